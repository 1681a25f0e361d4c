"""Issue 42, cases 5 to 7: HDF5 writers and the trainer's appends on a full disk, inputs checked
against what they are (direction, sizes, formats), and the smaller cases.  Each test failed
before its fix."""
from __future__ import annotations

import contextlib
import logging
import random
import re
from pathlib import Path

import pytest
import yaml

from elmoc.cli import main

WORDS = "the cat sat on a mat dog ran after red ball old bird sang over green tree".split()


def _error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Exception ignored" not in err and "Logging error" not in err, err
    lines = [line for line in err.splitlines() if line.startswith(f"elmoc {command}: ")]
    assert len(lines) == 1, err
    return lines[0]


def _many(path: Path, n: int = 3000) -> Path:
    rng = random.Random(0)
    path.write_text("".join(" ".join(rng.choices(WORDS, k=12)) + "\n" for _ in range(n)))
    return path


@pytest.mark.parametrize("command", ["embed", "extract"])
def test_case5_hdf5_writers_on_a_full_disk_are_one_line_and_leave_nothing(world, tmp_path, small_disk, fill_disk,
                                                                         monkeypatch, capsys, command):
    """Before: a segfault (exit 139) after hundreds of h5py traceback lines, the temporary left."""
    monkeypatch.chdir(world)
    disk = small_disk(512)
    out = disk / "out.h5"
    out.write_bytes(b"the previous features")
    fill_disk(disk, 96 * 1024)
    many = _many(tmp_path / "many.txt")
    argv = {"embed": ["embed", str(many), str(out), "--model", "models/tiny", "--all"],
            "extract": ["extract", "--forward", "lm/tiny/forward/model.pt", "--backward", "lm/tiny/backward/model.pt",
                        "--sentences", str(many), "--output", str(out)]}[command]
    assert main(argv) == 1
    line = _error_line(capsys, command)
    assert line.startswith(f"elmoc {command}: error: {out}: could not be written: no space left on its "
                           "filesystem ("), line
    assert "KiB free" in line and "its previous version is untouched" in line, line
    assert out.read_bytes() == b"the previous features"
    assert sorted(p.name for p in disk.iterdir()) == ["filler", "out.h5"]


def test_case5_a_log_append_on_a_full_disk_names_the_log_its_filesystem_and_the_intact_checkpoint(
        world, small_disk, fill_disk, monkeypatch, capsys):
    """Before: `elmoc train: error: .: could not be written: ... (74.5 GiB free)`: the attempt
    record's append replaced the trainer's error, and named the current directory."""
    import elmoc.train.loop as loop

    monkeypatch.chdir(world)
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    run = small_disk(1024) / "run"
    real = loop.append_record

    def fill_after_the_checkpoint(path, record):
        if (run / "checkpoint.pt").is_file():
            fill_disk(run.parent, 0)
            record = {**record, "padding": "x" * 8192}  # more than the log file's last page holds
        real(path, record)

    monkeypatch.setattr(loop, "append_record", fill_after_the_checkpoint)
    handlers = list(logging.getLogger().handlers)
    try:
        assert main(["train", "--spec", "spec.yaml", "--direction", "forward", "--output-dir", str(run),
                     "--max-steps", "8", "--threads", "1"]) == 1
    finally:
        for handler in set(logging.getLogger().handlers) - set(handlers):
            logging.getLogger().removeHandler(handler)
            with contextlib.suppress(OSError):
                handler.close()
    line = _error_line(capsys, "train")
    assert line.startswith(f"elmoc train: error: {run / 'train_log.jsonl'}: could not be written: no space left "
                           "on its filesystem ("), line
    assert "GiB free" not in line, line  # the small disk's, not the current directory's
    assert re.search(rf"the previous checkpoint {re.escape(str(run / 'checkpoint.pt'))} \(step \d+\) is intact; "
                     "free some space and rerun the same command to resume from it$", line), line


def test_case6_prune_refuses_a_direction_the_model_is_not(world, tmp_path, monkeypatch, capsys):
    """Before: `prune --model forward/model.pt --direction backward` trained three rounds on reversed
    text and labelled them backward."""
    monkeypatch.chdir(world)
    out = tmp_path / "pruned"
    assert main(["prune", "--model", "lm/tiny/forward/model.pt", "--direction", "backward",
                 "--output-dir", str(out)]) == 1
    line = _error_line(capsys, "prune")
    assert "lm/tiny/forward/model.pt: is the forward run's LM, not backward: give --direction forward" in line, line
    assert not out.exists()


def _spec(world: Path, tmp_path: Path, name: str, **changes) -> Path:
    spec = yaml.safe_load((world / "spec.yaml").read_text())
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            spec[section] = {**spec[section], field: value}
        elif value is None:
            spec.pop(section, None)
        else:
            spec[section] = value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_case6_distill_refuses_a_student_larger_than_its_teacher(world, tmp_path, monkeypatch, capsys):
    """Before: accepted without a word.  Distillation here compresses: a larger student is refused,
    before the output folder exists."""
    monkeypatch.chdir(world)
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    big = _spec(world, tmp_path, "big", encoder__cell_size=32, encoder__projection_size=16)
    out = tmp_path / "student"
    assert main(["distill", "--spec", str(big), "--teacher", "lm/tiny/forward/model.pt", "--direction", "forward",
                 "--output-dir", str(out)]) == 1
    line = _error_line(capsys, "distill")
    assert "the student's encoder has" in line and "more than the teacher's" in line, line
    assert not out.exists()


def test_case6_a_larger_student_of_another_architecture_is_warned_about(world, tmp_path, monkeypatch, caplog):
    """A Transformer student of an LSTM teacher may need more parameters: trained, with a warning."""
    from elmoc.params import check_student

    monkeypatch.chdir(world)
    spec = yaml.safe_load((world / "spec.yaml").read_text())
    spec["encoder"] = {"type": "transformer", "d_model": 16, "heads": 2, "d_ff": 64, "num_layers": 2}
    from elmoc.data.vocab.vocabulary import Vocabulary

    with caplog.at_level(logging.WARNING):
        check_student("s.yaml", "lm/tiny/forward/model.pt", "forward", spec, Vocabulary.load("vocab.txt"))
    warned = [r.getMessage() for r in caplog.records if "more than the teacher's" in r.getMessage()]
    assert len(warned) == 1 and "transformer encoder" in warned[0] and "will not be smaller" in warned[0], warned


@pytest.mark.parametrize("command", ["train", "distill"])
def test_case7_a_refused_config_leaves_no_folder_lock_attempt_or_log(world, tmp_path, monkeypatch, capsys, command):
    """Before: the output folder was made with .train.lock, a "crashed" attempts.jsonl line and a log."""
    monkeypatch.chdir(world)
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    bad = _spec(world, tmp_path, "novocab", vocab=None)
    out = tmp_path / "run"
    teacher = ["--teacher", "lm/tiny/forward/model.pt"] if command == "distill" else []
    assert main([command, "--spec", str(bad), *teacher, "--direction", "forward", "--output-dir", str(out)]) == 1
    line = _error_line(capsys, command)
    assert "the spec names no vocab file" in line, line
    assert not out.exists()


def test_case7_re_export_warns_before_deleting_a_file_the_user_added(world, tmp_path, monkeypatch, caplog):
    """Before: replaced without a word (documented: the folder is replaced whole)."""
    monkeypatch.chdir(world)
    out = tmp_path / "model"
    argv = ["export", "--forward", "lm/tiny/forward/model.pt", "--backward", "lm/tiny/backward/model.pt",
            "--output-dir", str(out)]
    assert main(argv) == 0
    (out / "notes.txt").write_text("mine\n")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert main(argv) == 0
    warned = [r.getMessage() for r in caplog.records if "notes.txt" in r.getMessage()]
    assert len(warned) == 1 and "not written by `elmoc export`" in warned[0] and "deletes it" in warned[0], warned
    assert not [r for r in caplog.records if "README.md" in r.getMessage()]  # its own files: no warning
