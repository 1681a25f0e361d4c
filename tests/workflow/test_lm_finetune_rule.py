"""The `lm_finetune` rule: one `elmoc lm-finetune` job per (variant, task), reading every run's model.pt and
the task's split folder (rule task_split_text), not sentences.txt (every split's text, test included)."""
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_requested_model_directory_is_one_job_per_variant_and_task(tmp_path):
    targets = [f"results/demo/lm_finetune/{variant}/sentiment/model" for variant in ("elmo-c", "elmo-a")]
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "2", "--snakefile",
                        str(REPO_ROOT / "Snakefile"), "--directory", str(tmp_path), "--configfile",
                        str(REPO_ROOT / "config/config.yaml"), "--", *targets],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    commands = sorted(line for line in r.stdout.splitlines() if " lm-finetune --lm-dir " in line)
    assert len(commands) == 2
    for variant, command in zip(("elmo-a", "elmo-c"), commands):
        assert (f"lm-finetune --lm-dir results/demo/lm/{variant} --text results/demo/tasks/sentiment/text "
                f"--output-dir results/demo/lm_finetune/{variant}/sentiment/model --section-json '{{}}'") in command
    inputs = [line for line in r.stdout.splitlines() if line.strip().startswith("input:") and "lm/elmo" in line
              and all(f"results/demo/tasks/sentiment/text/{split}.txt" in line for split in ("train", "dev", "test"))]
    assert len(inputs) == 2 and not any("sentences.txt" in line for line in inputs)
    split_jobs = [line for line in r.stdout.splitlines() if " task-sentences --task sentiment " in line]
    assert len(split_jobs) == 1 and "--split-dir results/demo/tasks/sentiment/text" in split_jobs[0]
    assert any("results/demo/lm/elmo-c/forward/model.pt" in line and "results/demo/lm/elmo-c/backward/model.pt" in line
               for line in inputs)
    assert any("results/demo/lm/elmo-a/joint/model.pt" in line for line in inputs)
