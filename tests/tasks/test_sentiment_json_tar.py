"""The json-tar format of the sst task: labelled JSON records read from a tarball (the demo's
UCI Sentiment Labelled Sentences inside the npm package ``sentiment``), on constructed tarballs."""
import io
import json
import re
import tarfile

import pytest
import yaml

from elmoc.errors import ConfigError, InputFileError
from elmoc.registry import build
from elmoc.tables.summary import majority_baseline
from elmoc.tasks.sst import read_labelled_json_tar

MEMBERS = ["package/test/fixtures/a.json", "package/test/fixtures/b.json"]


def _tarball(path, files: dict[str, bytes]):
    with tarfile.open(path, "w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _records(n: int, start: int = 0) -> bytes:
    items = [{"text": f"Sentence number {start + i} isn't bad.", "class": (start + i) % 2} for i in range(n)]
    return json.dumps(items + [{"text": "", "class": None}]).encode()


def _task(path, **kw):
    return build("task", {"type": "sst", "format": "json-tar", "train": str(path), "members": MEMBERS, **kw})


def test_reads_members_in_order_tokenized_and_skips_the_empty_closing_record(tmp_path):
    path = _tarball(tmp_path / "s.tgz", {MEMBERS[0]: _records(3), MEMBERS[1]: _records(2, start=3),
                                          "package/README.md": b"not json"})
    out = read_labelled_json_tar(path, MEMBERS)
    assert [x.label for x in out] == [0, 1, 0, 1, 0]
    assert out[0].tokens == ("Sentence", "number", "0", "is", "n't", "bad", ".")  # the corpus tokenizer's clitics


def test_seeded_split_is_a_deterministic_partition(tmp_path):
    path = _tarball(tmp_path / "s.tgz", {MEMBERS[0]: _records(30), MEMBERS[1]: _records(20, start=30)})
    task = _task(path, split_seed=7)
    splits = {s: task.read(s) for s in ("train", "dev", "test")}
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [30, 10, 10]
    texts = [" ".join(x.tokens) for s in splits.values() for x in s]
    assert sorted(texts) == sorted(" ".join(x.tokens) for x in read_labelled_json_tar(path, MEMBERS))
    assert _task(path, split_seed=7).read("test") == splits["test"]
    assert _task(path, split_seed=8).read("test") != splits["test"]
    # the split is a permutation, not the file order (which the i % 5 rule alone would keep)
    assert [x.tokens[2] for x in splits["dev"]] != [str(i) for i in range(3, 50, 5)]
    assert task.missing_data() is None and task.num_classes == 2


def test_the_demo_says_binary_and_granularity_leaves_binary_data_as_it_is(tmp_path, repo_root):
    """config/config.yaml's sentiment task says 2-class; on json-tar data the value changes
    nothing (the schema's default, 5-class, read the same instances into the same 2 classes)."""
    section = yaml.safe_load((repo_root / "config/config.yaml").read_text())["tasks"]["sentiment"]
    assert (section["format"], section["granularity"]) == ("json-tar", "2-class")
    path = _tarball(tmp_path / "s.tgz", {MEMBERS[0]: _records(30), MEMBERS[1]: _records(20, start=30)})
    binary, default = _task(path, granularity="2-class"), _task(path)
    assert binary.num_classes == default.num_classes == 2
    for split in ("train", "dev", "test"):
        assert binary.read(split) == default.read(split)


def test_majority_baseline_on_the_split(tmp_path):
    path = _tarball(tmp_path / "s.tgz", {MEMBERS[0]: _records(30), MEMBERS[1]: _records(20, start=30)})
    task = _task(path)
    train, test = task.read("train"), task.read("test")
    top = max((0, 1), key=lambda c: (sum(x.label == c for x in train), -c))
    record = majority_baseline(task, "sentiment")
    assert record["test"] == pytest.approx(sum(x.label == top for x in test) / len(test))
    assert record["num_train"] == 30 and record["num_test"] == 10


@pytest.mark.parametrize("files,message", [
    ({MEMBERS[0]: _records(2)}, "no member 'package/test/fixtures/b.json'"),
    ({MEMBERS[0]: _records(2), MEMBERS[1]: b"{oops"}, "b.json): not valid JSON"),
    ({MEMBERS[0]: _records(2), MEMBERS[1]: b'{"text": "x", "class": 1}'}, "b.json): expected a JSON list"),
    ({MEMBERS[0]: _records(2), MEMBERS[1]: b'[{"text": "x"}]'}, "record 0 must be an object with 'text' and 'class'"),
    ({MEMBERS[0]: _records(2), MEMBERS[1]: b'[{"text": "x", "class": 2}]'}, "record 0: 'class' must be 0 or 1"),
    ({MEMBERS[0]: _records(2), MEMBERS[1]: b'[{"text": "x", "class": true}]'}, "record 0: 'class' must be 0 or 1"),
    ({MEMBERS[0]: _records(2), MEMBERS[1]: b'[{"text": " ", "class": 1}]'}, "record 0: empty text with class 1"),
    ({MEMBERS[0]: _records(2), MEMBERS[1]: b'[{"text": "caf\xe9", "class": 1}]'}, "is not valid UTF-8"),
])
def test_bad_input_is_one_line_naming_the_file(tmp_path, files, message):
    path = _tarball(tmp_path / "s.tgz", files)
    with pytest.raises(InputFileError, match=re.escape(message)) as info:
        read_labelled_json_tar(path, MEMBERS)
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)


def test_missing_or_broken_tarball(tmp_path):
    with pytest.raises(InputFileError, match="s.tgz.*not found"):
        _task(tmp_path / "s.tgz").read("train")
    (tmp_path / "s.tgz").write_bytes(b"not a tarball")
    with pytest.raises(InputFileError, match="s.tgz: not a readable tar archive"):
        read_labelled_json_tar(tmp_path / "s.tgz", MEMBERS)


@pytest.mark.parametrize("kw,message", [
    ({"members": None}, "needs 'members'"),
    ({"members": "a.json"}, "needs 'members'"),
    ({"dev": "d.tgz"}, "leave dev and test unset"),
    ({"split_seed": "1"}, "split_seed must be an integer"),
])
def test_config_errors(tmp_path, kw, message):
    with pytest.raises(ConfigError, match=message):
        _task(tmp_path / "s.tgz", **kw)


def test_members_only_for_json_tar(tmp_path):
    with pytest.raises(ConfigError, match="only to format json-tar"):
        build("task", {"type": "sst", "format": "polarity", "train": "p.txt", "members": MEMBERS})
