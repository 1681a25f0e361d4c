"""resources.task_run (issue 29.2): the signal lead and stop margin reach a task run's job and
command, per-task overrides (resources.task_run.tasks) change one task's job only, a task with its
own retries runs in a rule of its own (Snakemake's retries are per rule), and an override naming
no task section is one line."""
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_dryrun import REPO_ROOT, snakemake, workdir  # noqa: E402

TARGET = "results/demo/tasks/sentiment/fasttext/seed1.json"


def _dry_run(work, resources):
    overlay = work / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"resources": {"task_run": resources}}))
    return snakemake("-n", "-p", "--cores", "1", "--snakefile", str(REPO_ROOT / "Snakefile"), "--configfile",
                     str(REPO_ROOT / "config/config.yaml"), str(overlay), "--directory", str(work), TARGET, cwd=work)


def _job(stdout: str, rule: str) -> str:
    block = stdout[stdout.index(f"rule {rule}:"):]
    return block[: block.index("\n\n")]


@pytest.mark.slow
def test_task_run_signal_margin_and_per_task_overrides(tmp_path):
    work = workdir(tmp_path)
    r = _dry_run(work, {"signal_lead_s": 120, "stop_margin_s": 33.5, "runtime": 50, "retries": 2})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    job = _job(r.stdout, "task_run")
    assert "runtime=50" in job and "slurm_extra='--signal=USR1@120'" in job
    (command,) = [line for line in r.stdout.splitlines() if " task --task sentiment " in line]
    assert " --stop-margin 33.5 " in command and " --stale-checkpoint set-aside " in command
    # an override without its own retries: the same rule, the task's resources
    r = _dry_run(work, {"retries": 2, "tasks": {"sentiment": {"runtime": 77, "retries": 2, "signal_lead_s": 90}}})
    assert r.returncode == 0, r.stderr[-3000:]
    job = _job(r.stdout, "task_run")
    assert "runtime=77" in job and "--signal=USR1@90" in job
    (command,) = [line for line in r.stdout.splitlines() if " task --task sentiment " in line]
    assert " --stop-margin auto " in command
    # its own retries: its own rule
    r = _dry_run(work, {"tasks": {"sentiment": {"retries": 4, "stop_margin_s": 10}}})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "rule task_run_sentiment:" in r.stdout and "rule task_run:" not in r.stdout
    (command,) = [line for line in r.stdout.splitlines() if " task --task sentiment " in line]
    assert " --stop-margin 10 " in command
    r = _dry_run(work, {"tasks": {"sentimnt": {"runtime": 5}}})
    assert r.returncode != 0
    assert "resources.task_run.tasks names ['sentimnt'], which are not task sections" in r.stdout + r.stderr
