"""Task runs checkpoint and resume (issue 29): for every task, a run stopped by a signal in
the middle of a training epoch, stopped again in the middle of an evaluation, then killed
(an exception after the epoch's checkpoint: the steps since are lost) and run once more
ends with the result of a run never interrupted, bit for bit (timings aside).

The stops are injected at chosen points: :class:`StopAt` is the run's ``StopSignals``, and
it "receives" SIGTERM at the n-th decision of a given kind (after a training step, after
an evaluation batch), exactly as the handler would set the flag.
"""
from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from elmoc.errors import ConfigError, InputFileError
from elmoc.model_file import load_checkpoint
from elmoc.registry import build
from elmoc.tasks import progress as progress_module
from elmoc.tasks import runner
from elmoc.tasks.checkpoint import FORMAT, TaskCheckpoint, run_dir, run_spec
from elmoc.tasks.embedder import TaskInputs
from elmoc.tasks.runner import RunInterrupted, TrainerConfig, run_task
from elmoc.train.signals import StopSignals

sys.path.insert(0, str(Path(__file__).parent))
from test_coref import DOCS  # noqa: E402
from test_ner import CONLL  # noqa: E402
from test_snli import ROWS  # noqa: E402
from test_srl import TINY as SRL_CONLL  # noqa: E402
from test_sst import TREES  # noqa: E402


def _sibling_conftest():
    """tests/tasks/conftest.py by its path: ``from conftest import`` finds whichever conftest
    pytest imported first under that name (tests/train's, in a whole-suite run)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tasks_conftest", Path(__file__).with_name("conftest.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


write_features = _sibling_conftest().write_features
write_vectors = _sibling_conftest().write_vectors

TIMING = ("seconds",)


def _files(tmp_path: Path, name: str, text: str) -> dict[str, str]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return {"train": str(path), "dev": str(path), "test": str(path)}


def _sst(tmp_path):
    model = {"pre_encode_dim": 8, "encoder_hidden": 6, "integrator_hidden": 6, "output_dims": [8, 6],
             "embedding_dropout": 0.2, "pre_encode_dropout": 0.2, "integrator_dropout": 0.2,
             "output_dropouts": [0.2, 0.2, 0.2]}
    return {"type": "sst", **_files(tmp_path, "trees.txt", TREES), "model": model}, {"batch_size": 3}


def _snli(tmp_path):
    rows = "".join(json.dumps(r) + "\n" for r in ROWS if r["gold_label"] != "-") * 3
    model = {"encoder_hidden": 6, "projection_dim": 6, "inference_hidden": 6, "output_hidden": 6, "dropout": 0.3}
    return {"type": "snli", **_files(tmp_path, "snli.jsonl", rows), "model": model}, \
        {"batch_size": 2, "plateau_factor": 0.5, "patience": 3}


def _ner(tmp_path):
    return {"type": "ner", **_files(tmp_path, "ner.txt", CONLL),
            "model": {"hidden": 8, "char_filters": 4, "dropout": 0.3}}, {"batch_size": 1}


def _srl(tmp_path):
    model = {"hidden_dim": 8, "num_layers": 2, "recurrent_dropout": 0.2, "predicate_dim": 4, "feature_dropout": 0.2}
    return {"type": "srl", **_files(tmp_path, "srl.gold_conll", SRL_CONLL), "model": model}, {"batch_size": 1}


def _coref(tmp_path):
    model = {"contextualization_size": 8, "contextualization_layers": 1, "ffnn_size": 8, "ffnn_depth": 1,
             "feature_size": 4, "max_span_width": 3, "top_span_ratio": 0.8, "max_top_antecedents": 4,
             "coref_depth": 2, "dropout": 0.2, "lstm_dropout": 0.2, "lexical_dropout": 0.2, "mention_loss": 1.0}
    return {"type": "coref", **_files(tmp_path, "docs.gold_conll", DOCS), "model": model}, \
        {"batch_size": 1, "eval_batch_size": 1, "lr_decay": 0.5, "lr_decay_steps": 3}


def _snli_fused(tmp_path):  # the same run with Adam's fused update (trainer.fused_optimizer)
    section, trainer = _snli(tmp_path)
    return section, {**trainer, "fused_optimizer": True}


TASKS = {"sst5": _sst, "snli": _snli, "ner": _ner, "srl": _srl, "coref": _coref, "snli-fused": _snli_fused}


class StopAt(StopSignals):
    """A stop signal that arrives at the ``n``-th decision after a ``kind`` of work
    ("train": a training step, "eval": an evaluation batch); counts every decision."""

    def __init__(self, kind: str | None = None, n: int = 0):
        super().__init__()
        self.kind, self.n, self.seen = kind, n, {"train": 0, "eval": 0, "epoch": 0}

    def decide(self, distributed=False, device=None, *, time_up=False, checkpoint_due=False):
        caller = sys._getframe(2).f_code.co_name  # should_stop's caller
        kind = {"train_epoch": "train", "evaluate": "eval", "end_epoch": "epoch"}[caller]
        self.seen[kind] += 1
        if kind == self.kind and self.seen[kind] == self.n and self.received is None:
            self.received = "SIGTERM"
        return super().decide(distributed, device, time_up=time_up, checkpoint_due=checkpoint_due)


def _setup(name, tmp_path):
    section, trainer_values = TASKS[name](tmp_path)
    task = build("task", section)
    data = {split: task.read(split) for split in ("train", "dev", "test")}
    sentences = [s for split in data.values() for s in task.sentences(split)]
    unique = list({" ".join(s): list(s) for s in sentences}.values())
    h5 = write_features(tmp_path / "features.hdf5", unique, num_layers=2, dim=6)
    inputs = TaskInputs.create(sentences, features=h5, lowercase=task.lowercase_words)
    trainer = TrainerConfig.from_dict({"epochs": 4, "patience": 4, "eval_batch_size": 2, "lr": 0.01,
                                       "checkpoint_minutes": 0, **trainer_values}, task.default_trainer)
    spec = run_spec(name, {**section, "trainer": trainer_values}, asdict(trainer), 7, {"features": str(h5)})
    return task, data, inputs, trainer, spec


def _same(a: dict, b: dict) -> None:
    strip = lambda r: {k: v for k, v in r.items() if k not in TIMING}  # noqa: E731
    assert strip(a) == strip(b)


@pytest.mark.parametrize("name", list(TASKS))
def test_stopped_twice_killed_once_then_resumed_equals_the_uninterrupted_run(name, tmp_path, monkeypatch):
    task, data, inputs, trainer, spec = _setup(name, tmp_path)
    straight_stop = StopAt()
    straight = run_task(task, inputs, 7, trainer, data, checkpoint=TaskCheckpoint(tmp_path / "a/checkpoint.pt", spec),
                        stop=straight_stop)
    plain = run_task(task, inputs, 7, trainer, data)  # without a checkpoint: the same numbers
    _same(straight, plain)
    steps, evals = straight_stop.seen["train"], straight_stop.seen["eval"]
    assert steps >= 6 and evals >= 6, straight_stop.seen

    ckpt = TaskCheckpoint(tmp_path / "b/checkpoint.pt", spec)
    # 1. SIGTERM in the middle of the second epoch's training
    per_epoch = steps // len(straight["history"])
    with pytest.raises(RunInterrupted, match="stopped by SIGTERM"):
        run_task(task, inputs, 7, trainer, data, checkpoint=ckpt, stop=StopAt("train", per_epoch + per_epoch // 2 + 1))
    saved = load_checkpoint(ckpt.path, formats=(FORMAT,))
    assert (saved["epoch"], saved["batch"], saved["step"]) == (2, per_epoch // 2 + 1, per_epoch + per_epoch // 2 + 1)
    # 2. SIGTERM in the middle of the next dev evaluation (its second batch): it is done again on resume
    with pytest.raises(RunInterrupted):
        run_task(task, inputs, 7, trainer, data, checkpoint=ckpt, stop=StopAt("eval", 2))
    saved = load_checkpoint(ckpt.path, formats=(FORMAT,))
    assert saved["epoch"] == 2 and saved["batch"] == per_epoch and len(saved["history"]) == 1
    # 3. killed one step into epoch 4 (after epoch 3's checkpoint): that step is lost and redone
    real_step, calls = runner.TaskTrainer.train_step, []

    def dies_in_epoch_4(self, idx, *built):
        calls.append(self.epoch)
        if self.epoch == 4 and self.batch == 1:
            raise KeyboardInterrupt("kill")  # not caught by the runner: nothing is saved
        return real_step(self, idx, *built)

    monkeypatch.setattr(runner.TaskTrainer, "train_step", dies_in_epoch_4)
    if len(straight["history"]) >= 4:
        with pytest.raises(KeyboardInterrupt):
            run_task(task, inputs, 7, trainer, data, checkpoint=ckpt, stop=StopAt())
        saved = load_checkpoint(ckpt.path, formats=(FORMAT,))
        assert (saved["epoch"], saved["batch"]) == (4, 0) and len(saved["history"]) == 3
    monkeypatch.setattr(runner.TaskTrainer, "train_step", real_step)
    # 4. the rerun finishes
    resumed = run_task(task, inputs, 7, trainer, data, checkpoint=ckpt, stop=StopAt())
    _same(straight, resumed)


def test_stop_during_the_test_evaluation_resumes_to_the_same_result(tmp_path):
    task, data, inputs, trainer, spec = _setup("srl", tmp_path)
    straight = run_task(task, inputs, 7, trainer, data)
    ckpt = TaskCheckpoint(tmp_path / "run/checkpoint.pt", spec)
    stop = StopAt("eval", 10 ** 6)
    run_task(task, inputs, 7, trainer, data, checkpoint=TaskCheckpoint(tmp_path / "count/checkpoint.pt", spec),
             stop=stop)
    last_eval = stop.seen["eval"]  # the last evaluation batch is the test evaluation's last
    with pytest.raises(RunInterrupted):
        run_task(task, inputs, 7, trainer, data, checkpoint=ckpt, stop=StopAt("eval", last_eval))
    saved = load_checkpoint(ckpt.path, formats=(FORMAT,))
    assert saved["finished"]
    _same(straight, run_task(task, inputs, 7, trainer, data, checkpoint=ckpt, stop=StopAt()))


def test_a_checkpoint_of_other_settings_or_data_is_set_aside_with_the_reason(tmp_path, caplog):
    task, data, inputs, trainer, spec = _setup("sst5", tmp_path)
    path = tmp_path / "run/checkpoint.pt"
    with pytest.raises(RunInterrupted):
        run_task(task, inputs, 7, trainer, data, checkpoint=TaskCheckpoint(path, spec), stop=StopAt("train", 2))
    # checkpoint_minutes and progress_seconds may change: the checkpoint is resumed
    changed = {**spec, "trainer": {**spec["trainer"], "checkpoint_minutes": 5, "progress_seconds": 1}}
    assert TaskCheckpoint(path, run_spec("sst5", spec["section"], changed["trainer"], 7, spec["inputs"])).prepare()
    # another learning rate: set aside, named
    other = run_spec("sst5", spec["section"], {**spec["trainer"], "lr": 0.5}, 7, spec["inputs"])
    with caplog.at_level(logging.WARNING):
        assert TaskCheckpoint(path, other).prepare() is None
    assert not path.exists() and len(list(path.parent.glob("checkpoint.*.pt"))) == 1
    assert "trainer.lr is 0.01 there but 0.5 in this task run" in caplog.text
    # refused with one line instead, when asked
    aside = next(path.parent.glob("checkpoint.*.pt"))
    aside.rename(path)
    with pytest.raises(InputFileError, match="trainer.lr is 0.01 there but 0.5"):
        TaskCheckpoint(path, other, stale="refuse").prepare()
    # the task's data file changed (same path): set aside, named
    Path(spec["section"]["train"]).write_text(TREES + "(2 (2 New) (2 tree))\n", encoding="utf-8")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert TaskCheckpoint(path, spec).prepare() is None
    assert "was trained on other inputs: " in caplog.text
    assert "trees.txt (the spec's section." in caplog.text and ") changed since the checkpoint was written" in caplog.text
    assert not path.exists() and len(list(path.parent.glob("checkpoint.*.pt"))) == 1


def test_time_based_checkpoints_and_the_deadline(tmp_path, monkeypatch):
    """checkpoint_minutes with a fake clock (one minute per step) saves between epochs' ends;
    a SLURM end time closer than the margin stops the run after its first step."""
    from elmoc.train import periodic

    task, data, inputs, trainer, spec = _setup("ner", tmp_path)
    now = [0.0]
    monkeypatch.setattr(periodic, "monotonic", lambda: now[0])
    real_step = runner.TaskTrainer.train_step

    def one_minute(self, idx, *built):
        now[0] += 60.0
        return real_step(self, idx, *built)

    monkeypatch.setattr(runner.TaskTrainer, "train_step", one_minute)
    saved = []
    real_save = TaskCheckpoint.save
    monkeypatch.setattr(TaskCheckpoint, "save", lambda self, state: (saved.append((state["epoch"], state["batch"])),
                                                                     real_save(self, state)))
    timed = TrainerConfig.from_dict({**asdict(trainer), "checkpoint_minutes": 2.5, "epochs": 1})
    run_task(task, inputs, 7, timed, data, checkpoint=TaskCheckpoint(tmp_path / "t/checkpoint.pt", spec),
             stop=StopAt())
    n = len(data["train"])
    assert saved == [(1, b) for b in range(3, n + 1, 3)] + [(2, 0)]  # every 3 fake minutes, then the epoch's end
    import time

    monkeypatch.setenv("SLURM_JOB_END_TIME", str(int(time.time()) + 100))  # < the default 300 s margin
    with pytest.raises(RunInterrupted, match="stopped by time-limit"):
        run_task(task, inputs, 7, trainer, data, checkpoint=TaskCheckpoint(tmp_path / "d/checkpoint.pt", spec),
                 stop=StopAt())
    assert load_checkpoint(tmp_path / "d/checkpoint.pt", formats=(FORMAT,))["step"] == 1


def test_evaluation_progress_lines(tmp_path, monkeypatch, caplog):
    """A long evaluation logs done/total, rate and ETA (a fake clock: 30 s per batch, a line
    every 60 s) and a closing line; a short one logs nothing."""
    task, data, inputs, trainer, _ = _setup("srl", tmp_path)
    model = task.build_model(inputs)
    now = [0.0]

    def clock():
        now[0] += 30.0
        return now[0]

    monkeypatch.setattr(progress_module, "monotonic", clock)
    with caplog.at_level(logging.INFO, logger="elmoc.tasks.runner"):
        runner.evaluate(task, model, data["dev"], inputs, 1, what="srl dev evaluation", progress_seconds=60)
    lines = [r.getMessage() for r in caplog.records]
    total = len(data["dev"])
    assert lines[0] == f"srl dev evaluation: 2/{total} batches ({100 * 2 / total:.0f}%), 0.03 batches/s, ETA " \
        f"{progress_module.duration((total - 2) * 30)}"
    assert lines[-1].startswith(f"srl dev evaluation: {total} batches in ")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="elmoc.tasks.runner"):
        runner.evaluate(task, model, data["dev"], inputs, 1, progress_seconds=None)
    assert not caplog.records


def test_run_dir_and_trainer_options():
    assert run_dir("results/tasks/sst5/elmo-c/seed1.json") == Path("results/tasks/sst5/elmo-c/seed1.run")
    assert TrainerConfig.from_dict({"checkpoint_minutes": 0, "progress_seconds": None}).checkpoint_minutes == 0
    for key in ("checkpoint_minutes", "progress_seconds"):
        with pytest.raises(ConfigError, match=f"trainer.{key} must be a number >= 0 or null"):
            TrainerConfig.from_dict({key: -1})
    with pytest.raises(ConfigError, match="stale_checkpoint"):
        TaskCheckpoint("x.pt", {}, stale="keep")
    assert torch.get_num_threads() == 1


def test_fused_optimizer_option_and_the_checkpoints_written_before_it():
    params = [torch.nn.Parameter(torch.ones(3))]
    assert runner.task_optimizer(params, TrainerConfig.from_dict({"fused_optimizer": True})).defaults["fused"] is True
    assert runner.task_optimizer(params, TrainerConfig.from_dict({})).defaults["fused"] is None  # torch's default
    with pytest.raises(ConfigError, match="trainer.fused_optimizer needs optimizer adam"):
        TrainerConfig.from_dict({"optimizer": "adadelta", "fused_optimizer": True})
    with pytest.raises(ConfigError, match="trainer.fused_optimizer must be true or false"):
        TrainerConfig.from_dict({"fused_optimizer": "yes"})
    # a spec made before the key existed (no fused_optimizer anywhere) is the spec of the default
    trainer = asdict(TrainerConfig.from_dict({}))
    before = run_spec("sst5", {"type": "sst", "trainer": {"lr": 0.1}}, {k: v for k, v in trainer.items()
                                                                      if k != "fused_optimizer"}, 1, {})
    section = {"type": "sst", "trainer": {"lr": 0.1, "fused_optimizer": False}}
    assert run_spec("sst5", section, trainer, 1, {}) == before
    fused = asdict(TrainerConfig.from_dict({"fused_optimizer": True}))
    assert run_spec("sst5", {**section, "trainer": {"lr": 0.1, "fused_optimizer": True}}, fused, 1, {}) != before


def _elmoc_task(tmp_path: Path, out: Path, wait: bool = True):
    """`elmoc task` on a small polarity SST run (BCN with dropout, vectors), 1 thread."""
    from tiny_corpus import ELMOC

    from test_sst import SMALL_MODEL

    model = {**SMALL_MODEL, "embedding_dropout": 0.2, "integrator_dropout": 0.2}
    section = {"type": "sst", "format": "polarity", "train": str(tmp_path / "pol.cor"), "model": model,
               "trainer": {"batch_size": 4, "epochs": 8, "lr": 1e-2, "patience": 8}}
    cmd = ELMOC + ["task", "--task", "demo", "--section-json", json.dumps(section), "--variant", "fasttext",
                   "--fasttext", str(tmp_path / "vectors.npy"), "--vocab", str(tmp_path / "vocab.txt"),
                   "--threads", "1", "--output", str(out)]
    env = {**__import__("os").environ, "OMP_NUM_THREADS": "1"}
    env.pop("SLURM_JOB_END_TIME", None)
    env.pop("SLURM_JOB_ID", None)
    import subprocess

    if wait:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)


@pytest.fixture(scope="module")
def polarity_reference(tmp_path_factory):
    """The data of the subprocess runs and the result of one never interrupted."""
    root = tmp_path_factory.mktemp("polarity")
    lines = [f"__label__{'neg' if i % 2 else 'pos'} {'bad awful' if i % 3 else 'good great'} film{i} ."
             for i in range(40)]
    (root / "pol.cor").write_text("\n".join(lines) + "\n")
    write_vectors(root, ["bad", "awful", "good", "great", "."] + [f"film{i}" for i in range(0, 40, 2)])
    r = _elmoc_task(root, root / "straight.json")
    assert r.returncode == 0, r.stderr
    assert not (root / "straight.run/checkpoint.pt").exists()  # removed once the JSON is written
    return root, json.loads((root / "straight.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM", "SIGUSR1"])
def test_elmoc_task_killed_or_stopped_then_rerun_writes_the_same_json(polarity_reference, sig):
    """The real command: signalled once its first checkpoint exists (frozen with SIGSTOP
    between the check and the signal, so it cannot finish first), then rerun."""
    import os
    import signal
    import time

    root, reference = polarity_reference
    out = root / f"{sig}.json"
    ckpt = root / f"{sig}.run/checkpoint.pt"
    proc = _elmoc_task(root, out, wait=False)
    deadline = time.monotonic() + 300
    while not ckpt.exists():
        assert proc.poll() is None, f"ended ({proc.returncode}) before its first checkpoint: {proc.stderr.read()}"
        assert time.monotonic() < deadline, "no checkpoint"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGSTOP)
    os.kill(proc.pid, getattr(signal, sig))
    os.kill(proc.pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=300)
    if sig == "SIGKILL":
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 75, err
        assert f"{sig} received" in err and "Traceback" not in err
        attempts = [json.loads(line) for line in (root / f"{sig}.run/attempts.jsonl").read_text().splitlines()]
        assert [(a["exit"], a["status"]) for a in attempts] == [("stopped", 75)]
    assert ckpt.exists() and not out.exists()
    stopped_at = load_checkpoint(ckpt, formats=(FORMAT,))
    assert 1 <= stopped_at["epoch"] < 8
    r = _elmoc_task(root, out)
    assert r.returncode == 0, r.stderr
    assert "resumed" in r.stderr and not ckpt.exists()
    result = json.loads(out.read_text())
    timing = ("seconds", "cpu_seconds")
    assert {k: v for k, v in result.items() if k not in timing} == \
        {k: v for k, v in reference.items() if k not in timing}
    assert "resumed" in (root / f"{sig}.run/task.log").read_text()  # every attempt's lines are kept


def test_a_run_that_crashes_twice_the_same_way_is_refused_at_once(tmp_path, capsys):
    """attempts.jsonl in the run folder: two crashes with the same error and no checkpoint
    progress, then a third attempt is refused in one line without training."""
    from elmoc.cli import main

    (tmp_path / "pol.cor").write_text("__label__pos good film .\n__label__neg bad film .\n" * 5)
    npy, vocab = write_vectors(tmp_path, ["good", "bad", "film", "."])
    broken = tmp_path / "features.hdf5"
    broken.write_bytes(b"not an hdf5 file")
    section = json.dumps({"type": "sst", "format": "polarity", "train": str(tmp_path / "pol.cor"),
                          "trainer": {"batch_size": 4, "epochs": 1}})
    args = ["task", "--task", "demo", "--section-json", section, "--variant", "x", "--features", str(broken),
            "--fasttext", str(npy), "--vocab", str(vocab), "--output", str(tmp_path / "seed1.json")]
    assert main(args) == 1 and main(args) == 1
    capsys.readouterr()
    assert main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the last two attempts crashed before the first checkpoint with the same error" in err[0]
    attempts = [json.loads(line) for line in (tmp_path / "seed1.run/attempts.jsonl").read_text().splitlines()]
    assert [a["exit"] for a in attempts] == ["crashed", "crashed"]  # the refusal is not an attempt
    assert not (tmp_path / "seed1.json").exists()
