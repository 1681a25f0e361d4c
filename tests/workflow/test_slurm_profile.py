"""The sbatch lines the SLURM profile produces (profiles/slurm, docs/slurm.md).

Runs the README's SLURM command (`snakemake --workflow-profile profiles/slurm`,
no --cores) with snakemake-executor-plugin-slurm against stand-in SLURM commands: the
stand-in `sbatch` records the command line the plugin built and refuses the job, so the
test sees exactly what a cluster would receive for a GPU pretraining job and a CPU job.
The real one-node cluster run is .ci/slurm-test.sh.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("snakemake_executor_plugin_slurm")
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "slurm" / "profile.yaml"

OVERLAY = {
    "tasks": {"run": []},
    "bench": {"enabled": False},
    "resources": {
        "partitions": {"cpu": "cpu_q", "gpu": "gpu_q"},
        "default": {"mem_mb": 3000, "runtime": 90},
        "pretrain": {"gpus": 4, "threads": 6, "mem_mb": 64000, "runtime": 2880, "signal_lead_s": 120,
                     "variants": {"elmo-c-rnd": {"nodes": 2}}},  # one model over 2 nodes x 4 GPUs (issue 48)
    },
}

FAKE_SBATCH = """#!/bin/sh
printf '%s\\n' "$*" >> "$FAKE_SBATCH_LOG"
echo "sbatch: error: stand-in sbatch of the test, job not submitted" >&2
exit 1
"""


@pytest.fixture(scope="module")
def profile():
    return yaml.safe_load(PROFILE.read_text())


def fake_slurm(bin_dir: Path):
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH)
    for name in ("sinfo", "squeue", "scontrol"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
    for name in ("sacct", "sacctmgr", "sshare"):  # no accounting: the account guess fails fast
        (bin_dir / name).write_text("#!/bin/sh\nexit 1\n")
    for path in bin_dir.iterdir():
        path.chmod(0o755)


def snakemake(workdir: Path, bin_dir: Path, *args, check=True):
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               FAKE_SBATCH_LOG=str(workdir / "sbatch.log"))
    env.pop("SNAKEMAKE_PROFILE", None)
    cmd = [sys.executable, "-m", "snakemake", "--workflow-profile", str(PROFILE),
           "--configfile", str(REPO / "config" / "config.yaml"), str(workdir / "overlay.yaml"),
           "--directory", str(workdir), "--snakefile", str(REPO / "Snakefile"), *args]
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def job_inputs(dry_run: str, output: str):
    """Input files of the job that makes `output`, from a dry run's job listing."""
    for block in re.split(r"\n(?=(?:local)?(?:rule|checkpoint) \w+:)", dry_run):
        if re.search(rf"^\s*output: (.*, )?{re.escape(output)}(,|$)", block, re.M):
            line = re.search(r"^\s*input: (.*)$", block, re.M)
            return [s.strip() for s in line.group(1).split(",")] if line else []
    raise AssertionError(f"no job makes {output} in the dry run")


@pytest.fixture(scope="module")
def sbatch_lines(tmp_path_factory):
    """{rule: argv of the sbatch call} for one GPU pretraining job and one CPU job."""
    work = tmp_path_factory.mktemp("slurm_profile")
    (work / "overlay.yaml").write_text(yaml.safe_dump(OVERLAY))
    bin_dir = work / "bin"
    fake_slurm(bin_dir)
    dry = snakemake(work, bin_dir, "-n", "--printshellcmds").stdout
    # random_vectors: a CPU job whose output is not an input of elmo-c's pretraining
    targets = {"pretrain": "results/demo/lm/elmo-c/forward/model.pt", "random_vectors": "results/demo/vectors/random.npy",
               "pretrain 2 nodes": "results/demo/lm/elmo-c-rnd/forward/model.pt"}
    lines = {"dry run": dry}
    for label, target in targets.items():
        rule = label.split()[0]
        for path in job_inputs(dry, target):   # existing inputs: only this job is submitted
            p = work / path
            p.parent.mkdir(parents=True, exist_ok=True)
            if path.endswith("/train"):
                p.mkdir(exist_ok=True)
            else:
                p.touch()
        log = work / "sbatch.log"
        log.unlink(missing_ok=True)
        # (the first status check waits 40 s by default; it changes nothing in the sbatch line)
        proc = snakemake(work, bin_dir, target, "--allowed-rules", rule,
                         "--slurm-init-seconds-before-status-checks", "1", check=False)
        assert proc.returncode != 0  # the stand-in refuses every job
        assert log.exists(), f"{label}: sbatch never called\n{proc.stderr[-3000:]}"
        calls = log.read_text().splitlines()
        assert len(calls) == 1, calls
        lines[label] = shlex.split(calls[0])
    return lines


def option(argv, *names):
    """Value of the first of `names` in argv (`--opt value` or `--opt=value`), else None."""
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name:
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg[len(name) + 1:]
    return None


def test_profile_leaves_job_sizes_to_the_config(profile):
    assert profile["executor"] == "slurm"
    for key in ("set-threads", "set-resources", "cores", "resources"):
        assert key not in profile, f"{key} in the SLURM profile overrides the config"
    # no accounting storage needed: job states from squeue
    assert profile["slurm-status-command"] == "squeue"
    assert set(profile["default-resources"]) <= {"slurm_extra", "slurm_account"}


def test_gpu_pretrain_job(sbatch_lines):
    argv = sbatch_lines["pretrain"]
    assert option(argv, "-p", "--partition") == "gpu_q"
    assert option(argv, "--gpus") == "4"
    assert option(argv, "--gres") is None
    assert option(argv, "--mem") == "64000"
    assert option(argv, "-t", "--time") == "2880"
    # threads per process x one process per GPU
    assert option(argv, "--cpus-per-task") == str(6 * 4)
    # the signal lead of pretraining jobs comes from the config (resources.pretrain.signal_lead_s)
    assert option(argv, "--signal") == "USR1@120"


def test_cpu_job(sbatch_lines):
    argv = sbatch_lines["random_vectors"]
    assert option(argv, "-p", "--partition") == "cpu_q"
    assert option(argv, "--gpus") is None and option(argv, "--gres") is None
    assert option(argv, "--mem") == "3000"
    assert option(argv, "-t", "--time") == "90"
    assert option(argv, "--cpus-per-task") == "1"
    assert option(argv, "--signal") == "USR1@300"


def test_multi_node_pretrain_job(sbatch_lines):
    """resources.pretrain.variants.<v>.nodes: 2 -> one job over 2 nodes, one srun task (one torchrun
    agent) per node, the GPUs per node as GRES (issue 48; elmoc.multinode)."""
    argv = sbatch_lines["pretrain 2 nodes"]
    assert option(argv, "--nodes") == "2" and option(argv, "--ntasks") == "2"
    assert option(argv, "--gres") == "gpu:4" and option(argv, "--gpus") is None  # per node, not per job
    assert option(argv, "--ntasks-per-gpu") is None
    assert option(argv, "--cpus-per-task") == str(6 * 4) and option(argv, "--mem") == "64000"  # per node
    assert option(argv, "--signal") == "USR1@120"
    # the job's command: srun one task per node, each with-gpus 4 + its node's agent
    shell = next(block for block in re.split(r"\n(?=(?:local)?rule \w+:)", sbatch_lines["dry run"])
                 if "results/demo/lm/elmo-c-rnd/forward/model.pt" in block and block.startswith("rule pretrain"))
    assert re.search(r"srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=24 --kill-on-bad-exit=1 \S+"
                     r" -m elmoc.cli with-gpus --lock-dir \S+ 4 -- \S+ -m elmoc.multinode --nodes 2 --nproc-per-node 4"
                     r" --shutdown-timeout 120 --log-dir results/demo/lm/elmo-c-rnd/forward/node-logs -- -m elmoc.cli train",
                     shell), shell
    # one node's jobs are as before
    assert "srun" not in next(block for block in re.split(r"\n(?=(?:local)?rule \w+:)", sbatch_lines["dry run"])
                              if "results/demo/lm/elmo-c/forward/model.pt" in block and block.startswith("rule pretrain"))


def test_multi_node_job_refused_without_slurm(tmp_path):
    """A local run (no SLURM executor) refuses nodes > 1 in one line naming the key."""
    overlay = {**OVERLAY, "resources": {**OVERLAY["resources"], "pretrain": {"variants": {"elmo-c": {"nodes": 2}}}}}
    (tmp_path / "overlay.yaml").write_text(yaml.safe_dump(overlay))
    target = "results/demo/lm/elmo-c/forward/model.pt"
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", str(REPO / "config" / "config.yaml"),
           str(tmp_path / "overlay.yaml"), "--directory", str(tmp_path), "--snakefile", str(REPO / "Snakefile"),
           target]
    dry = subprocess.run([*cmd, "-n"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert dry.returncode == 0, dry.stderr[-3000:]  # a dry run may show the plan
    for path in job_inputs(dry.stdout, target):  # existing inputs: only the pretraining job would run
        p = tmp_path / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.mkdir(exist_ok=True) if path.endswith("/train") else p.touch()
    proc = subprocess.run([*cmd, "--allowed-rules", "pretrain"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if "resources.pretrain.variants.elmo-c.nodes" in line]
    assert len(lines) == 1 and "needs the SLURM executor" in lines[0] and "set nodes to 1" in lines[0], proc.stderr
