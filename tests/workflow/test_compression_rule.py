"""Issue 36.4: the workflow's compression table (rules compress_copy and compression_table):
asked for by name, it makes the float16 and int8 copies and takes every model directory
already under results/demo/compressed/{variant}/ as a row; the default targets do not include it."""
import json
import re

import pytest
from test_dryrun import REPO_ROOT, snakemake, workdir


@pytest.mark.slow
def test_compression_table_dry_run(tmp_path):
    work = workdir(tmp_path)
    student = work / "results/demo/compressed/elmo-c/student-small"
    student.mkdir(parents=True)
    (student / "elmoc-model.json").write_text(json.dumps({"format": "elmoc-model-v1"}))
    r = snakemake("results/demo/tables/compression/elmo-c.md", "-n", "-p", "--cores", "1", "--snakefile",
                  str(REPO_ROOT / "Snakefile"), "--configfile", str(REPO_ROOT / "config/config.yaml"),
                  "--directory", str(work), cwd=work)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", r.stdout, flags=re.M))
    assert stats["compress_copy"] == "2" and stats["compression_table"] == "1" and stats["export_model"] == "1"
    command = next(line for line in r.stdout.splitlines() if "compression-table" in line)
    for part in ("--original results/demo/models/elmo-c", "--models-under results/demo/compressed/elmo-c",
                 "--heldout original=results/demo/lm/elmo-c/forward/heldout.json", "--tasks sentiment",
                 "--fasttext results/demo/fasttext/cc.bin", "--work-dir results/demo/compression-work/elmo-c",
                 "--threads 1"):  # resources.task_run.threads: the task runs' and the timing's
        assert part in command, part
    inputs = r.stdout.split("rule compression_table:")[1].split("output:")[0]
    assert "results/demo/compressed/elmo-c/student-small" in inputs



@pytest.mark.slow
def test_compression_table_rows_of_configured_students_and_prune_plans(tmp_path):
    """The students of this teacher (distill.students) and every round of every prune plan, with
    the first plan's ticket and its control, become rows: the table asks for them, so the
    workflow makes them (distill + export, prune + export) before it measures."""
    work = workdir(tmp_path)
    plans = tmp_path / "plans.yaml"
    plans.write_text(json.dumps({"prune": {"plans": {
        "magnitude": {"method": "magnitude", "levels": [0.5, 0.9], "finetune_steps": 5, "ticket": True},
        "structured": {"method": "structured", "levels": [0.5], "finetune_steps": 5}}}}))
    r = snakemake("results/demo/tables/compression/elmo-c.md", "-n", "-p", "--cores", "1", "--snakefile",
                  str(REPO_ROOT / "Snakefile"), "--configfile", str(REPO_ROOT / "config/config.yaml"),
                  str(REPO_ROOT / "config/distill.yaml"), str(plans), "--directory", str(work), cwd=work)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", r.stdout, flags=re.M))
    assert stats["compressed_student"] == "2" and stats["distill"] == "4" and stats["prune"] == "4"
    assert stats["compressed_pruned"] == "5"  # magnitude 0.5, 0.9, ticket, ticket-control; structured 0.5
    inputs = r.stdout.split("rule compression_table:")[1].split("output:")[0]
    for role in ("student-elmo-c-one-layer", "student-elmo-c-narrow", "pruned-magnitude-0.5", "pruned-magnitude-0.9",
                 "pruned-structured-0.5", "ticket", "ticket-control"):
        assert f"results/demo/compressed/elmo-c/{role}" in inputs, role
    assert ("export --forward results/demo/prune/elmo-c/magnitude/forward/round2/model.pt --backward "
            "results/demo/prune/elmo-c/magnitude/backward/round2/model.pt --output-dir results/demo/compressed/elmo-c/pruned-magnitude-0.9"
            in r.stdout)
    assert "export --forward results/demo/prune/elmo-c/magnitude/forward/control/model.pt" in r.stdout
    # every row's heldout value comes from its own training runs, one file per direction
    command = next(line for line in r.stdout.splitlines() if "compression-table" in line)
    for role, run in (("student-elmo-c-narrow", "distill/elmo-c-narrow/{}"), ("pruned-magnitude-0.9", "prune/elmo-c/magnitude/{}/round2"),
                      ("pruned-structured-0.5", "prune/elmo-c/structured/{}/round1"),
                      ("ticket", "prune/elmo-c/magnitude/{}/ticket"), ("ticket-control", "prune/elmo-c/magnitude/{}/control")):
        for d in ("forward", "backward"):
            assert f"--heldout {role}=results/demo/{run.format(d)}/heldout.json" in command, (role, d)
