# Feature extraction: the forward and backward LMs (model.pt, or a joint bi-LM's one file; a one-direction LM's
# forward model.pt alone) of a variant over a task's
# sentences -> HDF5 in the `allennlp elmo --all` layout (spec 5.3). With
# features.temporary the file is deleted once every task run that reads it is done
# (SNLI's features are ~80 GB per variant at paper size).
EXTRACT = RESOURCES["extract"]


rule extract:
    input:
        unpack(lm_model_inputs),  # forward, backward (a joint bi-LM's or a masked LM's one model.pt as both; forward alone)
        sentences=f"{RESULTS}/tasks/{{task}}/sentences.txt",
    output:
        temp(f"{RESULTS}/features/{{variant}}/{{task}}.hdf5")
        if config["features"]["temporary"]
        else f"{RESULTS}/features/{{variant}}/{{task}}.hdf5",
    log:
        f"{LOGS}/extract/{{variant}}.{{task}}.log",
    benchmark:
        f"{LOGS}/benchmarks/extract/{{variant}}.{{task}}.tsv"
    threads: EXTRACT["threads"]
    resources:
        gpu=EXTRACT["gpus"],
        mem_mb=EXTRACT["mem_mb"],
        runtime=EXTRACT["runtime"],
        slurm_partition=slurm_partition(EXTRACT["gpus"]),
    params:
        elmoc=ELMOC,
        with_gpus=with_gpus(EXTRACT["gpus"]),
        device=device_for(EXTRACT["gpus"]),
        threads=EXTRACT["threads"],
        models=lm_model_args,
        # `temporary` only marks the output (toggling it must not rerun extraction)
        section=section_json({k: v for k, v in config["features"].items() if k != "temporary"}),
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.with_gpus} {params.elmoc} extract {params.models}"
        " --sentences {input.sentences} --section-json {params.section:q} --output {output}"
        " --device {params.device} --threads {params.threads} > {log} 2>&1"
