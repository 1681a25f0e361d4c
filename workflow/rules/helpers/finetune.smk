# The functions of finetune.smk (config `fine_tune`) and lm_finetune.smk.
import re

from snakemake.exceptions import WorkflowError

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
        return f"{RESULTS}/lm_finetune/{variant}/{task}/model"
    return f"{RESULTS}/models/{variant}"


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
    """Every metrics JSON of the fine-tuning runs (results/<run>/finetune/{task}/{variant}/{recipe}/seed{seed}.json)."""
    if not finetune_active():
        return []
    return expand(f"{RESULTS}/finetune/{{task}}/{{variant}}/{{recipe}}/seed{{seed}}.json", task=finetune_tasks(),
                  variant=finetune_variants(), recipe=finetune_recipes(), seed=finetune_seeds())


def finetune_feature_results():
    """The feature-based runs the fine-tuned ones sit beside in the table (rule task_run)."""
    if not finetune_active():
        return []
    return expand(f"{RESULTS}/tasks/{{task}}/{{variant}}/seed{{seed}}.json", task=finetune_tasks(),
                  variant=finetune_variants(), seed=finetune_seeds())


def lm_finetune_section_json(wildcards):
    """config fine_tune.lm_finetune as `elmoc lm-finetune --section-json` ({epochs, lr}; true or
    absent: the command's defaults)."""
    value = (config.get("fine_tune") or {}).get("lm_finetune")
    return section_json(value if isinstance(value, dict) else {})


check_fine_tune()
if finetune_active():
    TASK_JOB_KINDS.append(task_job_kind(
        "finetune_run", finetune_tasks(), finetune_run_inputs, f"{RESULTS}/finetune/{{task}}/{{variant}}/{{recipe}}/seed{{seed}}.json",
        finetune_section_json, f"{LOGS}/finetune/{{task}}.{{variant}}.{{recipe}}.seed{{seed}}.log",
        f"{LOGS}/benchmarks/finetune/{{task}}.{{variant}}.{{recipe}}.seed{{seed}}.tsv",
        {"recipe": "|".join(re.escape(r) for r in finetune_recipes())}))
