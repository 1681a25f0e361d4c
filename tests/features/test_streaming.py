"""Issue 24.2: length-sorted batches by sentences and tokens, outputs in input order, and
a sentences file of any size streamed in constant memory."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmoc.data.vocab.vocabulary import SPECIALS, Vocabulary
from elmoc.errors import ConfigError, InputFileError
from elmoc.features.bilm import BiLM, FeatureLM
from elmoc.features.embed import iter_features, length_batches, sentence_features
from elmoc.features.sentences import check_sentences, iter_sentences
from elmoc.features.store import FeatureStore, write_features
from elmoc.registry import build

WORDS = "the cat sat on a mat dog ran far away".split()
SRC = Path(__file__).resolve().parents[2] / "src"


def tiny_bilm(seed: int = 0) -> BiLM:
    """A random-table, one-layer LSTM bi-LM (dim 2 x 4), small enough to stream a million sentences."""
    torch.manual_seed(seed)
    vocab = Vocabulary(list(SPECIALS) + WORDS)
    lms = []
    for direction in range(2):
        input_layer = build("input", {"type": "random", "dim": 4, "seed": 1}, vocab=vocab)
        encoder = build("encoder", {"type": "elmo_lstm", "num_layers": 1, "cell_size": 8, "projection_size": 4},
                        input_dim=4)
        lms.append(FeatureLM(input_layer, encoder, vocab).eval())
    return BiLM(lms[0], lms[1], vocab)


def test_length_batches_sorted_capped_and_complete():
    lengths = [5, 1, 9, 3, 3, 7, 1, 2, 30]
    batches = length_batches(lengths, batch_size=3, max_tokens=12)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))  # every sentence exactly once
    assert [lengths[i] for i in flat] == sorted(lengths)  # shortest first
    assert flat[:2] == [1, 6] and flat[3:5] == [3, 4]  # ties keep input order
    for b in batches:
        assert len(b) <= 3
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 12
    assert batches[-1] == [8]  # longer than the budget: a batch of its own
    assert length_batches(lengths, batch_size=100) == [flat]
    with pytest.raises(ConfigError, match="batch size"):
        length_batches(lengths, batch_size=0)
    with pytest.raises(ConfigError, match="max tokens"):
        length_batches(lengths, batch_size=4, max_tokens=0)


def test_outputs_in_input_order_whatever_the_batching():
    bilm = tiny_bilm()
    rng = np.random.default_rng(0)
    sentences = [list(rng.choice(WORDS + ["zebra"], size=int(rng.integers(1, 12)))) for _ in range(57)]
    reference = {}
    for tokens in sentences:  # one at a time, no batching at all
        with torch.inference_mode():
            reference[len(reference)] = bilm.embed([tokens])[0][0].numpy()
    for kwargs in ({"batch_size": 64}, {"batch_size": 5}, {"batch_size": 64, "max_tokens": 20},
                   {"batch_size": 8, "chunk_size": 7}):
        seen = {}
        for i, tokens, value in iter_features(bilm, iter(sentences), "all", **kwargs):
            assert tokens == sentences[i] and i not in seen
            seen[i] = value
        assert sorted(seen) == list(range(len(sentences)))
        for i, value in seen.items():
            assert value.shape == (2, len(sentences[i]), 8)
            np.testing.assert_allclose(value, reference[i], rtol=0, atol=1e-4)  # float rounding differs with the batch (BLAS paths), amplified by the random LSTM
    listed = dict(sentence_features(bilm, sentences, "top", batch_size=4))
    for i, value in listed.items():
        np.testing.assert_allclose(value, reference[i][-1], rtol=0, atol=1e-4)
    from elmoc import embed_sentences  # the library entry point batches as the CLI does

    for i, value in enumerate(embed_sentences(bilm, sentences, "average", batch_size=16, max_tokens=30)):
        np.testing.assert_allclose(value, reference[i].mean(axis=0), rtol=0, atol=1e-4)


def test_streamed_file_written_whole_and_in_order(tmp_path):
    bilm = tiny_bilm()
    lines = [" ".join(WORDS[: 1 + (i * 7) % 9]) for i in range(300)] + ["the cat"]  # many duplicates
    (tmp_path / "s.txt").write_text("\n".join(lines) + "\n")
    total = check_sentences(tmp_path / "s.txt")
    assert total == 301
    count = write_features(bilm, iter_sentences(tmp_path / "s.txt"), tmp_path / "f.hdf5", batch_size=16,
                           max_tokens=40, total=total)
    assert count == 301
    with h5py.File(tmp_path / "f.hdf5") as h5:
        mapping = json.loads(h5["sentence_to_index"][0])
        assert len([k for k in h5 if k != "sentence_to_index"]) == 301
        for i, line in enumerate(lines):
            assert h5[str(i)].shape == (2, len(line.split()), 8)
    # the last occurrence of a sentence names its key, as a dict over the input would
    assert mapping == {line: str(i) for i, line in enumerate(lines)}
    store = FeatureStore(tmp_path / "f.hdf5")
    assert store.check(line.split() for line in lines) == 301
    write_features(bilm, iter_sentences(tmp_path / "s.txt"), tmp_path / "g.hdf5", forget_sentences=True)
    with h5py.File(tmp_path / "g.hdf5") as h5:
        assert "sentence_to_index" not in h5 and "300" in h5


def test_a_bad_line_is_refused_before_the_model_runs_and_nothing_is_written(tmp_path):
    (tmp_path / "s.txt").write_text("the cat\n\nsat\n")
    with pytest.raises(InputFileError, match=":2: blank line"):
        check_sentences(tmp_path / "s.txt")
    with pytest.raises(InputFileError, match="blank line"):
        write_features(tiny_bilm(), iter_sentences(tmp_path / "s.txt"), tmp_path / "f.hdf5")
    assert not list(tmp_path.glob("*.hdf5")) and not list(tmp_path.glob(".*"))  # no partial file left
    (tmp_path / "e.txt").write_text("")
    with pytest.raises(InputFileError, match="no sentences"):
        check_sentences(tmp_path / "e.txt")


STREAM_SCRIPT = textwrap.dedent("""
    import resource, sys
    sys.path.insert(0, {tests!r})
    import torch
    torch.set_num_threads(1)
    from features.test_streaming import tiny_bilm
    from elmoc.features.embed import iter_features
    from elmoc.features.sentences import iter_sentences
    bilm = tiny_bilm()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    seen = bytearray(int(sys.argv[2]))
    tokens = 0
    for i, words, value in iter_features(bilm, iter_sentences(sys.argv[1]), "top", batch_size=512):
        assert not seen[i] and value.shape == (len(words), 8)
        seen[i] = 1
        tokens += len(words)
    assert all(seen)
    print(tokens, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
""")


@pytest.mark.slow
def test_a_million_sentences_stream_in_constant_memory(tmp_path):
    """Peak memory while streaming 1M sentences is that of 20K: a whole-file list of 1M
    token lists alone would take ~200 MB more."""
    script = tmp_path / "stream.py"
    script.write_text(STREAM_SCRIPT.format(tests=str(Path(__file__).resolve().parents[1])))
    grown = {}
    for n in (20_000, 1_000_000):
        path = tmp_path / f"{n}.txt"
        rng = np.random.default_rng(n)
        lengths = rng.integers(1, 5, size=n)
        words = np.array(WORDS)[rng.integers(0, len(WORDS), size=int(lengths.sum()))]
        with open(path, "w") as f:
            start = 0
            for length in lengths:
                f.write(" ".join(words[start: start + length]) + "\n")
                start += length
        out = subprocess.run([sys.executable, str(script), str(path), str(n)], capture_output=True, text=True,
                             env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}, timeout=900)
        assert out.returncode == 0, out.stderr[-2000:]
        tokens, grown[n] = map(int, out.stdout.split())
        assert tokens == int(lengths.sum())
    assert grown[1_000_000] - grown[20_000] < 60_000, grown  # KiB: within 60 MB of the 20K-sentence run
