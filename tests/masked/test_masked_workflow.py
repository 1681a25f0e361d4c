"""The workflow runs a masked LM like any variant: a dry run of config/rehearsal.yaml, which
opts into mlm-c-tupe (the masked LM with TUPE, issue 35) and mlm-sampled (pretrain.extra_variants, sized by pretrain.overrides_by_type),
lists one `train --direction masked` job each, extraction and export reading its one model.pt
as both files, and every task for it."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from elmoc.config import resolve_variant
from elmoc.directions import runs

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED = REPO_ROOT.parent / "shared"
TINY_TRANSFORMER = {"d_model": 16, "heads": 2, "d_ff": 32, "num_layers": 2}


def scratch_config(tmp_path: Path) -> Path:
    """The rehearsal config itself (it lists both masked LMs among its extra variants)."""
    config = yaml.safe_load((REPO_ROOT / "config/rehearsal.yaml").read_text())
    assert {"mlm-c-tupe", "mlm-sampled"} <= set(config["pretrain"]["extra_variants"])
    return REPO_ROOT / "config/rehearsal.yaml"


def test_the_rehearsal_specs_of_the_masked_variants(tmp_path):
    config = yaml.safe_load(scratch_config(tmp_path).read_text())
    for name, output, positions in (("mlm-c-tupe", "cosine", {"positions": "tupe"}), ("mlm-sampled", "sampled", {})):
        spec = resolve_variant(config, name, presets_dir=REPO_ROOT / "config/lm")
        assert runs(spec) == ("masked",)
        assert spec["encoder"] == {"type": "transformer", "causal": False, "dropout": 0.1, **TINY_TRANSFORMER,
                                   **positions}
        assert spec["output"]["type"] == output and spec["input"]["type"] == "fasttext"
        assert spec["train"]["masking"] == {"rate": 0.15, "mask": 0.8, "random": 0.1}
        assert spec["train"]["max_steps"] == config["pretrain"]["overrides"]["train"]["max_steps"]


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "data").is_dir(), reason="../shared/data is absent")
def test_a_dry_run_lists_train_export_extract_and_task_jobs_of_mlm_c(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "shared").symlink_to(SHARED)
    configfile = scratch_config(tmp_path)
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "2", "--snakefile",
                        str(REPO_ROOT / "Snakefile"), "--configfile", str(configfile), "--directory", str(work),
                        "all", "results/rehearsal/models/mlm-c-tupe", "results/rehearsal/models/mlm-sampled"],
                       cwd=work, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    for variant in ("mlm-c-tupe", "mlm-sampled"):
        model = f"results/rehearsal/lm/{variant}/masked/model.pt"
        train = [c for c in lines if " train --spec " in c and f"results/rehearsal/lm/{variant}/" in c]
        assert len(train) == 1 and "--direction masked" in train[0], train
        assert f"--output-dir results/rehearsal/lm/{variant}/masked" in train[0]
        assert [c for c in lines if f" export --forward {model} --backward {model} " in c]
        extract = [c for c in lines if " extract --forward " in c and f"/{variant}/" in c]
        assert extract and all(f"--forward {model} --backward {model}" in c for c in extract)
        tasks = {m for c in lines if " task --task " in c and f"--variant {variant} " in c
                 for m in re.findall(r"--task (\w+)", c)}
        assert tasks == set(yaml.safe_load(configfile.read_text())["tasks"]["run"]), tasks
