"""BERT's masking of masked-LM windows (elmoc.data.masking, issue 25): the 15% / 80-10-10
distribution within binomial bounds, words only, determinism per (seed, window), the rows
of a process equal to those rows of the one-process window, and the batcher's windows."""
from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest
import torch

from elmoc.data.batches import ShardBatches, iter_heldout
from elmoc.data.masking import HELDOUT_MASKING_SEED, Masking, MaskedLMBatch
from elmoc.data.vocab.vocabulary import BOS_ID, EOS_ID, PAD_ID, SPECIALS, Vocabulary
from elmoc.errors import ConfigError

V = 50


def _ids(rows=64, cols=500, seed=0):
    """Word ids in [4, V) with a <s> ... </s> pair every 10 columns and padding at the end of row 0."""
    ids = np.random.default_rng(seed).integers(len(SPECIALS), V, size=(rows, cols))
    ids[:, ::10], ids[:, 9::10] = BOS_ID, EOS_ID
    ids[0, -7:] = PAD_ID
    return ids


def _within(count: int, n: int, p: float, sigmas: float = 5.0) -> bool:
    """``count`` successes of ``n`` trials within ``sigmas`` binomial standard deviations of ``n p``."""
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p))


def test_distribution_is_bert_15_percent_then_80_10_10():
    ids = _ids()
    batch = Masking().apply(ids, seed=3, key=(0, 0, 0), vocab_size=V)
    words = ~np.isin(ids, (PAD_ID, BOS_ID, EOS_ID))
    chosen = batch.mask.numpy()
    replaced = batch.replaced.numpy()
    changed = batch.inputs.numpy() != ids
    n_words, n_chosen = int(words.sum()), int(chosen.sum())
    assert not (chosen & ~words).any()  # never <pad>, <s>, </s>
    assert _within(n_chosen, n_words, 0.15), n_chosen / n_words
    assert not (replaced & ~chosen).any() and not (changed & ~chosen).any()
    n_masked = int(replaced.sum())
    random_pos = chosen & ~replaced
    # a random word differs from the original unless it drew the same id (1 in V - 4)
    n_random = int((changed & ~replaced).sum())
    assert _within(n_masked, n_chosen, 0.8), n_masked / n_chosen
    assert _within(n_random, n_chosen, 0.1 * (1 - 1 / (V - 4))), n_random / n_chosen
    assert _within(int(random_pos.sum()) - n_random, n_chosen, 0.1 + 0.1 / (V - 4))  # kept their word
    inputs = batch.inputs.numpy()
    assert (inputs[changed] >= len(SPECIALS)).all() and (inputs[changed] < V).all()  # random words: no specials
    drawn = Counter(inputs[changed & ~replaced].tolist())
    assert len(drawn) > (V - 4) * 0.9  # spread over the vocabulary
    assert torch.equal(batch.targets, torch.from_numpy(ids))  # targets: the original words
    assert torch.equal(batch.padding, torch.from_numpy(ids != PAD_ID))
    assert batch.num_tokens == int((ids != PAD_ID).sum()) and batch.num_predicted == n_chosen


def test_other_rates_are_followed():
    ids = _ids()
    batch = Masking.from_config({"rate": 0.4, "mask": 0.5, "random": 0.0}).apply(ids, 1, (2,), V)
    words = ~np.isin(ids, (PAD_ID, BOS_ID, EOS_ID))
    n_chosen = int(batch.mask.sum())
    assert _within(n_chosen, int(words.sum()), 0.4)
    assert _within(int(batch.replaced.sum()), n_chosen, 0.5)
    assert torch.equal(batch.inputs, torch.from_numpy(ids))  # random: 0 -> no word changed


def test_deterministic_per_seed_and_key_and_rows_split_like_one_process():
    ids = _ids(rows=8, cols=40)
    masking = Masking()
    a = masking.apply(ids, 5, (1, 2, 3), V)
    b = masking.apply(ids, 5, (1, 2, 3), V)
    for name in ("inputs", "mask", "replaced"):
        assert torch.equal(getattr(a, name), getattr(b, name))
    for other in (masking.apply(ids, 6, (1, 2, 3), V), masking.apply(ids, 5, (1, 2, 4), V)):
        assert not torch.equal(a.mask, other.mask)
    # rank r of 2 keeps rows [4r, 4r + 4): exactly those rows of the one-process window
    for rank in range(2):
        rows = slice(4 * rank, 4 * rank + 4)
        part = masking.apply(ids, 5, (1, 2, 3), V, rows)
        for name in ("inputs", "targets", "mask", "replaced", "padding"):
            assert torch.equal(getattr(part, name), getattr(a, name)[rows]), name


def test_bad_masking_settings_are_one_line():
    for config, needle in (({"rate": 0.0}, "rate must be > 0"), ({"mask": 0.95, "random": 0.1}, "mask + random"),
                           ({"rate": 1.5}, "in [0, 1]"), ({"ratio": 0.1}, "unknown key"), ([0.15], "mapping")):
        with pytest.raises(ConfigError, match=re.escape(needle)):
            Masking.from_config(config)


def _vocab():
    return Vocabulary.from_counts(Counter({f"w{i}": 100 - i for i in range(V - 4)}))


def test_masked_windows_of_the_batcher_resume_and_split_over_ranks(tmp_path):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(V - 4)]
    for j in range(2):
        lines = [" ".join(rng.choice(words, size=int(rng.integers(3, 9)))) for _ in range(60)]
        (tmp_path / f"shard_{j:03d}.txt").write_text("\n".join(lines) + "\n")
    shards = sorted(tmp_path.glob("shard_*.txt"))
    vocab = _vocab()

    def read(rank=0, world=1, **kw):
        it = ShardBatches(shards, vocab, 4, 8, "masked", seed=2, epochs=2, rank=rank, world_size=world, **kw)
        return [(b, it.state_dict()) for b in it]

    one = read()
    fwd = [b for b in ShardBatches(shards, vocab, 4, 8, "forward", seed=2, epochs=2)]
    assert len(one) == len(fwd) > 4
    for (m, _), f in zip(one, fwd):
        assert isinstance(m, MaskedLMBatch)
        assert torch.equal(m.targets, f.inputs)  # the forward stream's words, unshifted
    # two ranks: each the rows of the one-process window, masked identically
    ranks = [read(rank=r, world=2) for r in range(2)]
    for k, (m, pos) in enumerate(one):
        for r in range(2):
            part, rpos = ranks[r][k]
            assert rpos == pos
            for name in ("inputs", "targets", "mask", "replaced"):
                assert torch.equal(getattr(part, name), getattr(m, name)[2 * r:2 * r + 2]), (k, r, name)
    # windows differ in their masks (the key includes the window), and a resume continues identically
    assert not all(torch.equal(one[0][0].mask[:, :5], m.mask[:, :5]) for m, _ in one[1:])
    resumed = read(position=one[4][1])
    assert len(resumed) == len(one) - 5
    for (a, _), (b, _) in zip(resumed, one[5:]):
        assert torch.equal(a.inputs, b.inputs) and torch.equal(a.mask, b.mask) and torch.equal(a.replaced, b.replaced)
    # heldout: a fixed seed whatever the training seed, the same at every evaluation
    held_a = list(iter_heldout(shards[0], vocab, 3, 8, "masked"))
    held_b = list(iter_heldout(shards[0], vocab, 3, 8, "masked"))
    assert all(torch.equal(a.mask, b.mask) and torch.equal(a.inputs, b.inputs) for a, b in zip(held_a, held_b))
    ids = held_a[1].targets.numpy()
    again = Masking().apply(ids, HELDOUT_MASKING_SEED, (1,), len(vocab))
    assert torch.equal(again.mask, held_a[1].mask)
