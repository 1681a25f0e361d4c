"""An `elmoc` command killed by a fatal signal (a native library's std::terminate, a crash in a
kernel) leaves every thread's Python stack in its stderr, the job log of a long run."""
import signal
import subprocess
import sys

import pytest

# `elmoc params` whose run() aborts the process as a C++ std::terminate would (SIGABRT)
ABORTING = """\
import os, sys
import elmoc.commands.params as command
def run(args):
    os.abort()
command.run = run
from elmoc.cli import main
sys.exit(main(["params", "--preset", "elmo-c"]))
"""


@pytest.mark.slow
def test_a_fatal_signal_leaves_the_python_stack_in_stderr():
    r = subprocess.run([sys.executable, "-c", ABORTING], capture_output=True, text=True, timeout=120)
    assert r.returncode == -signal.SIGABRT
    assert "Fatal Python error: Aborted" in r.stderr
    assert 'line 4 in run' in r.stderr and "elmoc/cli.py" in r.stderr  # where it died, and through main
