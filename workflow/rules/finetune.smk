# Fine-tuning beside features (issue 37; opt-in: config `fine_tune`, no job by default).
#
#   results/<run>/finetune/{task}/{variant}/{recipe}/seed{seed}.json
#       `elmoc task` with the task section plus `encoder: fine_tune` and the recipe's options as its
#       `fine_tune:` mapping, the bi-LM read in-process from `--lm results/<run>/models/{variant}` (rule
#       export_model), or, for a recipe with `lm_finetune: true`, from the LM fine-tuned on the
#       task's own text, results/<run>/lm_finetune/{variant}/{task}/model (rule lm_finetune)
#   results/<run>/tables/finetune.{md,csv,tex,html}
#       `elmoc finetune-table`: variant x mode (features, each recipe) rows, one column group per task,
#       beside the feature-based runs of rule task_run and the paper's feature-based numbers
#
# Rule finetune_run is made in tasks.smk, beside rule task_run, whose command, resources, retries,
# SLURM's SIGUSR1 and stop margin it shares (helpers/finetune.smk adds its kind to TASK_JOB_KINDS;
# resources.task_run.tasks.<task> applies): the run folder beside the JSON is not an output, so a
# stopped job's rerun resumes it.


if finetune_active():

    FINAL_OUTPUT_HOOKS.append(lambda: [f"{RESULTS}/tables/finetune.md"])

    rule finetune_table:
        input:
            features=finetune_feature_results(),
            runs=finetune_results(),
        output:
            **table_files("finetune"),
        log:
            f"{LOGS}/tables/finetune.log",
        localrule: True
        params:
            elmoc=ELMOC,
        conda:
            "../envs/elmoc.yaml"
        shell:
            "{params.elmoc} finetune-table --inputs {input} --output {output.md} --csv {output.csv}"
            " --tex {output.tex} --html {output.html} > {log} 2>&1"
