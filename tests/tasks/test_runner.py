"""The runner: device handling (every tensor of a batch follows the run's device), optimizers,
learning-rate decay, the deterministic mode and trainer option errors."""
from __future__ import annotations

import os

import pytest
import torch

from elmoc.tasks.embedder import TextBatch
from elmoc.tasks.runner import to_device


def test_to_device_reaches_every_tensor_of_a_batch():
    mask = torch.ones(2, 3, dtype=torch.bool)
    text = TextBatch([["a", "b", "c"], ["d", "e", "f"]], mask, torch.zeros(2, 3, dtype=torch.long), torch.zeros(4, 2, 3, 5))
    batch = {"text": text, "label": torch.tensor([0, 1]), "gold_tags": [["O"] * 3] * 2,
             "docs": [{"text": text, "speaker_ids": torch.zeros(6, dtype=torch.long), "genre": 3,
                       "clusters": [[(0, 1), (2, 2)]]}]}
    moved = to_device(batch, torch.device("meta"))  # "meta": a device other than the CPU, on any machine
    assert moved["label"].device.type == "meta"
    for t in (moved["text"], moved["docs"][0]["text"]):
        assert isinstance(t, TextBatch) and t.tokens == text.tokens
        assert t.mask.is_meta and t.word_ids.is_meta and t.features.is_meta and t.features.shape == (4, 2, 3, 5)
    assert moved["docs"][0]["speaker_ids"].is_meta and moved["docs"][0]["genre"] == 3
    assert moved["docs"][0]["clusters"] == [[(0, 1), (2, 2)]] and moved["gold_tags"] == batch["gold_tags"]
    assert text.mask.device.type == "cpu"  # the original batch is left as it was
    cpu = to_device(batch, torch.device("cpu"))
    assert cpu["label"] is batch["label"]  # .to() of a tensor already there is the tensor itself


TINY_CONLL = """\
#begin document (nw/x); part 000
nw/x 0 0 John  NNP (TOP(S(NP*) - - - - * (ARG0*) -
nw/x 0 1 said  VBD (VP*        say 01 - - * (V*) -
nw/x 0 2 hi    UH  *)))        - - - - * (ARG1*) -

nw/x 0 0 Mary  NNP (TOP(S(NP*) - - - - * (ARG0*) -
nw/x 0 1 slept VBD (VP*)))     sleep 01 - - * (V*) -
#end document
"""
SMALL_SRL = {"hidden_dim": 8, "num_layers": 1, "recurrent_dropout": 0.0, "predicate_dim": 4, "feature_dropout": 0.0}


def _srl(tmp_path):
    from elmoc.registry import build

    path = tmp_path / "tiny.gold_conll"
    path.write_text(TINY_CONLL, encoding="utf-8")
    return build("task", {"type": "srl", "train": str(path), "dev": str(path), "test": str(path), "model": SMALL_SRL})


def _spy_optimizer(monkeypatch, seen: dict):
    from elmoc.tasks import runner

    real = runner.task_optimizer

    def spy(params, trainer):
        seen["optimizer"] = real(params, trainer)
        seen["deterministic"] = torch.are_deterministic_algorithms_enabled()
        seen["cudnn"] = torch.backends.cudnn.deterministic
        seen["cublas"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
        return seen["optimizer"]

    monkeypatch.setattr(runner, "task_optimizer", spy)


def test_step_decay_of_the_learning_rate(tmp_path, random_inputs, monkeypatch):
    """coref's e2e-coref schedule: lr x 0.999 every 100 steps; here x 0.5 every 2 steps."""
    from elmoc.tasks.runner import TrainerConfig, run_task

    task = _srl(tmp_path)
    seen: dict = {}
    _spy_optimizer(monkeypatch, seen)
    trainer = TrainerConfig.from_dict({"optimizer": "adam", "lr": 0.08, "lr_decay": 0.5, "lr_decay_steps": 2,
                                       "epochs": 2, "patience": 5, "batch_size": 1}, task.default_trainer)
    run_task(task, random_inputs(task, task.read("train")), seed=1, trainer=trainer)
    # 2 epochs x 2 predicates = 4 steps -> two decays
    assert seen["optimizer"].param_groups[0]["lr"] == pytest.approx(0.08 * 0.5 ** 2)
    from elmoc.tasks.coref import CorefTask

    coref = TrainerConfig.from_dict({}, CorefTask.default_trainer)
    assert (coref.optimizer, coref.lr, coref.lr_decay, coref.lr_decay_steps) == ("adam", 1e-3, 0.999, 100)


def test_deterministic_option_is_applied_and_restored(tmp_path, random_inputs, monkeypatch):
    from elmoc.tasks.runner import TrainerConfig, run_task

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    task = _srl(tmp_path)
    inputs = random_inputs(task, task.read("train"))
    seen: dict = {}
    _spy_optimizer(monkeypatch, seen)
    run_task(task, inputs, seed=1, trainer=TrainerConfig.from_dict({"epochs": 1}, task.default_trainer))
    assert seen["deterministic"] is False and seen["cublas"] is None  # off by default
    run_task(task, inputs, seed=1, trainer=TrainerConfig.from_dict({"epochs": 1, "deterministic": True},
                                                                   task.default_trainer))
    assert seen["deterministic"] is True and seen["cudnn"] is True and seen["cublas"] == ":4096:8"
    assert not torch.are_deterministic_algorithms_enabled()  # the process setting is given back


@pytest.mark.parametrize("options, message", [
    ({"optimizer": "sgd"}, "trainer.optimizer must be one of adam, adadelta"),
    ({"rho": 1.5}, "trainer.rho"),
    ({"lr_decay": 2.0}, "trainer.lr_decay"),
    ({"lr_decay_steps": 0}, "trainer.lr_decay_steps"),
    ({"deterministic": "yes"}, "trainer.deterministic"),
])
def test_bad_trainer_options(options, message):
    from elmoc.errors import ConfigError
    from elmoc.tasks.runner import TrainerConfig

    with pytest.raises(ConfigError, match=message):
        TrainerConfig.from_dict(options)


def test_paper_config_trainers_are_the_task_defaults(repo_root):
    """config/paper.yaml writes each task's paper trainer out; it must equal the class defaults."""
    import dataclasses

    import yaml

    from elmoc.registry import build
    from elmoc.tasks.runner import TrainerConfig

    tasks = yaml.safe_load((repo_root / "config" / "paper.yaml").read_text(encoding="utf-8"))["tasks"]
    optimizers = {}
    for name in ("snli", "coref", "sst5", "ner", "srl"):
        section = tasks[name]
        task = build("task", {k: v for k, v in section.items() if k != "trainer"})
        written = TrainerConfig.from_dict(section["trainer"], task.default_trainer)
        # paper.yaml's one setting beyond the paper: Adam's fused update, a speed setting (every Adam task)
        speed = {"fused_optimizer": written.optimizer == "adam"}
        assert written == dataclasses.replace(TrainerConfig.from_dict({}, task.default_trainer), **speed), name
        assert written == TrainerConfig.from_dict(section["trainer"]), name  # complete without the defaults
        optimizers[name] = written.optimizer
    assert optimizers == {"snli": "adam", "coref": "adam", "sst5": "adam", "ner": "adam", "srl": "adadelta"}


@pytest.mark.gpu
def test_deterministic_mode_on_a_gpu_runs_and_repeats(tmp_path, random_inputs, monkeypatch):
    """On CUDA, `trainer.deterministic: true` finds a deterministic kernel for every operation of a task
    run (torch stops at the first one without) and two runs give the same scores and history."""
    from elmoc.tasks.runner import TrainerConfig, run_task

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    task = _srl(tmp_path)
    inputs = random_inputs(task, task.read("train"))
    trainer = TrainerConfig.from_dict({"epochs": 2, "deterministic": True}, task.default_trainer)
    first, second = (run_task(task, inputs, seed=1, trainer=trainer, device="cuda") for _ in range(2))
    assert first["device"].startswith("cuda")
    assert (first["dev"], first["test"], first["history"]) == (second["dev"], second["test"], second["history"])
