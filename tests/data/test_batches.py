"""elmoc.data.batches against a brute-force transcription of spec 1.2."""
from __future__ import annotations

import random

import pytest
import torch

from elmoc.data.batches import BatchPosition, ShardBatches, iter_heldout, shard_order, shuffled_lines
from elmoc.data.vocab.vocabulary import UNK_ID, Vocabulary
from elmoc.errors import ConfigError, InputFileError


@pytest.fixture
def corpus(tmp_path):
    rng = random.Random(0)
    words = [f"w{i}" for i in range(30)]
    shards = []
    for s in range(3):
        lines = [" ".join(rng.choice(words + ["oov"]) for _ in range(rng.randint(1, 9))) for _ in range(25 + 7 * s)]
        lines.insert(3, "")  # empty lines are dropped
        lines.insert(8, "   ")
        p = tmp_path / f"shard_{s:03d}.txt"
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        shards.append(p)
    vocab = Vocabulary(["<pad>", "<s>", "</s>", "<unk>"] + words)
    return shards, vocab


def reference_batches(shards, vocab, B, bptt, direction, seed, epochs):
    """Spec 1.2 step by step with Python lists (slow, obviously right)."""
    out = []
    for epoch in range(epochs):
        for j in shard_order(len(shards), seed, epoch):
            lines = [l for l in shards[j].read_text(encoding="utf-8").split("\n") if l.strip()]
            lines = shuffled_lines(lines, seed, epoch, j)
            stream = []
            for line in lines:
                stream += [vocab.index["<s>"]] + [vocab.index.get(t, UNK_ID) for t in line.split()] + [vocab.index["</s>"]]
            if direction == "backward":
                stream = stream[::-1]
            N = len(stream)
            L = ((N - 1) // B) * B
            if L == 0:
                continue
            cols = L // B
            inputs = [[stream[b * cols + c] for c in range(cols)] for b in range(B)]
            targets = [[stream[b * cols + c + 1] for c in range(cols)] for b in range(B)]
            for k in range((cols - 1) // bptt + 1):
                x = torch.tensor([row[k * bptt:(k + 1) * bptt] for row in inputs])
                y = torch.tensor([row[k * bptt:(k + 1) * bptt] for row in targets])
                out.append((x, y, x > 0))
    return out


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("B, bptt", [(4, 5), (3, 7)])
def test_matches_reference(corpus, direction, B, bptt):
    shards, vocab = corpus
    got = list(ShardBatches(shards, vocab, B, bptt, direction=direction, seed=7, epochs=2))
    want = reference_batches(shards, vocab, B, bptt, direction, seed=7, epochs=2)
    assert len(got) == len(want) > 10
    assert any(g.inputs.shape[1] < bptt for g in got)  # short last windows exist
    for g, (x, y, m) in zip(got, want):
        assert g.inputs.dtype == torch.long and g.mask.dtype == torch.bool
        assert torch.equal(g.inputs, x) and torch.equal(g.targets, y) and torch.equal(g.mask, m)


def test_targets_are_next_tokens_and_backward_predicts_bos(corpus):
    shards, vocab = corpus
    fw = next(iter(ShardBatches(shards, vocab, 2, 6, seed=1, epochs=1)))
    assert torch.equal(fw.inputs[:, 1:], fw.targets[:, :-1])
    assert fw.inputs[0, 0].item() == vocab.index["<s>"]
    bw = list(ShardBatches(shards, vocab, 2, 6, direction="backward", seed=1, epochs=1))
    assert bw[0].inputs[0, 0].item() == vocab.index["</s>"]  # reversed stream starts at the last </s>
    assert any((b.targets == vocab.index["<s>"]).any() for b in bw)


def test_epochs_reshuffle_and_seed_matters(corpus):
    shards, vocab = corpus
    e0 = [b.inputs for b in ShardBatches(shards, vocab, 4, 5, seed=3, epochs=1)]
    both = [b.inputs for b in ShardBatches(shards, vocab, 4, 5, seed=3, epochs=2)]
    assert all(torch.equal(a, b) for a, b in zip(e0, both[: len(e0)]))
    assert not all(torch.equal(a, b) for a, b in zip(e0, both[len(e0):]))
    other = [b.inputs for b in ShardBatches(shards, vocab, 4, 5, seed=4, epochs=1)]
    assert not all(torch.equal(a, b) for a, b in zip(e0, other))


def test_resume_from_every_position(corpus):
    shards, vocab = corpus
    full = list(ShardBatches(shards, vocab, 4, 5, seed=2, epochs=2))
    it = ShardBatches(shards, vocab, 4, 5, seed=2, epochs=2)
    positions = []
    for _ in it:
        positions.append(it.state_dict())
    assert positions[-1] == {"epoch": 2, "shard": 0, "window": 0}
    for i in (0, 1, 5, len(full) // 2, len(full) - 2):
        resumed = list(ShardBatches(shards, vocab, 4, 5, seed=2, epochs=2, position=dict(positions[i])))
        assert len(resumed) == len(full) - i - 1
        assert all(torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
                   for a, b in zip(resumed, full[i + 1:]))


def test_shard_start_flag(corpus):
    shards, vocab = corpus
    it = ShardBatches(shards, vocab, 4, 5, seed=2, epochs=1)
    starts = [it.shard_start for _ in it]
    assert starts[0] and sum(starts) == 3


def test_data_parallel_split_is_disjoint_and_complete(corpus):
    shards, vocab = corpus
    full = list(ShardBatches(shards, vocab, 6, 5, seed=1, epochs=1))
    parts = [list(ShardBatches(shards, vocab, 6, 5, seed=1, epochs=1, rank=r, world_size=3)) for r in range(3)]
    assert all(len(p) == len(full) for p in parts)
    for k, batch in enumerate(full):
        assert all(p[k].inputs.shape[0] == 2 for p in parts)
        assert torch.equal(torch.cat([p[k].inputs for p in parts]), batch.inputs)
        assert torch.equal(torch.cat([p[k].targets for p in parts]), batch.targets)
    with pytest.raises(ConfigError, match="divisible"):
        ShardBatches(shards, vocab, 6, 5, world_size=4)
    with pytest.raises(ConfigError, match="rank"):
        ShardBatches(shards, vocab, 6, 5, rank=3, world_size=3)


def test_heldout_iteration_is_unshuffled(tmp_path):
    vocab = Vocabulary(["<pad>", "<s>", "</s>", "<unk>", "a", "b"])
    p = tmp_path / "heldout.txt"
    p.write_text("a b\n\nb a a\n", encoding="utf-8")
    batches = list(iter_heldout(p, vocab, 2, 3))
    # stream: <s> a b </s> <s> b a a </s> (N=9) -> L=8, rows of 4 columns
    stream = [1, 4, 5, 2, 1, 5, 4, 4, 2]
    assert torch.equal(torch.cat([b.inputs for b in batches], 1), torch.tensor([stream[0:4], stream[4:8]]))
    assert torch.equal(torch.cat([b.targets for b in batches], 1), torch.tensor([stream[1:5], stream[5:9]]))
    assert [b.inputs.shape[1] for b in batches] == [3, 1]
    with pytest.raises(ConfigError, match="fewer than batch_size"):
        list(iter_heldout(p, vocab, 16, 3))


def test_bad_shard_errors(tmp_path, corpus):
    _, vocab = corpus
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"w1 w2\nw3\n\xff\n")
    with pytest.raises(InputFileError) as e:
        list(ShardBatches([bad], vocab, 2, 3, epochs=1))
    assert e.value.line == 3
    with pytest.raises(InputFileError, match="not found"):
        list(ShardBatches([tmp_path / "nope.txt"], vocab, 2, 3, epochs=1))
    with pytest.raises(ConfigError, match="outside"):
        ShardBatches([bad], vocab, 2, 3, position=BatchPosition(0, 4, 0))


def test_position_serializes():
    p = BatchPosition(3, 1, 7)
    assert BatchPosition.from_dict(p.to_dict()) == p
    with pytest.raises(ConfigError):
        BatchPosition.from_dict({"epoch": 1})


def test_a_nul_byte_in_a_shard_is_one_line_naming_file_and_line(tmp_path):
    """A shard made by hand (not by `elmoc corpus`, which replaces control characters) with a NUL
    byte trained without a warning before (issue 30.8); it is refused when read for training."""
    from elmoc.data.batches import read_shard_lines

    shard = tmp_path / "shard_000.txt"
    shard.write_bytes(b"the cat sat\nthe dog ran\nthe \x00 bird flew\n")
    with pytest.raises(InputFileError, match=rf"^{shard}:3: holds a NUL byte .*`elmoc corpus`"):
        read_shard_lines(shard)
    shard.write_bytes(b"the cat sat\nthe dog ran\n")
    assert read_shard_lines(shard) == ["the cat sat", "the dog ran"]
