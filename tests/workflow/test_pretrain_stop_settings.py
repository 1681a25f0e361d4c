"""The signal lead and the stop margin of pretraining jobs come from the config
(resources.pretrain.signal_lead_s / stop_margin_s) and reach the job's command (issue 19.3)."""
import os
import sys
import time
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from test_checkpoint_resume import elmoc_train, make_workdir  # noqa: E402

from test_dryrun import REPO_ROOT, snakemake, workdir  # noqa: E402


@pytest.mark.slow
def test_the_config_sets_torchruns_wait_and_the_trainers_stop_margin(tmp_path):
    work = workdir(tmp_path)
    overlay = work / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"resources": {"pretrain": {"processes": 2, "signal_lead_s": 45,
                                                                  "stop_margin_s": 42.5}}}))
    r = snakemake("-n", "-p", "--cores", "1", "--snakefile", str(REPO_ROOT / "Snakefile"),
                  "--configfile", str(REPO_ROOT / "config/config.yaml"), str(overlay), "--directory", str(work),
                  "results/demo/lm/elmo-c/forward/model.pt", cwd=work)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (command,) = [line for line in r.stdout.splitlines() if " train --spec " in line]
    assert "-m torch.distributed.run --standalone --signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1" \
           " --shutdown-timeout=45 --nproc-per-node=2 -m elmoc.cli train" in command
    assert " --stop-margin 42.5 " in command
    bad = work / "bad.yaml"
    bad.write_text(yaml.safe_dump({"resources": {"pretrain": {"signal_lead_s": 0}}}))
    r = snakemake("-n", "--cores", "1", "--snakefile", str(REPO_ROOT / "Snakefile"), "--configfile",
                  str(REPO_ROOT / "config/config.yaml"), str(bad), "--directory", str(work), cwd=work)
    assert r.returncode != 0 and "signal_lead_s" in r.stdout + r.stderr


@pytest.mark.slow
def test_stop_margin_reaches_the_trainer(tmp_path):
    """A SLURM job ending in 10 minutes with --stop-margin 3600: the trainer stops after its
    first step, saves, and exits 75."""
    make_workdir(tmp_path)
    os.environ["SLURM_JOB_END_TIME"] = str(int(time.time()) + 600)
    try:
        r = elmoc_train(tmp_path, "out", "--stop-margin", "3600")
    finally:
        del os.environ["SLURM_JOB_END_TIME"]
    assert r.returncode == 75, r.stderr
    assert "stopped by time-limit at step 1;" in r.stderr
