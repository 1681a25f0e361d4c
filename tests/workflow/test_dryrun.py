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


def test_typo_in_config_key_is_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("pretrain:\n  varients: {elmo-c: {}}\n")
    r = snakemake("-n", "--cores", "1", "--snakefile", str(REPO_ROOT / "Snakefile"),
                  "--configfile", str(REPO_ROOT / "config/config.yaml"), str(bad),
                  "--directory", str(tmp_path), cwd=tmp_path)
    assert r.returncode != 0
    assert "varients" in r.stdout + r.stderr
