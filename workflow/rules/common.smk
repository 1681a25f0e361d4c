# What several rule files use (the elmoc command, the variants and their LM files, section JSON,
# the jobs' resources and the default targets). Each rule file's own functions are in
# workflow/rules/helpers/<file>.smk (functions apart from rules: snakemake --lint).
# Kept light (no torch import): cluster jobs re-parse this file.
import json
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

from snakemake.exceptions import WorkflowError

from elmoc import directions
from elmoc.config import artifact_paths, resolve_variant, variant_names

# The `elmoc` CLI of the Python running Snakemake (works without an activated venv).
PYTHON = shlex.quote(sys.executable)
ELMOC = f"{PYTHON} -m elmoc.cli"
DIRECTIONS = list(directions.DIRECTIONS)


wildcard_constraints:
    variant=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    direction="|".join(directions.RUNS),
    seed=r"\d+",


def variants():
    """Pretraining variants enabled in the config, in config order: pretrain.variants, then the
    opt-in presets of pretrain.extra_variants (elmoc.config.variant_names)."""
    return variant_names(config)


def lm_spec(variant):
    # presets_dir is relative to the repository (the Snakefile's folder), not the workdir
    presets = Path(workflow.basedir) / config["pretrain"]["presets_dir"]
    return relocate(resolve_variant(config, variant, presets_dir=presets), RUN)  # its results/ paths: the run's


def section_json(section):
    """A config section (or entry) as the JSON every `elmoc <command> --section-json` takes:
    the one way configuration reaches a command (the command parses and checks it)."""
    return json.dumps(section, sort_keys=True)


def lm_directions(variant):
    """The pretrain runs of a variant: ["joint"] for a joint bi-LM (train.directions: joint,
    the softmax family), ["masked"] for a masked LM (train.objective: masked_lm), ["forward"]
    for a one-direction LM (train.directions: forward, the GPT presets), else
    ["forward", "backward"]; a released ELMo comes as two files."""
    if released_lm(variant):
        return DIRECTIONS
    return list(directions.runs(lm_spec(variant)))


def lm_models(variant):
    """{"forward": model.pt, "backward": model.pt} of a variant: a joint bi-LM's one file
    serves as both (elmoc reads each direction's view of it), a masked LM's too (elmoc
    reads its one bidirectional stack); a one-direction LM has {"forward": model.pt} alone."""
    runs = lm_directions(variant)
    single = directions.single_run(runs)
    if single:
        return dict.fromkeys(DIRECTIONS, f"{RESULTS}/lm/{variant}/{single}/model.pt")
    return {d: f"{RESULTS}/lm/{variant}/{d}/model.pt" for d in runs}


def lm_model_inputs(wildcards):
    return lm_models(wildcards.variant)


def lm_model_args(wildcards, input):
    """--forward FILE [--backward FILE] of `elmoc extract` / `elmoc export` (no --backward
    for a one-direction LM)."""
    return " ".join(f"--{d} {shlex.quote(str(input[d]))}" for d in DIRECTIONS if d in input.keys())


def lm_artifacts(wildcards):
    """Every workflow artifact the variant's spec names (vectors, vocab, corpus...)."""
    return artifact_paths(lm_spec(wildcards.variant))


# --- what jobs ask for (config section `resources`; threads, GPUs, memory, time, partition) ---
# Thread counts reach the commands from here (params), never from Snakemake's {threads},
# which --cores and a profile's set-threads may change: results depend on the config only.
RESOURCES = config["resources"]


def slurm_partition(gpus):
    """The config's SLURM partition for a job with `gpus` GPUs ("" = the cluster's default)."""
    return RESOURCES["partitions"]["gpu" if gpus else "cpu"] or ""


def with_gpus(gpus):
    """Command prefix that gives the job `gpus` devices of its own (CUDA_VISIBLE_DEVICES)
    and hides the others; inside a SLURM job it passes the job's own GPUs through."""
    return f"{ELMOC} with-gpus --lock-dir {shlex.quote(RESOURCES['gpu_lock_dir'])} {int(gpus)} --"


def device_for(gpus):
    return "cuda" if gpus else "cpu"


def pretrain_job(variant):
    """resources.pretrain with the variant's overrides; `processes` resolved. A joint bi-LM's
    one job gets, unless its override says otherwise, the GPUs of the two direction jobs it
    replaces (2 x gpus: all 4 of a 4-GPU box with the paper's 2 per direction)."""
    job = {k: v for k, v in RESOURCES["pretrain"].items() if k not in ("variants", "retries")}
    override = RESOURCES["pretrain"]["variants"].get(variant) or {}
    if job["gpus"] and "gpus" not in override and lm_directions(variant) == ["joint"]:
        job["gpus"], job["processes"] = 2 * job["gpus"], None
    job.update(override)
    if job["processes"] is None:
        job["processes"] = max(1, job["gpus"])
    if job["gpus"] and job["processes"] != job["gpus"]:
        raise WorkflowError(
            f"config resources.pretrain (variant {variant}): processes {job['processes']} != gpus {job['gpus']};"
            " with GPUs every process drives one GPU: drop `processes` or make it equal"
        )
    return job


def one_gpu_lm_job(job_of):
    """A job that trains an LM on one GPU at most with pretraining's resources (prune, lm_finetune,
    distill): ``job_of(wildcards)`` gives them (pretrain_job of the variant, or of a student's
    teacher). Its threads, resources, and the command's GPU wrapper and --device, as functions of
    the wildcards."""
    gpus = lambda w: min(1, job_of(w)["gpus"])
    return SimpleNamespace(
        threads=lambda w: job_of(w)["threads"],
        resources={"gpu": gpus, "mem_mb": lambda w: job_of(w)["mem_mb"], "runtime": lambda w: job_of(w)["runtime"],
                   "slurm_partition": lambda w: slurm_partition(gpus(w))},
        with_gpus=lambda w: with_gpus(gpus(w)),
        device=lambda w: device_for(gpus(w)),
    )


# the LM jobs on a trained variant (prune, lm_finetune)
VARIANT_LM_JOB = one_gpu_lm_job(lambda w: pretrain_job(w.variant))


DEFAULT_JOB = {
    "mem_mb": RESOURCES["default"]["mem_mb"],
    "runtime": RESOURCES["default"]["runtime"],
    "slurm_partition": slurm_partition(0),
}
# rules that load or train a fastText model (the Common Crawl .bin is ~7 GB in memory)
FASTTEXT_JOB = {
    "mem_mb": RESOURCES["fasttext"]["mem_mb"],
    "runtime": RESOURCES["fasttext"]["runtime"],
    "slurm_partition": slurm_partition(0),
}


def check_names(place, names, known, what, where):
    """WorkflowError when config ``place`` names entries not in ``known``: ``what`` they must be, ``where``
    those are defined."""
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise WorkflowError(f"config {place} names {unknown}, which are not {what} ({where}: {known})")


def check_resources():
    check_names("resources.pretrain.variants", RESOURCES["pretrain"]["variants"], variants(),
                "pretraining variants", "pretrain.variants")


def table_files(name, *formats):
    """{format: results/<run>/tables/<name>.<format>} for a table rule's outputs (default: md, csv, tex, html)."""
    return {f: f"{RESULTS}/tables/{name}.{f}" for f in formats or ("md", "csv", "tex", "html")}


def paper_results():
    """The inputs of the paper's tables and the summary: heldout metrics, task runs, majority baselines."""
    return {"heldout": all_heldout(), "tasks": task_results(), "majority": majority_results()}


def final_outputs():
    """What `snakemake` builds by default: every table the enabled stages can fill."""
    targets = [f"{RESULTS}/tables/pretrain.md"]
    targets += extra_final_outputs()
    return targets


# Rule files that add default targets append functions here.
FINAL_OUTPUT_HOOKS = []


def extra_final_outputs():
    out = []
    for hook in FINAL_OUTPUT_HOOKS:
        out += hook()
    return out


def released_lm(variant):
    entry = config["pretrain"]["variants"].get(variant) or {}
    return entry.get("released")
