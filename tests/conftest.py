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


def pytest_configure(config):
    # Tiny models run fastest single-threaded, and CI has 2 cores: avoid oversubscription.
    import torch

    torch.set_num_threads(1)
