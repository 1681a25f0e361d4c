"""Result records read strictly (issue 20.5): one line naming the file, the field and what
was expected, from every reader (tables downstream|paper|pretrain, figures, summary)."""
from __future__ import annotations

import json

import pytest

from elmoc.cli import main
from elmoc.errors import InputFileError
from elmoc.records import HeldoutRecord, TaskRecord

TASK = {"task": "sst5", "variant": "elmo-c", "seed": 1, "metric": "accuracy", "dev": 0.5, "test": 0.5,
        "status": "ok", "scale": "demo", "seconds": 3.0, "threads": 1}


def _task(tmp_path, **changes):
    data = {**TASK, **changes}
    data = {k: v for k, v in data.items() if v is not _DROP}
    path = tmp_path / "tasks" / "sst5" / "elmo-c" / "seed1.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


_DROP = object()
SCORE = r"must be a score: a finite fraction in \[0, 1\] \(the tables show it x 100\) or null"


@pytest.mark.parametrize("changes, message", [
    ({"test": "high"}, f"field 'test' {SCORE}, got 'high'"),
    ({"seconds": "x"}, "field 'seconds' must be a number or null, got 'x'"),
    ({"seed": [1]}, r"field 'seed' must be an integer, got \[1\]"),
    ({"seed": True}, "field 'seed' must be an integer, got True"),
    ({"dev": False}, f"field 'dev' {SCORE}"),
    ({"threads": 1.5}, "field 'threads' must be an integer or null"),
    ({"scale": _DROP}, "lacks the required field 'scale'"),
    ({"scale": "huge"}, "field 'scale' must be one of demo, cpu, full"),
    ({"test": _DROP}, "lacks the required field 'test'"),
    ({"status": _DROP}, "lacks the required field 'status'"),
    ({"extra_scores": {"conll05-f1": {"label": "x", "dev": 0.1, "test": "y"}}},
     f"field 'extra_scores.conll05-f1.test' {SCORE}"),
    # issue 30.4: impossible scores, which the tables dropped (NaN: a cell of n=1) or averaged (7.5: "400.00")
    ({"test": float("nan")}, f"field 'test' {SCORE}, got nan"),
    ({"test": float("inf")}, f"field 'test' {SCORE}, got inf"),
    ({"test": 7.5}, f"field 'test' {SCORE}, got 7.5"),
    ({"dev": -0.01}, f"field 'dev' {SCORE}, got -0.01"),
    ({"extra_scores": {"conll05-f1": {"label": "x", "dev": 1.5, "test": 0.5}}},
     f"field 'extra_scores.conll05-f1.dev' {SCORE}, got 1.5"),
])
def test_task_record_rejects_bad_fields(tmp_path, changes, message):
    path = _task(tmp_path, **changes)
    with pytest.raises(InputFileError, match=message) as e:
        TaskRecord.from_json(path)
    assert str(e.value).startswith(str(path))


def test_task_record_optional_fields_and_extra_scores(tmp_path):
    minimal = {k: v for k, v in TASK.items() if k in ("task", "variant", "seed", "metric", "scale", "status", "test")}
    path = tmp_path / "m.json"
    path.write_text(json.dumps({**minimal, "test": 1, "history": [{"anything": "kept"}]}))
    record = TaskRecord.from_json(path)
    assert (record.dev, record.seconds, record.threads, record.extra_scores) == (None, None, None, {})
    assert record.test == 1.0 and isinstance(record.test, float) and record.metric_label == "accuracy"
    path.write_text(json.dumps({**minimal, "extra_scores": {"conll05-f1": {"label": "official", "dev": None,
                                                                            "test": 0.7}}}))
    assert TaskRecord.from_json(path).extra_scores["conll05-f1"].test == 0.7


def _heldout(tmp_path, **changes):
    data = {"direction": "forward", "steps": 10, "tokens": 100, "seconds": 5.0, "metric": "cosine", "before": 0.1,
            "after": 0.5, "history": [{"metric": "cosine", "value": 0.5, "step": 10, "tokens": 100, "tag": "after"}],
            "trainable_parameters": 7, "threads": 1, **changes}
    data = {k: v for k, v in data.items() if v is not _DROP}
    path = tmp_path / "lm" / "elmo-c" / "forward" / "heldout.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("changes, message", [
    ({"after": "bad"}, "field 'after' must be a number or null, got 'bad'"),
    ({"tokens": "many"}, "field 'tokens' must be an integer or null"),
    ({"steps": _DROP}, "lacks the required field 'steps'"),
    ({"processes": "4"}, "field 'processes' must be an integer or null"),
    ({"history": [{"value": "v"}]}, r"field 'history\[0\].value' must be a number or null"),
    ({"forward": {"after": "x"}}, "field 'forward.after' must be a number or null"),
])
def test_heldout_record_rejects_bad_fields(tmp_path, changes, message):
    with pytest.raises(InputFileError, match=message):
        HeldoutRecord.from_json(_heldout(tmp_path, **changes))


def test_heldout_record_defaults(tmp_path):
    record = HeldoutRecord.from_json(_heldout(tmp_path, direction=_DROP, history=_DROP))
    assert (record.direction, record.processes, record.device, record.history) == ("forward", 1, "cpu", [])


@pytest.mark.parametrize("argv", [
    ["downstream-table", "--inputs", "{task}", "--output", "{out}/d.md"],
    ["paper-tables", "--tasks", "{task}", "--output-dir", "{out}"],
    ["paper-tables", "--heldout", "{heldout}", "--output-dir", "{out}"],
    ["pretrain-table", "--inputs", "{heldout}", "--output", "{out}/p.md"],
    ["figures", "--heldout", "{heldout}", "--output-dir", "{out}"],
    ["tables", "paper", "--heldout", "{heldout}", "--output-dir", "{out}"],  # the old spelling
    ["summary", "--tasks", "{task}"],
    ["summary", "--heldout", "{heldout}"],
])
def test_every_reader_prints_one_line(tmp_path, capsys, argv):
    """`"test": "high"` / `"after": "bad"` crashed these commands with a ValueError before."""
    task = _task(tmp_path, test="high")
    heldout = _heldout(tmp_path, after="bad")
    out = tmp_path / "out"
    status = main([a.format(task=task, heldout=heldout, out=out) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(err) == 1, err
    assert "Traceback" not in err[0]
    bad = (task, "'test'") if "{task}" in argv else (heldout, "'after'")
    expected = "a score: a finite fraction in [0, 1] (the tables show it x 100)" if "{task}" in argv else "a number"
    assert str(bad[0]) in err[0] and f"field {bad[1]} must be {expected} or null" in err[0]


@pytest.mark.parametrize("score", [float("nan"), 7.5])
def test_tables_refuse_an_impossible_score_in_one_line(tmp_path, capsys, score):
    """A NaN test was dropped (the cell said n=1) and 7.5 averaged with 0.5 into "400.00±494.97"."""
    good, bad = _task(tmp_path / "a"), _task(tmp_path / "b", seed=2, test=score)
    out = tmp_path / "out"
    assert main(["downstream-table", "--inputs", str(good), str(bad), "--output", str(out / "d.md")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "field 'test' must be a score" in err[0], err
    assert not out.exists()


def test_writer_checks_the_record_the_readers_read(tmp_path):
    """`elmoc task` and `elmoc tables majority` write through write_task_record: what it writes
    reads back as the same TaskRecord, and a record the tables would refuse fails when written."""
    from elmoc.records import write_task_record

    path = tmp_path / "seed1.json"
    record = write_task_record(path, {**TASK, "num_train": 10})
    assert TaskRecord.from_json(path) == record and json.loads(path.read_text())["num_train"] == 10
    assert path.read_text() == json.dumps({**TASK, "num_train": 10}, indent=1) + "\n"
    missing = tmp_path / "no_scale.json"
    with pytest.raises(InputFileError, match="no_scale.json: result record lacks the required field 'scale'"):
        write_task_record(missing, {k: v for k, v in TASK.items() if k != "scale"})
    assert not missing.exists()


def test_train_log_and_history_points_are_typed(tmp_path, write_lm):
    """train_log.jsonl and heldout.json's history are read into typed points; a field of the
    wrong type is one line naming the file, the line and the field."""
    from elmoc.records import HeldoutPoint, TrainLog, TrainPoint

    path = write_lm(tmp_path, "elmo-c", "forward", params=1, tokens=100, seconds=2.0,
                    log=[{"event": "train", "step": 1, "tokens": 50, "loss": 1.5, "tokens_per_s": 25.0},
                         {"event": "other"}, {"event": "heldout", "value": 0.3, "step": 1, "tokens": 50}])
    log = TrainLog.from_jsonl(path.with_name("train_log.jsonl"))
    assert log.train == [TrainPoint(step=1, tokens=50, loss=1.5, tokens_per_s=25.0)]
    assert log.heldout == [HeldoutPoint(value=0.3, tokens=50, step=1)]
    assert HeldoutRecord.from_json(path).history[0] == HeldoutPoint(value=0.1, tokens=0, step=0, tag="before")
    assert TrainLog.from_jsonl(tmp_path / "absent.jsonl") == TrainLog()
    bad = path.with_name("train_log.jsonl")
    bad.write_text('{"event": "train", "step": 1}\n{"event": "train", "tokens": "many"}\n')
    with pytest.raises(InputFileError, match=r"train_log.jsonl:2: field 'tokens' must be an integer or null"):
        TrainLog.from_jsonl(bad)
    bad.write_text('[1, 2]\n')
    with pytest.raises(InputFileError, match=r"train_log.jsonl:1: expected a JSON object per line"):
        TrainLog.from_jsonl(bad)


def test_heldout_json_is_checked_where_it_is_written(tmp_path):
    """The trainer writes heldout.json through the record type the tables read
    (elmoc.records.write_heldout_record): a summary they would refuse is refused at the
    writer, and nothing is written."""
    import pytest

    from elmoc.errors import InputFileError
    from elmoc.records import HeldoutRecord, write_heldout_record
    from elmoc.train.records import write_summary

    run = {"direction": "forward", "steps": 10, "tokens": 640, "seconds": 1.5, "threads": 1, "processes": 1,
           "segments": [], "config_hash": "abc", "trainable_parameters": 1234}
    history = [{"tag": "before", "step": 0, "metric": "cosine", "value": 0.1, "loss": -0.1, "tokens": 64},
               {"tag": "after", "step": 10, "metric": "cosine", "value": 0.5, "loss": -0.5, "tokens": 64}]
    write_summary(tmp_path / "heldout.json", run, history)
    record = HeldoutRecord.from_json(tmp_path / "heldout.json")
    assert (record.steps, record.after, record.trainable_parameters) == (10, 0.5, 1234)
    with pytest.raises(InputFileError, match="'steps'"):
        write_summary(tmp_path / "bad.json", {**run, "steps": "ten"}, history)
    with pytest.raises(InputFileError, match="'after'"):
        write_heldout_record(tmp_path / "bad.json", {**record.data, "after": "bad"})
    assert not (tmp_path / "bad.json").exists()
