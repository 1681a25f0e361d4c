"""Faults of a two-node pretraining job on a real two-node SLURM cluster (issue 48).

Runs only inside `.ci/slurm-multinode-test.sh` (ELMOC_SLURM_MN=1 and the cluster's SLURM_CONF /
ELMOC_SLURM_CONF exported by `.ci/slurm-multinode.sh start`); skipped elsewhere.

Each job is what the pretrain rule runs for `nodes: 2` (elmoc.multinode.srun_prefix: one srun task
per node, `--kill-on-bad-exit=1`; each task `elmoc with-gpus` + `python -m elmoc.multinode`: one
torchrun agent per node, c10d rendezvous) on the tiny corpus of tests/train, through a wrapper that
sleeps in each step (numbers unchanged) so that a fault lands mid-run after a checkpoint. Every case
ends with a model.pt equal, tensor for tensor, to an uninterrupted run's (1 node x 2 processes, equal
to 2 x 1 by tests/train/test_multinode_launch.py):

* a worker SIGKILLed: the agents restart every worker (--max-restarts), which resume from the
  checkpoint, in the same job;
* one node's torchrun agent SIGKILLed: the job fails fast (srun --kill-on-bad-exit), no process of
  it is left, and the retry (the same command, as Snakemake's retry) resumes;
* a node lost (`scontrol update nodename=n2 state=down`) under `--requeue`: NODE_FAIL, the job is
  requeued (released at once instead of after SLURM's 120 s hold) and resumes;
* the time limit: SIGUSR1 before it (--signal=USR1@40), every worker stops, rank 0 saves, the job
  ends before SLURM kills it, and the retry resumes.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from test_checkpoint_resume import make_workdir  # noqa: E402

from elmoc.model_file import load_checkpoint  # noqa: E402
from elmoc.multinode import srun_prefix  # noqa: E402
from elmoc.process_tree import torchrun_options  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.serial,
              pytest.mark.skipif(not os.environ.get("ELMOC_SLURM_MN") or not os.environ.get("ELMOC_SLURM_CONF"),
                                 reason="needs the two-node cluster of .ci/slurm-multinode-test.sh")]

STEPS, EVERY = 150, 30
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}
WRAPPER = """\
import os, sys, time
import elmoc.train.loop as loop
take = loop.Trainer.take_step
def slow(self, *args, **kwargs):
    time.sleep(float(os.environ.get("TEST_STEP_SLEEP", "0")))
    return take(self, *args, **kwargs)
loop.Trainer.take_step = slow
from elmoc.cli import main
sys.exit(main())
"""
TRAIN = ["wrapper.py", "train", "--spec", "spec.yaml", "--direction", "forward", "--output-dir", "out",
         "--device", "cpu", "--threads", "1", "--stop-margin", "15"]


def prepare(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    work = make_workdir(root)
    spec = dict(work["spec"])
    spec["train"] = {**spec["train"], "epochs": 1000, "max_steps": STEPS, "checkpoint_every": EVERY,
                     "eval_every": 0, "log_every": 10}
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    (root / "wrapper.py").write_text(WRAPPER)
    return root


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_JOB", "SLURM_STEP", "TORCHELASTIC_"))}
    env.update(OMP_NUM_THREADS="1", ELMOC_NATIVE_LSTM="0", SLURM_CONF=os.environ["ELMOC_SLURM_CONF"], **extra)
    return env


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """model.pt of an uninterrupted run: one node, 2 gloo workers (torchrun --standalone)."""
    root = prepare(tmp_path_factory.mktemp("reference"))
    cmd = [sys.executable, "-m", "elmoc.cli", "with-gpus", "--lock-dir", str(root / "locks"), "0", "--",
           sys.executable, "-m", "torch.distributed.run", *torchrun_options(2, 30), *TRAIN]
    r = subprocess.run(cmd, cwd=root, env=clean_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return load_checkpoint(root / "out/model.pt")


def job_command(root: Path, max_restarts: int = 3) -> str:
    prefix = srun_prefix({"nodes": 2, "threads": 1, "processes": 1})
    agent = (f"{sys.executable} -m elmoc.cli with-gpus --lock-dir {root}/locks 0 -- {sys.executable} -m elmoc.multinode"
             f" --nodes 2 --nproc-per-node 1 --shutdown-timeout 30 --max-restarts {max_restarts}"
             f" --log-dir {root}/node-logs -- ")
    return f"cd {root} && {prefix}{agent}{' '.join(TRAIN)} >> {root}/job.log 2>&1"


def submit(root: Path, marker: str, *options: str, step_sleep: float = 0.1, **kw) -> str:
    cmd = ["sbatch", "--parsable", "-N", "2", "-n", "2", "-c", "1", "--mem=900", "-o", str(root / "sbatch-%j.out"),
           "-D", str(root), *options, "--wrap", job_command(root, **kw)]
    env = clean_env(TEST_CASE=marker, TEST_STEP_SLEEP=str(step_sleep))
    return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout.strip().split(";")[0]


def job_state(job: str) -> tuple[str, dict]:
    """(state, fields) from scontrol (MinJobAge keeps finished jobs for 10 minutes)."""
    out = subprocess.run(["scontrol", "show", "job", job], env=clean_env(), capture_output=True, text=True).stdout
    fields = dict(re.findall(r"(\w+)=(\S*)", out))
    return fields.get("JobState", "UNKNOWN"), fields


def wait_state(job: str, states: set[str], timeout: float, root: Path) -> str:
    deadline = time.monotonic() + timeout
    while True:
        state, _ = job_state(job)
        if state in states:
            return state
        assert time.monotonic() < deadline, f"job {job} still {state} after {timeout} s\n{log_tail(root)}"
        time.sleep(1)


def log_tail(root: Path) -> str:
    return "\n".join(p.read_text()[-2500:] for p in [root / "job.log", *root.glob("sbatch-*.out")] if p.exists())


def checkpoint_step(root: Path) -> int:
    path = root / "out/checkpoint.pt"
    try:
        return int(load_checkpoint(path)["step"]) if path.exists() else 0
    except Exception:  # being replaced right now
        return 0


def wait_checkpoint(root: Path, job: str, step: int = EVERY, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while checkpoint_step(root) < step:
        state, _ = job_state(job)
        assert state in ("PENDING", "RUNNING", "CONFIGURING"), f"job {job} {state}\n{log_tail(root)}"
        assert time.monotonic() < deadline, log_tail(root)
        time.sleep(0.5)


def processes(marker: str) -> list[dict]:
    """Every living process of a case (its environment holds TEST_CASE=marker)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        env = dict(e.decode(errors="replace").split("=", 1) for e in environ if b"=" in e)
        if env.get("TEST_CASE") == marker:
            found.append({"pid": int(pid), "cmd": cmdline, "env": env})
    return found


def completes_resumed(job: str, root: Path, reference: dict) -> None:
    """The job completes, its log shows a resume, and its model equals the uninterrupted one."""
    assert wait_state(job, ENDED, 400, root) == "COMPLETED", log_tail(root)
    assert resumed_lines(root), log_tail(root)
    assert_equal_model(root, reference)


def wait_gone(marker: str, timeout: float) -> None:
    """Wait until no process of the case is left; fail naming those still there."""
    deadline = time.monotonic() + timeout
    while processes(marker) and time.monotonic() < deadline:
        time.sleep(1)
    assert not processes(marker), [p["cmd"] for p in processes(marker)]


def assert_equal_model(root: Path, reference: dict) -> None:
    b = load_checkpoint(root / "out/model.pt")
    assert b["step"] == reference["step"] == STEPS
    different = [k for k, x in reference["model"].items() if not torch.equal(x, b["model"][k])]
    assert not different, f"resumed model differs from the uninterrupted run at {different}"


def resumed_lines(root: Path) -> list[str]:
    return re.findall(r"resumed .*checkpoint.pt from step \d+.*", (root / "out/train.log").read_text())


def test_worker_killed_restarts_and_resumes(tmp_path, reference):
    root, marker = prepare(tmp_path / "case"), uuid.uuid4().hex
    job = submit(root, marker, "-t", "10")
    wait_checkpoint(root, job)
    workers = [p for p in processes(marker) if "wrapper.py" in p["cmd"] and "torch.distributed.run" not in p["cmd"]
               and p["env"].get("RANK") == "1"]
    assert len(workers) == 1, processes(marker)
    os.kill(workers[0]["pid"], signal.SIGKILL)
    completes_resumed(job, root, reference)


def test_agent_killed_fails_fast_and_the_retry_resumes(tmp_path, reference):
    root, marker = prepare(tmp_path / "case"), uuid.uuid4().hex
    job = submit(root, marker, "-t", "10")
    wait_checkpoint(root, job)
    agents = [p for p in processes(marker) if "torch.distributed.run" in p["cmd"]
              and p["env"].get("SLURMD_NODENAME") == "n2"]
    assert len(agents) == 1, [p["cmd"] for p in processes(marker)]
    killed = time.monotonic()
    os.kill(agents[0]["pid"], signal.SIGKILL)
    state = wait_state(job, ENDED, 120, root)
    took = time.monotonic() - killed
    assert state == "FAILED", log_tail(root)
    wait_gone(marker, 60)  # nothing left running
    print(f"agent on n2 killed: job {job} FAILED {took:.0f} s later, no process left")
    retry = submit(root, uuid.uuid4().hex, "-t", "10", step_sleep=0)
    assert wait_state(retry, ENDED, 400, root) == "COMPLETED"
    assert resumed_lines(root), log_tail(root)
    assert_equal_model(root, reference)


def test_node_lost_requeues_and_resumes(tmp_path, reference):
    root, marker = prepare(tmp_path / "case"), uuid.uuid4().hex
    job = submit(root, marker, "-t", "10", "--requeue")
    wait_checkpoint(root, job)
    env = clean_env()
    subprocess.run(["scontrol", "update", "nodename=n2", "state=down", "reason=elmoc-test-node-lost"], env=env,
                   check=True)
    try:
        wait_state(job, {"PENDING", "REQUEUED", "REQUEUE_HOLD"}, 120, root)
    finally:
        subprocess.run(["scontrol", "update", "nodename=n2", "state=resume"], env=env, capture_output=True)
    _, fields = job_state(job)
    assert fields.get("Restarts") == "1", fields
    # SLURM holds a requeued job for 120 s; release it sooner, once the lost run's processes are gone
    # (rank 0 on the surviving node stops and saves on SLURM's SIGTERM)
    wait_gone(marker, 120)
    subprocess.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], env=env, capture_output=True)
    completes_resumed(job, root, reference)


def test_time_limit_stops_saves_and_the_retry_resumes(tmp_path, reference):
    root, marker = prepare(tmp_path / "case"), uuid.uuid4().hex
    # 2 minutes, SIGUSR1 70 s before the end: the first job cannot finish 150 steps of 1 s, and the signal
    # comes 50 s in, after the workers' start (at 20 s in, with a 1-minute limit, it once came before
    # either worker had started training, on a busy box)
    job = submit(root, marker, "-t", "2", "--signal=USR1@70", step_sleep=1.0)
    state = wait_state(job, ENDED, 240, root)
    text = (root / "out/train.log").read_text()
    assert state == "FAILED" and re.search(r"stopped by (SIGUSR1|the job's end time|\S+) at step \d+", text), \
        (state, log_tail(root))  # exit 75 (stopped, saved), never SLURM's TIMEOUT kill
    step = checkpoint_step(root)
    assert 0 < step < STEPS
    retry = submit(root, uuid.uuid4().hex, "-t", "10", step_sleep=0)
    assert wait_state(retry, ENDED, 400, root) == "COMPLETED"
    assert any(f"from step {step}" in line for line in resumed_lines(root)), log_tail(root)
    assert_equal_model(root, reference)
