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
# Each config is a run (its `run:`, e.g. demo, paper): its outputs go under results/<run>/, its
# logs under logs/<run>/, so runs of different configs keep apart (docs/workflow.md, "Runs").
#
# Thin by design: configuration, validation, and the rule files. Every rule calls
# one `elmoc <command>`; the logic lives in src/elmoc.
import json
import os
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

from elmoc.config import check_whole_config, check_workflow_config
from elmoc.errors import ConfigError
from elmoc.layouts import check_run_name, default_run_name, flat_layout_note, relocate, run_logs, run_root
from elmoc.process_tree import ignore_stop_signal_in_slurm_job

min_version("9.19")

# Each job's output goes to its log file; the console stays open to it as file descriptor 3
# (named with its device and inode), where long jobs (pretraining, task runs) write a progress
# line every 30 s (elmoc.io.console).
shell.prefix('set -euo pipefail; exec 3>&2; export ELMOC_PROGRESS_FD="3:$(stat -L -c %d:%i /dev/fd/3)"; ')


# Inside a SLURM job (the Snakemake a cluster job step starts re-reads this file), SIGUSR1 is
# ignored here and by the rule's shell: SLURM's --signal=USR1@N reaches every process of the
# step, and without this it ends this Snakemake, failing a job that stops and saves, or one
# that has just finished (whose output the submitting Snakemake then deletes). The trainers
# and `elmoc with-gpus` handle it themselves (elmoc.process_tree).
ignore_stop_signal_in_slurm_job()

# The demo config is the default. A --configfile on the command line replaces it (rather
# than being merged into it), so `--configfile config/paper.yaml` means exactly that file;
# give several --configfile files to layer them. A --configfile that is only an overlay
# (config/distill.yaml alone: no corpus, no pretrain) is refused in one line saying how to layer it.
# (A --configfile path that does not exist is refused by Snakemake itself, before this file is read.)
DEFAULT_CONFIG = "config/config.yaml"
if not workflow.overwrite_configfiles:

    configfile: DEFAULT_CONFIG


# The schema checked first by elmoc, whose message is one line naming the key and the closest
# known one; then Snakemake's validate fills in the schema's defaults.
CONFIG_FILES = [str(f) for f in workflow.overwrite_configfiles or []] or [DEFAULT_CONFIG]
try:
    check_whole_config(config, [str(f) for f in workflow.overwrite_configfiles or []],
                       os.path.relpath(Path(workflow.basedir) / DEFAULT_CONFIG))
    # the run (issue 52.6): its name as the config sets it (an overlay keeps its base's unless it
    # sets one), else the base config file's name
    config["run"] = check_run_name(config.get("run", default_run_name(CONFIG_FILES)), " ".join(CONFIG_FILES))
    check_workflow_config(config, " ".join(CONFIG_FILES),
                          schema_path=Path(workflow.basedir) / "workflow/schemas/config.schema.yaml")
except ConfigError as e:
    raise WorkflowError(str(e)) from None
validate(config, "workflow/schemas/config.schema.yaml")

# Every output of the run under results/<run>/ (RESULTS), every log and benchmark file under
# logs/<run>/ (LOGS): the rules build their paths from these two, and the config's own
# `results/...` paths (and the LM presets', lm_spec) are read inside the run's folder (elmoc.layouts).
# Only the downloads (resources/) and their fetch logs are shared by all runs: they depend on no config.
# docs/workflow.md ("Runs") says why this and not Snakemake's workdir or a module prefix.
RUN = config["run"]
RESULTS, LOGS = run_root(RUN), run_logs(RUN)
CONFIG_AS_GIVEN = json.loads(json.dumps(config))  # the report shows the config as written (plus its run)
config.update(relocate(dict(config), RUN))
if FLAT_NOTE := flat_layout_note():
    print(FLAT_NOTE, file=sys.stderr)


include: "workflow/rules/common.smk"


check_resources()


# The functions of each rule file, beside it (workflow/rules/helpers/<file>.smk), all before the
# rules, which use each other's (finetune's and tables' rules run tasks' job, tables reads the
# students and prune rounds).
include: "workflow/rules/helpers/pretrain.smk"
include: "workflow/rules/helpers/data.smk"
include: "workflow/rules/helpers/tasks.smk"
include: "workflow/rules/helpers/export.smk"
include: "workflow/rules/helpers/bench.smk"
include: "workflow/rules/helpers/distill.smk"
include: "workflow/rules/helpers/finetune.smk"
include: "workflow/rules/helpers/tables.smk"
include: "workflow/rules/helpers/sections.smk"


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
