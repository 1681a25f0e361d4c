"""Ctrl-C (SIGINT) in any `elmoc` command: one line, exit status 130, no traceback."""
import os
import signal
import subprocess
import sys
import time

import pytest

from elmoc.devices import GpuSlots


def _sigint_default() -> None:
    """Ctrl-C's default in the child: a suite started in the background of a non-interactive
    shell (`make test &`) ignores SIGINT, the child would inherit that and never hear it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_sigint_while_a_command_waits_is_one_line_and_130(tmp_path):
    held = GpuSlots(tmp_path, ["0"]).try_acquire(1)  # `with-gpus 1` waits for this slot
    try:
        proc = subprocess.Popen([sys.executable, "-m", "elmoc.cli", "with-gpus", "--lock-dir", str(tmp_path), "1",
                                 "--", "true"], env={**os.environ, "CUDA_VISIBLE_DEVICES": "0"},
                                stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_default)
        seen = ""
        deadline = time.monotonic() + 120
        while "waiting for 1 free GPU" not in seen:  # the command is inside its wait loop
            assert time.monotonic() < deadline and proc.poll() is None, seen
            seen += proc.stderr.readline()
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
        assert proc.wait(timeout=60) == 130
        assert "Traceback" not in rest
        assert rest.strip().splitlines() == ["elmoc with-gpus: interrupted"]
    finally:
        for _, fd in held:
            os.close(fd)
