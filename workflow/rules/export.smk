# Model directories and the released ELMo (issues 12.2 and 13).
#
#   results/<run>/models/{variant}/              elmoc export: a self-contained model directory
#                                          (weights, vocabulary, tables, fastText n-gram
#                                          buckets, model card); not built by default
#   results/<run>/lm/{variant}/{direction}/model.pt, heldout.json
#                                          for variants with `released: {options, weights}`
#                                          (the paper's ELMo from bilm-tf's public files)
#                                          instead of pretraining; every consumer of a
#                                          trained LM (extract, cnn-table, export) reads them


rule released_lm:
    input:
        released_inputs,
        spec=f"{RESULTS}/lm/{{variant}}/spec.yaml",
        vocab=lambda w: lm_spec(w.variant).get("vocab", config["pretrain"]["vocab"]),
    output:
        model=f"{RESULTS}/lm/{{variant}}/{{direction}}/model.pt",
        heldout=f"{RESULTS}/lm/{{variant}}/{{direction}}/heldout.json",
    wildcard_constraints:
        variant="|".join(released_variants()) or "NO_RELEASED_VARIANTS",
    params:
        elmoc=ELMOC,
        options=lambda w: released_lm(w.variant)["options"],
        weights=lambda w: released_lm(w.variant)["weights"],
    log:
        f"{LOGS}/released_lm/{{variant}}.{{direction}}.log",
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} export --bilm-tf-options {params.options:q} --bilm-tf-weights {params.weights:q}"
        " --format checkpoints --spec {input.spec} --vocab {input.vocab} --direction {wildcards.direction}"
        f" --output-dir {RESULTS}/lm/{{wildcards.variant}}" " > {log} 2>&1"


ruleorder: released_lm > pretrain


rule export_model:
    input:
        export_fasttext_model,
        unpack(lm_model_inputs),
    output:
        directory(f"{RESULTS}/models/{{variant}}"),
    log:
        f"{LOGS}/export/{{variant}}.log",
    params:
        elmoc=ELMOC,
        models=lm_model_args,
    conda:
        "../envs/elmoc.yaml"
    shell:
        "{params.elmoc} export {params.models} --output-dir {output} > {log} 2>&1"
