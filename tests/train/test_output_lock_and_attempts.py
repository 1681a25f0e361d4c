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


def test_job_outcome_names_every_rank_that_failed():
    from elmoc.attempts import job_outcome

    assert job_outcome(0, []) == ("done", "")
    assert job_outcome(75, [{"rank": 0, "status": 75, "world_size": 2}]) == ("stopped", "")
    assert job_outcome(1, [{"rank": 0, "status": 1, "reason": "ValueError: x", "world_size": 1}]) == \
        ("crashed", "ValueError: x")
    kind, error = job_outcome(1, [{"rank": 0, "status": 75, "world_size": 2}])  # rank 1 killed by the kernel
    assert kind == "crashed" and error == "rank 1 ended without an exit record (killed, out of memory or crashed" \
                                         " in native code)"
    _, error = job_outcome(1, [{"rank": 0, "status": 1, "reason": "RuntimeError: peer closed", "world_size": 2},
                               {"rank": 1, "status": 1, "reason": "RuntimeError: boom", "world_size": 2}])
    assert error == "rank 0: RuntimeError: peer closed; rank 1: RuntimeError: boom"


def test_errors_that_differ_only_in_numbers_are_the_same_crash(tmp_path):
    crash = {"exit": "crashed", "step": 100}
    with pytest.raises(RepeatedCrash):
        _log(tmp_path, [{**crash, "error": "RuntimeError: Connection closed by peer [127.0.0.1]:40211"},
                        {**crash, "error": "RuntimeError: Connection closed by peer [127.0.0.1]:51873"}], 100).check()
    _log(tmp_path, [{**crash, "error": "KeyError: 'a'"}, {**crash, "error": "KeyError: 'b'"}], 100).check()


# a stand-in for a 2-process training job under `elmoc with-gpus`: rank 0 announces the
# attempt; rank 0 then fails in a collective (a new port each time) and rank 1 leaves no
# exit record (killed by the kernel); or, with "stop", both stop and save
FAKE_JOB = """
import json, os, random, sys
from elmoc.attempts import AttemptLog, announce_attempt
from elmoc.process_tree import EXIT_DIR_ENV, record_exit
out, how = sys.argv[1], sys.argv[2]
announce_attempt(os.environ[EXIT_DIR_ENV], AttemptLog(out, lambda: None, "spec-a"))
env = {**os.environ, "WORLD_SIZE": "2"}
if how == "stop":
    record_exit(75, "stopped", {**env, "RANK": "0"}); record_exit(75, "stopped", {**env, "RANK": "1"})
    sys.exit(1)  # what torchrun returns for workers that exited 75
record_exit(1, f"RuntimeError: Connection closed by peer [127.0.0.1]:{random.randint(20000, 60000)}",
            {**env, "RANK": "0"})
sys.exit(1)
"""


@pytest.mark.slow
def test_with_gpus_records_the_jobs_outcome_from_every_rank(tmp_path):
    out = tmp_path / "out"

    def job(how):
        r = subprocess.run([sys.executable, "-m", "elmoc.cli", "with-gpus", "--lock-dir", str(tmp_path / "locks"),
                            "0", "--", sys.executable, "-c", FAKE_JOB, str(out), how],
                           capture_output=True, text=True, timeout=120)
        return r.returncode

    assert job("stop") == 75
    assert job("crash") == 1 and job("crash") == 1
    records = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines()]
    assert [(r["exit"], r["status"]) for r in records] == [("stopped", 75), ("crashed", 1), ("crashed", 1)]
    assert records[1]["error"].startswith("rank 0: RuntimeError: Connection closed by peer [127.0.0.1]:")
    assert records[1]["error"].endswith("; rank 1 ended without an exit record (killed, out of memory or crashed"
                                        " in native code)")
    with pytest.raises(RepeatedCrash, match="the last two attempts crashed before the first checkpoint"):
        AttemptLog(out, lambda: None, "spec-a").check()


@pytest.mark.slow
def test_the_same_crash_twice_under_with_gpus_refuses_further_attempts(tmp_path):
    """The workflow's layout: `elmoc with-gpus 0 -- elmoc train`; the job's outcome is
    recorded once per attempt (by with-gpus), and the third attempt is refused."""
    work = make_workdir(tmp_path)
    work["second"].write_bytes(b"the cat \xff\xfe sat\n" * 20)
    prefix = ("with-gpus", "--lock-dir", str(tmp_path / "locks"), "0", "--", sys.executable, "-m", "elmoc.cli")
    runs = []
    for _ in range(3):
        cmd = [sys.executable, "-m", "elmoc.cli", *prefix, "train", "--spec", "spec.yaml", "--direction", "forward",
               "--output-dir", "out", "--threads", "1"]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "ELMOC_NATIVE_LSTM": "0"}
        runs.append(subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env))
    assert [r.returncode for r in runs] == [1, 1, 1], runs[0].stderr
    attempts = [json.loads(line) for line in (tmp_path / "out/attempts.jsonl").read_text().splitlines()]
    assert [a["exit"] for a in attempts] == ["crashed", "crashed"]
    assert attempts[0]["error"].endswith("shard_001.txt:1: not valid UTF-8")
    assert "the last two attempts crashed at checkpoint step" in runs[2].stderr


def test_a_file_system_without_flock_warns_instead_of_failing_every_attempt(tmp_path, monkeypatch, caplog):
    import errno
    import fcntl

    from elmoc.attempts import OutputLock

    def no_flock(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    with caplog.at_level("WARNING"):
        lock = OutputLock(tmp_path / "out").acquire()
    lock.release()
    assert "this file system has no flock" in caplog.text


def test_a_node_of_a_multi_node_job_judges_its_own_workers(tmp_path):
    """Issue 48: each node's `with-gpus` sees the exit records of its own workers only (2 of 4)."""
    from elmoc.attempts import job_outcome

    def record(rank, status, group):
        return {"rank": rank, "status": status, "world_size": 4, "local_world_size": 2, "group_rank": group}

    for rank in (2, 3):  # node 1 (group rank 1) holds ranks 2 and 3
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(record(rank, 75, 1)))
    assert job_status(1, tmp_path) == 75  # both of its workers stopped and saved
    (tmp_path / "rank3.json").unlink()
    assert job_status(1, tmp_path) == 1
    kind, error = job_outcome(1, [record(2, 75, 1)])
    assert kind == "crashed" and error.startswith("rank 3 ended without an exit record")
    kind, error = job_outcome(1, [record(0, 1, 0) | {"reason": "RuntimeError: peer closed"}, record(1, 75, 0)])
    assert error == "rank 0: RuntimeError: peer closed"  # ranks 2 and 3 are another node's
