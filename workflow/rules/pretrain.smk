# Pretraining: one job per (variant, direction) for ELMo-C and its ablations, whose forward
# and backward LMs are separate runs with separate parameters (spec 1.1 "Directions"); one
# job, direction "joint", for the softmax family (train.directions: joint in the spec: one
# bi-LM sharing its input and output layer, as bilm-tf trains ELMo; common.smk lm_directions).


from elmoc.multinode import agent_launcher, slurm_resources, srun_prefix


rule lm_spec:
    output:
        f"{RESULTS}/lm/{{variant}}/spec.yaml",
    params:
        elmoc=ELMOC,
        spec=lm_spec_json,
    log:
        f"{LOGS}/lm_spec/{{variant}}.log",
    localrule: True
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} spec --section-json {params.spec:q} --output {output} > {log} 2>&1"


# checkpoint.pt (written every train.checkpoint_every steps or train.checkpoint_minutes, on
# SIGTERM/SIGUSR1/SIGINT, and stop_margin_s before a SLURM job's end time) is not
# an output: Snakemake never deletes it, so a failed, killed or timed-out job's rerun (the
# same `elmoc train --output-dir`) resumes from it. With resources.pretrain.retries = R a
# job gets R reruns, so training longer than one job's runtime spans up to R + 1 jobs.
# Snakemake deletes a job's log when it starts the job, so the log shows the last attempt;
# results/<run>/lm/{variant}/{direction}/train.log keeps every attempt's lines. A changed spec reruns the
# job: --stale-checkpoint set-aside then keeps the old checkpoint as checkpoint.<hash>.pt
# and trains the new spec from step 0 instead of refusing. The job exits 75 when it stopped
# and saved (every process, under torchrun too: `elmoc with-gpus` says so), else 1; after two
# attempts that crashed with the same error at the same checkpoint step, each further retry
# is refused at once (results/<run>/lm/<variant>/<direction>/attempts.jsonl; delete it to retry).
rule pretrain:
    input:
        spec=f"{RESULTS}/lm/{{variant}}/spec.yaml",
        artifacts=lm_artifacts,
    output:
        model=f"{RESULTS}/lm/{{variant}}/{{direction}}/model.pt",
        heldout=f"{RESULTS}/lm/{{variant}}/{{direction}}/heldout.json",
    log:
        f"{LOGS}/pretrain/{{variant}}.{{direction}}.log",
    benchmark:
        f"{LOGS}/benchmarks/pretrain/{{variant}}.{{direction}}.tsv"
    threads: lambda wildcards: pretrain_job(wildcards.variant)["threads"] * pretrain_job(wildcards.variant)["processes"]
    resources:
        gpu=lambda w: slurm_resources(pretrain_job(w.variant), w.variant, workflow)["gpu"],
        # a multi-node job (resources.pretrain.variants.<v>.nodes > 1; unset for one node)
        nodes=lambda w: slurm_resources(pretrain_job(w.variant), w.variant, workflow)["nodes"],
        tasks=lambda w: slurm_resources(pretrain_job(w.variant), w.variant, workflow)["tasks"],
        mpi=lambda w: slurm_resources(pretrain_job(w.variant), w.variant, workflow)["mpi"],
        tasks_per_gpu=lambda w: slurm_resources(pretrain_job(w.variant), w.variant, workflow)["tasks_per_gpu"],
        gres=lambda w: slurm_resources(pretrain_job(w.variant), w.variant, workflow)["gres"],
        mem_mb=lambda wildcards: pretrain_job(wildcards.variant)["mem_mb"],
        runtime=lambda wildcards: pretrain_job(wildcards.variant)["runtime"],
        slurm_partition=lambda wildcards: slurm_partition(pretrain_job(wildcards.variant)["gpus"]),
        # SIGUSR1 signal_lead_s before the time limit (replaces the SLURM profile's default)
        slurm_extra=lambda wildcards: f"'--signal=USR1@{pretrain_job(wildcards.variant)['signal_lead_s']}'",
    # retried by the main Snakemake process only: under the SLURM executor the Snakemake
    # inside the job (remote mode) would rerun a stopped job in the same, ending allocation
    retries: 0 if workflow.remote_exec else RESOURCES["pretrain"]["retries"]
    params:
        # a multi-node job: `srun` one task per node, each `with-gpus` + its node's torchrun agent
        with_gpus=lambda wildcards: srun_prefix(pretrain_job(wildcards.variant))
        + with_gpus(pretrain_job(wildcards.variant)["gpus"]),
        launcher=lambda wildcards: agent_launcher(pretrain_job(wildcards.variant), PYTHON,
                                                  f"{RESULTS}/lm/{wildcards.variant}/{wildcards.direction}/node-logs")
        or pretrain_launcher(wildcards),
        device=lambda wildcards: device_for(pretrain_job(wildcards.variant)["gpus"]),
        threads=lambda wildcards: pretrain_job(wildcards.variant)["threads"],
        stop_margin=lambda wildcards: pretrain_job(wildcards.variant)["stop_margin_s"] or "auto",
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.with_gpus} {params.launcher} train --spec {input.spec} --direction {wildcards.direction}"
        f" --output-dir {RESULTS}/lm/{{wildcards.variant}}/{{wildcards.direction}}"
        " --device {params.device} --threads {params.threads} --stop-margin {params.stop_margin}"
        " --stale-checkpoint set-aside >> {log} 2>&1"


rule pretrain_table:
    input:
        heldout=all_heldout(),
    output:
        **table_files("pretrain", "md", "csv"),
        plot=report(
            f"{RESULTS}/tables/pretrain_curves.png",
            caption="../report/pretrain_curves.rst",
            category="Pretraining",
            labels={"figure": "training loss curves"},
        ),
    log:
        f"{LOGS}/tables/pretrain.log",
    localrule: True
    params:
        elmoc=ELMOC,
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} pretrain-table --inputs {input.heldout} --output {output.md} --csv {output.csv}"
        " --plot {output.plot} > {log} 2>&1"
