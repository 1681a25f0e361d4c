"""The workflow builds the table beyond the paper by default exactly when the config has a
Transformer or masked-LM variant (workflow/rules/helpers/tables.smk beyond_variants)."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]


def dry_run(tmp_path, *configs):
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--snakefile",
                        str(REPO_ROOT / "Snakefile"), "--configfile", *map(str, configs), "--directory", str(work)],
                       cwd=work, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    stats = r.stdout.split("Job stats:")[1].split("Reasons:")[0]
    return set(re.findall(r"^(\w+)\s+\d+\s*$", stats, flags=re.M)), r.stdout


@pytest.mark.slow
def test_beyond_table_only_with_a_beyond_variant(tmp_path):
    base = REPO_ROOT / "config/config.yaml"
    rules, out = dry_run(tmp_path, base)
    assert "paper_tables" in rules and "beyond_table" not in rules and "results/demo/tables/beyond.md" not in out
    # a Transformer variant under another name than its preset's: the preset names the family
    presets = tmp_path / "lm"
    shutil.copytree(REPO_ROOT / "config/lm", presets)
    (presets / "trans-base-c.yaml").write_text(yaml.safe_dump({
        "input": {"type": "fasttext", "vectors": "results/vectors/cc.npy"},
        "encoder": {"type": "transformer", "d_model": 16, "heads": 2, "d_ff": 32, "num_layers": 1, "dropout": 0.1},
        "output": {"type": "cosine", "vectors": "results/vectors/cc.npy"},
        "optimizer": {"type": "adam", "lr": 0.001},
        "train": {"batch_size": 8, "bptt": 20, "epochs": 1, "seed": 1}, "vocab": "results/vocab/vocab.txt"}))
    extra = tmp_path / "beyond.yaml"
    extra.write_text(yaml.safe_dump({"pretrain": {"presets_dir": str(presets),
                                                  "variants": {"my-trans": {"preset": "trans-base-c"}}}}))
    rules, out = dry_run(tmp_path, base, extra)
    assert "beyond_table" in rules and "results/demo/tables/beyond.md" in out
