"""What a checkpoint may be resumed on (#20.1, #20.2, #20.8): the input files the spec
names (sha256 of their content), another thread count (allowed, warned, recorded), and
setting a stale checkpoint aside more than once under one tag."""
import json
import logging
from collections import Counter

import numpy as np
import pytest
import torch

from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.errors import InputFileError
from elmoc.model_file import load_checkpoint
from elmoc.train.checkpoint import InputFingerprints, config_hash, set_aside_if_stale
from elmoc.train.loop import train


def _retrain_vectors(path):
    """A retrained table: same shape, other values (what fastText with other settings writes)."""
    old = np.load(path)
    np.save(path, (old + np.random.default_rng(7).standard_normal(old.shape)).astype("float32"))


def test_changed_vectors_file_is_refused_in_one_line(tmp_path, tiny_lm):
    vocab, spec, make_batches, _ = tiny_lm
    first = {**spec, "train": {**spec["train"], "max_steps": 10}}
    train(first, vocab, tmp_path / "run", make_batches, None)
    recorded = load_checkpoint(tmp_path / "run/checkpoint.pt")["inputs"]
    assert sorted(recorded) == ["input.vectors", "output.vectors"]
    _retrain_vectors(tmp_path / "vec.npy")
    with pytest.raises(InputFileError) as err:
        train(spec, vocab, tmp_path / "run", make_batches, None)
    message = str(err.value)
    assert "\n" not in message and "checkpoint.pt" in message and "input.vectors" in message
    assert str(tmp_path / "vec.npy") in message and "--no-resume" in message


def test_changed_vectors_file_is_set_aside_and_training_starts_afresh(tmp_path, tiny_lm, caplog):
    vocab, spec, make_batches, _ = tiny_lm
    first = {**spec, "train": {**spec["train"], "max_steps": 10}}
    train(first, vocab, tmp_path / "run", make_batches, None)
    _retrain_vectors(tmp_path / "vec.npy")
    with caplog.at_level(logging.WARNING, logger="elmoc.train.checkpoint"):
        result = train(spec, vocab, tmp_path / "run", make_batches, None, stale_checkpoint="set-aside")
    assert result.steps == 30
    kept = tmp_path / "run" / f"checkpoint.{config_hash(spec)}.pt"
    assert load_checkpoint(kept)["step"] == 10
    assert any("input.vectors" in r.getMessage() and "changed" in r.getMessage() and str(kept) in r.getMessage()
               for r in caplog.records)
    train(spec, vocab, tmp_path / "fresh", make_batches, None)  # on the new vectors from step 0
    a, b = load_checkpoint(tmp_path / "fresh/model.pt"), load_checkpoint(tmp_path / "run/model.pt")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_fingerprints_of_a_corpus_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus/train").mkdir(parents=True)
    (tmp_path / "corpus/train/shard_000.txt").write_text("a b\n")
    (tmp_path / "corpus/train/.shard_001.x.tmp.txt").write_text("partial")  # a writer's temp file: skipped
    (tmp_path / "tok.json").write_text("{}")
    spec = {"name": "corpus", "input": {"type": "subword"}, "data": {"train": "corpus/train", "tokenizer": "tok.json"}}
    before = InputFingerprints.of_spec(spec)
    assert sorted(before) == ["data.tokenizer", "data.train"]  # "corpus" (a name) and "subword" are no paths
    assert list(before["data.train"]["files"]) == ["shard_000.txt"]
    (tmp_path / "corpus/train/shard_000.txt").write_text("a c\n")  # same size, other content
    after = InputFingerprints.of_spec(spec)
    # the file, then the key that names it (issue 30.8: it said "input input.vectors" before)
    assert InputFingerprints.first_change(before, after) == (
        "corpus/train (the spec's data.train) changed since the checkpoint was written: 1 file(s) differ, "
        "first shard_000.txt")
    assert InputFingerprints.first_change(after, InputFingerprints.of_spec(spec)) is None
    (tmp_path / "tok.json").write_text('{"model": "retrained"}')  # a BPE model trained anew
    assert InputFingerprints.first_change(after, InputFingerprints.of_spec(spec)).startswith(
        "tok.json (the spec's data.tokenizer) changed since the checkpoint was written (sha256 ")


def test_another_thread_count_is_allowed_warned_and_recorded(tmp_path, tiny_lm, caplog):
    vocab, spec, make_batches, _ = tiny_lm
    threads = torch.get_num_threads()
    first = {**spec, "train": {**spec["train"], "max_steps": 10}}
    train(first, vocab, tmp_path / "run", make_batches, None)
    torch.set_num_threads(threads + 1)
    try:
        with caplog.at_level(logging.WARNING, logger="elmoc.train.loop"):
            train(spec, vocab, tmp_path / "run", make_batches, None)
    finally:
        torch.set_num_threads(threads)
    warning = [r.getMessage() for r in caplog.records if "bit for bit" in r.getMessage()]
    assert len(warning) == 1 and f"threads {threads} -> {threads + 1}" in warning[0]
    segments = [{"step": 0, "threads": threads, "processes": 1}, {"step": 10, "threads": threads + 1, "processes": 1}]
    assert load_checkpoint(tmp_path / "run/model.pt")["segments"] == segments
    assert load_checkpoint(tmp_path / "run/checkpoint.pt")["segments"] == segments
    assert json.loads((tmp_path / "run/heldout.json").read_text())["segments"] == segments


def test_setting_aside_twice_under_one_tag_keeps_both(tmp_path, tiny_lm):
    vocab, spec, make_batches, _ = tiny_lm
    other = {**spec, "encoder": {**spec["encoder"], "cell_size": 20}}
    kept = []
    for steps in (2, 3):
        run = {**spec, "train": {**spec["train"], "max_steps": steps}}
        train(run, vocab, tmp_path / "run", make_batches, None, resume=False)
        kept.append(set_aside_if_stale(tmp_path / "run/checkpoint.pt", spec=other, direction="forward", vocab=vocab))
    tag = config_hash(spec)
    assert [p.name for p in kept] == [f"checkpoint.{tag}.pt", f"checkpoint.{tag}.1.pt"]
    assert [load_checkpoint(p)["step"] for p in kept] == [2, 3]


def test_vocabulary_fingerprint_still_checked(tmp_path, tiny_lm):
    vocab, spec, make_batches, _ = tiny_lm
    first = {**spec, "train": {**spec["train"], "max_steps": 2}}
    train(first, vocab, tmp_path / "run", make_batches, None)
    other = Vocabulary.from_counts(Counter({f"x{i}": 100 - i for i in range(len(vocab) - 4)}))
    with pytest.raises(InputFileError, match="another vocabulary"):
        train(spec, other, tmp_path / "run", make_batches, None)
