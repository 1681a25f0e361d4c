# Helpers shared by the rule files: variant specs, target lists, commands.
# Kept light (no torch import): cluster jobs re-parse this file.
import json
import shlex
import sys
from pathlib import Path

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


def pretrain_gpus():
    return int(config["pretrain"]["gpus"])


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
