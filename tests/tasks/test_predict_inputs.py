"""`elmoc predict` checks its input against what it is (issue 42, cases 6 and 7): another task's
file in the sentences format, an overlong line and a truncated words.json are one line each,
before any model loads and with no output written.  Each test failed before its fix."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from test_predict import _predict, _train_and_save, in_lm, lm  # noqa: F401 (fixtures)


def _saved(in_lm) -> Path:
    saved = in_lm / "sst5" / "task-model"
    if not saved.is_dir():
        _train_and_save(in_lm, "sst5")
    return saved


def _one_line(capsys, *parts: str) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    for part in parts:
        assert part in err, err
    return err


def test_case6_snli_jsonl_and_conll_are_not_sentences(in_lm, capsys):
    """Before: an SNLI .jsonl file's JSON fragments were labelled as sentences, exit 0."""
    saved = _saved(in_lm)
    capsys.readouterr()
    record = {"gold_label": "neutral", "sentence1": "A man is outside .", "sentence2": "A person sleeps ."}
    Path("pairs.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert _predict("--task-model", str(saved), "pairs.jsonl", "--output", "pairs-out.jsonl") == 1
    _one_line(capsys, "elmoc predict: error: pairs.jsonl:1: is JSON lines", "--input-format task")
    before = Path("pairs.jsonl").read_bytes()  # the advice followed: refused in one line, nothing lost
    assert _predict("--task-model", str(saved), "--input-format", "task", "pairs.jsonl", "--output",
                    "pairs-out.jsonl") == 1
    _one_line(capsys, "pairs.jsonl:1", "not task sst's input format")
    assert Path("pairs.jsonl").read_bytes() == before
    Path("ner.txt").write_text("-DOCSTART- -X- O O\n\nEU NNP B-NP B-ORG\n", encoding="utf-8")
    assert _predict("--task-model", str(saved), "ner.txt", "--output", "pairs-out.jsonl") == 1
    _one_line(capsys, "ner.txt:1: is a CoNLL file")
    assert not Path("pairs-out.jsonl").exists()
    Path("ok.txt").write_text("{ a brace } opens this sentence\n", encoding="utf-8")  # not JSON: a sentence
    assert _predict("--task-model", str(saved), "ok.txt", "--output", "pairs-out.jsonl") == 0


def test_case7_an_overlong_line_is_one_line(in_lm, capsys):
    """Before: one 100,000-token line tried to allocate 40 GB and printed a 22-line traceback."""
    saved = _saved(in_lm)
    capsys.readouterr()
    Path("long.txt").write_text("a good film\n" + " ".join(["film"] * 100_000) + "\n", encoding="utf-8")
    assert _predict("--task-model", str(saved), "long.txt", "--output", "long.jsonl") == 1
    _one_line(capsys, "long.txt:2: has 100,000 tokens on one line, more than --max-line-tokens 1,000")
    assert not Path("long.jsonl").exists()


def test_case7_a_truncated_words_json_is_one_line(in_lm, capsys, tmp_path):
    """Before: a JSONDecodeError traceback."""
    saved = _saved(in_lm)
    copy = tmp_path / "tm"
    shutil.copytree(saved, copy)
    words = copy / "words.json"
    assert words.is_file()
    words.write_bytes(words.read_bytes()[: len(words.read_bytes()) // 2])
    Path("ok.txt").write_text("a good film\n", encoding="utf-8")
    capsys.readouterr()
    assert _predict("--task-model", str(copy), "ok.txt", "--output", str(tmp_path / "pairs-out.jsonl")) == 1
    _one_line(capsys, f"{words}: is not the word table's list of words", "--save-model")
    assert not (tmp_path / "pairs-out.jsonl").exists()
