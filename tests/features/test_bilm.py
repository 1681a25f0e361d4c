"""The feature bi-LM (loaded from model.pt files) through the feature file writer, read back with h5py."""
import json
from collections import Counter

import h5py
import numpy as np
import pytest
import torch

from elmoc.data.batches import LMBatch
from elmoc.data.vocab.vocabulary import BOS_ID, EOS_ID, Vocabulary
from elmoc.errors import InputFileError
from elmoc.features.bilm import FeatureLM
from elmoc.features.store import write_features
from elmoc.lm import LanguageModel
from elmoc.pretrained.loader import load_checkpoints
from elmoc.train.loop import train

H = 6


@pytest.fixture(scope="module")
def bilm(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bilm")
    words = "the cat sat on a mat dog ran".split()
    vocab = Vocabulary.from_counts(Counter({w: 10 - i for i, w in enumerate(words)}))
    vocab.save(tmp / "vocab.txt")
    np.save(tmp / "vec.npy", np.random.default_rng(0).standard_normal((len(vocab), 5)).astype("float32"))
    stream = torch.tensor([4 + i % 8 for i in range(400)])

    def make_batches(position, rank, world):
        for w in range(0 if position is None else position["w"], 3):
            d = torch.stack([stream[w * 5 + r * 50: w * 5 + r * 50 + 6] for r in range(2)])
            yield LMBatch(d[:, :-1], d[:, 1:], d[:, :-1] > 0), {"epoch": 0, "w": w + 1}

    spec = {"input": {"type": "fasttext", "vectors": str(tmp / "vec.npy")},
            "encoder": {"type": "elmo_lstm", "num_layers": 2, "cell_size": 10, "projection_size": H},
            "output": {"type": "cosine", "vectors": str(tmp / "vec.npy")},
            "optimizer": {"type": "adam", "lr": 0.01},
            "train": {"batch_size": 2, "bptt": 5, "checkpoint_every": 0, "log_every": 100}}
    for direction in ("forward", "backward"):
        train(spec, vocab, tmp / direction, make_batches, None, direction=direction,
              vocab_path=str(tmp / "vocab.txt"))
    model = load_checkpoints(tmp / "forward/checkpoint.pt", tmp / "backward/checkpoint.pt")
    model.checkpoint_dir = tmp
    return model


def test_layout_and_values(bilm, tmp_path):
    sentences = [["the", "cat", "sat"], ["a", "dog", "ran", "on", "the", "mat"], ["zebra"]]
    out = tmp_path / "f.hdf5"
    write_features(bilm, sentences, out, batch_size=2)
    with h5py.File(out, "r") as h5:
        mapping = json.loads(h5["sentence_to_index"][0])
        assert mapping == {"the cat sat": "0", "a dog ran on the mat": "1", "zebra": "2"}
        for i, s in enumerate(sentences):
            assert h5[str(i)].shape == (3, len(s), 2 * H)
            assert h5[str(i)].dtype == np.float32
        got = h5["1"][()]
        assert not h5.attrs["boundaries"]
    # reference: run each direction by hand on one sentence: a trained LM reads the bare tokens by
    # default (the authors' ELMo-C code; issue 31.8); boundaries=True wraps them in <s> ... </s> (AllenNLP)
    assert bilm.boundaries is False
    bare = torch.tensor([bilm.vocab.encode(sentences[1])])
    wrapped = torch.tensor([[BOS_ID] + bilm.vocab.encode(sentences[1]) + [EOS_ID]])
    write_features(bilm, sentences, tmp_path / "wrapped.hdf5", batch_size=2, boundaries=True)
    with h5py.File(tmp_path / "wrapped.hdf5", "r") as h5:
        assert h5.attrs["boundaries"]
        got_wrapped = h5["1"][()]
    for ids, features, inner in ((bare, got, slice(None)), (wrapped, got_wrapped, slice(1, -1))):
        fwd = bilm.forward_lm.encode(ids).layers
        bwd = bilm.backward_lm.encode(ids.flip(1)).layers
        for k in range(3):
            np.testing.assert_allclose(features[k, :, :H], fwd[k][0, inner].detach().numpy(), atol=1e-5)
            np.testing.assert_allclose(features[k, :, H:], bwd[k][0].flip(0)[inner].detach().numpy(), atol=1e-5)
    assert np.abs(got[1:] - got_wrapped[1:]).max() > 1e-3  # the two inputs do differ


def test_one_encode_for_training_and_features(bilm):
    """FeatureLM runs LanguageModel.encode; composed input vectors replace the input layer's."""
    lm = bilm.forward_lm
    assert isinstance(lm, FeatureLM) and FeatureLM.encode is LanguageModel.encode and lm.output_layer is None
    ids = torch.tensor([[1, 4, 5, 2], [1, 6, 2, 0]])
    mask = ids != 0
    own = lm.input_layer(ids)
    torch.testing.assert_close(lm.encode(ids).output, lm.encode(ids, mask, vectors=own).output)
    other = torch.randn_like(own)
    torch.testing.assert_close(lm.encode(ids, mask, vectors=other).output, lm.encoder(other, mask).output)
    assert not torch.allclose(lm.encode(ids, mask, vectors=other).output, lm.encode(ids).output)


def test_batching_does_not_change_features(bilm, tmp_path):
    sentences = [["the", "cat"], ["a", "dog", "ran", "on", "the", "mat", "the", "cat"]]
    write_features(bilm, sentences, tmp_path / "one.hdf5", batch_size=1)
    write_features(bilm, sentences, tmp_path / "two.hdf5", batch_size=2)
    with h5py.File(tmp_path / "one.hdf5") as a, h5py.File(tmp_path / "two.hdf5") as b:
        for key in ("0", "1"):
            np.testing.assert_allclose(a[key][()], b[key][()], atol=1e-5)


def test_direction_mismatch_is_an_error(bilm):
    forward = bilm.checkpoint_dir / "forward/checkpoint.pt"
    with pytest.raises(InputFileError, match="expected a backward \\(or joint\\) model"):
        load_checkpoints(forward, forward)


def test_a_rerun_removes_the_temporaries_a_killed_run_left(bilm, tmp_path):
    """A SIGKILLed `elmoc embed`/`extract` leaves ``.k.XXXX.tmp.h5`` and its ``.index`` beside the
    output; the next run into that output removes them (and nothing else: not another output's
    temporaries, not one a running writer holds)."""
    import fcntl
    import os

    stale = [tmp_path / ".k.dead1.tmp.h5", tmp_path / ".k.dead1.tmp.h5.index", tmp_path / ".k.dead2.tmp.h5.index"]
    others = [tmp_path / ".j.dead3.tmp.h5", tmp_path / ".k.notes", tmp_path / "k.txt"]
    busy = tmp_path / ".k.busy.tmp.h5"
    for p in stale + others + [busy]:
        p.write_bytes(b"partial")
    fd = os.open(busy, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as HDF5 holds the file of a run still writing
    try:
        write_features(bilm, [["the", "cat"]], tmp_path / "k.h5", batch_size=1)
    finally:
        os.close(fd)
    assert not any(p.exists() for p in stale)
    assert all(p.exists() for p in others + [busy])
    assert sorted(p.name for p in tmp_path.glob(".k.*")) == [".k.busy.tmp.h5", ".k.notes"]
