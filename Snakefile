# elmoc: ELMo with continuous outputs (Li et al., TACL 2019) and its softmax baselines.
#
#   snakemake --cores all                                   # offline CPU demo (config/config.yaml)
#   snakemake --cores all --configfile config/shared-data.yaml
#   snakemake --cores all --resources gpu=4 --configfile config/paper.yaml
#   snakemake --workflow-profile profiles/slurm --configfile config/paper.yaml
#
# profiles/default/profile.yaml (beside this file) is loaded automatically, profiles/slurm when
# named; threads, memory, time, GPUs and partitions of every job come from the config's
# `resources:`.
#
# Thin by design: configuration, validation, and the rule files. Every rule calls
# one `elmoc <command>`; the logic lives in src/elmoc.
from snakemake.utils import min_version, validate

min_version("9.19")

# Each job's output goes to its log file; the console stays open to it as file descriptor 3
# (named with its device and inode), where long jobs (pretraining, task runs) write a progress
# line every 30 s (elmoc.io.console).
shell.prefix('set -euo pipefail; exec 3>&2; export ELMOC_PROGRESS_FD="3:$(stat -L -c %d:%i /dev/fd/3)"; ')


# The demo config is the default. A --configfile on the command line replaces it (rather
# than being merged into it), so `--configfile config/paper.yaml` means exactly that file;
# give several --configfile files to layer them.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"



validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"


check_resources()


include: "workflow/rules/data.smk"
include: "workflow/rules/variants.smk"
include: "workflow/rules/pretrain.smk"
include: "workflow/rules/features.smk"
include: "workflow/rules/tasks.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/bench.smk"
include: "workflow/rules/export.smk"
include: "workflow/rules/distill.smk"
include: "workflow/rules/prune.smk"
include: "workflow/rules/lm_finetune.smk"
include: "workflow/rules/finetune.smk"


rule all:
    input:
        final_outputs(),
    default_target: True
