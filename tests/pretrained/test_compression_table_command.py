"""Issue 36.4: ``elmoc compression-table`` end to end on the test ELMo, its float16 copy and a
"pruned" copy, with a three-tree SST task at two seeds: the table, the JSON, the figure, a
rerun that reuses every task run, and one line for each kind of bad input."""
from __future__ import annotations

import json
import shutil

import pytest
import torch
from lm_tree_helpers import run_command

from elmoc.io.tensor_files import read_state, save_tensors

TREES = """(3 (2 The) (4 (3 film) (4 rocks)))
(1 (2 It) (0 (2 is) (0 awful)))
(4 (2 A) (4 (4 fine) (2 film)))
"""


@pytest.fixture(scope="module")
def setup(elmo_dir):
    root = elmo_dir
    assert run_command("compress", [str(root / "elmo"), "--output-dir", str(root / "models" / "float16"),
                                    "--format", "float16", "--measure", str(root / "s.txt"),
                                    "--threads", "1", "--rounds", "1"]) == 0
    pruned = root / "models" / "pruned-0.5"
    shutil.copytree(root / "elmo", pruned)
    state = read_state(pruned / "backward.safetensors")
    for k, v in state.items():
        if v.dim() == 2 and "encoder" in k:
            state[k] = torch.where(v.abs() < v.abs().median(), torch.zeros_like(v), v)
    save_tensors(state, pruned / "backward.safetensors")
    for split in ("train", "dev", "test"):
        (root / f"{split}.txt").write_text(TREES)
    section = {"type": "sst", **{s: str(root / f"{s}.txt") for s in ("train", "dev", "test")},
               "model": {"pre_encode_dim": 4, "encoder_hidden": 4, "integrator_hidden": 4, "output_dims": [4, 4]},
               "trainer": {"batch_size": 2, "epochs": 1}}
    heldout = root / "heldout.json"
    heldout.write_text(json.dumps({"metric": "perplexity", "after": 50.0}))
    (root / "heldout2.json").write_text(json.dumps({"metric": "perplexity", "after": 60.0}))
    return root, json.dumps({"tiny": section})


def _args(root, sections, *extra):
    return ["--original", str(root / "elmo"), "--models-under", str(root / "models"), "--sentences", str(root / "s.txt"),
            "--rounds", "1", "--batch-size", "4", "--threads", "1", "--heldout", f"original={root / 'heldout.json'}",
            "--heldout", f"original={root / 'heldout2.json'}", "--tasks", "tiny", "--sections-json", sections,
            "--seeds", "1", "2", "--work-dir", str(root / "work"), "--output-dir", str(root / "out"), *extra]


def test_table_json_figure_and_rerun(setup, capsys):
    root, sections = setup
    assert run_command("compression_table", _args(root, sections)) == 0
    summary = json.loads((root / "out" / "compression.json").read_text())
    rows = {r["role"]: r for r in summary["rows"]}
    assert [r["role"] for r in summary["rows"]] == ["original", "float16", "pruned-0.5"]
    assert rows["original"]["heldout"]["value"] == 55.0  # the mean of the two directions' runs
    assert rows["float16"]["heldout"]["inherited"] and "heldout" not in (rows["pruned-0.5"]["heldout"] or {})
    assert rows["pruned-0.5"]["nonzero"] < rows["pruned-0.5"]["parameters"] == rows["original"]["parameters"]
    for r in rows.values():
        assert set(r["downstream"]["tiny"]["test"]) == {"1", "2"} and r["downstream"]["tiny"]["metric"] == "accuracy"
    md = (root / "out" / "compression.md").read_text()
    assert "| float16 |" in md and "55.0000†" in md and "tiny test, mean ± sd (accuracy, Δ)" in md
    assert (root / "out" / "compression.png").stat().st_size > 0 and (root / "out" / "compression.pdf").is_file()
    runs = sorted((root / "work").glob("*/tasks/*/seed*.json"))
    assert len(runs) == 6
    stamps = [p.stat().st_mtime_ns for p in runs]
    capsys.readouterr()
    assert run_command("compression_table", _args(root, sections)) == 0  # a rerun: every task run reused
    assert [p.stat().st_mtime_ns for p in sorted((root / "work").glob("*/tasks/*/seed*.json"))] == stamps
    again = json.loads((root / "out" / "compression.json").read_text())
    assert [r["downstream"] for r in again["rows"]] == [r["downstream"] for r in summary["rows"]]
    args = _args(root, sections, "--finished-only")
    args[args.index("--seeds") + 1: args.index("--seeds") + 3] = ["1", "2", "3"]
    assert run_command("compression_table", args) == 0  # seed 3 never ran: a gap, not a training
    assert len(list((root / "work").glob("*/tasks/*/seed*.json"))) == 6
    assert " [seed 1, 2] " in (root / "out" / "compression.md").read_text()


@pytest.mark.parametrize("extra, message", [
    (["--model", "half=X"], "model role 'half' is not one of: original, bfloat16, float16"),
    (["--model", "original=X"], "the original is --original"),
    (["--heldout", "int8=h.json"], "--heldout int8=h.json: no model has role 'int8'"),
    (["--model", "int8=/nonexistent"], "/nonexistent: is not a model directory"),
    (["--num-sentences", "0"], "--num-sentences must be >= 1"),
])
def test_bad_input_is_one_line(setup, capsys, extra, message):
    root, sections = setup
    capsys.readouterr()
    assert run_command("compression_table", _args(root, sections, *extra)) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_tasks_without_sections_say_the_fix(setup, capsys):
    root, _ = setup
    capsys.readouterr()
    args = _args(root, "{}")
    args[args.index("--sections-json") + 1] = '{"other": {}}'
    assert run_command("compression_table", args) == 1
    assert "--sections-json has no section for tiny" in capsys.readouterr().err
