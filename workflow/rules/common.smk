# Helpers shared by the rule files: variant specs, target lists, commands.
# Kept light (no torch import): cluster jobs re-parse this file.
import json
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from elmoc.config import artifact_paths, resolve_variant

# The `elmoc` CLI of the Python running Snakemake (works without an activated venv).
PYTHON = shlex.quote(sys.executable)
ELMOC = f"{PYTHON} -m elmoc.cli"
DIRECTIONS = ["forward", "backward"]


wildcard_constraints:
    variant=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    direction="forward|backward",
    seed=r"\d+",


def variants():
    """Pretraining variants enabled in the config, in config order."""
    return list(config["pretrain"]["variants"])


def lm_spec(variant):
    # presets_dir is relative to the repository (the Snakefile's folder), not the workdir
    presets = Path(workflow.basedir) / config["pretrain"]["presets_dir"]
    return resolve_variant(config, variant, presets_dir=presets)


def lm_spec_json(wildcards):
    return json.dumps(lm_spec(wildcards.variant), sort_keys=True)


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
    """resources.pretrain with the variant's overrides; `processes` resolved."""
    job = {k: v for k, v in RESOURCES["pretrain"].items() if k not in ("variants", "retries")}
    job.update(RESOURCES["pretrain"]["variants"].get(variant) or {})
    if job["processes"] is None:
        job["processes"] = max(1, job["gpus"])
    if job["gpus"] and job["processes"] != job["gpus"]:
        raise WorkflowError(
            f"config resources.pretrain (variant {variant}): processes {job['processes']} != gpus {job['gpus']};"
            " with GPUs every process drives one GPU: drop `processes` or make it equal"
        )
    return job


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


def pretrain_launcher(wildcards):
    """`elmoc train` in one process, or torchrun with one process per GPU (or, without GPUs,
    `processes` gloo processes on CPU: the same DDP code path, as in the rehearsal)."""
    job = pretrain_job(wildcards.variant)
    if job["processes"] > 1:
        return f"{PYTHON} -m torch.distributed.run --standalone --nproc-per-node={job['processes']} -m elmoc.cli"
    return ELMOC


def check_resources():
    unknown = sorted(set(RESOURCES["pretrain"]["variants"]) - set(variants()))
    if unknown:
        raise WorkflowError(
            f"config resources.pretrain.variants names {unknown}, which are not pretraining variants"
            f" (pretrain.variants: {variants()})"
        )


def final_outputs():
    """What `snakemake` builds by default: every table the enabled stages can fill."""
    targets = ["results/tables/pretrain.md"]
    targets += extra_final_outputs()
    return targets


# Rule files that add default targets append functions here.
FINAL_OUTPUT_HOOKS = []


def extra_final_outputs():
    out = []
    for hook in FINAL_OUTPUT_HOOKS:
        out += hook()
    return out
