"""The opt-in fine-tuning rules (workflow/rules/finetune.smk, issue 37): config/finetune.yaml layered over
the demo config schedules one `elmoc task` with `encoder: fine_tune` per task x variant x recipe x seed,
each reading its variant's exported model directory (--lm), and the side-by-side table; the shipped
configs alone schedule none of them (their job counts are those before fine-tuning existed)."""
import json
import re
import shlex

import pytest

from test_dryrun import REPO_ROOT, snakemake, workdir

DEMO = str(REPO_ROOT / "config/config.yaml")
OVERLAY = str(REPO_ROOT / "config/finetune.yaml")


def dry_run(work, *configs, extra=()):
    return snakemake("-n", "-p", "--forceall", "--cores", "2", "--snakefile", str(REPO_ROOT / "Snakefile"),
                     "--configfile", *configs, *extra, "--directory", str(work), cwd=work)


def job_counts(stdout):
    return {name: int(n) for name, n in re.findall(r"^(\w+)\s+(\d+)$", stdout, flags=re.M)}


def task_commands(stdout, folder):
    """Each `elmoc task` command line writing under results/{folder}/, split as the shell would."""
    out = []
    for line in stdout.splitlines():
        if " elmoc.cli task " in line and f"--output results/demo/{folder}/" in line:
            words = shlex.split(line.removeprefix("Shell command: "))
            out.append(words[:words.index(">")])
    return out


def option(words, name):
    return words[words.index(name) + 1]


@pytest.mark.slow
def test_each_task_variant_recipe_and_seed_is_one_fine_tuning_task_run(tmp_path):
    work = workdir(tmp_path)
    r = dry_run(work, DEMO, OVERLAY)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    counts = job_counts(r.stdout)
    # 1 task x 2 variants x 3 recipes x 1 seed; the two exports; the table; the demo's 66 jobs besides
    assert (counts["finetune_run"], counts["export_model"], counts["finetune_table"]) == (6, 2, 1), counts
    assert counts["total"] == 66 + 6 + 2 + 1, counts
    commands = task_commands(r.stdout, "finetune")
    outputs = sorted(option(c, "--output") for c in commands)
    assert outputs == sorted(f"results/demo/finetune/sentiment/{v}/{recipe}/seed1.json"
                             for v in ("elmo", "elmo-c") for recipe in ("frozen", "full", "ulmfit"))
    ulmfit = next(c for c in commands if option(c, "--output") == "results/demo/finetune/sentiment/elmo-c/ulmfit/seed1.json")
    assert option(ulmfit, "--lm") == "results/demo/models/elmo-c" and "--features" not in ulmfit
    assert option(ulmfit, "--fasttext") == "results/demo/fasttext/cc.bin"  # the demo task's with_fasttext
    section = json.loads(option(ulmfit, "--section-json"))
    assert section["encoder"] == "fine_tune" and section["fine_tune"] == {"recipe": "ulmfit"}
    # the task section the features run gets, plus the two keys; the same job options as task_run
    features = next(c for c in task_commands(r.stdout, "tasks") if option(c, "--variant") == "elmo-c")
    assert {k: v for k, v in section.items() if k not in ("encoder", "fine_tune")} == json.loads(
        option(features, "--section-json"))
    tail = ["--device", "--threads", "--stop-margin", "--stale-checkpoint"]
    assert [option(ulmfit, o) for o in tail] == [option(features, o) for o in tail]
    assert ulmfit[:ulmfit.index("--")] == features[:features.index("--")]  # elmoc with-gpus ... --
    table = next(line for line in r.stdout.splitlines() if " elmoc.cli finetune-table " in line)
    inputs = shlex.split(table)[shlex.split(table).index("--inputs") + 1:][:8]
    assert "results/demo/tasks/sentiment/elmo-c/seed1.json" in inputs  # the features beside them
    assert "results/demo/finetune/sentiment/elmo/full/seed1.json" in inputs


@pytest.mark.slow
def test_a_recipe_with_lm_finetune_reads_the_lm_fine_tuned_on_the_tasks_text(tmp_path):
    work = workdir(tmp_path)
    # made by rule lm_finetune (workflow/rules/lm_finetune.smk); present here, so the dry run needs no rule
    for variant in ("elmo-c", "elmo"):
        (work / f"results/demo/lm_finetune/{variant}/sentiment/model").mkdir(parents=True)
    overlay = tmp_path / "lmft.yaml"
    overlay.write_text("fine_tune:\n  recipes: {ulmfit: {recipe: ulmfit, lm_finetune: true}, full: {recipe: full}}\n"
                       "  variants: [elmo-c, elmo]\n  tasks: [sentiment]\n")
    r = dry_run(work, DEMO, str(overlay), extra=["--until", "finetune_run"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lms = {option(c, "--output"): option(c, "--lm") for c in task_commands(r.stdout, "finetune")}
    assert lms["results/demo/finetune/sentiment/elmo-c/ulmfit/seed1.json"] == "results/demo/lm_finetune/elmo-c/sentiment/model"
    assert lms["results/demo/finetune/sentiment/elmo-c/full/seed1.json"] == "results/demo/models/elmo-c"
    ulmfit = next(c for c in task_commands(r.stdout, "finetune") if "/elmo/ulmfit/" in option(c, "--output"))
    assert json.loads(option(ulmfit, "--section-json"))["fine_tune"] == {"recipe": "ulmfit"}  # no workflow key


@pytest.mark.slow
@pytest.mark.parametrize("block, named", [
    ("fine_tune:\n  recipes: {full: {}}\n  variants: [elmo-c]\n  tasks: [sst]\n", "fine_tune.tasks names ['sst']"),
    ("fine_tune:\n  recipes: {full: {}}\n  variants: [elmo-x]\n  tasks: [sentiment]\n",
     "fine_tune.variants names ['elmo-x']"),
    ("fine_tune:\n  recipes: {full: {}}\n  varaints: [elmo-c]\n", "varaints"),
])
def test_a_bad_fine_tune_block_stops_the_dry_run_naming_the_key(tmp_path, block, named):
    work = workdir(tmp_path)
    overlay = tmp_path / "bad.yaml"
    overlay.write_text(block)
    r = dry_run(work, DEMO, str(overlay))
    assert r.returncode != 0 and named in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-2000:]


# Job counts of the shipped configs before fine-tuning existed (commit 4fe0ef0), each + 1 for the results
# page (rule results_page, issue 52.3): no fine-tuning job.
SHIPPED_TOTALS = {"config/config.yaml": 66, "config/shared-data.yaml": 136, "config/paper.yaml": 226,
                  "config/rehearsal.yaml": 198}


@pytest.mark.slow
@pytest.mark.parametrize("configfile", SHIPPED_TOTALS)
def test_the_shipped_configs_schedule_no_fine_tuning(tmp_path, configfile):
    # config/rehearsal.yaml reads ../shared/data too (its name does not say so)
    if "../shared/" in (REPO_ROOT / configfile).read_text() and not (REPO_ROOT.parent / "shared" / "data").is_dir():
        pytest.skip(f"../shared/data is absent ({configfile} reads it)")
    r = dry_run(workdir(tmp_path), str(REPO_ROOT / configfile))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    counts = job_counts(r.stdout)
    assert counts["total"] == SHIPPED_TOTALS[configfile], counts
    assert not {"finetune_run", "finetune_table"} & set(counts), counts


@pytest.mark.slow
def test_lint_is_clean_with_the_fine_tuning_rules(tmp_path):
    r = snakemake("--lint", "--snakefile", str(REPO_ROOT / "Snakefile"), "--configfile", DEMO, OVERLAY,
                  "--directory", str(workdir(tmp_path)), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "finetune" not in r.stdout + r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
