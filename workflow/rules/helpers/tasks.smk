# The functions of tasks.smk: task sections, the `elmoc task` job (resources.task_run), the runs'
# inputs; finetune.smk's and tables.smk's rules run the same job.
import re
from types import SimpleNamespace

from snakemake.exceptions import WorkflowError

from elmoc.errors import ConfigError


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
        f"{RESULTS}/tasks/{{task}}/{{variant}}/seed{{seed}}.json",
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
    inputs = {"vectors": config["tasks"].get("vectors", f"{RESULTS}/fasttext/cc.bin")}
    if config["tasks"].get("vocab"):
        inputs["vocab"] = config["tasks"]["vocab"]
    return inputs


def task_run_inputs(wildcards):
    inputs = {"data": task_data_inputs(wildcards)}
    if not task_has_data(wildcards.task):
        return {}
    if wildcards.variant != BASELINE:
        inputs["features"] = f"{RESULTS}/features/{wildcards.variant}/{wildcards.task}.hdf5"
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


def check_task_resources():
    """resources.task_run.tasks must name task sections."""
    check_names("resources.task_run.tasks", RESOURCES["task_run"]["tasks"], task_sections(),
                "task sections", "tasks.<name> with a type")


check_task_resources()


def task_job_kind(base, tasks, inputs, output, section, log, benchmark, constraints=None):
    """One kind of `elmoc task` job, whose rules tasks.smk makes (task_job_rules: ``base`` and
    ``base_<task>``): ``inputs`` an input function (unpacked), ``section`` the function giving the
    task section as JSON, ``output`` / ``log`` / ``benchmark`` patterns, ``constraints`` on wildcards
    other than {task}. Every kind runs the same command (TASK_JOB_SHELL) with resources.task_run."""
    return SimpleNamespace(base=base, tasks=tasks, inputs=inputs, output=output, section=section, log=log,
                           benchmark=benchmark, constraints=constraints or {})


# The kinds of `elmoc task` job: the feature-based runs here, fine-tuning in helpers/finetune.smk.
TASK_JOB_KINDS = [
    task_job_kind("task_run", task_sections(), task_run_inputs, f"{RESULTS}/tasks/{{task}}/{{variant}}/seed{{seed}}.json",
                  lambda w: section_json(task_section(w.task)), f"{LOGS}/tasks/{{task}}.{{variant}}.seed{{seed}}.log",
                  f"{LOGS}/benchmarks/tasks/{{task}}.{{variant}}.seed{{seed}}.tsv"),
]
# The command of every such job: a stopped job saves its checkpoint and exits 75; a changed input
# sets the old checkpoint aside (TASK_JOB_OPTIONS).
TASK_JOB_SHELL = ("{params.with_gpus} {params.elmoc} task --task {wildcards.task} --section-json {params.section:q}"
                  " --variant {wildcards.variant} --seed {wildcards.seed} --scale {params.scale} {params.inputs}"
                  + TASK_JOB_OPTIONS)
