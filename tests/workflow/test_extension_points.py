"""Issue 32's "done when": a new task, a new continuous output layer and a new frozen-table input,
each one file outside the package (``ELMOC_PLUGINS``), are used together by one config: the
dry run schedules their jobs, the range an option declares on its own class is checked when
the workflow is parsed, and the LM the variant names is built and trains a step."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TASK_PLUGIN = REPO_ROOT / "tests/tasks/tsv_binary.py"  # the one file of a TSV binary classifier

OUTPUT_PLUGIN = '''\
"""A continuous output layer in one file: 1 - cos^2 (sign-blind cosine), scaled."""
import torch

from elmoc.outputs.continuous import ContinuousOutput
from elmoc.registry import register


@register("output", "sq_cosine")
class SquaredCosineOutput(ContinuousOutput):
    OPTION_RANGES = {"scale": "> 0"}
    loss_name = "sq_cosine"

    def __init__(self, scale: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale

    def token_loss(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        cos = torch.nn.functional.cosine_similarity(prediction, target, dim=-1)  # (batch, time)
        return self.scale * (1 - cos * cos)
'''

INPUT_PLUGIN = '''\
"""A frozen-table input in one file: the table's rows scaled to unit length."""
import torch

from elmoc.inputs.fasttext import FastTextInput
from elmoc.registry import register


@register("input", "unit_table")
class UnitTableInput(FastTextInput):
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """(batch, time) long -> (batch, time, dim): the rows divided by their norm."""
        rows = super().forward(ids)
        return rows / rows.norm(dim=-1, keepdim=True).clamp_min(1e-8)
'''

OVERLAY = """\
pretrain:
  variants:
    mine:
      preset: elmo-c
      overrides:
        optimizer: {type: scheduled_adam, base_scale: 2.0e-3, base_ratio: 4.0, warmup: 50}
        input: {type: unit_table}
        output: {type: sq_cosine, scale: SCALE}
tasks:
  run: [reviews]
  variants: [mine, elmo-c]
  reviews: {type: tsv_binary, train: data/train.tsv, dev: data/dev.tsv, test: data/test.tsv}
"""


@pytest.fixture
def plugins(tmp_path) -> str:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "sq_cosine.py").write_text(OUTPUT_PLUGIN)
    (folder / "unit_table.py").write_text(INPUT_PLUGIN)
    return os.pathsep.join([str(TASK_PLUGIN), str(folder / "sq_cosine.py"), str(folder / "unit_table.py")])


def dry_run(tmp_path, plugins: str, scale: str):
    work = tmp_path / f"work{scale}"
    (work / "data").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (work / "data" / f"{split}.tsv").write_text("1\tgood film\n0\tbad film\n")
    (work / "overlay.yaml").write_text(OVERLAY.replace("SCALE", scale))
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "1",
                           "--snakefile", str(REPO_ROOT / "Snakefile"), "--directory", str(work),
                           "--configfile", str(REPO_ROOT / "config/config.yaml"), str(work / "overlay.yaml")],
                          cwd=work, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ELMOC_PLUGINS": plugins})


def jobs(stdout: str, rule: str) -> list[str]:
    return re.findall(rf"rule {rule}:\n(.*?)\n\n", stdout, re.S)


@pytest.mark.slow
def test_three_plugin_files_are_scheduled_together(tmp_path, plugins):
    r = dry_run(tmp_path, plugins, "2.0")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    pretrain = [j for j in jobs(r.stdout, "pretrain") if "variant=mine" in j]
    assert sorted(re.search(r"direction=(\w+)", j)[1] for j in pretrain) == ["backward", "forward"]
    assert any("results/demo/features/mine/reviews.hdf5" in j for j in jobs(r.stdout, "extract"))
    runs = [j for j in jobs(r.stdout, "task_run") if "task=reviews" in j]
    assert sorted(re.search(r"variant=([\w.-]+)", j)[1] for j in runs) == ["elmo-c", "fasttext", "mine"]
    # the resolved spec the pretraining reads names the plug-in blocks with their options
    spec_jobs = [j for j in jobs(r.stdout, "lm_spec") if "mine" in j]
    assert spec_jobs, r.stdout[-3000:]


@pytest.mark.slow
def test_a_plugin_option_out_of_its_declared_range_stops_the_dry_run(tmp_path, plugins):
    r = dry_run(tmp_path, plugins, "-1.0")
    assert r.returncode != 0
    lines = [x for x in (r.stdout + r.stderr).splitlines()
             if "pretrain.variants.mine.overrides.output.scale: -1.0 must be" in x]
    assert len(lines) == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "Traceback" not in r.stderr


def test_the_plugin_blocks_build_an_lm_that_trains(tmp_path, plugins):
    """In a fresh process with ELMOC_PLUGINS: the spec with the plug-in input and output builds,
    a step lowers nothing to NaN, and the loss is the plug-in's own (not the cosine's)."""
    code = textwrap.dedent("""
        import sys
        import numpy as np, torch
        from elmoc.lm import LanguageModel
        table = sys.argv[1]
        np.save(table, np.random.default_rng(0).standard_normal((12, 6)).astype(np.float32))
        spec = {"input": {"type": "unit_table", "vectors": table},
                "encoder": {"type": "elmo_lstm", "num_layers": 1, "cell_size": 8, "projection_size": 4},
                "output": {"type": "sq_cosine", "vectors": table, "scale": 2.0}}
        torch.manual_seed(0)
        lm = LanguageModel.from_spec(spec, [str(i) for i in range(12)])
        assert type(lm.input_layer).__name__ == "UnitTableInput", type(lm.input_layer)
        assert type(lm.output_layer).__name__ == "SquaredCosineOutput" and lm.output_layer.scale == 2.0
        x = lm.input_layer(torch.tensor([[1, 2, 3]]))
        assert torch.allclose(x.norm(dim=-1), torch.ones(1, 3))
        hidden = torch.randn(1, 3, 4)
        targets = torch.tensor([[2, 3, 4]])
        out = lm.output_layer(hidden, targets, torch.ones(1, 3, dtype=torch.bool))
        assert torch.isfinite(out.loss_sum) and 0 <= float(out.loss_sum) <= 2.0 * 3 + 1e-5
        out.loss_sum.backward()
        print("ok", type(lm.output_layer).table_label())
    """)
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "t.npy")], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "ELMOC_PLUGINS": plugins})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["ok", "CONT-SQ_COSINE"]
