"""A full disk is one line, and the previous file survives (issue 30.5): every atomic writer
turns ENOSPC (and torch's serializer failure that a full disk causes) into a DiskFullError
naming the file and the space left, removes its temporary and leaves the old file as it was."""
from __future__ import annotations

import errno
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmoc.cli import main
from elmoc.errors import DiskFullError
from elmoc.io.atomic import atomic_directory, atomic_file, atomic_path, out_of_space


def _writers():
    def text(path):
        with atomic_file(path) as f:
            f.write("x" * 400_000)

    def torch_save(path):
        with atomic_path(path) as tmp:
            torch.save({"w": torch.zeros(100_000)}, tmp)

    def hdf5(path):
        with atomic_path(path, held=False) as tmp, h5py.File(tmp, "w") as h5:
            h5["0"] = np.zeros(100_000, dtype="float32")

    def folder(path):
        with atomic_directory(path) as tmp:
            torch.save({"w": torch.zeros(100_000)}, tmp / "forward.pt")

    return {"text": text, "torch.save": torch_save, "hdf5": hdf5, "folder": folder}


@pytest.mark.parametrize("writer", sorted(_writers()))
@pytest.mark.parametrize("leave", [0, 6000])  # a few KB free: torch fails with "unexpected pos" instead of ENOSPC
def test_a_full_disk_is_one_error_and_the_old_file_survives(writer, leave, small_disk, fill_disk):
    disk = small_disk(256)
    target = disk / ("out" if writer == "folder" else "out.bin")
    if writer == "folder":
        target.mkdir()
        (target / "old.txt").write_text("old")
    else:
        target.write_text("old")
    fill_disk(disk, leave)
    with pytest.raises(DiskFullError) as e:
        _writers()[writer](target)
    message = str(e.value)
    assert message.startswith(f"{target}: could not be written: no space left") and "free)" in message
    assert "its previous version is untouched" in message and "\n" not in message
    assert (target / "old.txt" if writer == "folder" else target).read_text() == "old"
    assert sorted(p.name for p in disk.iterdir()) == sorted(["filler", target.name])  # no temporaries left


def test_injected_errors_are_recognised():
    assert out_of_space(OSError(errno.ENOSPC, "No space left on device"))
    assert out_of_space(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert out_of_space(RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0"))
    assert not out_of_space(OSError(errno.EACCES, "Permission denied"))
    assert not out_of_space(RuntimeError("shape mismatch"))


def test_a_command_on_a_full_disk_prints_one_line(tmp_path, small_disk, fill_disk, capsys):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<pad>\t0\n<s>\t0\n</s>\t0\n<unk>\t0\n" + "".join(f"w{i}\t{1000 - i}\n" for i in range(996)))
    disk = small_disk(256)
    fill_disk(disk, 8000)
    assert main(["vectors", "--vocab", str(vocab), "--random", "--dim", "300", "--output", str(disk / "rnd.npy")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{disk / 'rnd.npy'}: could not be written: no space left" in err[0], err
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]


def test_a_full_disk_elsewhere_is_one_line_too(monkeypatch, capsys, tmp_path):
    """Outside the atomic writers (an append, a library's own file) the CLI still says it in one line."""
    import elmoc.data.vocab.vocabulary as vocabulary

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "v.txt"))

    monkeypatch.setattr(vocabulary, "build_vocabulary", full)
    (tmp_path / "corpus").mkdir()
    assert main(["vocab", "--corpus", str(tmp_path / "corpus"), "--output", str(tmp_path / "v.txt")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{tmp_path / 'v.txt'}: could not be written: no space left" in err[0], err


@pytest.mark.parametrize("directory", [True, False], ids=["folder", "file"])
def test_a_new_temporary_swept_by_another_process_before_it_is_held_is_replaced(tmp_path, monkeypatch, directory):
    """Two fetches starting at once in one cache (CI, 2026-11-27): one creates ``.pip-*`` and,
    before it holds it, the other's sweep of abandoned ``.pip-*`` removes it; the first then
    failed with FileNotFoundError. held_temp tries a new name instead and holds that one."""
    import os
    import tempfile

    from elmoc.io import atomic
    from elmoc.io.output_paths import remove_stale_temps

    real = {"mkdtemp": tempfile.mkdtemp, "mkstemp": tempfile.mkstemp}
    swept = []

    def create_then_sweep(name):
        def create(*args, **kwargs):
            made = real[name](*args, **kwargs)
            if not swept:  # the other process's sweep, in the window before this one holds it
                swept.extend(remove_stale_temps(tmp_path / "x", patterns=[".pip-*"]))
            return made
        return create

    monkeypatch.setattr(tempfile, "mkdtemp", create_then_sweep("mkdtemp"))
    monkeypatch.setattr(tempfile, "mkstemp", create_then_sweep("mkstemp"))
    fd, path = atomic.held_temp(tmp_path, ".pip-", directory=directory)
    try:
        assert len(swept) == 1 and not swept[0].exists() and Path(path) != swept[0]
        assert os.path.samestat(os.fstat(fd), os.stat(path))
        assert remove_stale_temps(tmp_path / "x", patterns=[".pip-*"]) == [] and Path(path).exists()  # held
    finally:
        os.close(fd)
    assert remove_stale_temps(tmp_path / "x", patterns=[".pip-*"]) == [Path(path)]  # abandoned once closed
