"""`snakemake -n` for every shipped config and profile, and config validation errors."""
import subprocess
import sys

import pytest

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

CONFIGS = ["config/config.yaml", "config/shared-data.yaml", "config/paper.yaml"]


def workdir(tmp_path):
    """A fresh working directory with ../shared pointing at the real shared folder, so
    config paths like ../shared/data/... resolve as they do from the repository."""
    work = tmp_path / "work"
    work.mkdir()
    shared = REPO_ROOT.parent / "shared"
    if shared.exists():
        (tmp_path / "shared").symlink_to(shared)
    return work


def snakemake(*args, cwd=REPO_ROOT):
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("configfile", CONFIGS)
def test_dry_run_default_profile(configfile, tmp_path):
    # a fresh --directory so results of earlier runs do not hide jobs
    if "shared" in configfile and not (REPO_ROOT.parent / "shared" / "data").is_dir():
        pytest.skip("../shared/data is absent")
    tmp_path = workdir(tmp_path)
    r = snakemake("-n", "--cores", "2", "--snakefile", str(REPO_ROOT / "Snakefile"),
                  "--configfile", str(REPO_ROOT / configfile), "--directory", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "pretrain" in r.stdout and "lm_spec" in r.stdout


@pytest.mark.parametrize("configfile", CONFIGS)
def test_dry_run_slurm_profile(configfile, tmp_path):
    if "shared" in configfile and not (REPO_ROOT.parent / "shared" / "data").is_dir():
        pytest.skip("../shared/data is absent")
    tmp_path = workdir(tmp_path)
    r = snakemake("-n", "--workflow-profile", str(REPO_ROOT / "workflow/profiles/slurm"),
                  "--snakefile", str(REPO_ROOT / "Snakefile"), "--configfile", str(REPO_ROOT / configfile),
                  "--directory", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.parametrize("override, named", [
    ("pretrain:\n  varients: {elmo-c: {}}\n", "varients"),
    ("resources:\n  pretrain:\n    variants: {elmo-x: {mem_mb: 100}}\n", "resources.pretrain.variants names ['elmo-x']"),
])
def test_bad_config_is_named(tmp_path, override, named):
    """A misspelled key (schema) and a resources entry for an unknown variant stop the run naming it."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(override)
    r = snakemake("-n", "--cores", "1", "--snakefile", str(REPO_ROOT / "Snakefile"),
                  "--configfile", str(REPO_ROOT / "config/config.yaml"), str(bad),
                  "--directory", str(tmp_path), cwd=tmp_path)
    assert r.returncode != 0
    assert named in r.stdout + r.stderr


def test_default_profile_is_picked_up(tmp_path):
    """profiles/default beside the Snakefile is loaded without being named: Snakemake says so,
    and its `printshellcmds: true` shows the shell commands, which `--workflow-profile none` does not."""
    tmp_path = workdir(tmp_path)
    r = snakemake("-n", "--snakefile", str(REPO_ROOT / "Snakefile"), "--configfile", str(REPO_ROOT / "config/config.yaml"),
                  "--directory", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"Using workflow specific profile {REPO_ROOT / 'profiles/default'}" in r.stdout + r.stderr
    skipped = snakemake("-n", "--workflow-profile", "none", "--snakefile", str(REPO_ROOT / "Snakefile"),
                        "--configfile", str(REPO_ROOT / "config/config.yaml"), "--directory", str(tmp_path), cwd=tmp_path)
    assert "Shell command:" in r.stdout
    assert skipped.returncode == 0 and "Shell command:" not in skipped.stdout


def test_paper_jobs_ask_the_config_for_threads_gpus_and_memory(tmp_path):
    """config/paper.yaml: per-variant memory, GPUs per job, `elmoc with-gpus` around GPU jobs,
    thread counts from the config even when --cores is smaller."""
    tmp_path = workdir(tmp_path)
    r = snakemake("-n", "-p", "--cores", "1", "--snakefile", str(REPO_ROOT / "Snakefile"),
                  "--configfile", str(REPO_ROOT / "config/paper.yaml"), "--directory", str(tmp_path),
                  "results/lm/elmo-a/forward/model.pt", "results/lm/elmo-c/forward/model.pt", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    assert "gpu=2, runtime=1440" in out and "mem_mb=96000" in out and "mem_mb=64000" in out
    assert "with-gpus --lock-dir .snakemake/gpu-slots 2 -- " in out
    assert "--nproc-per-node=2 -m elmoc.cli train" in out and "--device cuda --threads 4" in out
    assert "checkpoint.pt" not in out.split("rule pretrain:", 1)[1]
