"""Never destroy what the user has, round two (issue 42): every command resolves its complete
input set (explicit flags and what it reads through a spec, a checkpoint, a model directory or
a task section) and refuses an output that is, holds or lies inside one of them, before any
work; and an output folder holding another command's output or runs.

A tiny variant is trained once per module (lm/tiny/{spec.yaml, forward/, backward/}, over
vocab.txt, vec.npy and corpus/), exported (models/tiny), and every command that reads it is
walked with each of its inputs as the output: directly, through a symlink, and as the folder
that holds it.  Each refusal is one line, exit 1, and nothing under the work folder changes.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from test_output_paths import _one_line_error as _one_line

from elmoc.cli import main


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and "links" not in p.relative_to(root).parts}




RUN = "lm/tiny/forward"
LM_IMPLICIT = ["vocab.txt", "vec.npy", "corpus/train", "corpus/train/shard_000.txt", "corpus/heldout.txt"]
FWD_RUN = [f"{RUN}/model.pt", f"{RUN}/checkpoint.pt", f"{RUN}/heldout.json", f"{RUN}/train_log.jsonl"]

# command -> (argv with OUT for the output, the inputs it reads: explicit first, then implicit)
WALK = {
    "extract": (["extract", "--forward", f"{RUN}/model.pt", "--backward", "lm/tiny/backward/model.pt",
                 "--sentences", "task.txt", "--output", "OUT"],
                [*FWD_RUN, "lm/tiny/backward/model.pt", "task.txt", *LM_IMPLICIT]),
    "export": (["export", "--forward", f"{RUN}/model.pt", "--backward", "lm/tiny/backward/model.pt", "--output-dir", "OUT"],
               [*FWD_RUN, "lm/tiny/backward/model.pt", *LM_IMPLICIT]),
    "cnn-table": (["cnn-table", "--checkpoint", f"{RUN}/model.pt", "--vocab", "vocab.txt", "--output", "OUT"],
                  [*FWD_RUN, *LM_IMPLICIT]),
    "prune": (["prune", "--model", f"{RUN}/model.pt", "--direction", "forward", "--output-dir", "OUT"],
              [*FWD_RUN, *LM_IMPLICIT]),
    "distill": (["distill", "--spec", "student.yaml", "--teacher", f"{RUN}/model.pt", "--direction", "forward",
                 "--output-dir", "OUT"], ["student.yaml", *FWD_RUN, *LM_IMPLICIT]),
    "train": (["train", "--spec", "spec.yaml", "--direction", "forward", "--output-dir", "OUT"],
              ["spec.yaml", *LM_IMPLICIT]),
    "lm-finetune": (["lm-finetune", "--lm-dir", "lm/tiny", "--text", "task.txt", "--output-dir", "OUT"],
                    ["lm/tiny", "lm/tiny/spec.yaml", *FWD_RUN, "lm/tiny/backward/model.pt", "task.txt",
                     *LM_IMPLICIT]),
    "embed": (["embed", "task.txt", "OUT", "--model", "models/tiny", "--top"],
              ["task.txt", "models/tiny", "models/tiny/forward.pt"]),
    "compress": (["compress", "models/tiny", "--output-dir", "OUT", "--format", "float16", "--measure", "task.txt"],
                 ["models/tiny", "models/tiny/forward.pt", "task.txt"]),
    "task": (["task", "--task", "sst5", "--config", "config.yaml", "--variant", "v", "--features", "feats.hdf5",
              "--output", "OUT"],
             ["config.yaml", "feats.hdf5", "data/sst/train.txt", "data/sst/dev.txt", "data/sst/test.txt"]),
    "predict": (["predict", "task.txt", "--task-model", "tm", "--output", "OUT"],
                ["task.txt", "tm", "tm/weights.pt", "tm/lm", "tm/lm/forward.pt"]),
    "vocab": (["vocab", "--corpus", "corpus/train", "--output", "OUT"], ["corpus/train", "corpus/train/shard_000.txt"]),
}


def _cases():
    for name, (_, inputs) in WALK.items():
        for inp in inputs:
            yield name, inp


@pytest.mark.parametrize("how", ["direct", "symlink", "parent"])
@pytest.mark.parametrize("name,inp", list(_cases()))
def test_every_input_as_the_output_is_refused_and_nothing_changes(world, name, inp, how, monkeypatch, capsys):
    monkeypatch.chdir(world)
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    before = _tree(world)
    links = world / "links"
    links.mkdir(exist_ok=True)
    if how == "direct":
        out = inp
    elif how == "symlink":
        out = str(links / f"{name}-{inp.replace('/', '_')}")
        if os.path.lexists(out):
            os.unlink(out)
        os.symlink(world / inp, out)
    else:
        out = str(Path(inp).parent) if Path(inp).parent != Path(".") else "."
        if out == ".":
            pytest.skip("the work folder itself: covered by the input folders inside it")
    argv = [out if a == "OUT" else a for a in WALK[name][0]]
    assert main(argv) == 1, argv
    _one_line(capsys, f"elmoc {name}: error:")
    assert _tree(world) == before
    assert not [p for p in world.rglob(".*.tmp*")]


# ------------------------------------------------------------------ the cases of issue 42


def test_case1_lm_finetune_into_the_variant_folder_is_refused(world, monkeypatch, capsys):
    """Before: `lm-finetune --lm-dir V --output V/model` overwrote V/forward/model.pt, exit 0."""
    monkeypatch.chdir(world)
    before = _tree(world)
    assert main(["lm-finetune", "--lm-dir", "lm/tiny", "--text", "task.txt", "--output-dir", "lm/tiny/model"]) == 1
    _one_line(capsys, "elmoc lm-finetune: error:", "inside the input folder --lm-dir")
    assert main(["lm-finetune", "--lm-dir", "lm/tiny", "--text", "task.txt", "--output-dir", "lm/model"]) == 1
    _one_line(capsys, "elmoc lm-finetune: error:", "--output-dir's parent (the work folder) holds the input --lm-dir")
    assert _tree(world) == before and not Path("lm/tiny/model").exists() and not Path("lm/model").exists()


@pytest.mark.parametrize("advice", [[], ["--no-resume"]])
def test_case2_distill_onto_the_teachers_run_is_refused_with_or_without_no_resume(world, monkeypatch, capsys,
                                                                                  advice):
    """Before: refused "trained with another spec ... rerun with --no-resume"; following that advice
    overwrote the teacher's model.pt, checkpoint.pt and heldout.json, exit 0."""
    monkeypatch.chdir(world)
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    before = _tree(world)
    assert main(["distill", "--spec", "student.yaml", "--teacher", f"{RUN}/model.pt", "--direction", "forward",
                 "--output-dir", RUN, "--max-steps", "2", *advice]) == 1
    err = _one_line(capsys, "elmoc distill: error:", "--teacher")
    assert "--no-resume" not in err
    assert _tree(world) == before


def test_no_resume_never_discards_another_commands_run(world, tmp_path, monkeypatch, capsys):
    """--no-resume may discard only a checkpoint the same command wrote: `train --no-resume` onto a
    distillation's folder, and `distill --no-resume` onto another training run, are refused."""
    monkeypatch.chdir(world)
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    other = tmp_path / "other-run"
    shutil.copytree(world / "lm/tiny/backward", other)
    before, kept = _tree(world), _tree(other)
    assert main(["distill", "--spec", "student.yaml", "--teacher", f"{RUN}/model.pt", "--direction", "forward",
                 "--output-dir", str(other), "--no-resume", "--max-steps", "2"]) == 1
    _one_line(capsys, "elmoc distill: error:", "`elmoc train`'s model.pt and checkpoint.pt")
    assert _tree(other) == kept
    distilled = tmp_path / "distilled"
    distilled.mkdir()
    payload = {"format": "elmoc-lm-v1", "spec": {"distill": {"teacher": "t"}}, "direction": "forward"}
    import torch

    torch.save(payload, distilled / "checkpoint.pt")
    kept = _tree(distilled)
    assert main(["train", "--spec", "spec.yaml", "--direction", "forward", "--output-dir", str(distilled),
                 "--no-resume"]) == 1
    _one_line(capsys, "elmoc train: error:", "`elmoc distill`'s checkpoint.pt")
    assert _tree(distilled) == kept and _tree(world) == before


@pytest.mark.parametrize("target", ["vocab.txt", "vec.npy", f"{RUN}/checkpoint.pt"])
def test_case3_extract_onto_a_file_it_reads_implicitly(world, monkeypatch, capsys, target):
    """Before: the recorded vocabulary (no --vocab), the spec's vectors and the checkpoint.pt beside
    --forward were overwritten with HDF5, exit 0."""
    monkeypatch.chdir(world)
    before = _tree(world)
    assert main(["extract", "--forward", f"{RUN}/model.pt", "--backward", "lm/tiny/backward/model.pt",
                 "--sentences", "task.txt", "--output", target]) == 1
    _one_line(capsys, "elmoc extract: error:", "same file as the input")
    assert _tree(world) == before


def test_case4_task_output_onto_its_dev_file(world, monkeypatch, capsys):
    """Before: the dataset was overwritten by the metrics JSON, exit 0."""
    monkeypatch.chdir(world)
    before = _tree(world)
    assert main(["task", "--task", "sst5", "--config", "config.yaml", "--variant", "v", "--features", "feats.hdf5",
                 "--output", "data/sst/dev.txt"]) == 1
    _one_line(capsys, "elmoc task: error:", "tasks.sst5's dev")
    assert _tree(world) == before


def test_case4_predict_into_the_task_models_lm(world, monkeypatch, capsys):
    """Before: only the task model's direct children were protected: its LM was overwritten."""
    monkeypatch.chdir(world)
    before = _tree(world)
    assert main(["predict", "task.txt", "--task-model", "tm", "--output", "tm/lm/forward.pt"]) == 1
    _one_line(capsys, "elmoc predict: error:", "inside the input folder --task-model")
    assert _tree(world) == before


# ------------------------------------------------------------------ every command, through a symlink and a parent


def _generic_commands():
    from test_output_paths import _command_modules

    return sorted(m.NAME for m in _command_modules() if m.OUTPUTS and m.INPUTS)


def _module_named(name: str):
    from test_output_paths import _command_modules

    return next(m for m in _command_modules() if m.NAME == name)


@pytest.mark.parametrize("how", ["symlink", "parent"])
@pytest.mark.parametrize("name", _generic_commands())
def test_every_command_refuses_its_input_through_a_symlink_or_as_the_folder_holding_it(name, how, tmp_path,
                                                                                        monkeypatch, capsys):
    """The command lines of test_output_paths (an input given again as the output), with the output
    respelled: a symlink to the input, or the folder that holds it."""
    from test_output_paths import _argv_output_is_input

    monkeypatch.chdir(tmp_path)
    Path("sub").mkdir()
    Path("sub/in.txt").write_text("the precious input\n")
    Path("dir").mkdir()
    (Path("dir") / "shard_000.txt").write_text("a b c\n")
    argv = _argv_output_is_input(name, "sub/in.txt", "dir")
    target = "sub/in.txt" if argv.count("sub/in.txt") >= 2 else "dir"
    assert argv.count(target) >= 2, argv
    if how == "symlink":
        os.symlink(tmp_path / target, "lnk")
        out = str(tmp_path / "lnk")
    else:
        out = str(Path(target).parent)
        if out == ".":
            pytest.skip("the input folder's parent is the work folder (refused as the current directory)")
    index = len(argv) - 1 - argv[::-1].index(target)
    argv[index] = out
    before = {str(p): p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file() and not p.is_symlink()}
    if how == "parent" and hasattr(_module_named(name), "TABLES"):
        # a table command writes only its tables' files into --output-dir (results/tables holds its --bench):
        # the folder holding an input is no refusal, and nothing the user had changes
        main(argv)
        capsys.readouterr()
        after = {str(p): p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file() and not p.is_symlink()}
        assert {k: after.get(k) for k in before} == before
        return
    assert main(argv) == 1, argv
    err = _one_line(capsys, f"elmoc {name}: error:")
    assert any(why in err for why in ("same file as the input", "holds the input", "inside the input folder")), err
    assert {str(p): p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file() and not p.is_symlink()} \
        == before


def test_an_output_folder_holding_another_commands_output_is_refused(world, tmp_path, monkeypatch, capsys):
    """A model directory (manifest of `elmoc export`) as a training run's folder, a training run as
    prune's or lm-finetune's work folder: refused, nothing changed."""
    monkeypatch.chdir(world)
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    other = tmp_path / "backward-copy"
    shutil.copytree(world / "lm/tiny/backward", other)
    before, kept = _tree(world), _tree(other)
    assert main(["train", "--spec", "spec.yaml", "--direction", "forward", "--output-dir", "models/tiny"]) == 1
    _one_line(capsys, "elmoc train: error:", "an output of `elmoc export`")
    assert main(["prune", "--model", f"{RUN}/model.pt", "--direction", "forward", "--output-dir", str(other)]) == 1
    _one_line(capsys, "elmoc prune: error:", "holds a training run's model.pt")
    assert main(["lm-finetune", "--lm-dir", "lm/tiny", "--text", "task.txt", "--output-dir", str(other / "model")]) == 1
    _one_line(capsys, "elmoc lm-finetune: error:", "--output-dir's parent (the work folder) holds a training run's")
    assert _tree(world) == before and _tree(other) == kept


def test_export_checkpoints_writes_beside_its_spec(world, tmp_path, monkeypatch, capsys):
    """The workflow's released_lm rule: `export --format checkpoints --spec results/lm/V/spec.yaml
    --output-dir results/lm/V` writes only V/{direction}/model.pt and heldout.json, beside the spec: not
    refused as "holds the input --spec"; an output file that is the spec still is."""
    from elmoc.cli import build_parser, _refuse_outputs_among_inputs

    monkeypatch.chdir(world)
    args = build_parser(argv := ["export", "--bilm-tf-options", "o.json", "--bilm-tf-weights", "w.hdf5",
                                 "--format", "checkpoints", "--spec", "lm/tiny/spec.yaml", "--vocab", "vocab.txt",
                                 "--direction", "forward", "--output-dir", "lm/tiny"]).parse_args(argv)
    _refuse_outputs_among_inputs(args)  # no error
    args = build_parser(argv).parse_args([*argv[:-1], "lm"])
    _refuse_outputs_among_inputs(args)
    bad = build_parser(argv).parse_args([*argv[:8], "lm/tiny/forward/model.pt", *argv[9:]])
    with pytest.raises(Exception, match="same file as the input --spec"):
        _refuse_outputs_among_inputs(bad)
