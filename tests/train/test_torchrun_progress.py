"""Progress lines from a torchrun job (issue 52, the quiet console): the workflow's console reaches
rank 0 of `elmoc train` under the real `torch.distributed.run` agent (2 gloo workers on CPU), launched
as the pretrain rule launches it (`elmoc with-gpus ... -- python -m torch.distributed.run`), although
the agent starts its workers with the console's descriptor closed (elmoc.io.console.parent_console)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml
from test_checkpoint_resume import make_workdir

from elmoc.io.console import FD_ENV, SECONDS_ENV, console_env
from elmoc.process_tree import torchrun_options

# serial: two torchrun workers (multi-process DDP), alone after make test's parallel pass
pytestmark = [pytest.mark.slow, pytest.mark.serial]


def test_rank_0_of_a_torchrun_job_writes_progress_lines_to_the_console(tmp_path):
    work = make_workdir(tmp_path)
    spec = dict(work["spec"])
    spec["train"] = {**spec["train"], "epochs": 1, "max_steps": 6, "log_every": 1, "checkpoint_every": 0,
                     "eval_every": 0}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    console = tmp_path / "console.txt"
    fd = os.open(console, os.O_WRONLY | os.O_CREAT | os.O_APPEND)  # stands for the console of the Snakefile's fd 3
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TORCHELASTIC_"))}
    env.update(OMP_NUM_THREADS="1", ELMOC_NATIVE_LSTM="0", **{FD_ENV: console_env(fd), SECONDS_ENV: "0"})
    cmd = [sys.executable, "-m", "elmoc.cli", "with-gpus", "--lock-dir", str(tmp_path / "locks"), "0", "--",
           sys.executable, "-m", "torch.distributed.run", *torchrun_options(2, 60), "-m", "elmoc.cli",
           "train", "--spec", "spec.yaml", "--direction", "forward", "--output-dir", "lm/tiny/forward", "--device", "cpu",
           "--threads", "1"]
    try:
        r = subprocess.run(cmd, cwd=tmp_path, env=env, pass_fds=(fd,), capture_output=True, text=True, timeout=600)
    finally:
        os.close(fd)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = console.read_text().splitlines()
    steps = [int(m[1]) for line in lines if (m := re.match(r"\[train tiny/forward\] step (\d+)/6, loss -?\d", line))]
    # a line at every step (interval 0 s) from rank 0 alone: each step once, nothing else on the console
    assert steps == list(range(1, 7)), lines
    assert len(lines) == len(steps), lines
