# Fine-tuning beside features (issue 37; opt-in: config `fine_tune`, no job by default).
#
#   results/finetune/{task}/{variant}/{recipe}/seed{seed}.json
#       `elmoc task` with the task section plus `encoder: fine_tune` and the recipe's options as its
#       `fine_tune:` mapping, the bi-LM read in-process from `--lm results/models/{variant}` (rule
#       export_model), or, for a recipe with `lm_finetune: true`, from the LM fine-tuned on the
#       task's own text, results/lm_finetune/{variant}/{task}/model (rule lm_finetune)
#   results/tables/finetune.{md,csv,tex,html}
#       `elmoc finetune-table`: variant x mode (features, each recipe) rows, one column group per task,
#       beside the feature-based runs of rule task_run and the paper's feature-based numbers
#
# Resources, retries, SLURM's SIGUSR1 and the stop margin are those of rule task_run (helpers/tasks.smk
# task_job_params / task_job_resources / task_job_rules; resources.task_run.tasks.<task> applies):
# the run folder beside the JSON is not an output, so a stopped job's rerun resumes it.


check_fine_tune()

if finetune_active():

    FINAL_OUTPUT_HOOKS.append(lambda: ["results/tables/finetune.md"])

    for _rule_name, _tasks, _retries in task_job_rules("finetune_run", finetune_tasks()):

        rule:
            name:
                _rule_name
            input:
                unpack(finetune_run_inputs),
            output:
                "results/finetune/{task}/{variant}/{recipe}/seed{seed}.json",
            wildcard_constraints:
                recipe="|".join(re.escape(r) for r in finetune_recipes()),
                **({"task": _tasks} if _tasks else {}),
            params:
                elmoc=ELMOC,
                section=finetune_section_json,
                inputs=task_run_args,
                scale=config.get("scale", "demo"),
                **task_job_params(),
            log:
                "logs/finetune/{task}.{variant}.{recipe}.seed{seed}.log",
            benchmark:
                "logs/benchmarks/finetune/{task}.{variant}.{recipe}.seed{seed}.tsv"
            threads: task_job_threads
            resources:
                **task_job_resources(),
            retries: 0 if workflow.remote_exec else _retries
            conda:
                "../envs/elmoc.yaml"
            shell:
                "{params.with_gpus} {params.elmoc} task --task {wildcards.task} --section-json {params.section:q}"
                " --variant {wildcards.variant} --seed {wildcards.seed} --scale {params.scale} {params.inputs}"
                + TASK_JOB_OPTIONS

    rule finetune_table:
        input:
            features=finetune_feature_results(),
            runs=finetune_results(),
        output:
            md="results/tables/finetune.md",
            csv="results/tables/finetune.csv",
            tex="results/tables/finetune.tex",
            html="results/tables/finetune.html",
        log:
            "logs/tables/finetune.log",
        localrule: True
        params:
            elmoc=ELMOC,
        conda:
            "../envs/elmoc.yaml"
        shell:
            "{params.elmoc} finetune-table --inputs {input} --output {output.md} --csv {output.csv}"
            " --tex {output.tex} --html {output.html} > {log} 2>&1"
