# Helpers shared by the rule files (variant specs, target lists, commands), and the
# functions of each rule file, so that rule files hold rules only (snakemake --lint).
# Kept light (no torch import): cluster jobs re-parse this file.
import glob
import json
import re
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

from snakemake.exceptions import WorkflowError

from elmoc import directions
from elmoc.config import (STUDENT_WORKFLOW_KEYS, artifact_paths, declared_values, resolve_student, resolve_variant,
                          variant_names)
from elmoc.errors import ConfigError
from elmoc.process_tree import torchrun_options
from elmoc.tables import families

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
    return resolve_variant(config, variant, presets_dir=presets)


def section_json(section):
    """A config section (or entry) as the JSON every `elmoc <command> --section-json` takes:
    the one way configuration reaches a command (the command parses and checks it)."""
    return json.dumps(section, sort_keys=True)


def lm_spec_json(wildcards):
    return section_json(lm_spec(wildcards.variant))


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
        return dict.fromkeys(DIRECTIONS, f"results/lm/{variant}/{single}/model.pt")
    return {d: f"results/lm/{variant}/{d}/model.pt" for d in runs}


def lm_model_inputs(wildcards):
    return lm_models(wildcards.variant)


def lm_model_args(wildcards, input):
    """--forward FILE [--backward FILE] of `elmoc extract` / `elmoc export` (no --backward
    for a one-direction LM)."""
    return " ".join(f"--{d} {shlex.quote(str(input[d]))}" for d in DIRECTIONS if d in input.keys())


def cnn_source_model():
    """The model.pt whose char-CNN makes results/vectors/cnn.npy (shared in a joint ELMo)."""
    source = config["variants"]["cnn_source"]
    if source not in variants():
        return f"results/lm/{source}/forward/model.pt"  # not pretrained here: a file given by hand
    return lm_models(source)["forward"]


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
        # the agent passes stop signals (SLURM's SIGUSR1 too) to its workers and waits
        # signal_lead_s for rank 0's checkpoint before it kills them (torch's default: 30 s)
        options = " ".join(torchrun_options(job["processes"], job["signal_lead_s"]))
        return f"{PYTHON} -m torch.distributed.run {options} -m elmoc.cli"
    return ELMOC


def task_sections():
    """The task sections of the config (tasks.<name> with a `type`), in config order."""
    return [name for name, value in config["tasks"].items() if isinstance(value, dict) and "type" in value]


def task_run_job(task):
    """resources.task_run with the task's overrides (resources.task_run.tasks.<task>); its
    `retries` is the task's (the rule's: task_run_rules)."""
    job = {k: v for k, v in RESOURCES["task_run"].items() if k != "tasks"}
    job.update(RESOURCES["task_run"]["tasks"].get(task) or {})
    return job


def task_job_rules(base, tasks):
    """[(name, task wildcard regex or None, retries)] of the rules named ``base`` that run `elmoc task`
    jobs for ``tasks`` (task_run; finetune_run). Snakemake's `retries` are per rule, so a task whose
    resources.task_run.tasks override sets its own retries gets a rule of its own, ``<base>_<task>``;
    rule ``base`` runs every other task (all of them without such overrides)."""
    default = RESOURCES["task_run"]["retries"]
    own = [t for t, o in RESOURCES["task_run"]["tasks"].items()
           if (o or {}).get("retries", default) != default and t in tasks]
    rules = [(f"{base}_{re.sub(r'[^0-9A-Za-z_]', '_', t)}", re.escape(t), task_run_job(t)["retries"]) for t in own]
    others = [t for t in tasks if t not in own]
    if not own:
        rules.append((base, None, default))
    elif others:
        rules.append((base, "|".join(re.escape(t) for t in others), default))
    return rules


def task_run_rules():
    """The task_run rules (task_job_rules) of every task section."""
    return task_job_rules("task_run", task_sections())


def task_job_threads(wildcards):
    return task_run_job(wildcards.task)["threads"]


def task_job_params():
    """The params of an `elmoc task` job from resources.task_run (with the task's override): the
    GPU wrapper, --device, --threads and --stop-margin (TASK_JOB_OPTIONS)."""
    return {
        "with_gpus": lambda w: with_gpus(task_run_job(w.task)["gpus"]),
        "device": lambda w: device_for(task_run_job(w.task)["gpus"]),
        "threads": task_job_threads,
        "stop_margin": lambda w: task_run_job(w.task)["stop_margin_s"] or "auto",
    }


def task_job_resources():
    """The resources of an `elmoc task` job from resources.task_run (with the task's override); SLURM
    sends SIGUSR1 signal_lead_s before the time limit (replaces the SLURM profile's default)."""
    return {
        "gpu": lambda w: task_run_job(w.task)["gpus"],
        "mem_mb": lambda w: task_run_job(w.task)["mem_mb"],
        "runtime": lambda w: task_run_job(w.task)["runtime"],
        "slurm_partition": lambda w: slurm_partition(task_run_job(w.task)["gpus"]),
        "slurm_extra": lambda w: f"'--signal=USR1@{task_run_job(w.task)['signal_lead_s']}'",
    }


# The end of every `elmoc task` job's command line (the params of task_job_params): a stopped job
# saves its checkpoint and exits 75; a changed input sets the old checkpoint aside.
TASK_JOB_OPTIONS = (" --device {params.device} --threads {params.threads} --stop-margin {params.stop_margin}"
                    " --stale-checkpoint set-aside --output {output} > {log} 2>&1")


def check_resources():
    unknown = sorted(set(RESOURCES["pretrain"]["variants"]) - set(variants()))
    if unknown:
        raise WorkflowError(
            f"config resources.pretrain.variants names {unknown}, which are not pretraining variants"
            f" (pretrain.variants: {variants()})"
        )
    unknown = sorted(set(RESOURCES["task_run"]["tasks"]) - set(task_sections()))
    if unknown:
        raise WorkflowError(
            f"config resources.task_run.tasks names {unknown}, which are not task sections"
            f" (tasks.<name> with a type: {task_sections()})"
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


# --- functions of data.smk ---
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
        inputs.append("results/corpus/train")
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
    return ["results/corpus/train"]




# --- functions of tasks.smk ---
BASELINE = "fasttext"


def complete_task_sections():
    """Each task section checked by its registered task class and completed with the class's
    defaults (elmoc.tasks.config.complete_sections), once, when the workflow is parsed: an
    unknown type or key stops `snakemake -n` in one line naming it, and every rule's
    --section-json carries each option the run uses. Importing the task classes imports torch
    (about 3 s of CPU, only for a config with task sections; docs/architecture.md)."""
    if not task_sections():
        return
    from elmoc.tasks.config import complete_sections  # the package imports every task: torch

    try:
        complete_sections(config["tasks"])
    except ConfigError as e:
        raise WorkflowError(str(e)) from None


complete_task_sections()


def task_section(task):
    return config["tasks"][task]


def task_names():
    names = list(config["tasks"].get("run", []))
    for name in names:
        if name not in task_sections():
            raise WorkflowError(f"config tasks.run names {name!r}, which is not a task section (tasks.<name> with a"
                                f" type): add tasks.{name} or pick one of {task_sections()}")
    return names


def task_has_data(task):
    """Whether the task's training data is configured (the CLI reports the exact missing key)."""
    return bool(task_section(task).get("train") or task_section(task).get("data_dir"))


def task_data_paths(section):
    """train / dev / test paths of a task section: the keys themselves, or a CoNLL-2012 task's
    data_dir/<splits.<split>> (elmoc.tasks.conll2012.resolve_conll_paths)."""
    if section.get("data_dir"):
        from elmoc.tasks.conll2012 import resolve_conll_paths

        paths = resolve_conll_paths(f"task {section['type']}", section.get("train"), section.get("dev"),
                                    section.get("test"), section["data_dir"], section.get("splits"))
        return list(paths.values())
    return [section[k] for k in ("train", "dev", "test") if section.get(k)]


def task_variants():
    chosen = config["tasks"].get("variants")
    out = list(variants() if chosen is None else chosen)
    if config["tasks"].get("baseline", True):
        out.append(BASELINE)
    return out


def task_results():
    """Every metrics JSON of the downstream stage (the tables rule collects them)."""
    return expand(
        "results/tasks/{task}/{variant}/seed{seed}.json",
        task=task_names(),
        variant=task_variants(),
        seed=config["tasks"].get("seeds", [1, 2, 3]),
    )


def task_download_manifests(task):
    """Fetch manifests of the downloads a task's data paths live in."""
    out = []
    for name in config["tasks"].get("downloads", {}):
        prefix = f"resources/tasks/{name}/"
        if any(str(task_section(task).get(k) or "").startswith(prefix) for k in ("train", "dev", "test")):
            out.append(f"{prefix}.fetch.json")
    return out


def task_data_inputs(wildcards):
    """Data files given as plain paths (user-supplied or shared data) plus download manifests."""
    section = task_section(wildcards.task)
    files = [path for path in task_data_paths(section) if not str(path).startswith("resources/tasks/")]
    return files + task_download_manifests(wildcards.task)


def task_vectors_needed(task, variant):
    return task_has_data(task) and (variant == BASELINE or task_section(task)["with_fasttext"])


def task_vector_inputs(task, variant):
    """{"vectors": the fastText .bin, "vocab": tasks.vocab} of a run that reads word vectors, else {}."""
    if not task_vectors_needed(task, variant):
        return {}
    inputs = {"vectors": config["tasks"].get("vectors", "results/fasttext/cc.bin")}
    if config["tasks"].get("vocab"):
        inputs["vocab"] = config["tasks"]["vocab"]
    return inputs


def task_run_inputs(wildcards):
    inputs = {"data": task_data_inputs(wildcards)}
    if not task_has_data(wildcards.task):
        return {}
    if wildcards.variant != BASELINE:
        inputs["features"] = f"results/features/{wildcards.variant}/{wildcards.task}.hdf5"
    return {**inputs, **task_vector_inputs(wildcards.task, wildcards.variant)}


# `elmoc task` options naming an input of the job (rule input name -> option)
TASK_INPUT_OPTIONS = {"features": "--features", "lm": "--lm", "vectors": "--fasttext", "vocab": "--vocab"}


def task_run_args(wildcards, input):
    """The options of `elmoc task` naming the job's inputs (--features or --lm, --fasttext, --vocab)."""
    args = []
    for name, option in TASK_INPUT_OPTIONS.items():
        if name in input.keys():
            args += [option, getattr(input, name)]
    return " ".join(args)


# --- functions of finetune.smk ---
# The workflow's own keys of a fine_tune recipe (the rest is the task section's `fine_tune:` mapping).
FINETUNE_WORKFLOW_KEYS = ("lm_finetune",)


def fine_tune_block():
    """Config `fine_tune` (absent: {}): recipes, variants, tasks, seeds, lm_finetune."""
    return config.get("fine_tune") or {}


def finetune_recipes():
    return list(fine_tune_block().get("recipes") or {})


def finetune_variants():
    return list(fine_tune_block().get("variants") or [])


def finetune_tasks():
    return list(fine_tune_block().get("tasks") or [])


def finetune_active():
    """Whether the config asks for fine-tuning runs: a recipe, a variant and a task at least."""
    return bool(finetune_recipes() and finetune_variants() and finetune_tasks())


def finetune_seeds():
    seeds = fine_tune_block().get("seeds")
    return list(config["tasks"].get("seeds", [1, 2, 3]) if seeds is None else seeds)


def check_fine_tune():
    """fine_tune.tasks must be task sections, fine_tune.variants pretraining variants."""
    if not finetune_active():
        return
    for key, names, known, where in (("tasks", finetune_tasks(), task_sections(), "tasks.<name> with a type"),
                                      ("variants", finetune_variants(), variants(), "pretrain.variants")):
        unknown = [n for n in names if n not in known]
        if unknown:
            raise WorkflowError(f"config fine_tune.{key} names {unknown}, which are not in {where} ({known});"
                                f" add them there or remove them from fine_tune.{key}")


def recipe_lm_finetune(recipe):
    """Whether the recipe starts from the LM fine-tuned on the task's text (the recipe's
    `lm_finetune`, else the block's)."""
    entry = fine_tune_block()["recipes"][recipe]
    value = entry.get("lm_finetune", fine_tune_block().get("lm_finetune", False))
    return value is True or isinstance(value, dict)  # a mapping: the options of `elmoc lm-finetune`


def finetune_lm_dir(task, variant, recipe):
    """The model directory of `elmoc task --lm`: the variant's export (rule export_model), or its LM
    fine-tuned on the task's text (rule lm_finetune, workflow/rules/lm_finetune.smk)."""
    if recipe_lm_finetune(recipe):
        return f"results/lm_finetune/{variant}/{task}/model"
    return f"results/models/{variant}"


def finetune_section_json(wildcards):
    """The task section with `encoder: fine_tune` and the recipe's options as its `fine_tune:`."""
    entry = fine_tune_block()["recipes"][wildcards.recipe]
    options = {k: v for k, v in entry.items() if k not in FINETUNE_WORKFLOW_KEYS}
    return section_json({**task_section(wildcards.task), "encoder": "fine_tune", "fine_tune": options})


def finetune_run_inputs(wildcards):
    inputs = {"data": task_data_inputs(wildcards),
              "lm": finetune_lm_dir(wildcards.task, wildcards.variant, wildcards.recipe)}
    return {**inputs, **task_vector_inputs(wildcards.task, wildcards.variant)}


def finetune_results():
    """Every metrics JSON of the fine-tuning runs (results/finetune/{task}/{variant}/{recipe}/seed{seed}.json)."""
    if not finetune_active():
        return []
    return expand("results/finetune/{task}/{variant}/{recipe}/seed{seed}.json", task=finetune_tasks(),
                  variant=finetune_variants(), recipe=finetune_recipes(), seed=finetune_seeds())


def finetune_feature_results():
    """The feature-based runs the fine-tuned ones sit beside in the table (rule task_run)."""
    if not finetune_active():
        return []
    return expand("results/tasks/{task}/{variant}/seed{seed}.json", task=finetune_tasks(),
                  variant=finetune_variants(), seed=finetune_seeds())


# --- functions of tables.smk ---
# the copies that compress_copy makes for the compression table (the registered formats with TABLE_COPY)
COMPRESSED_FORMATS = [name for name, copy in declared_values("compression", "TABLE_COPY").items() if copy]


def compressed_dirs(variant):
    """The model directories under results/compressed/{variant}/: the two copies, the configured
    students of this teacher, the configured prune plans' rounds and ticket (compressed_smaller_roles),
    plus any already there."""
    found = {p.parent.name for p in Path(f"results/compressed/{variant}").glob("*/elmoc-model.json")}
    roles = found | set(COMPRESSED_FORMATS) | set(compressed_smaller_roles(variant))
    return [f"results/compressed/{variant}/{role}" for role in sorted(roles)]


def prune_level_name(level):
    """A prune level as a role name writes it (0.5 -> "0.5", 1 -> "1")."""
    return f"{float(level):g}"


def compressed_smaller_roles(variant):
    """Role -> how the workflow makes it, for the smaller models of ``variant`` that the config asks
    for: ``student-{name}`` for each `distill.students` entry whose teacher is the variant,
    ``pruned-{plan}-{level}`` for each round of each `prune.plans` plan (round k = level k), and
    ``ticket`` / ``ticket-control`` from the first plan with ``ticket: true`` (the table has one
    ticket row pair)."""
    roles = {f"student-{s}": ("student", s) for s in distill_students() if student_teacher(s) == variant}
    plans = (config.get("prune") or {}).get("plans") or {}
    ticket = None
    for plan, section in plans.items():
        for k, level in enumerate(section.get("levels") or [], start=1):
            roles[f"pruned-{plan}-{prune_level_name(level)}"] = ("round", plan, f"round{k}")
        if section.get("ticket") and ticket is None:
            ticket = plan
    if ticket is not None:
        roles["ticket"] = ("round", ticket, "ticket")
        roles["ticket-control"] = ("round", ticket, "control")
    return roles


def pruned_models(variant, role):
    """{"forward": model.pt, "backward": model.pt} of a pruned role (compressed_smaller_roles): each
    run's model.pt of lm_models with results/lm/{variant}/{run}/ replaced by the plan's round folder."""
    _, plan, folder = compressed_smaller_roles(variant)[role]
    return {d: str(Path(f"results/prune/{variant}/{plan}") / Path(path).parent.name / folder / "model.pt")
            for d, path in lm_models(variant).items()}


def compressed_heldout(variant):
    """(role, heldout.json) pairs of the smaller models (compressed_smaller_roles), one per training
    run: a student's two directions (rule distill's outputs), a pruned round's, the ticket's and its
    control's file beside each direction's model.pt (written by the prune job whose prune.json the
    row's directory waits for, so present when the table runs)."""
    pairs = []
    for role, how in compressed_smaller_roles(variant).items():
        if how[0] == "student":
            files = [f"results/distill/{how[1]}/{d}/heldout.json" for d in DIRECTIONS]
        else:
            files = sorted({str(Path(m).parent / "heldout.json") for m in pruned_models(variant, role).values()})
        pairs += [(role, f) for f in files]
    return pairs


def compression_tasks():
    """The tasks of the compression table: tasks.run with data."""
    return [t for t in task_names() if task_has_data(t)]


def compression_task_data():
    return [f for t in compression_tasks() for f in task_data_inputs(SimpleNamespace(task=t))]


def bench_json():
    return ["results/tables/bench.json"] if config.get("bench", {}).get("enabled") else []


def majority_results():
    return expand("results/baselines/{task}/majority.json", task=task_names())


def all_heldout():
    return [f"results/lm/{v}/{d}/heldout.json" for v in variants() for d in lm_directions(v)]


def preset_name(variant):
    """The preset a variant is built from (`preset:` of its entry, else its own name)."""
    return (config["pretrain"]["variants"].get(variant) or {}).get("preset", variant)


def beyond_variants():
    """The variants beyond the paper (a Transformer or a masked LM; elmoc.tables.families):
    with none, the workflow builds no table `beyond`."""
    return [v for v in variants() if families.is_beyond(lm_spec(v), preset_name(v))]


# --- functions of bench.smk ---
def bench_processes():
    """Processes the bench runs at once: `world` for the data-parallel scenario S3 (default 2), else 1."""
    b = config["bench"]
    return (b.get("world") or 2) if b.get("s3", True) else 1


def bench_gpus():
    """One GPU per process when the bench runs on CUDA."""
    return bench_processes() if str(config["bench"].get("device", "cpu")).startswith("cuda") else 0




# --- functions of export.smk ---
def released_lm(variant):
    entry = config["pretrain"]["variants"].get(variant) or {}
    return entry.get("released")


def released_variants():
    return [v for v in config["pretrain"]["variants"] if released_lm(v)]


def released_inputs(wildcards):
    files = released_lm(wildcards.variant)
    return data_path_inputs([files["options"], files["weights"]])


def export_fasttext_model(wildcards):
    """The fastText .bin an input table was made from (results/vectors/{name}.npy of a configured
    fastText model, whatever the input type): export puts its n-gram buckets into the directory."""
    return fasttext_models_of(lm_spec(wildcards.variant))


def fasttext_models_of(spec):
    """[the fastText .bin of the spec's input table], or [] (export_fasttext_model)."""
    table = spec["input"].get("vectors")
    name = Path(str(table)).stem
    if isinstance(table, str) and name in config["fasttext"].get("models", {}):
        return [f"results/fasttext/{name}.bin"]
    return []


# --- functions of distill.smk ---
def distill_students():
    return list((config.get("distill") or {}).get("students") or {})


def student_spec(student):
    presets = Path(workflow.basedir) / config["pretrain"]["presets_dir"]
    return resolve_student(config, student, presets_dir=presets)


def student_teacher(student):
    return config["distill"]["students"][student]["teacher"]


def student_job(student):
    """The teacher's pretrain resources, one process (a student trains as its teacher did)."""
    return pretrain_job(student_teacher(student))


def student_section_json(wildcards):
    """The student's loss settings, what `elmoc distill --section-json` reads."""
    entry = config["distill"]["students"][wildcards.student] or {}
    return section_json({k: v for k, v in entry.items() if k not in STUDENT_WORKFLOW_KEYS})



# --- functions of lm_finetune.smk ---
def lm_finetune_section_json(wildcards):
    """config fine_tune.lm_finetune as `elmoc lm-finetune --section-json` ({epochs, lr}; true or
    absent: the command's defaults)."""
    value = (config.get("fine_tune") or {}).get("lm_finetune")
    return section_json(value if isinstance(value, dict) else {})
