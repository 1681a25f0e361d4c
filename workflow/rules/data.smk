# Data stages (spec 1.2, 2.5): fetch -> corpus -> vocab / fasttext -> vectors.
#
#   resources/downloads/{download}/.fetch.json   elmoc fetch   (config corpus.downloads; pins_file)
#   resources/tasks/{download}/.fetch.json       elmoc fetch   (config tasks.downloads; pins_file)
#   results/<run>/corpus/{train/,heldout.txt,stats.json} elmoc corpus (config corpus)
#   results/<run>/vocab/vocab.txt                      elmoc vocab    (config vocab)
#   results/<run>/fasttext/{model}.bin, .eval.json     elmoc fasttext (config fasttext.models)
#   results/<run>/vectors/{model}.npy                  elmoc vectors  (one per fastText model)
#   results/<run>/vectors/random.npy                   elmoc vectors --random (ELMo-C-RND targets)
# Each command gets its config section as --section-json (common.smk: section_json).


rule fetch:
    output:
        "resources/{place}/{download}/.fetch.json",
    wildcard_constraints:
        place="|".join(DOWNLOAD_PLACES),
    params:
        elmoc=ELMOC,
        cache=f"{DATA_DOWNLOADS}/.cache",
        section=download_json,
        pins=config["pins_file"],
    log:
        "logs/fetch/{place}/{download}.log",
    localrule: True
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} fetch --section-json {params.section:q} --pins {params.pins:q}"
        " --output-dir resources/{wildcards.place}/{wildcards.download} --cache {params.cache} > {log} 2>&1"


rule corpus:
    input:
        data_corpus_inputs,
    output:
        train=directory(f"{RESULTS}/corpus/train"),
        heldout=f"{RESULTS}/corpus/heldout.txt",
        stats=f"{RESULTS}/corpus/stats.json",
    params:
        elmoc=ELMOC,
        section=corpus_section_json(),
    resources:
        **DEFAULT_JOB,
    log:
        f"{LOGS}/corpus/corpus.log",
    benchmark:
        f"{LOGS}/benchmarks/corpus.tsv"
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} corpus --section-json {params.section:q}" f" --output-dir {RESULTS}/corpus" " > {log} 2>&1"


rule vocab:
    input:
        data_vocab_inputs,
    output:
        f"{RESULTS}/vocab/vocab.txt",
    params:
        elmoc=ELMOC,
        section=section_json(config["vocab"]),
    resources:
        **DEFAULT_JOB,
    log:
        f"{LOGS}/vocab/vocab.log",
    benchmark:
        f"{LOGS}/benchmarks/vocab.tsv"
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} vocab --section-json {params.section:q}" f" --corpus {RESULTS}/corpus/train" " --output {output} > {log} 2>&1"


rule fasttext:
    input:
        data_fasttext_inputs,
    output:
        model=f"{RESULTS}/fasttext/{{model}}.bin",
        eval=f"{RESULTS}/fasttext/{{model}}.eval.json",
    wildcard_constraints:
        model="|".join(config["fasttext"].get("models", {})) or "NO_MODELS",
    params:
        elmoc=ELMOC,
        section=fasttext_section_json,
        cache=f"{DATA_DOWNLOADS}/.cache",
    threads: lambda w: data_fasttext_model(w.model).get("train", {}).get("thread", 1)
    resources:
        **FASTTEXT_JOB,
    log:
        f"{LOGS}/fasttext/{{model}}.log",
    benchmark:
        f"{LOGS}/benchmarks/fasttext_{{model}}.tsv"
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} fasttext --section-json {params.section:q} --name {wildcards.model}" f" --corpus {RESULTS}/corpus/train"
        " --cache {params.cache} --output {output.model} --eval-out {output.eval} > {log} 2>&1"


rule vectors:
    input:
        vocab=f"{RESULTS}/vocab/vocab.txt",
        model=f"{RESULTS}/fasttext/{{model}}.bin",
    output:
        f"{RESULTS}/vectors/{{model}}.npy",
    wildcard_constraints:
        model="|".join(config["fasttext"].get("models", {})) or "NO_MODELS",
    resources:
        **FASTTEXT_JOB,
    log:
        f"{LOGS}/vectors/{{model}}.log",
    benchmark:
        f"{LOGS}/benchmarks/vectors_{{model}}.tsv"
    params:
        elmoc=ELMOC,
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} vectors --vocab {input.vocab} --model {input.model} --output {output} > {log} 2>&1"


rule random_vectors:
    input:
        vocab=f"{RESULTS}/vocab/vocab.txt",
    output:
        f"{RESULTS}/vectors/random.npy",
    params:
        elmoc=ELMOC,
        section=section_json(config["fasttext"]["random"]),
    resources:
        **DEFAULT_JOB,
    log:
        f"{LOGS}/vectors/random.log",
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} vectors --vocab {input.vocab} --random --section-json {params.section:q}"
        " --output {output} > {log} 2>&1"
