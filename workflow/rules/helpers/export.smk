# The functions of export.smk (model directories, the released ELMo).
from pathlib import Path

def released_variants():
    return [v for v in config["pretrain"]["variants"] if released_lm(v)]


def released_inputs(wildcards):
    files = released_lm(wildcards.variant)
    return data_path_inputs([files["options"], files["weights"]])


def export_fasttext_model(wildcards):
    """The fastText .bin an input table was made from (results/<run>/vectors/{name}.npy of a configured
    fastText model, whatever the input type): export puts its n-gram buckets into the directory."""
    return fasttext_models_of(lm_spec(wildcards.variant))


def fasttext_models_of(spec):
    """[the fastText .bin of the spec's input table], or [] (export_fasttext_model)."""
    table = spec["input"].get("vectors")
    name = Path(str(table)).stem
    if isinstance(table, str) and name in config["fasttext"].get("models", {}):
        return [f"{RESULTS}/fasttext/{name}.bin"]
    return []
