"""Rules pass a command its config section as --section-json (workflow/rules/common.smk:
section_json). Each command must then do exactly what the flags a user types by hand do:
both ways are compared here on the call into the library, and a bad value is one line
naming the config key."""
import json

import pytest

from elmoc.cli import main


class Called(Exception):
    """Raised by a stand-in library function, carrying the arguments it got."""


def capture(monkeypatch, module, name):
    """Replace module.name by a function that raises Called(args, kwargs)."""
    import importlib

    def stand_in(*args, **kwargs):
        raise Called(args, kwargs)

    monkeypatch.setattr(importlib.import_module(module), name, stand_in)


def call(argv):
    with pytest.raises(Called) as got:
        main(argv)
    return got.value.args


def test_corpus(monkeypatch):
    capture(monkeypatch, "elmoc.data.corpus.prepare", "prepare_corpus")
    section = {"sources": [{"format": "lines", "path": "d/shard*"}, {"format": "raw", "path": "d/lee.cor"}],
               "heldout_sources": [], "num_shards": 4, "heldout": 0.05, "lowercase": False, "max_length": None,
               "seed": 1}
    by_hand = ["--source", "lines:d/shard*", "--source", "raw:d/lee.cor", "--shards", "4", "--seed", "1",
               "--heldout", "0.05"]
    assert call(["corpus", "--section-json", json.dumps(section), "--output-dir", "o"]) == call(["corpus", *by_hand,
                                                                                         "--output-dir", "o"])
    section.update(heldout_sources=[{"format": "lines", "path": "h.txt"}], num_shards=None, lowercase=True,
                   max_length=50, seed=3)
    by_hand = ["--source", "lines:d/shard*", "--source", "raw:d/lee.cor", "--heldout-source", "lines:h.txt",
               "--shards", "0", "--seed", "3", "--lowercase", "--max-length", "50"]
    assert call(["corpus", "--section-json", json.dumps(section), "--output-dir", "o"]) == call(["corpus", *by_hand,
                                                                                         "--output-dir", "o"])


def test_vocab(monkeypatch):
    capture(monkeypatch, "elmoc.data.vocab.vocabulary", "build_vocabulary")
    section = {"file": None, "max_size": 40000, "min_count": 2}
    assert call(["vocab", "--section-json", json.dumps(section), "--corpus", "c", "--output", "v"]) == call(
        ["vocab", "--corpus", "c", "--min-count", "2", "--max-size", "40000", "--output", "v"])
    section = {"file": "list.txt", "max_size": None, "min_count": 1}
    assert call(["vocab", "--section-json", json.dumps(section), "--corpus", "c", "--output", "v"]) == call(
        ["vocab", "--from-file", "list.txt", "--output", "v"])


def test_fasttext(monkeypatch):
    capture(monkeypatch, "elmoc.data.vectors.fasttext_model", "make_fasttext")
    evals = {"wordsim353": "w.tsv", "simlex999": "s.txt"}
    trained = {"eval": evals, "models": {"cc": {"train": {"dim": 50, "lr": 0.05, "thread": 1, "minCount": 2}}}}
    by_hand = ["--eval", "simlex999=s.txt", "--eval", "wordsim353=w.tsv", "--corpus", "c", "--dim", "50",
               "--lr", "0.05", "--minCount", "2", "--thread", "1"]
    assert call(["fasttext", "--section-json", json.dumps(trained), "--name", "cc", "--corpus", "c", "--output", "m"]) \
        == call(["fasttext", *by_hand, "--output", "m"])
    pretrained = {"eval": {}, "models": {"cc": {"pretrained": {"url": "https://x/cc.zip", "sha256": "ab" * 32,
                                                               "member": "cc.bin"}}}}
    by_hand = ["--pretrained", "https://x/cc.zip", "--sha256", "ab" * 32, "--member", "cc.bin", "--cache", "k"]
    assert call(["fasttext", "--section-json", json.dumps(pretrained), "--name", "cc", "--corpus", "c",
                 "--cache", "k", "--output", "m"]) == call(["fasttext", *by_hand, "--output", "m"])


def test_vectors_random(monkeypatch, tmp_path):
    capture(monkeypatch, "elmoc.data.vectors.tables", "random_table")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<pad>\t0\n<s>\t0\n</s>\t0\n<unk>\t0\nthe\t3\n", encoding="utf-8")
    common = ["vectors", "--vocab", str(vocab), "--random", "--output", "r.npy"]
    assert call([*common, "--section-json", '{"dim": 50, "seed": 2}']) == call([*common, "--dim", "50",
                                                                                   "--seed", "2"])


def test_bpe(monkeypatch, tmp_path):
    capture(monkeypatch, "elmoc.data.vocab.subword", "train_bpe")
    (tmp_path / "corpus").mkdir()  # the output beside the corpus: inside it would be refused (docs/safety.md)
    (tmp_path / "corpus" / "shard_000.txt").write_text("a b\n", encoding="utf-8")
    common = ["bpe", "--corpus", str(tmp_path / "corpus"), "--output-dir", str(tmp_path / "bpe")]
    assert call([*common, "--section-json", '{"bpe_merges": 20, "bpe_min_frequency": 1}']) == call(
        [*common, "--num-merges", "20", "--min-frequency", "1"])


def test_bench(monkeypatch):
    capture(monkeypatch, "elmoc.bench.speed", "run_all")
    section = {"enabled": True, "device": "cpu", "quick": True, "s3": False, "width_scale": 1, "repeats": 2,
               "threads": None, "world": None, "vocab_scale": None, "memory_budget_mb": None, "table5_batch": None,
               "table5_protocol": "s3"}
    got = call(["bench", "--section-json", json.dumps(section)])
    typed = call(["bench", "--device", "cpu", "--quick", "--no-s3", "--width-scale", "1", "--repeats", "2",
                  "--table5-protocol", "s3"])
    assert got[0][0] == typed[0][0] and got[0][2] == typed[0][2]  # the settings and the tables
    assert got[0][0].table5_protocol == "s3"


def test_extract(monkeypatch):
    import importlib

    loader = importlib.import_module("elmoc.pretrained.loader")
    monkeypatch.setattr(loader, "load_checkpoints",
                        lambda *a, **k: ("bilm", k["closed_vocabulary"], k["boundaries"]))
    monkeypatch.setattr(importlib.import_module("elmoc.features.sentences"), "read_sentences", lambda path: [])
    capture(monkeypatch, "elmoc.features.store", "write_features")
    common = ["extract", "--forward", "f.pt", "--backward", "b.pt", "--sentences", "s.txt", "--output", "x.hdf5"]
    seen = set()
    for section, by_hand in (({"batch_size": 32, "boundaries": False, "closed_vocabulary": True},
                              ["--batch-size", "32", "--no-boundaries", "--closed-vocabulary"]),
                             ({"batch_size": 32, "boundaries": False}, ["--batch-size", "32", "--boundaries", "false"]),
                             ({"batch_size": 64, "boundaries": True, "closed_vocabulary": False},
                              ["--boundaries", "true"]),
                             ({"batch_size": 64, "boundaries": "auto", "closed_vocabulary": False}, []),
                             ({"batch_size": 64}, ["--boundaries", "auto"])):
        got = call([*common, "--section-json", json.dumps(section)])
        assert got == call([*common, *by_hand])
        seen.add(got[0][0][2])
    assert seen == {False, True, None}  # None: by the model's kind (elmoc.pretrained.loader.boundaries_by_kind)


@pytest.mark.parametrize(("argv", "message"), [
    (["corpus", "--section-json", '{"sources": [], "seed": "1"}', "--output-dir", "o"], "config corpus.seed must be int"),
    (["corpus", "--section-json", '{"sources": [{"path": "x"}]}', "--output-dir", "o"],
     "config corpus.sources[0].format is required"),
    (["corpus", "--section-json", "{}", "--seed", "2", "--output-dir", "o"], "drop --seed"),
    (["vocab", "--section-json", '{"max_size": 1.5}', "--corpus", "c", "--output", "v"],
     "config vocab.max_size must be int"),
    (["fasttext", "--section-json", '{"models": {}}', "--name", "cc", "--output", "m"],
     "config fasttext.models.cc is required"),
    (["bpe", "--corpus", "c", "--output-dir", "o", "--section-json", "[2]"],
     "--section-json (variants) must be a JSON object"),
    (["bench", "--section-json", '{"quick": "yes"}'], "config bench.quick must be bool"),
    (["extract", "--forward", "f", "--backward", "b", "--sentences", "s", "--output", "o", "--section-json",
      '{"boundaries": "yes"}'], "config features.boundaries must be auto, true or false"),
])
def test_bad_section_is_one_line_naming_the_key(argv, message, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
