# The functions of data.smk (fetch, corpus, vocab, fasttext, vectors).
import glob

DATA_DOWNLOADS = "resources/downloads"
# resources/{place}/{download}/.fetch.json: the config section whose `downloads` it is
DOWNLOAD_PLACES = {"downloads": "corpus", "tasks": "tasks"}


def download_json(wildcards):
    """The download entry of `elmoc fetch` (corpus.downloads or tasks.downloads) as JSON."""
    return section_json(config[DOWNLOAD_PLACES[wildcards.place]]["downloads"][wildcards.download])


def data_path_inputs(paths):
    """Inputs for config paths: the fetch manifest of a download they live in, or the
    local files themselves (globs expanded now, so Snakemake sees real files)."""
    out = []
    for path in paths:
        path = str(path)
        for name in config["corpus"].get("downloads", {}):
            if path.startswith(f"{DATA_DOWNLOADS}/{name}/"):
                out.append(f"{DATA_DOWNLOADS}/{name}/.fetch.json")
                break
        else:
            out += sorted(glob.glob(path)) if glob.has_magic(path) else [path]
    return sorted(set(out))


def data_corpus_inputs(wildcards):
    sources = config["corpus"]["sources"] + config["corpus"].get("heldout_sources", [])
    return data_path_inputs([s["path"] for s in sources])


def corpus_section_json():
    """The corpus section without `downloads` (rule fetch's entries, no concern of `elmoc corpus`)."""
    return section_json({k: v for k, v in config["corpus"].items() if k != "downloads"})


def data_fasttext_model(name):
    return config["fasttext"]["models"][name]


def data_fasttext_inputs(wildcards):
    model = data_fasttext_model(wildcards.model)
    inputs = data_path_inputs(config["fasttext"].get("eval", {}).values())
    if "train" in model:
        inputs.append(f"{RESULTS}/corpus/train")
    elif model["pretrained"].get("path"):
        inputs += data_path_inputs([model["pretrained"]["path"]])
    return inputs


def fasttext_section_json(wildcards):
    """The fasttext section as one model's job sees it: `eval` and only this model under
    `models` (so that editing another model does not rerun this one)."""
    f = config["fasttext"]
    return section_json({"eval": f.get("eval", {}), "models": {wildcards.model: data_fasttext_model(wildcards.model)}})


def data_vocab_inputs(wildcards):
    if config["vocab"].get("file"):
        return data_path_inputs([config["vocab"]["file"]])
    return [f"{RESULTS}/corpus/train"]
