import numpy as np
import pytest


@pytest.fixture
def target_table(tmp_path):
    """A small unnormalized [V=12, d=5] target table on disk."""
    rng = np.random.default_rng(1)
    table = (rng.normal(size=(12, 5)) * rng.uniform(0.5, 3.0, size=(12, 1))).astype(np.float32)
    path = tmp_path / "targets.npy"
    np.save(path, table)
    return path, table
