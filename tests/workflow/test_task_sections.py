"""`snakemake -n` and the task sections: the schema names no task; the task class checks a section
when the workflow is parsed (a misspelled key or type is one line naming it and the fix), and a
task in one file outside the package (ELMOC_PLUGINS) is scheduled like a shipped one."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PLUGIN = REPO_ROOT / "tests/tasks/tsv_binary.py"


def dry_run(tmp_path, overlay: str, env=None):
    """`snakemake -n -p` of config/config.yaml with `overlay` (YAML) laid over it, in tmp_path."""
    (tmp_path / "overlay.yaml").write_text(overlay)
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "1",
                           "--snakefile", str(REPO_ROOT / "Snakefile"), "--directory", str(tmp_path),
                           "--configfile", str(REPO_ROOT / "config/config.yaml"), str(tmp_path / "overlay.yaml")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


@pytest.mark.slow
@pytest.mark.parametrize("overlay, line", [
    ("tasks:\n  sst5: {granularty: 2-class}\n",
     "config tasks.sst5: unknown key 'granularty' (did you mean 'granularity'?); known keys: "),
    ("tasks:\n  sst5: {type: sts}\n",
     "config tasks.sst5.type: unknown task type 'sts'. Did you mean 'sst'? Available: coref, ner, snli, srl, sst"),
])
def test_a_bad_task_section_stops_the_dry_run_in_one_line(tmp_path, overlay, line):
    r = dry_run(tmp_path, overlay)
    assert r.returncode != 0
    lines = [x for x in (r.stdout + r.stderr).splitlines() if x.startswith(line)]
    assert len(lines) == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_a_task_in_one_plugin_file_is_scheduled(tmp_path):
    overlay = ("tasks:\n  run: [reviews]\n  reviews: {type: tsv_binary, train: data/train.tsv, dev: data/dev.tsv,"
               " test: data/test.tsv, trainer: {epochs: 2}}\n")
    (tmp_path / "data").mkdir()
    for split in ("train", "dev", "test"):
        (tmp_path / "data" / f"{split}.tsv").write_text("1\tgood film\n0\tbad film\n")
    r = dry_run(tmp_path, overlay, env={"ELMOC_PLUGINS": str(PLUGIN)})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    runs = re.findall(r"rule task_run:\n(.*?)\n\n", r.stdout, re.S)
    variants = sorted(re.search(r"variant=([\w.-]+)", job)[1] for job in runs)
    assert variants == sorted(["fasttext", "elmo-c", "elmo", "elmo-a", "elmo-sub", "elmo-c-oneb", "elmo-c-rnd",
                               "elmo-c-cnn", "elmo-c-cnn-cc", "elmo-c-cc-cnn"])
    assert all("task=reviews" in job for job in runs)
    # the class's defaults reach every run: its own option, and with_fasttext (the vectors go in)
    section = ('"delimiter": "\\t", "dev": "data/dev.tsv", "test": "data/test.tsv", "train": "data/train.tsv",'
               ' "trainer": {"epochs": 2}, "type": "tsv_binary", "with_fasttext": true}')
    elmo_c = next(job for job in runs if "variant=elmo-c," in job)
    assert "--fasttext results/demo/fasttext/cc.bin" in elmo_c and "--features results/demo/features/elmo-c/reviews.hdf5" in elmo_c
    assert section in elmo_c
    assert "rule task_sentences:" in r.stdout and "rule majority_baseline:" in r.stdout
