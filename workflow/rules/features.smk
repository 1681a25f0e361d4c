# Feature extraction: forward + backward checkpoints of a variant over a task's
# sentences -> HDF5 in the `allennlp elmo --all` layout (spec 5.3).


rule extract:
    input:
        forward="results/lm/{variant}/forward/checkpoint.pt",
        backward="results/lm/{variant}/backward/checkpoint.pt",
        sentences="results/tasks/{task}/sentences.txt",
    output:
        temp("results/features/{variant}/{task}.hdf5")
        if config["features"]["temporary"]
        else "results/features/{variant}/{task}.hdf5",
    log:
        "logs/extract/{variant}.{task}.log",
    benchmark:
        "logs/benchmarks/extract/{variant}.{task}.tsv"
    threads: min(4, workflow.cores)
    resources:
        gpu=min(1, pretrain_gpus()),
    params:
        batch_size=config["features"]["batch_size"],
        boundaries="" if config["features"]["boundaries"] else "--no-boundaries",
        device=lambda wildcards, resources: "cuda" if resources.gpu > 0 else "cpu",
    shell:
        "{ELMOC} extract --forward {input.forward} --backward {input.backward}"
        " --sentences {input.sentences} --output {output} --batch-size {params.batch_size}"
        " {params.boundaries} --device {params.device} --threads {threads} > {log} 2>&1"
