"""Issue 36.4: the workflow's compression table (rules compress_copy and compression_table):
asked for by name, it makes the float16 and int8 copies and takes every model directory
already under results/compressed/{variant}/ as a row; the default targets do not include it."""
import json
import re

import pytest
from test_dryrun import REPO_ROOT, snakemake, workdir


@pytest.mark.slow
def test_compression_table_dry_run(tmp_path):
    work = workdir(tmp_path)
    student = work / "results/compressed/elmo-c/student-small"
    student.mkdir(parents=True)
    (student / "elmoc-model.json").write_text(json.dumps({"format": "elmoc-model-v1"}))
    r = snakemake("results/tables/compression/elmo-c.md", "-n", "-p", "--cores", "1", "--snakefile",
                  str(REPO_ROOT / "Snakefile"), "--configfile", str(REPO_ROOT / "config/config.yaml"),
                  "--directory", str(work), cwd=work)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", r.stdout, flags=re.M))
    assert stats["compress_copy"] == "2" and stats["compression_table"] == "1" and stats["export_model"] == "1"
    command = next(line for line in r.stdout.splitlines() if "compression-table" in line)
    for part in ("--original results/models/elmo-c", "--models-under results/compressed/elmo-c",
                 "--heldout original=results/lm/elmo-c/forward/heldout.json", "--tasks sentiment",
                 "--fasttext results/fasttext/cc.bin", "--work-dir results/compression-work/elmo-c"):
        assert part in command, part
    inputs = r.stdout.split("rule compression_table:")[1].split("output:")[0]
    assert "results/compressed/elmo-c/student-small" in inputs

