"""Fault injection through Snakemake: a pretraining job killed after its first checkpoint.pt
(SIGKILL, and separately SIGTERM) is resumed by rerunning the same `snakemake` command, and
the final model.pt equals an uninterrupted run's bit for bit. SIGUSR1 is sent as SLURM's
``--signal=USR1@N`` sends it to a job step: to every process, Snakemake included, with
``SLURM_JOB_ID`` set; Snakemake must outlive it and report the stop.

One uninterrupted run of a tiny ELMo-C (data stages + forward LM) is the reference; each
fault run starts from a copy of its working folder without the LM's folder, so only the
pretraining job runs (same corpus, vocabulary and vectors, same Snakemake metadata).
"""
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("ELMOC_SHARED_DATA", REPO_ROOT.parent / "shared" / "data")).resolve()
LM = "results/tiny/lm/elmo-c/forward"
TARGET = f"{LM}/model.pt"

CONFIG = {
    "scale": "demo",
    "corpus": {"downloads": {}, "sources": [{"format": "lines", "path": str(SHARED / "corpus_sample/1b_word_shards/shard*")}],
               "num_shards": 2, "heldout": 0.1, "seed": 1},
    "vocab": {"max_size": 3000, "min_count": 1},
    "fasttext": {"models": {"cc": {"train": {"dim": 16, "epoch": 2, "minn": 3, "maxn": 6, "minCount": 1, "ws": 5, "neg": 5,
                                             "lr": 0.05, "bucket": 20000, "thread": 1, "seed": 1}}},
                 "random": {"dim": 16, "seed": 1}},
    "pretrain": {
        "variants": {"elmo-c": {}},
        "overrides": {
            "encoder": {"cell_size": 32, "projection_size": 16},
            "optimizer": {"type": "scheduled_adam", "base_scale": 2.0e-3, "base_ratio": 16.0, "warmup": 5},
            "train": {"batch_size": 8, "epochs": 1, "max_steps": 80, "log_every": 5, "checkpoint_every": 5,
                      "eval_batch_size": 8},
        },
    },
    "tasks": {"run": []},
    "bench": {"enabled": False},
    "resources": {"pretrain": {"threads": 1}},
}


def process_tree(pid):
    """``pid`` and every process below it (read from /proc)."""
    from elmoc.process_tree import descendants

    return [pid, *descendants(pid)]


def snakemake_command(work, cfg):
    return [sys.executable, "-m", "snakemake", "--cores", "1", "--snakefile", str(REPO_ROOT / "Snakefile"),
            "--configfile", str(cfg), "--directory", str(work), TARGET]


def trainer_pids(work):
    """PIDs of `elmoc train` processes running in `work` (read from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if b"train" in cmdline and b"--output-dir" in cmdline and b"elmoc.cli" in cmdline and b"with-gpus" not in cmdline \
                and Path(cwd) == Path(work):
            pids.append(int(entry.name))
    return pids


def models_equal(a, b):
    import torch

    from elmoc.model_file import load_checkpoint

    ma, mb = load_checkpoint(a), load_checkpoint(b)
    assert ma["step"] == mb["step"] and ma["tokens"] == mb["tokens"]
    assert ma["model"].keys() == mb["model"].keys()
    return all(torch.equal(ma["model"][k], mb["model"][k]) for k in ma["model"])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    if not SHARED.is_dir():
        pytest.skip(f"shared data not found at {SHARED}")
    root = tmp_path_factory.mktemp("fault")
    cfg = root / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    work = root / "reference"
    work.mkdir()
    r = subprocess.run(snakemake_command(work, cfg), cwd=work, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return root, cfg, work


@pytest.mark.slow
@pytest.mark.parametrize("sig, whole_step", [(signal.SIGKILL, False), (signal.SIGTERM, False), (signal.SIGUSR1, True)],
                         ids=["SIGKILL", "SIGTERM", "SIGUSR1-to-the-SLURM-job-step"])
def test_killed_pretraining_job_resumes_bit_for_bit(reference, sig, whole_step):
    root, cfg, ref = reference
    work = root / f"killed-{sig.name}"
    shutil.copytree(ref, work, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    shutil.rmtree(work / LM)
    (work / f"logs/tiny/pretrain/elmo-c.forward.log").unlink()
    # as in a SLURM job step: Snakemake, the rule's shell, with-gpus and the trainer all get the signal
    env = {**os.environ, "SLURM_JOB_ID": "4242"} if whole_step else None
    first = subprocess.Popen(snakemake_command(work, cfg), cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=env)
    checkpoint, killed = work / LM / "checkpoint.pt", []
    deadline = time.monotonic() + 600
    while not killed:
        assert first.poll() is None, "snakemake ended before the first checkpoint: " + first.stdout.read()[-3000:]
        assert time.monotonic() < deadline, "no checkpoint.pt within 10 minutes"
        if checkpoint.exists() and trainer_pids(work):
            killed = process_tree(first.pid) if whole_step else trainer_pids(work)
            for pid in killed:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:  # a short-lived process of the tree (a `stat` of the shell prefix)
                    pass
        time.sleep(0.05)
    out, _ = first.communicate(timeout=300)
    # Snakemake reports the stop as a failed job (exit 1); one ended by the signal itself has -sig
    assert first.returncode == 1, f"snakemake exited {first.returncode} (-{int(sig)}: ended by {sig.name}):\n" + out[-3000:]
    assert not (work / TARGET).exists() and checkpoint.exists(), "Snakemake removed the checkpoint or kept a partial model"
    if sig != signal.SIGKILL:  # the trainer finished its step, saved and exited 75 (contract 2)
        log = (work / "logs/tiny/pretrain/elmo-c.forward.log").read_text()
        assert f"stopped by {sig.name}" in log, log[-3000:]

    again = subprocess.run(snakemake_command(work, cfg), cwd=work, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    log = (work / "logs/tiny/pretrain/elmo-c.forward.log").read_text()
    assert "resumed" in log, log[-3000:]
    assert models_equal(ref / TARGET, work / TARGET)
