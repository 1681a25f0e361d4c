"""One model over 2 nodes x 1 process equals the same model over 1 node x 2 processes (issue 48,
CPU, gloo): the multi-node launch changes placement only.

The 2 x 1 run is two `elmoc.multinode` agents started as two SLURM tasks would start them (fake
SLURM variables: one job id, node ids 0 and 1, node names n1 and n2, and stand-in `scontrol` /
`squeue` commands that answer the node list and the head's address 127.0.0.1), each under
`elmoc with-gpus` as in the pretrain rule, meeting through c10d rendezvous on the job's port; the
1 x 2 run is one `--standalone` agent with 2 workers, the options of a one-node job. Both train the
same spec from the same data; every tensor of model.pt must be equal."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from test_checkpoint_resume import make_workdir

from elmoc.model_file import load_checkpoint
from elmoc.multinode import PORT_BASE, PORT_SPAN
from elmoc.process_tree import torchrun_options

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # 2 gloo workers twice: alone after the parallel pass

SCONTROL = """#!/bin/sh
case "$2" in
  hostnames) echo n1; echo n2 ;;
  node) echo "NodeName=$3 Arch=x86_64"; echo "   NodeAddr=127.0.0.1 NodeHostName=$(hostname)" ;;
  *) echo "stand-in scontrol: $*" >&2; exit 1 ;;
esac
"""
SQUEUE = "#!/bin/sh\necho 'n[1-2]'\n"


def free_job_id() -> int:
    """A job id whose rendezvous port (elmoc.multinode.rendezvous_port) is free now."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            probe = s.getsockname()[1]
        job = 10_000 * 7 + (probe % PORT_SPAN)
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", PORT_BASE + job % PORT_SPAN))
            return job
        except OSError:
            continue
    raise AssertionError("no free port in the rendezvous range")


def workdir(root: Path) -> dict:
    work = make_workdir(root)
    spec = dict(work["spec"])
    spec["train"] = {**spec["train"], "epochs": 2, "checkpoint_every": 0, "eval_every": 0, "log_every": 5}
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    return work


def base_env(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TORCHELASTIC_"))}
    env.update(OMP_NUM_THREADS="1", ELMOC_NATIVE_LSTM="0")
    return env


TRAIN = ["-m", "elmoc.cli", "train", "--spec", "spec.yaml", "--direction", "forward", "--output-dir", "out",
         "--device", "cpu", "--threads", "1"]


def with_gpus(root: Path) -> list[str]:
    return [sys.executable, "-m", "elmoc.cli", "with-gpus", "--lock-dir", str(root / "locks"), "0", "--"]


def run_one_node(root: Path) -> subprocess.CompletedProcess:
    cmd = [*with_gpus(root), sys.executable, "-m", "torch.distributed.run", *torchrun_options(2, 30), *TRAIN]
    return subprocess.run(cmd, cwd=root, env=base_env(root), capture_output=True, text=True, timeout=600)


def run_two_nodes(root: Path) -> list[tuple[int, str]]:
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for name, text in (("scontrol", SCONTROL), ("squeue", SQUEUE)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    job = free_job_id()
    procs = []
    for node_id, name in ((1, "n2"), (0, "n1")):  # the non-host first: it must wait for the host
        env = base_env(root)
        env.update(PATH=f"{bin_dir}:{env['PATH']}", SLURM_JOB_ID=str(job), SLURM_NODEID=str(node_id),
                   SLURMD_NODENAME=name, ELMOC_SLURM_CONF=str(root / "slurm.conf"))
        cmd = [*with_gpus(root), sys.executable, "-m", "elmoc.multinode", "--nodes", "2", "--nproc-per-node", "1",
               "--shutdown-timeout", "30", "--max-restarts", "0", "--log-dir", "node-logs", "--", *TRAIN]
        procs.append(subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    out = []
    for p in procs:
        try:
            text, _ = p.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        out.append((p.returncode, text))
    return out


def test_two_nodes_by_one_process_equal_one_node_by_two(tmp_path):
    one, two = tmp_path / "1x2", tmp_path / "2x1"
    one.mkdir()
    two.mkdir()
    workdir(one)
    workdir(two)
    r = run_one_node(one)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    agents = run_two_nodes(two)
    assert all(code == 0 for code, _ in agents), "\n".join(text[-3000:] for _, text in agents)
    logs = "".join(text for _, text in agents)
    assert "rendezvous 127.0.0.1:" in logs and "(host)" in logs
    assert re.search(r"^\[n[12] rank 0\]:.* heldout ", logs, re.M)  # rank 0's lines name its node (n1 or n2)
    assert sorted(p.name for p in (two / "node-logs").iterdir()) == ["n1", "n2"]
    a = load_checkpoint(one / "out/model.pt")
    b = load_checkpoint(two / "out/model.pt")
    assert a["step"] == b["step"] > 0
    assert a["model"].keys() == b["model"].keys()
    different = [k for k, x in a["model"].items() if not torch.equal(x, b["model"][k])]
    assert not different, f"2 nodes x 1 != 1 node x 2 at {different}"
