# Data stages (spec 1.2, 2.5): fetch -> corpus -> vocab / fasttext -> vectors.
#
#   resources/downloads/{download}/.fetch.json   elmoc fetch   (config corpus.downloads; pins_file)
#   results/corpus/{train/,heldout.txt,stats.json} elmoc corpus (config corpus)
#   results/vocab/vocab.txt                      elmoc vocab    (config vocab)
#   results/fasttext/{model}.bin, .eval.json     elmoc fasttext (config fasttext.models)
#   results/vectors/{model}.npy                  elmoc vectors  (one per fastText model)
#   results/vectors/random.npy                   elmoc vectors --random (ELMo-C-RND targets)


rule fetch:
    output:
        f"{DATA_DOWNLOADS}/{{download}}/.fetch.json",
    params:
        elmoc=DATA_ELMOC,
        out=lambda w, output: str(Path(output[0]).parent),
        cache=f"{DATA_DOWNLOADS}/.cache",
        download=lambda w: download_json("corpus", w.download),
        pins=config["pins_file"],
    log:
        "logs/fetch/{download}.log",
    localrule: True
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} fetch --download-json {params.download:q} --pins {params.pins:q} --out {params.out}"
        " --cache {params.cache} > {log} 2>&1"


rule corpus:
    input:
        data_corpus_inputs,
    output:
        train=directory("results/corpus/train"),
        heldout="results/corpus/heldout.txt",
        stats="results/corpus/stats.json",
    params:
        elmoc=DATA_ELMOC,
        args=data_corpus_args(),
    resources:
        **DEFAULT_JOB,
    log:
        "logs/corpus/corpus.log",
    benchmark:
        "logs/benchmarks/corpus.tsv"
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} corpus {params.args} --out results/corpus > {log} 2>&1"


rule vocab:
    input:
        data_vocab_inputs,
    output:
        "results/vocab/vocab.txt",
    params:
        elmoc=DATA_ELMOC,
        args=data_vocab_args(),
    resources:
        **DEFAULT_JOB,
    log:
        "logs/vocab/vocab.log",
    benchmark:
        "logs/benchmarks/vocab.tsv"
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} vocab {params.args} --out {output} > {log} 2>&1"


rule fasttext:
    input:
        data_fasttext_inputs,
    output:
        model="results/fasttext/{model}.bin",
        eval="results/fasttext/{model}.eval.json",
    wildcard_constraints:
        model="|".join(config["fasttext"].get("models", {})) or "NO_MODELS",
    params:
        elmoc=DATA_ELMOC,
        args=data_fasttext_args,
    threads: lambda w: data_fasttext_model(w.model).get("train", {}).get("thread", 1)
    resources:
        **FASTTEXT_JOB,
    log:
        "logs/fasttext/{model}.log",
    benchmark:
        "logs/benchmarks/fasttext_{model}.tsv"
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} fasttext {params.args} --out {output.model} --eval-out {output.eval} > {log} 2>&1"


rule vectors:
    input:
        vocab="results/vocab/vocab.txt",
        model="results/fasttext/{model}.bin",
    output:
        "results/vectors/{model}.npy",
    wildcard_constraints:
        model="|".join(config["fasttext"].get("models", {})) or "NO_MODELS",
    resources:
        **FASTTEXT_JOB,
    log:
        "logs/vectors/{model}.log",
    benchmark:
        "logs/benchmarks/vectors_{model}.tsv"
    params:
        elmoc=DATA_ELMOC,
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} vectors --vocab {input.vocab} --model {input.model} --out {output} > {log} 2>&1"


rule random_vectors:
    input:
        vocab="results/vocab/vocab.txt",
    output:
        "results/vectors/random.npy",
    params:
        elmoc=DATA_ELMOC,
        dim=config["fasttext"]["random"]["dim"],
        seed=config["fasttext"]["random"]["seed"],
    resources:
        **DEFAULT_JOB,
    log:
        "logs/vectors/random.log",
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} vectors --vocab {input.vocab} --random --dim {params.dim} --seed {params.seed}"
        " --out {output} > {log} 2>&1"
