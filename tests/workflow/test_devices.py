"""The GPU slot allocator (`elmoc with-gpus`) on a fake 4-GPU machine (CUDA_VISIBLE_DEVICES=0,1,2,3)."""
import os
import signal
import subprocess
import sys
import time

import pytest

from elmoc.devices import GpuSlots, job_environment
from elmoc.errors import ConfigError

FAKE_BOX = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
# a job that reports its devices, then holds them until the test creates its release file
HOLD = ("import os, pathlib, sys, time\n"
        "out, release = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])\n"
        "out.write_text(os.environ['CUDA_VISIBLE_DEVICES'])\n"
        "while not release.exists(): time.sleep(0.05)\n")


def start_job(n, lock_dir, out, release, env=FAKE_BOX):
    environ = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    environ.update(env)
    return subprocess.Popen([sys.executable, "-m", "elmoc.cli", "with-gpus", "--lock-dir", str(lock_dir), str(n),
                             "--", sys.executable, "-c", HOLD, str(out), str(release)], env=environ)


def wait_for(path, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"job exited with {proc.returncode} before reporting its devices"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return path.read_text().split(",")


@pytest.mark.slow
def test_two_concurrent_two_gpu_jobs_get_disjoint_devices_and_a_task_job_gets_one(tmp_path):
    locks, release = tmp_path / "locks", tmp_path / "release"
    jobs = [start_job(2, locks, tmp_path / f"job{i}", release) for i in range(2)]
    try:
        got = [wait_for(tmp_path / f"job{i}", job) for i, job in enumerate(jobs)]
        assert all(len(g) == 2 for g in got)
        assert set(got[0]).isdisjoint(got[1]) and set(got[0]) | set(got[1]) == {"0", "1", "2", "3"}
        # while both run, every slot is taken: a one-GPU task job could not start
        assert GpuSlots(locks, ["0", "1", "2", "3"]).try_acquire(1) is None
        release.touch()
        assert [job.wait(timeout=60) for job in jobs] == [0, 0]
    finally:
        release.touch()
        for job in jobs:
            job.kill() if job.poll() is None else None
    task = start_job(1, locks, tmp_path / "task", tmp_path / "release")
    assert len(wait_for(tmp_path / "task", task)) == 1
    assert task.wait(timeout=60) == 0


@pytest.mark.slow
def test_a_terminated_job_frees_its_slots(tmp_path):
    locks = tmp_path / "locks"
    job = start_job(4, locks, tmp_path / "job", tmp_path / "never")
    try:
        assert sorted(wait_for(tmp_path / "job", job)) == ["0", "1", "2", "3"]
        slots = GpuSlots(locks, ["0", "1", "2", "3"])
        assert slots.try_acquire(1) is None
        job.send_signal(signal.SIGTERM)  # forwarded to the command, which dies of it
        assert job.wait(timeout=60) == 128 + signal.SIGTERM
        taken = slots.try_acquire(4)
        assert taken is not None and [d for d, _ in taken] == ["0", "1", "2", "3"]
        for _, fd in taken:
            os.close(fd)
    finally:
        if job.poll() is None:
            job.kill()


# a job that reports its devices and, on SIGTERM, marks it, "saves" for 3 s and exits 75
SAVE_ON_TERM = ("import os, pathlib, signal, sys, time\n"
                "out = pathlib.Path(sys.argv[1])\n"
                "def stop(*_):\n"
                "    pathlib.Path(str(out) + '.term').touch(); time.sleep(3); sys.exit(75)\n"
                "signal.signal(signal.SIGTERM, stop)\n"
                "out.write_text(os.environ['CUDA_VISIBLE_DEVICES'])\n"
                "while True: time.sleep(0.05)\n")


@pytest.mark.slow
def test_a_killed_with_gpus_stops_its_command_and_keeps_the_slots_until_it_ends(tmp_path):
    """SIGKILL to `with-gpus` itself: the kernel sends its command SIGTERM (the command stops
    and saves, never trains on unseen), and its GPUs stay taken until it has ended."""
    locks, out = tmp_path / "locks", tmp_path / "job"
    environ = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    job = subprocess.Popen([sys.executable, "-m", "elmoc.cli", "with-gpus", "--lock-dir", str(locks), "2",
                            "--", sys.executable, "-c", SAVE_ON_TERM, str(out)], env={**environ, **FAKE_BOX})
    try:
        wait_for(out, job)
        job.kill()
        job.wait(timeout=60)
        deadline = time.monotonic() + 30
        while not (tmp_path / "job.term").exists():
            assert time.monotonic() < deadline, "the command never got SIGTERM when with-gpus died"
            time.sleep(0.05)
        slots = GpuSlots(locks, ["0", "1", "2", "3"])
        assert slots.try_acquire(3) is None  # the saving command still holds 2 of 4
        deadline = time.monotonic() + 60
        while (taken := slots.try_acquire(4)) is None:
            assert time.monotonic() < deadline, "the slots were never freed"
            time.sleep(0.05)
        for _, fd in taken:
            os.close(fd)
    finally:
        if job.poll() is None:
            job.kill()


def test_partial_free_slots_are_not_taken(tmp_path):
    slots = GpuSlots(tmp_path, ["0", "1", "2", "3"])
    three = slots.try_acquire(3)
    assert [d for d, _ in three] == ["0", "1", "2"]
    assert slots.try_acquire(2) is None  # one free: nothing taken, nothing held
    one = slots.try_acquire(1)
    assert [d for d, _ in one] == ["3"]
    for _, fd in three + one:
        os.close(fd)


@pytest.mark.slow
def test_waiting_job_starts_once_slots_free(tmp_path):
    locks, release = tmp_path / "locks", tmp_path / "release"
    first = start_job(3, locks, tmp_path / "first", release)
    try:
        wait_for(tmp_path / "first", first)
        second = start_job(2, locks, tmp_path / "second", tmp_path / "release2")
        # the second job waits in the allocator: it has not reported devices while the first holds 3 of 4
        assert GpuSlots(locks, ["0", "1", "2", "3"]).try_acquire(2) is None
        assert not (tmp_path / "second").exists()
        release.touch()
        assert first.wait(timeout=60) == 0
        assert len(wait_for(tmp_path / "second", second)) == 2
        (tmp_path / "release2").touch()
        assert second.wait(timeout=60) == 0
    finally:
        release.touch()
        (tmp_path / "release2").touch()


@pytest.mark.slow
def test_too_many_gpus_is_one_clear_error(tmp_path):
    r = subprocess.run([sys.executable, "-m", "elmoc.cli", "with-gpus", "--lock-dir", str(tmp_path), "5", "--", "true"],
                       env={**os.environ, **FAKE_BOX}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("elmoc with-gpus: error: a job asks for 5 GPU(s) but this machine offers 4")
    assert "Traceback" not in r.stderr


def test_zero_gpus_hides_devices_and_slurm_passes_through(tmp_path):
    env, fds = job_environment(0, tmp_path, FAKE_BOX)
    assert env["CUDA_VISIBLE_DEVICES"] == "" and fds == []
    slurm = {"SLURM_JOB_ID": "42", "CUDA_VISIBLE_DEVICES": "2,3"}
    env, fds = job_environment(2, tmp_path, slurm)
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and fds == []
    assert not (tmp_path / "gpu-2.lock").exists()  # nothing locked inside a SLURM job
    with pytest.raises(ConfigError, match="SLURM job asks for 4 GPU"):
        job_environment(4, tmp_path, slurm)


def test_uuid_devices_are_slots_too(tmp_path):
    env, fds = job_environment(1, tmp_path, {"CUDA_VISIBLE_DEVICES": "GPU-1a2b/x,GPU-3c4d"})
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-1a2b/x"
    for fd in fds:
        os.close(fd)


@pytest.mark.gpu
def test_auto_picks_cuda_and_the_device_count_comes_from_torch(monkeypatch):
    """On a GPU: `--device auto` resolves to CUDA, and without CUDA_VISIBLE_DEVICES the devices on offer
    are torch.cuda.device_count()'s (devices.py; the other tests set the variable)."""
    import torch

    from elmoc.devices import resolve_device, visible_devices

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    assert resolve_device("auto").type == "cuda"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_devices() == [str(i) for i in range(torch.cuda.device_count())]
