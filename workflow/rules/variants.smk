# Artifacts some pretraining variants need beyond the word vectors (spec 1.3, 3.3):
#   results/<run>/bpe/{tokenizer.json,vocab.txt}  BPE subwords learned on the corpus (ELMo-Sub)
#   results/<run>/vectors/cnn.npy                 the trained ELMo char-CNN run over the vocabulary
#                                           (ELMo-C-CNN, -CNN-CC, -CC-CNN)
# A variant's spec names these paths, so its pretrain job depends on them automatically
# (common.smk: lm_artifacts); cnn.npy thereby puts the CNN ablations after ELMo in the DAG.


rule bpe:
    input:
        corpus=f"{RESULTS}/corpus/train",
    output:
        tokenizer=f"{RESULTS}/bpe/tokenizer.json",
        vocab=f"{RESULTS}/bpe/vocab.txt",
    resources:
        **DEFAULT_JOB,
    log:
        f"{LOGS}/bpe.log",
    params:
        elmoc=ELMOC,
        section=section_json({k: config["variants"][k] for k in ("bpe_merges", "bpe_min_frequency")}),
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} bpe --section-json {params.section:q} --corpus {input.corpus}" f" --output-dir {RESULTS}/bpe" " > {log} 2>&1"


rule cnn_table:
    input:
        model=cnn_source_model(),
        vocab=config["pretrain"]["vocab"],
    output:
        f"{RESULTS}/vectors/cnn.npy",
    resources:
        **DEFAULT_JOB,
    log:
        f"{LOGS}/vectors/cnn.log",
    params:
        elmoc=ELMOC,
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} cnn-table --checkpoint {input.model} --vocab {input.vocab} --output {output} > {log} 2>&1"


# Open-vocabulary training (paper §3.2, spec 1.2 `emb_on_the_fly`): instead of mapping
# corpus words outside the capped vocabulary to <unk>, every distinct training token gets
# its own row, whose FastText vector is composed from character n-grams when the word is
# unknown to FastText.  The paper rebuilt this per shard; here one uncapped vocabulary
# and table are built once (same targets, more memory: use host_resident for big corpora).
# Preset config/lm/elmo-c-open.yaml points its vocab and tables here.
rule open_vocab:
    input:
        corpus=f"{RESULTS}/corpus/train",
    output:
        f"{RESULTS}/open_vocab/vocab.txt",
    resources:
        **DEFAULT_JOB,
    log:
        f"{LOGS}/open_vocab/vocab.log",
    params:
        elmoc=ELMOC,
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} vocab --corpus {input.corpus} --min-count 1 --output {output} > {log} 2>&1"


use rule vectors as open_vectors with:
    input:
        vocab=f"{RESULTS}/open_vocab/vocab.txt",
        model=f"{RESULTS}/fasttext/{{model}}.bin",
    output:
        f"{RESULTS}/open_vocab/vectors/{{model}}.npy",
    log:
        f"{LOGS}/open_vocab/vectors.{{model}}.log",
    benchmark:
        f"{LOGS}/benchmarks/open_vocab/vectors_{{model}}.tsv"
