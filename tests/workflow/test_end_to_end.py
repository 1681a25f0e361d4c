"""One end-to-end workflow run of a tiny config in a temporary directory (slow), then the
Snakemake HTML report of that run.

Real data from ../shared/data (skipped when absent): the 1B Word sample as corpus and
slices of SST-5; ELMo-C (two direction runs) and ELMo-A (one joint bi-LM run), two seeds,
the quick bench. Checks that the final tables
exist in every format, their numbers are finite, and the figures, summary and report
hold what a reader expects.
"""
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]


def _slice(src, dst, n):
    dst.write_text("\n".join(src.read_text(encoding="utf-8").splitlines()[:n]) + "\n", encoding="utf-8")
    return str(dst)


def tiny_config(shared: Path, data: Path) -> dict:
    sst = {split: _slice(shared / f"sst5/{split}.txt", data / f"sst_{split}.txt", n)
           for split, n in (("train", 150), ("dev", 40), ("test", 60))}
    return {
        "scale": "demo",
        "corpus": {"downloads": {}, "num_shards": 2, "heldout": 0.1, "seed": 1,
                   "sources": [{"format": "lines", "path": str(shared / "corpus_sample/1b_word_shards/shard*")}]},
        "vocab": {"max_size": 5000, "min_count": 1},
        "fasttext": {"models": {"cc": {"train": {"dim": 16, "epoch": 3, "minn": 3, "maxn": 6, "minCount": 1, "ws": 5,
                                                 "neg": 5, "lr": 0.025, "bucket": 20000, "thread": 1, "seed": 1}}},
                     "eval": {"wordsim353": str(shared / "wordsim/wordsim353.tsv")},
                     "random": {"dim": 16, "seed": 1}},
        "pretrain": {"variants": {"elmo-c": {}, "elmo-a": {"overrides": {"output": {"cutoffs": [500, 2000]}}}},
                     "overrides": {"encoder": {"cell_size": 32, "projection_size": 16},
                                   "optimizer": {"type": "scheduled_adam", "base_scale": 2.0e-3, "base_ratio": 16.0,
                                                 "warmup": 5},
                                   "train": {"batch_size": 8, "epochs": 1, "max_steps": 25, "log_every": 5,
                                             "eval_every": 10, "eval_batch_size": 8}}},
        "tasks": {"run": ["sst5"], "seeds": [1, 2],
                  "sst5": {"type": "sst", **sst,
                           "model": {"pre_encode_dim": 16, "encoder_hidden": 16, "integrator_hidden": 16,
                                     "output_dims": [16, 8]},
                           "trainer": {"batch_size": 16, "epochs": 2, "patience": 2}}},
        "bench": {"enabled": True, "quick": True},
    }


@pytest.mark.slow
def test_tiny_workflow_end_to_end_with_report(tmp_path, shared_data):
    data = tmp_path / "data"
    data.mkdir()
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(tiny_config(shared_data, data)))
    work = tmp_path / "work"
    work.mkdir()
    base = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO_ROOT / "Snakefile"),
            "--configfile", str(cfg), "--directory", str(work)]
    r = subprocess.run(base + ["--cores", "2"], cwd=work, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]

    pretrain = pd.read_csv(work / "results/tables/pretrain.csv")
    assert sorted(zip(pretrain.variant, pretrain.direction)) == [
        ("elmo-a", "joint"), ("elmo-c", "backward"), ("elmo-c", "forward")]
    for column in ("before", "after"):
        assert all(math.isfinite(v) for v in pretrain[column])
    assert not (work / "results/lm/elmo-a/forward").exists()  # one joint run, read as both directions
    runs = pd.read_csv(work / "results/tables/downstream_runs.csv")
    assert set(runs.variant) == {"elmo-c", "elmo-a", "fasttext"} and set(runs.seed) == {1, 2}
    assert (runs.status == "ok").all()
    assert all(0.0 <= v <= 1.0 for v in runs.test)
    table = (work / "results/tables/downstream.md").read_text()
    assert "elmo-c" in table and "paper 53.80±0.73" in table

    tables = work / "results/tables"
    for name in ("table2", "table3", "table4_speed", "table5_speed"):
        for suffix in ("md", "csv", "tex", "html"):
            assert (tables / f"{name}.{suffix}").stat().st_size > 0
    table2 = (tables / "table2.md").read_text()
    assert "| ELMo-C |" in table2 and "2.5 days × 4 GPUs" in table2 and "cell/projection 32/16" in table2
    assert "| majority class |" in table2
    for fig in ("heldout_curves", "speed_table4", "speed_table5", "memory_s2"):
        assert (work / f"results/figures/{fig}.png").stat().st_size > 0
        assert (work / f"results/figures/{fig}.pdf").read_bytes().startswith(b"%PDF")
    summary = (work / "results/summary.txt").read_text()
    assert "elmo-c" in summary and "1.00x" in summary and "majority class" in summary
    assert "(joint bi-LM)" in summary

    r = subprocess.run(base + ["--cores", "1", "--report", str(work / "results/report.html")], cwd=work,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    html = (work / "results/report.html").read_text(encoding="utf-8")
    for item in ("table2.html", "table5_speed.html", "heldout_curves.png", "memory_s2.png", "config.yaml"):
        assert item in html
