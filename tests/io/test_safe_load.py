"""A truncated model file is named as truncated (issue 30.8), not with torch's internal
miniz or pickle text ("PytorchStreamReader failed reading zip archive: failed finding
central directory. This is an internal miniz error ...")."""
from __future__ import annotations

import pytest
import torch

from elmoc.errors import InputFileError
from elmoc.io.safe_load import load_weights_only


def _cut_zip(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


@pytest.mark.parametrize("damage", ["half", "last bytes", "empty", "text", "legacy half"])
def test_a_truncated_or_garbled_file_says_so_in_one_line(tmp_path, damage):
    full, legacy = tmp_path / "full.pt", tmp_path / "legacy.pt"
    torch.save({"w": torch.zeros(500)}, full)
    torch.save({"w": torch.zeros(500)}, legacy, _use_new_zipfile_serialization=False)
    raw = {"half": full.read_bytes()[: full.stat().st_size // 2], "last bytes": full.read_bytes()[:-10],
           "empty": b"", "text": b"hello world\n", "legacy half": legacy.read_bytes()[: legacy.stat().st_size // 2]}
    path = tmp_path / "model.pt"
    path.write_bytes(raw[damage])
    with pytest.raises(InputFileError) as e:
        load_weights_only(path, what="an elmoc checkpoint", fix="delete it and train again")
    assert str(e.value) == (f"{path}: is truncated or corrupt ({len(raw[damage])} bytes), not an elmoc checkpoint "
                            "that PyTorch can read: delete it and train again")
    assert load_weights_only(full)["w"].shape == (500,)


def test_other_failures_keep_their_own_words(tmp_path):
    path = tmp_path / "model.pt"
    torch.save({"w": torch.zeros(5)}, path)
    with pytest.raises(InputFileError, match="cannot read it as an elmoc weights file"):
        load_weights_only(path, map_location="no-such-device")
