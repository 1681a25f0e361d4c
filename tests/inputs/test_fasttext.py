import numpy as np
import pytest
import torch

from elmoc.errors import InputFileError, ConfigError
from elmoc.registry import build


@pytest.fixture
def table_path(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "vec.npy"
    np.save(path, rng.normal(size=(10, 6)).astype(np.float32))
    return path


@pytest.mark.parametrize("host", [False, True])
def test_lookup_matches_table_and_is_frozen(table_path, host):
    layer = build("input", {"type": "fasttext", "vectors": str(table_path), "host_resident": host}, vocab=range(10))
    table = np.load(table_path)
    ids = torch.tensor([[0, 3, 9], [2, 2, 5]])
    out = layer(ids)
    assert out.shape == (2, 3, 6) and layer.output_dim == 6
    np.testing.assert_allclose(out.numpy(), table[ids.numpy()])
    assert list(layer.parameters()) == []
    assert "table" not in layer.state_dict()  # rebuilt from the path, not checkpointed
    if host:
        assert list(layer.buffers()) == []
        layer.to(torch.float64)  # .to() does not touch a host-resident table
        assert layer.weight.dtype == torch.float32
    else:
        assert len(list(layer.buffers())) == 1


def test_wrong_rows_names_file(table_path):
    with pytest.raises(InputFileError, match="10 rows but the vocabulary has 12"):
        build("input", {"type": "fasttext", "vectors": str(table_path)}, vocab=range(12))


def test_wrong_dim_and_missing_file(table_path, tmp_path):
    with pytest.raises(InputFileError, match="6 columns but the config says dim: 300"):
        build("input", {"type": "fasttext", "vectors": str(table_path), "dim": 300})
    with pytest.raises(InputFileError, match="not found"):
        build("input", {"type": "fasttext", "vectors": str(tmp_path / "none.npy")})


def test_nan_row_rejected(tmp_path):
    bad = np.zeros((5, 3), np.float32)
    bad[2, 1] = np.nan
    np.save(tmp_path / "bad.npy", bad)
    with pytest.raises(InputFileError, match="row 2"):
        build("input", {"type": "fasttext", "vectors": str(tmp_path / "bad.npy")})


def test_meta_device_needs_no_file(tmp_path):
    with torch.device("meta"):
        layer = build("input", {"type": "fasttext", "vectors": str(tmp_path / "later.npy"), "dim": 300}, vocab=range(2_000_000))
    assert layer.weight.shape == (2_000_000, 300) and layer.weight.is_meta
    with torch.device("meta"), pytest.raises(ConfigError, match="set `dim:`"):
        build("input", {"type": "fasttext", "vectors": str(tmp_path / "later.npy")}, vocab=range(5))
