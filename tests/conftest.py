"""Shared pytest fixtures.

``shared_data``: the folder of real public data (``../shared/data`` beside the
repository, or ``$ELMOC_SHARED_DATA``).  Tests that need it skip when it is absent.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    return Path(os.environ.get("ELMOC_SHARED_DATA", REPO_ROOT.parent / "shared" / "data")).resolve()


@pytest.fixture
def shared_data() -> Path:
    path = shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path} (set ELMOC_SHARED_DATA)")
    return path


@pytest.fixture
def elmo_fixture_dir(shared_data) -> Path:
    """AllenNLP's tiny ELMo test model (options.json, lm_weights.hdf5, lm_embeddings_*.hdf5)."""
    path = shared_data / "fixtures" / "allennlp" / "elmo"
    if not (path / "lm_weights.hdf5").is_file():
        pytest.skip("AllenNLP ELMo fixture absent")
    return path


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


# The test files that take longest (per-file sums of `pytest --durations=0`, 2026-11-27: 474 s down to
# 103 s of the 3,756 s the parallel pass's tests take), collected first: pytest-xdist's `--dist loadfile`
# hands files out in collection order, so both workers start on the long files at once instead of one
# worker ending the run alone with one of them (longest first keeps the two workers' ends close).
# Order only: every test still runs, and a file's own tests keep their order.
LONGEST_FIRST = (
    "tests/bench/test_gpu_check.py", "tests/workflow/test_end_to_end.py", "tests/workflow/test_fault_injection.py",
    "tests/workflow/test_dryrun.py", "tests/train/test_checkpoint_resume.py", "tests/train/test_transformer_lm.py",
    "tests/encoders/test_tupe_training.py", "tests/features/test_streaming.py", "tests/workflow/test_config_errors.py",
    "tests/tasks/test_resume.py", "tests/workflow/test_finetune_workflow.py",
    "tests/train/test_output_lock_and_attempts.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep order


def pytest_configure(config):
    # Tiny models run fastest single-threaded, and CI has 2 cores: avoid oversubscription.
    import torch

    torch.set_num_threads(1)


@pytest.fixture
def small_disk(tmp_path):
    """``make(size_kib) -> folder``: a folder on a tmpfs of that size (a disk that fills up);
    skips when mounting is not permitted (not root, no CAP_SYS_ADMIN)."""
    import subprocess

    mounted = []

    def make(size_kib: int) -> Path:
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip() or done.returncode})")
        mounted.append(folder)
        return folder

    yield make
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.fixture
def fill_disk():
    """``fill(folder, leave=0) -> filler file``: fill the filesystem of ``folder`` (a
    :func:`small_disk`), leaving about ``leave`` bytes free."""
    return _fill_disk


def _fill_disk(folder: Path, leave: int = 0) -> Path:
    import shutil

    filler = folder / "filler"
    with open(filler, "ab") as f:
        while shutil.disk_usage(folder).free > leave:
            try:
                f.write(b"\0" * max(4096, min(1 << 20, shutil.disk_usage(folder).free - leave)))
                f.flush()
            except OSError:
                break
    return filler
