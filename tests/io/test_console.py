"""Progress lines on the workflow's console (elmoc.io.console): written to ELMOC_PROGRESS_FD at
most every ELMOC_PROGRESS_SECONDS, nothing without it; ETAs never negative."""
from __future__ import annotations

import os

from elmoc.io.console import FD_ENV, SECONDS_ENV, ConsoleProgress, console_env, console_fds, eta_text


def console_file(tmp_path, monkeypatch, every_s="0"):
    """A file standing for the console: its descriptor in ELMOC_PROGRESS_FD (closed by the caller)."""
    path = tmp_path / "console.txt"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    monkeypatch.setenv(FD_ENV, console_env(fd))
    monkeypatch.setenv(SECONDS_ENV, every_s)
    return path, fd


def test_lines_go_to_the_console_descriptor_at_the_interval(tmp_path, monkeypatch):
    path, fd = console_file(tmp_path, monkeypatch, every_s="3600")
    slow = ConsoleProgress("train x/forward")
    assert not slow.due()  # an hour has not passed
    fast = ConsoleProgress("train x/forward", every_s=0.0)
    assert fast.due()
    fast.write("step 3/10, loss 1.0000, ETA 5 s")
    os.close(fd)
    assert path.read_text() == "[train x/forward] step 3/10, loss 1.0000, ETA 5 s\n"


def test_no_console_no_lines(monkeypatch):
    monkeypatch.delenv(FD_ENV, raising=False)
    progress = ConsoleProgress("task a/b/seed1", every_s=0.0)
    assert not progress.due()
    progress.write("nothing")  # no error, nowhere
    monkeypatch.setenv(FD_ENV, "987:1:2")  # a closed descriptor: no console either
    assert ConsoleProgress("x", every_s=0.0).stream is None


def test_a_descriptor_number_reused_for_another_file_is_not_the_console(tmp_path, monkeypatch):
    """A launcher closed the console's descriptor and the process opened a file under the same
    number (a lock, a checkpoint): the device and inode differ, so nothing is written there."""
    path, fd = console_file(tmp_path, monkeypatch)
    assert console_fds() == (fd,)
    console = os.environ[FD_ENV]
    os.close(fd)
    other = os.open(tmp_path / "lock", os.O_WRONLY | os.O_CREAT)  # the lowest free number: fd again
    assert other == fd and os.environ[FD_ENV] == console
    progress = ConsoleProgress("train x/forward", every_s=0.0)
    assert progress.stream is None and not progress.due() and console_fds() == ()
    progress.write("must not land in the lock file")
    os.close(other)
    assert (tmp_path / "lock").read_text() == ""


def test_eta_text_is_never_negative():
    assert eta_text(-24.0) == "ETA 0 s"
    assert eta_text(42) == "ETA 42 s" and eta_text(210) == "ETA 3.5 min" and eta_text(7560) == "ETA 2.1 h"


def test_elmocs_launcher_passes_the_console_on(tmp_path, monkeypatch):
    """`elmoc with-gpus` runs every workflow job through run_tree: the job's trainer gets the
    console's descriptor (subprocess closes every other one)."""
    import sys

    from elmoc.process_tree import run_tree

    path, fd = console_file(tmp_path, monkeypatch)
    code = ("from elmoc.io.console import ConsoleProgress; p = ConsoleProgress('train a/forward', every_s=0.0); "
            "assert p.due(), 'no console'; p.write('step 1/2')")
    status = run_tree([sys.executable, "-c", code], dict(os.environ), grace_s=5.0)
    os.close(fd)
    assert status == 0 and path.read_text() == "[train a/forward] step 1/2\n"
