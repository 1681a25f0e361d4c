# Downstream evaluation (spec 6): for every task in tasks.run, every LM variant (features
# from rule `extract`) plus the FastText baseline, and every seed, one `elmoc task` run
# -> results/tasks/{task}/{variant}/seed{seed}.json.  A task whose data is not configured
# still gets its JSONs, with "status": "no data: set tasks.<task>.<key>", never silently.
# Rules pass the task's (merged) config section as JSON, so --configfile/--config overrides count.
# The task's downloads (tasks.downloads) are fetched by rule fetch (data.smk) into resources/tasks/.


FINAL_OUTPUT_HOOKS.append(task_results)


rule task_sentences:
    input:
        unpack(lambda w: {"data": task_data_inputs(w)}),
    output:
        "results/tasks/{task}/sentences.txt",
    params:
        elmoc=ELMOC,
        section=lambda w: section_json(task_section(w.task)),
    resources:
        **DEFAULT_JOB,
    log:
        "logs/task_sentences/{task}.log",
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} task-sentences --task {wildcards.task} --section-json {params.section:q}"
        " --output {output} > {log} 2>&1"


TASK_RUN = RESOURCES["task_run"]


rule task_run:
    input:
        unpack(task_run_inputs),
    output:
        "results/tasks/{task}/{variant}/seed{seed}.json",
    params:
        elmoc=ELMOC,
        section=lambda w: section_json(task_section(w.task)),
        inputs=task_run_args,
        scale=config.get("scale", "demo"),
        with_gpus=with_gpus(TASK_RUN["gpus"]),
        device=device_for(TASK_RUN["gpus"]),
        threads=TASK_RUN["threads"],
    log:
        "logs/tasks/{task}.{variant}.seed{seed}.log",
    benchmark:
        "logs/benchmarks/tasks/{task}.{variant}.seed{seed}.tsv"
    threads: TASK_RUN["threads"]
    resources:
        gpu=TASK_RUN["gpus"],
        mem_mb=TASK_RUN["mem_mb"],
        runtime=TASK_RUN["runtime"],
        slurm_partition=slurm_partition(TASK_RUN["gpus"]),
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.with_gpus} {params.elmoc} task --task {wildcards.task} --section-json {params.section:q}"
        " --variant {wildcards.variant} --seed {wildcards.seed} --scale {params.scale} {params.inputs}"
        " --device {params.device} --threads {params.threads} --output {output} > {log} 2>&1"
