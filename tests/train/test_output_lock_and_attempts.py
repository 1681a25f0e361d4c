"""One trainer per output folder, and no retry loop on a deterministic crash (issue 19.4,
19.6), through the real `elmoc train`; plus the job status `elmoc with-gpus` reports."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from test_checkpoint_resume import block_on_second_shard, make_workdir, wait_for_reader
from tiny_corpus import elmoc_train

from elmoc.attempts import EXIT_BUSY, AttemptLog, RepeatedCrash
from elmoc.process_tree import job_status


def _error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr
    return [line for line in stderr.splitlines() if "error:" in line]


@pytest.mark.slow
def test_a_second_trainer_on_the_same_folder_is_refused_with_one_line(tmp_path):
    work = make_workdir(tmp_path)
    content = block_on_second_shard(work)
    first = elmoc_train(tmp_path, wait=False)
    fd = wait_for_reader(work["second"], first)  # the first trainer is mid-run, between two steps
    try:
        second = elmoc_train(tmp_path, "out", wait=False)
        _, err = second.communicate(timeout=120)
        assert second.returncode == EXIT_BUSY, err
        (line,) = _error_lines(err)
        assert line.startswith("elmoc train: error: out is being written by another trainer (pid "
                               f"{first.pid} on "), line
    finally:
        os.write(fd, content.encode())
        os.close(fd)
    _, err = first.communicate(timeout=240)
    assert first.returncode == 0, err  # the refused one changed nothing
    assert (tmp_path / "out/model.pt").exists()


@pytest.mark.slow
def test_the_same_crash_twice_at_the_same_checkpoint_refuses_further_attempts(tmp_path):
    work = make_workdir(tmp_path)
    work["second"].write_bytes(b"the cat \xff\xfe sat\n" * 20)  # reading shard 2 fails, after a checkpoint
    runs = [elmoc_train(tmp_path) for _ in range(3)]
    errors = [_error_lines(r.stderr) for r in runs]
    assert [r.returncode for r in runs] == [1, 1, 1]
    assert errors[0] == errors[1] and errors[0][0].endswith("shard_001.txt:1: not valid UTF-8")
    attempts = [json.loads(line) for line in (tmp_path / "out/attempts.jsonl").read_text().splitlines()]
    assert [a["exit"] for a in attempts] == ["crashed", "crashed"]  # the refused third one trained nothing
    step = attempts[0]["step"]
    assert step and attempts[1]["step"] == step
    assert errors[2] == [f"elmoc train: error: the last two attempts crashed at checkpoint step {step} with the same"
                         f" error ({errors[0][0].split('error: ', 1)[1]}), so a retry would too; fix the cause,"
                         " then delete out/attempts.jsonl to train again"]
    assert "step " not in runs[2].stderr.replace(f"step {step}", "")  # no training step ran
    # cleared: the next attempt trains again (and here meets the same error)
    (tmp_path / "out/attempts.jsonl").unlink()
    r = elmoc_train(tmp_path)
    assert _error_lines(r.stderr) == errors[0]
    assert json.loads((tmp_path / "out/attempts.jsonl").read_text())["exit"] == "crashed"


def _log(tmp_path, records, step):
    log = AttemptLog(tmp_path, lambda: step, "spec-a")
    log.path.write_text("".join(json.dumps({"spec": "spec-a", **r}) + "\n" for r in records))
    return log


def test_only_two_equal_crashes_without_progress_refuse(tmp_path):
    crash = {"exit": "crashed", "error": "RuntimeError: CUDA out of memory", "step": 100}
    with pytest.raises(RepeatedCrash, match="at checkpoint step 100 with the same error"):
        _log(tmp_path, [crash, crash], 100).check()
    _log(tmp_path, [crash], 100).check()  # once is not a pattern
    _log(tmp_path, [crash, {**crash, "step": 200}], 200).check()  # progress between them
    _log(tmp_path, [crash, {**crash, "error": "ValueError: x"}], 100).check()  # another error
    _log(tmp_path, [crash, {"exit": "stopped", "step": 100}, crash], 100).check()  # a stop between
    _log(tmp_path, [crash, crash], 150).check()  # the checkpoint moved since
    other = AttemptLog(tmp_path, lambda: 100, "spec-b")  # attempts of another spec do not count
    other.check()


def test_job_status_tells_a_stop_from_a_crash(tmp_path):
    def status(child, *records):
        for path in tmp_path.glob("rank*.json"):
            path.unlink()
        for rank, (code, world) in enumerate(records):
            (tmp_path / f"rank{rank}.json").write_text(json.dumps({"status": code, "world_size": world}))
        return job_status(child, tmp_path)

    assert status(1, (75, 2), (75, 2)) == 75  # torchrun exits 1 when its workers stopped and saved
    assert status(1, (75, 2)) == 1  # one worker never said: not a clean stop
    assert status(1, (75, 2), (1, 2)) == 1
    assert status(75, (75, 1)) == 75
    assert status(0, (75, 2), (75, 2)) == 0
    assert status(137) == 137


@pytest.mark.slow
def test_with_gpus_exits_with_its_command_status(tmp_path):
    r = subprocess.run([sys.executable, "-m", "elmoc.cli", "with-gpus", "--lock-dir",
                        str(tmp_path), "0", "--", sys.executable, "-c", "import sys; sys.exit(3)"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
