"""The `prune` rule: a plan of `prune.plans` becomes one `elmoc prune` job per direction."""
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

PLANS = """prune:
  plans:
    cells: {method: structured, levels: [0.5, 0.75], finetune_steps: 100}
"""


@pytest.mark.slow
def test_a_prune_plan_is_one_job_per_direction(tmp_path):
    work = tmp_path
    (work / "plans.yaml").write_text(PLANS)

    def snakemake(*args, cwd):
        return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=300)

    args = ("-n", "-p", "--cores", "2", "--snakefile", str(REPO_ROOT / "Snakefile"), "--directory", str(work),
            "--configfile", str(REPO_ROOT / "config/config.yaml"), str(work / "plans.yaml"))
    r = snakemake(*args, "--", *(f"results/demo/prune/elmo-c/cells/{d}/prune.json" for d in ("forward", "backward")),
                  cwd=work)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    commands = [line for line in r.stdout.splitlines() if " prune --model " in line]
    assert len(commands) == 2
    assert "--section-json '{\"finetune_steps\": 100, \"levels\": [0.5, 0.75], \"method\": \"structured\"}'" in commands[0]
