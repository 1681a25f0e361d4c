"""One end-to-end workflow run of a tiny config in a temporary directory.

Real data from ../shared/data (skipped when absent): the 1B Word sample as corpus and
small slices of SST-5. Checks that the final tables exist and their numbers are finite.
"""
import math
import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def _slice(src, dst, n):
    lines = src.read_text(encoding="utf-8").splitlines()[:n]
    dst.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(dst)


@pytest.mark.slow
def test_tiny_workflow_end_to_end(tmp_path):
    shared = Path(os.environ.get("ELMOC_SHARED_DATA", REPO_ROOT.parent / "shared" / "data")).resolve()
    if not shared.is_dir():
        pytest.skip(f"shared data not found at {shared}")
    data = tmp_path / "data"
    data.mkdir()
    sst = {split: _slice(shared / f"sst5/{split}.txt", data / f"sst_{split}.txt", n)
           for split, n in (("train", 150), ("dev", 40), ("test", 60))}
    config = {
        "scale": "demo",
        "corpus": {
            "downloads": {},
            "sources": [{"format": "lines", "path": str(shared / "corpus_sample/1b_word_shards/shard*")}],
            "num_shards": 2, "heldout": 0.1, "seed": 1,
        },
        "vocab": {"max_size": 5000, "min_count": 1},
        "fasttext": {
            "models": {"cc": {"train": {"dim": 16, "epoch": 3, "minn": 3, "maxn": 6, "minCount": 1, "ws": 5,
                                        "neg": 5, "lr": 0.025, "bucket": 20000, "thread": 1, "seed": 1}}},
            "eval": {"wordsim353": str(shared / "wordsim/wordsim353.tsv")},
            "random": {"dim": 16, "seed": 1},
        },
        "pretrain": {
            "variants": {"elmo-c": {}},
            "overrides": {
                "encoder": {"cell_size": 32, "projection_size": 16},
                "optimizer": {"type": "scheduled_adam", "base_scale": 2.0e-3, "base_ratio": 16.0, "warmup": 5},
                "train": {"batch_size": 8, "epochs": 1, "max_steps": 25, "log_every": 5, "eval_batch_size": 8},
            },
        },
        "tasks": {
            "run": ["sst5"], "seeds": [1, 2],
            "sst5": {"type": "sst", **sst,
                     "model": {"pre_encode_dim": 16, "encoder_hidden": 16, "integrator_hidden": 16,
                               "output_dims": [16, 8]},
                     "trainer": {"batch_size": 16, "epochs": 2, "patience": 2}},
        },
    }
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(config))
    work = tmp_path / "work"
    work.mkdir()
    r = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", "--snakefile", str(REPO_ROOT / "Snakefile"),
         "--configfile", str(cfg), "--directory", str(work)],
        cwd=work, capture_output=True, text=True, timeout=900,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    pretrain = pd.read_csv(work / "results/tables/pretrain.csv")
    assert set(pretrain.direction) == {"forward", "backward"}
    for column in ("before", "after"):
        assert all(math.isfinite(v) for v in pretrain[column])
    runs = pd.read_csv(work / "results/tables/downstream_runs.csv")
    assert set(runs.variant) == {"elmo-c", "fasttext"} and set(runs.seed) == {1, 2}
    assert (runs.status == "ok").all()
    assert all(0.0 <= v <= 1.0 for v in runs.test)
    table = (work / "results/tables/downstream.md").read_text()
    assert "elmo-c" in table and "paper 53.80±0.73" in table
