"""SIGUSR1 in a SLURM job (elmoc.process_tree.ignore_stop_signal_in_slurm_job, called by the
Snakefile): ignored by the process and by the shell it starts, which cannot undo it; a Python
command that installs its own handler (with-gpus, the trainers) still gets it. Outside a job
nothing changes. The whole chain through Snakemake is in test_fault_injection.py."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")

PROBE = """
import os, signal, subprocess, sys
from elmoc.process_tree import ignore_stop_signal_in_slurm_job
print("ignored" if ignore_stop_signal_in_slurm_job() else "default", flush=True)
os.kill(os.getpid(), signal.SIGUSR1)  # ends this process unless ignored
shell = subprocess.run(["bash", "-c", "trap - USR1; kill -USR1 $$; exit 7"])
handler = subprocess.run([sys.executable, "-c", "import os, signal\\n"
    "got = []\\nsignal.signal(signal.SIGUSR1, lambda *a: got.append(1))\\n"
    "os.kill(os.getpid(), signal.SIGUSR1)\\nprint(f'handled {len(got)}')"], capture_output=True, text=True)
print(f"shell {shell.returncode}; {handler.stdout.strip()}")
"""


@pytest.mark.parametrize("job_id", ["4242", None], ids=["in-a-SLURM-job", "outside"])
def test_sigusr1_is_ignored_by_snakemake_and_its_shell_in_a_slurm_job_only(job_id):
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [SRC, env.get("PYTHONPATH")]))
    if job_id:
        env["SLURM_JOB_ID"] = job_id
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    if job_id:
        assert r.returncode == 0, r.stdout + r.stderr
        # the shell outlived `kill -USR1 $$` (exit 7), the Python command's own handler ran
        assert r.stdout.split("\n")[:2] == ["ignored", "shell 7; handled 1"], r.stdout + r.stderr
    else:
        assert r.stdout.strip() == "default" and r.returncode == -signal.SIGUSR1, (r.returncode, r.stdout, r.stderr)
