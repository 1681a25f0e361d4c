"""Issue 45.4: batches that feed the step without waiting. For every task, batches built on the
prefetch thread equal the synchronous ones in order and content, a contiguous feature file gives
the batches (and the run) of the allennlp one bit for bit, and collate's vectorised bookkeeping
equals the per-row loops it replaced."""
from __future__ import annotations

import dataclasses
import random
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from elmoc.features.store import convert_features
from elmoc.tasks import prefetch as prefetch_module
from elmoc.tasks.embedder import TaskInputs, padded_ids
from elmoc.tasks.prefetch import Prefetch
from elmoc.tasks.runner import bucket_batches, run_task

sys.path.insert(0, str(Path(__file__).parent))
from test_resume import TASKS, _same, _setup  # noqa: E402


def _equal(a, b) -> bool:
    """Deep equality of collated batches: tensors bit for bit (dtype and shape too)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(_equal(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return a == b


def _batches(task, instances, size=2):
    return bucket_batches([task.length(x) for x in instances], size, random.Random(3))


@pytest.mark.parametrize("name", list(TASKS))
def test_prefetched_and_contiguous_batches_equal_the_synchronous_allennlp_ones(name, tmp_path):
    task, data, inputs, _, _ = _setup(name, tmp_path)
    train = data["train"]
    order = _batches(task, train)
    make = lambda idx, with_inputs=inputs: task.collate([train[i] for i in idx], with_inputs)  # noqa: E731
    reference = [make(idx) for idx in order]
    assert reference and all(_equal(x, x) for x in reference)
    for depth in (0, 1, 2, 5):
        with Prefetch(make, order, depth=depth) as ahead:
            got = list(ahead)
        assert len(got) == len(reference) and all(_equal(g, r) for g, r in zip(got, reference)), depth
    contiguous = convert_features(tmp_path / "features.hdf5", tmp_path / "contiguous.hdf5", "contiguous")
    assert contiguous > 0
    sentences = [s for split in data.values() for s in task.sentences(split)]
    other = TaskInputs.create(sentences, features=tmp_path / "contiguous.hdf5", lowercase=task.lowercase_words)
    assert other.store.layout == "contiguous"
    assert all(_equal(make(idx, other), r) for idx, r in zip(order, reference))


@pytest.mark.parametrize("name", ["sst5", "ner"])
def test_a_run_with_batches_built_ahead_equals_one_without(name, tmp_path, monkeypatch):
    task, data, inputs, trainer, _ = _setup(name, tmp_path)
    ahead = run_task(task, inputs, 7, trainer, data)
    monkeypatch.setattr(prefetch_module, "DEPTH", 0)
    synchronous = run_task(task, inputs, 7, trainer, data)
    _same(ahead, synchronous)
    convert_features(tmp_path / "features.hdf5", tmp_path / "contiguous.hdf5", "contiguous")
    sentences = [s for split in data.values() for s in task.sentences(split)]
    other = TaskInputs.create(sentences, features=tmp_path / "contiguous.hdf5", lowercase=task.lowercase_words)
    _same(run_task(task, other, 7, trainer, data), synchronous)


def test_errors_arrive_in_order_and_leaving_early_stops_the_thread():
    made = []

    def make(i):
        made.append(i)
        if i == 3:
            raise KeyError("item 3")
        return i * 10

    got = []
    with pytest.raises(KeyError, match="item 3"):
        with Prefetch(make, range(10), depth=2) as ahead:
            for value in ahead:
                got.append(value)
    assert got == [0, 10, 20] and made == [0, 1, 2, 3]  # nothing built after the failing item
    made.clear()
    before = threading.active_count()
    with Prefetch(make, range(1000), depth=2) as ahead:
        for value in ahead:
            if value == 10:
                break
    assert threading.active_count() == before - 0 and len(made) <= 2 + 2 + 1  # the thread is gone, little built ahead
    assert not any(t.name == "elmoc-prefetch" for t in threading.enumerate())
    with pytest.raises(ValueError, match="depth"):
        Prefetch(make, [], depth=-1)


def test_vectorised_collate_equals_the_per_row_loops():
    rng = np.random.default_rng(0)
    lengths = [int(n) for n in rng.integers(1, 9, size=7)]
    flat = [int(v) for v in rng.integers(2, 50, size=sum(lengths))]
    reference = torch.full((7, 10), -1, dtype=torch.long)
    at = 0
    for i, n in enumerate(lengths):
        reference[i, :n] = torch.tensor(flat[at : at + n])
        at += n
    assert torch.equal(padded_ids(lengths, flat, 10, fill=-1), reference)
    # encode: mask and word ids as the loops built them
    words = ["a", "b", "c", "D"]
    inputs = TaskInputs(np.ones((4, 3), np.float32), words, lowercase=True)
    sentences = [["a", "x", "d"], ["C"], ["b", "b", "a", "zz"]]
    batch = inputs.encode(sentences)
    want = torch.tensor([[2, 1, 1, 0], [4, 0, 0, 0], [3, 3, 2, 1]])  # rows 2.. of the words; 1 = unknown
    assert torch.equal(batch.word_ids, want) and torch.equal(batch.mask, want != 0)
    assert batch.mask.dtype == torch.bool and batch.features is None


def test_ner_characters_and_tags_equal_the_per_token_loop(tmp_path):
    from elmoc.tasks.ner import UNK_CHAR

    task, data, inputs, _, _ = _setup("ner", tmp_path)
    instances = data["train"]
    for batch in (instances[:3], instances, instances[1:2], instances[:3]):  # the last one from the word cache
        got = task.collate(batch, inputs)
        time = got["text"].mask.shape[1]
        width = max(task.model_options["char_width"], max(len(t) for x in batch for t in x.tokens))
        chars = torch.zeros(len(batch), time, width, dtype=torch.long)
        tags = torch.zeros(len(batch), time, dtype=torch.long)
        index = {t: i for i, t in enumerate(task.vocabularies()["labels"])}
        for b, x in enumerate(batch):
            for t, token in enumerate(x.tokens):
                chars[b, t, : len(token)] = torch.tensor([task._chars.get(c, UNK_CHAR) for c in token])
            tags[b, : len(x.tags)] = torch.tensor([index[t] for t in x.tags])
        assert _equal(got["chars"], chars) and _equal(got["tag_ids"], tags)
    task.use_vocabularies({"labels": task.vocabularies()["labels"], "chars": {"a": 5}})  # a new table: looked up again
    got = task.collate(instances[:2], inputs)["chars"]
    assert set(got.unique().tolist()) <= {0, 5, UNK_CHAR}
