# Pretraining: one job per (variant, direction); the forward and backward LMs are
# separate runs with separate parameters (spec 1.1 "Directions").


rule lm_spec:
    output:
        "results/lm/{variant}/spec.yaml",
    params:
        spec=lm_spec_json,
    log:
        "logs/lm_spec/{variant}.log",
    localrule: True
    shell:
        "{ELMOC} spec --spec-json {params.spec:q} --output {output} > {log} 2>&1"


rule pretrain:
    input:
        spec="results/lm/{variant}/spec.yaml",
        artifacts=lm_artifacts,
    output:
        checkpoint="results/lm/{variant}/{direction}/checkpoint.pt",
        heldout="results/lm/{variant}/{direction}/heldout.json",
    log:
        "logs/pretrain/{variant}.{direction}.log",
    benchmark:
        "logs/benchmarks/pretrain/{variant}.{direction}.tsv"
    threads: config["pretrain"]["threads"] or workflow.cores
    resources:
        gpu=pretrain_gpus(),
        runtime=config["pretrain"]["runtime_minutes"],
        mem_mb=config["pretrain"]["mem_mb"],
    params:
        launcher=lambda wildcards, resources: (
            f"{PYTHON} -m torch.distributed.run --standalone --nproc-per-node={resources.gpu} -m elmoc.cli"
            if resources.gpu > 1
            else ELMOC
        ),
        device=lambda wildcards, resources: "cuda" if resources.gpu > 0 else "cpu",
    shell:
        "{params.launcher} train --spec {input.spec} --direction {wildcards.direction}"
        " --output-dir results/lm/{wildcards.variant}/{wildcards.direction}"
        " --device {params.device} --threads {threads} > {log} 2>&1"


rule pretrain_table:
    input:
        heldout=lambda w: expand(
            "results/lm/{variant}/{direction}/heldout.json",
            variant=variants(),
            direction=DIRECTIONS,
        ),
    output:
        md="results/tables/pretrain.md",
        csv="results/tables/pretrain.csv",
        plot=report("results/tables/pretrain_curves.png", caption="../report/pretrain_curves.rst", category="Pretraining"),
    log:
        "logs/tables/pretrain.log",
    localrule: True
    shell:
        "{ELMOC} tables pretrain --inputs {input.heldout} --output {output.md} --csv {output.csv}"
        " --plot {output.plot} > {log} 2>&1"
