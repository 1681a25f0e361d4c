# Downstream evaluation (spec 6): for every task in tasks.run, every LM variant (features
# from rule `extract`) plus the FastText baseline, and every seed, one `elmoc task` run
# -> results/<run>/tasks/{task}/{variant}/seed{seed}.json.  A task whose data is not configured
# still gets its JSONs, with "status": "no data: set tasks.<task>.<key>", never silently.
# Rules pass the task's (merged) config section as JSON, so --configfile/--config overrides count;
# the section is checked and completed by its task class when the workflow is parsed (helpers/tasks.smk
# complete_task_sections): the schema names no task, so a new task is one file.
# The task's downloads (tasks.downloads) are fetched by rule fetch (data.smk) into resources/tasks/.


FINAL_OUTPUT_HOOKS.append(task_results)


rule task_sentences:
    input:
        unpack(lambda w: {"data": task_data_inputs(w)}),
    output:
        f"{RESULTS}/tasks/{{task}}/sentences.txt",
    params:
        elmoc=ELMOC,
        section=lambda w: section_json(task_section(w.task)),
    resources:
        **DEFAULT_JOB,
    log:
        f"{LOGS}/task_sentences/{{task}}.log",
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} task-sentences --task {wildcards.task} --section-json {params.section:q}"
        " --output {output} > {log} 2>&1"


# results/<run>/tasks/{task}/{variant}/seed{seed}.run/ (checkpoint.pt, written at every epoch's end, every
# trainer.checkpoint_minutes and on SIGTERM/SIGUSR1/SIGINT or stop_margin_s before a SLURM job's end
# time; attempts.jsonl; task.log with every attempt's lines) is not an output: Snakemake never
# deletes it, so a failed, stopped or timed-out job's rerun (the same `elmoc task --output`) resumes
# from it; `elmoc task` removes the checkpoint once the JSON is written. The job exits 75 when it
# stopped and saved. With resources.task_run.retries = R a job gets R reruns, so a run longer than
# one job's runtime spans up to R + 1 jobs; after two attempts that crashed with the same error at
# the same checkpoint step, each further retry is refused at once (delete attempts.jsonl to retry).
# A changed config, features or data file reruns the job: the old checkpoint is set aside as
# checkpoint.<hash>.pt and the run starts afresh. Snakemake's retries are per rule: a task whose
# resources.task_run.tasks entry sets its own retries runs in a rule of its own, task_run_<task>
# (helpers/tasks.smk task_job_rules); every other task in rule task_run.
# The same rules run every kind of `elmoc task` job (helpers/tasks.smk TASK_JOB_KINDS): task_run on
# features, and finetune_run (finetune.smk, config fine_tune) on the LM fine-tuned in the task.
for _kind in TASK_JOB_KINDS:
    for _rule_name, _tasks, _retries in task_job_rules(_kind.base, _kind.tasks):

        rule:
            name:
                _rule_name
            input:
                unpack(_kind.inputs),
            output:
                _kind.output,
            wildcard_constraints:
                **_kind.constraints,
                **({"task": _tasks} if _tasks else {}),
            params:
                elmoc=ELMOC,
                section=_kind.section,
                inputs=task_run_args,
                scale=config.get("scale", "demo"),
                **task_job_params(),
            log:
                _kind.log,
            benchmark:
                _kind.benchmark
            threads: task_job_threads
            resources:
                **task_job_resources(),
            # retried by the main Snakemake process only: under the SLURM executor the Snakemake
            # inside the job (remote mode) would rerun a stopped job in the same, ending allocation
            retries: 0 if workflow.remote_exec else _retries
            conda:
                "../envs/elmoc.yaml"
            shell:
                TASK_JOB_SHELL
