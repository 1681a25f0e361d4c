"""A full disk during training (issue 30.5): one DiskFullError naming the file, the space
left and the intact previous checkpoint; once space is freed the same command resumes
exactly, as if the disk had never filled."""
from __future__ import annotations

import pytest
import torch

from elmoc.errors import DiskFullError
from elmoc.model_file import load_checkpoint
from elmoc.train.loop import train


@pytest.mark.parametrize("leave", [0, 6000])  # a few KB free: torch.save fails with "unexpected pos 64 vs 0"
def test_a_full_disk_keeps_the_previous_checkpoint_and_resumes_exactly(tmp_path, tiny_lm, small_disk, fill_disk,
                                                                        monkeypatch, leave):
    import elmoc.train.loop as loop

    vocab, spec, make_batches, _ = tiny_lm
    spec = {**spec, "train": {**spec["train"], "checkpoint_every": 10}}
    train(spec, vocab, tmp_path / "straight", make_batches, None)
    out = small_disk(2048) / "run"
    real_save, saves = loop.save_checkpoint, []

    def fill_before_the_second_save(path, payload):
        saves.append(path)
        if len(saves) == 2:
            fill_disk(out.parent, leave)
        real_save(path, payload)

    monkeypatch.setattr(loop, "save_checkpoint", fill_before_the_second_save)
    with pytest.raises(DiskFullError) as e:
        train(spec, vocab, out, make_batches, None)
    message = str(e.value)
    assert message.startswith(f"{out / 'checkpoint.pt'}: could not be written: no space left") and "\n" not in message
    assert f"the previous checkpoint {out / 'checkpoint.pt'} (step 10) is intact" in message, message
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 10 and not (out / "model.pt").exists()
    assert not list(out.glob(".*.tmp*")), list(out.iterdir())

    monkeypatch.setattr(loop, "save_checkpoint", real_save)
    (out.parent / "filler").unlink()  # space freed: the same command resumes from step 10
    assert train(spec, vocab, out, make_batches, None).steps == 30
    a, b = load_checkpoint(tmp_path / "straight/model.pt"), load_checkpoint(out / "model.pt")
    for name, value in a["model"].items():
        assert torch.equal(value, b["model"][name]), name


def test_no_checkpoint_yet_says_so(tmp_path, tiny_lm, monkeypatch):
    """Injected: the first save fails with torch's serializer error that a full disk causes."""
    import elmoc.model_file as model_file

    vocab, spec, make_batches, _ = tiny_lm

    def full(*args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")

    monkeypatch.setattr(model_file.torch, "save", full)
    with pytest.raises(DiskFullError, match="checkpoint.pt: could not be written: .*; no checkpoint of this run "
                       r"was written yet; free some space and rerun the same command \(it starts at step 0\)"):
        train(spec, vocab, tmp_path / "run", make_batches, None)
    assert sorted(p.name for p in (tmp_path / "run").iterdir() if p.name.startswith(".")) == []
