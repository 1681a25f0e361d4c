"""Fine-tuning the bi-LM inside the task models (issue 37): the frozen recipe equals the
feature path, ULMFiT's rates, schedule and unfreezing, full fine-tuning, resume, every task in
fine_tune mode, and the one-line errors of ``elmoc task --lm``."""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch

from elmoc.data.vocab.vocabulary import SPECIALS, Vocabulary
from elmoc.errors import ConfigError
from elmoc.lm import LanguageModel
from elmoc.model_file import save_checkpoint
from elmoc.registry import build
from elmoc.tasks import runner
from elmoc.tasks.checkpoint import TaskCheckpoint, run_spec
from elmoc.tasks.embedder import TaskInputs
from elmoc.tasks.fine_tune import BERT_LM_LR, FineTuneSettings, LMInputs, linear_warmup_decay, slanted_triangular
from elmoc.tasks.runner import RunInterrupted, TrainerConfig, run_task

sys.path.insert(0, str(Path(__file__).parent))
from test_resume import TASKS, StopAt  # noqa: E402

WORDS = "The film rocks It is awful Meh . A man sleeps person runs dog barks Something".split()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A tiny exported bi-LM (``elmoc export``): trainable random input table (layer 0 has
    parameters), a 2-layer ELMo LSTM with an input projection."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "pretrained"))
    from lm_tree_helpers import run_command

    root = tmp_path_factory.mktemp("lm")
    vocab = Vocabulary(list(SPECIALS) + sorted(set(WORDS)))
    vocab.save(root / "vocab.txt")
    spec = {"name": "tiny", "input": {"type": "random", "dim": 8, "seed": 3, "trainable": True},
            "encoder": {"type": "elmo_lstm", "num_layers": 2, "cell_size": 10, "projection_size": 6,
                        "recurrent_dropout": 0.1},
            "output": {"type": "sampled", "num_samples": 4}, "vocab": str(root / "vocab.txt")}
    for seed, direction in enumerate(("forward", "backward")):
        torch.manual_seed(seed)
        save_checkpoint(root / f"{direction}.pt", {
            "spec": spec, "vocab_path": spec["vocab"], "direction": direction,
            "model": LanguageModel.from_spec(spec, vocab).state_dict(), "step": 1, "tokens": 5, "final": True})
    assert run_command("export", ["--forward", str(root / "forward.pt"), "--backward", str(root / "backward.pt"),
                                  "--output-dir", str(root / "model")]) == 0
    return root / "model"


def _setup(name, tmp_path, model_dir, recipe="ulmfit", trainer=None, **options):
    section, trainer_values = TASKS[name](tmp_path)
    task = build("task", section)
    data = {split: task.read(split) for split in ("train", "dev", "test")}
    sentences = [s for split in data.values() for s in task.sentences(split)]
    settings = FineTuneSettings.from_section({"recipe": recipe, **options})
    inputs = LMInputs.create(sentences, model_dir, settings, lowercase=task.lowercase_words)
    config = TrainerConfig.from_dict({"epochs": 3, "patience": 3, "eval_batch_size": 2, "lr": 0.01,
                                      "checkpoint_minutes": 0, **trainer_values, **(trainer or {})},
                                     task.default_trainer)
    return task, data, sentences, inputs, config


def _trainer(task, inputs, config, data):
    return runner.TaskTrainer(task, inputs, 7, config, data, "cpu", None, None, None)


def _lm_params(trainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.tuner.embedder.lm.named_parameters()}


@pytest.mark.parametrize("name", ["sst5", "snli"])
def test_frozen_recipe_equals_features_extracted_from_the_same_model_directory(name, tmp_path, model_dir):
    from elmoc.features.store import write_features
    from elmoc.pretrained.loader import load_bilm

    task, data, sentences, lm_inputs, config = _setup(name, tmp_path, model_dir, "frozen")
    unique = list({" ".join(s): list(s) for s in sentences}.values())
    write_features(load_bilm(model_dir), unique, tmp_path / "f.hdf5")
    features = TaskInputs.create(sentences, features=tmp_path / "f.hdf5", lowercase=task.lowercase_words)
    layers = lm_inputs.embedder().train().lm_layers(unique)  # (layers, batch, words, dim), the LM frozen
    for i, s in enumerate(unique):
        np.testing.assert_allclose(layers[:, i, : len(s)].numpy(), features.store.get(s), atol=1e-5)
    a = run_task(task, features, 7, config, data)
    b = run_task(task, lm_inputs, 7, config, data)
    assert (a["dev"], a["test"], a["best_epoch"]) == (b["dev"], b["test"], b["best_epoch"])
    for x, y in zip(a["history"], b["history"]):
        assert x["train_loss"] == pytest.approx(y["train_loss"], rel=1e-5, abs=1e-6)
        assert x["dev"] == y["dev"]


def test_ulmfit_rates_per_layer_and_the_slanted_triangular_shape(tmp_path, model_dir):
    task, data, _, inputs, config = _setup("sst5", tmp_path, model_dir, lm_lr=0.02)
    t = _trainer(task, inputs, config, data)
    top = t.tuner.embedder.top_layer
    assert top == 2
    base = t.slanted.base_lrs
    assert base[0] == pytest.approx(0.01)  # the head at trainer.lr
    assert base[1:] == pytest.approx([0.02 / 2.6 ** (top - layer) for layer in range(top + 1)])
    assert [len(g["params"]) for g in t.optimizer.param_groups[1:]] == [9, 12, 12]  # shared table + input proj/norm of 2 directions; cells
    # the first step runs at 1/ratio of each peak
    assert [g["lr"] for g in t.optimizer.param_groups] == pytest.approx([b / 32 for b in base])
    total = 100
    curve = [slanted_triangular(s, total, 0.1, 32) for s in range(total + 1)]
    assert curve[0] == pytest.approx(1 / 32) and max(curve) == curve[10] == 1.0
    assert curve[100] == pytest.approx(1 / 32)
    assert all(a < b for a, b in zip(curve[:10], curve[1:11])) and all(a > b for a, b in zip(curve[10:], curve[11:]))
    task, data, _, inputs, config = _setup("sst5", tmp_path, model_dir, "full_constant", lm_lr=0.02)
    full = _trainer(task, inputs, config, data)
    assert full.slanted is None and [g["lr"] for g in full.optimizer.param_groups[1:]] == [0.02] * 3


def test_full_is_berts_recipe_small_lm_rate_linear_warmup_then_decay_to_zero(tmp_path, model_dir):
    task, data, _, inputs, config = _setup("sst5", tmp_path, model_dir, "full")
    t = _trainer(task, inputs, config, data)
    assert t.slanted.base_lrs == pytest.approx([0.01] + [BERT_LM_LR] * 3)  # head at trainer.lr, LM at BERT's
    assert BERT_LM_LR in (5e-5, 3e-5, 2e-5)
    steps = []
    for _ in range(len(data["train"]) * config.epochs):  # more than the run's steps: the rate stays 0 at the end
        steps.append(t.optimizer.param_groups[1]["lr"])
        t.optimizer.step()
        t.slanted.step()
    total = config.epochs * -(-len(data["train"]) // config.batch_size)
    curve = [linear_warmup_decay(s, total, 0.1) for s in range(total + 1)]
    warmup = max(1, int(total * 0.1))
    assert curve[warmup - 1] == 1.0 and curve[total] == 0.0 and curve[0] == pytest.approx(1 / warmup)
    assert all(a <= b for a, b in zip(curve[:warmup], curve[1:warmup])) and all(
        a > b for a, b in zip(curve[warmup - 1:], curve[warmup:]))
    assert steps[:total] == pytest.approx([BERT_LM_LR * c for c in curve[:total]])


def _changed_layers_per_epoch(t, epochs: int) -> list[set[int]]:
    layer_of, changed = t.tuner.embedder.layer_of, []
    for epoch in range(epochs):
        before = _lm_params(t)
        t.train_epoch()
        after = _lm_params(t)
        changed.append({layer_of[n] for n in before if not torch.equal(before[n], after[n])})
        t.end_epoch()
    return changed


def test_gradual_unfreezing_trains_the_head_alone_in_epoch_one(tmp_path, model_dir):
    """ULMFiT section 3.3: the last layer (the task head) first, then one LM layer more per epoch."""
    task, data, _, inputs, config = _setup("sst5", tmp_path, model_dir)
    t = _trainer(task, inputs, config, data)
    head = {n: p.detach().clone() for n, p in t.model.named_parameters() if not n.startswith("embedder.lm.")}
    assert _changed_layers_per_epoch(t, 3) == [set(), {2}, {1, 2}]
    assert any(not torch.equal(p, dict(t.model.named_parameters())[n]) for n, p in head.items())


def test_gradual_unfreezing_from_the_top_layer_is_the_former_order(tmp_path, model_dir):
    task, data, _, inputs, config = _setup("sst5", tmp_path, model_dir, first_unfrozen="top_layer")
    t = _trainer(task, inputs, config, data)
    assert _changed_layers_per_epoch(t, 2) == [{2}, {1, 2}]


def test_a_bad_first_unfrozen_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"first_unfrozen must be one of head, top_layer, got 'top'"):
        FineTuneSettings.from_section({"recipe": "ulmfit", "first_unfrozen": "top"})


def test_full_fine_tuning_changes_every_lm_layer_and_leaves_the_inputs_lm_alone(tmp_path, model_dir):
    task, data, _, inputs, config = _setup("sst5", tmp_path, model_dir, "full")
    t = _trainer(task, inputs, config, data)
    layer_of = t.tuner.embedder.layer_of
    before = _lm_params(t)
    t.train_epoch()
    after = _lm_params(t)
    for layer in range(3):
        names = [n for n in before if layer_of[n] == layer]
        assert any(not torch.equal(before[n], after[n]) for n in names), layer
    original = dict(inputs.lm.named_parameters())
    assert all(torch.equal(original[n], before[n]) for n in before)  # the embedder trains its own copy


def test_a_stopped_fine_tuning_run_resumes_to_the_uninterrupted_result(tmp_path, model_dir):
    task, data, _, inputs, config = _setup("sst5", tmp_path, model_dir, lm_dropout=0.2)
    spec = run_spec("sst5", {}, asdict(config), 7, {})
    stop = StopAt()
    straight = run_task(task, inputs, 7, config, data, checkpoint=TaskCheckpoint(tmp_path / "a/c.pt", spec),
                        stop=stop)
    ckpt = TaskCheckpoint(tmp_path / "b/c.pt", spec)
    per_epoch = stop.seen["train"] // len(straight["history"])
    with pytest.raises(RunInterrupted):  # in the middle of epoch 2 (two layers unfrozen, schedule under way)
        run_task(task, inputs, 7, config, data, checkpoint=ckpt, stop=StopAt("train", per_epoch + 1))
    resumed = run_task(task, inputs, 7, config, data, checkpoint=ckpt, stop=StopAt())
    strip = lambda r: {k: v for k, v in r.items() if k != "seconds"}  # noqa: E731
    assert strip(resumed) == strip(straight)


@pytest.mark.parametrize("name", list(TASKS))
def test_every_task_builds_and_steps_in_fine_tune_mode(name, tmp_path, model_dir):
    task, data, _, inputs, config = _setup(name, tmp_path, model_dir, "full")
    t = _trainer(task, inputs, config, data)
    before = _lm_params(t)
    loss = t.train_step([0])
    assert np.isfinite(loss)
    after = _lm_params(t)
    assert any(not torch.equal(before[n], after[n]) for n in before)
    # a features-mode model's weights load into it with only the LM's keys missing
    missing = set(t.model.state_dict()) - set(task.build_model(_features_like(inputs)).state_dict())
    assert missing and all(".lm." in k or k.startswith("lm.") for k in missing)


def _features_like(inputs: LMInputs) -> TaskInputs:
    """Inputs of the same widths as ``inputs`` with features from a (fake) store."""

    class Store:
        num_layers, dim = inputs.num_lm_layers, inputs.feature_dim

    return TaskInputs(None, None, Store())


def test_checkpointing_and_bf16_keep_the_step(tmp_path, model_dir):
    task, data, _, inputs, config = _setup("sst5", tmp_path, model_dir, "full")
    plain = _trainer(task, inputs, config, data)
    plain.train_step([0, 1])
    _, _, _, ck_inputs, _ = _setup("sst5", tmp_path, model_dir, "full", checkpointing=True)
    ck = _trainer(task, ck_inputs, config, data)
    ck.train_step([0, 1])
    for (n, a), b in zip(plain.model.named_parameters(), ck.model.parameters()):
        torch.testing.assert_close(a, b, msg=n)
    _, _, _, bf_inputs, _ = _setup("sst5", tmp_path, model_dir, "full", precision="bf16")
    bf = _trainer(task, bf_inputs, config, data)
    assert np.isfinite(bf.train_step([0, 1]))


@pytest.mark.parametrize("options, message", [
    ({"recipe": "bert"}, "fine_tune.recipe must be one of frozen, full, full_constant, ulmfit, got 'bert'"),
    ({"recipe": "ulmfitt"}, "got 'ulmfitt' (did you mean 'ulmfit'?)"),
    ({"recipe": "full", "warmup_frac": 1.0}, "fine_tune.warmup_frac must be in"),
    ({"warmup_frac": 0.2}, "fine_tune.warmup_frac is an option of recipe 'full', not of 'ulmfit'"),
    ({"recipe": "full", "slanted": "yes"}, "fine_tune.slanted is an option of recipe 'ulmfit'"),
    ({"slanted": "yes"}, "fine_tune.slanted must be bool"),
    ({"decay_": 2}, "did you mean"),
    ({"decay": 0}, "fine_tune.decay: 0 must be a number > 0"),
    ({"cut_frac": 1.5}, "fine_tune.cut_frac must be in (0, 1)"),
    ({"precision": "fp16"}, "fine_tune.precision must be one of fp32, bf16"),
    ({"lm_dropout": 1.0}, "fine_tune.lm_dropout: 1.0 must be a number in [0, 1)"),
])
def test_bad_settings_are_one_line(options, message):
    with pytest.raises(ConfigError, match=None) as e:
        FineTuneSettings.from_section(options)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_task_command_errors_are_one_line(tmp_path, model_dir, capsys):
    sys.path.insert(0, str(Path(__file__).parents[1] / "pretrained"))
    from lm_tree_helpers import run_command

    section, _ = TASKS["sst5"](tmp_path)
    out = str(tmp_path / "r.json")

    def task(extra: dict, *argv: str) -> str:
        code = run_command("task", ["--task", "sst5", "--variant", "tiny", "--output", out,
                                    "--section-json", json.dumps({**section, **extra}), *argv])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 1 and len(err) == 1, err
        return err[0]

    ft = {"encoder": "fine_tune"}
    assert "tasks.sst5.encoder is fine_tune: give --lm DIR" in task(ft)
    assert "--features with tasks.sst5.encoder: fine_tune" in task(ft, "--lm", str(model_dir), "--features", "f.h5")
    assert "model directory not found" in task(ft, "--lm", str(tmp_path / "nothing"))
    assert "elmoc-model.json: missing" in task(ft, "--lm", str(tmp_path))
    assert "--lm is read only when tasks.sst5.encoder is fine_tune" in task({}, "--lm", str(model_dir))
    assert "tasks.sst5.encoder must be one of features, fine_tune" in task({"encoder": "tuned"}, "--lm", "x")


def test_task_command_writes_encoder_and_recipe(tmp_path, model_dir):
    sys.path.insert(0, str(Path(__file__).parents[1] / "pretrained"))
    from lm_tree_helpers import run_command

    section, _ = TASKS["sst5"](tmp_path)
    section = {**section, "encoder": "fine_tune", "fine_tune": {"recipe": "full"},
               "trainer": {"epochs": 1, "batch_size": 3}}
    out = tmp_path / "r.json"
    assert run_command("task", ["--task", "sst5", "--variant", "tiny", "--output", str(out), "--lm", str(model_dir),
                                "--section-json", json.dumps(section)]) == 0
    record = json.loads(out.read_text())
    assert (record["encoder"], record["recipe"], record["status"]) == ("fine_tune", "full", "ok")
    assert record["inputs"]["lm"] == str(model_dir)


def test_layers_of_a_transformer_stack_input_blocks_and_final_norm():
    from elmoc.features.bilm import BiLM, FeatureLM
    from elmoc.tasks.fine_tune import lm_layer_of

    vocab = Vocabulary(list(SPECIALS) + ["a"])
    inp = build("input", {"type": "random", "dim": 6, "seed": 1, "trainable": True}, vocab=vocab)
    encoder = build("encoder", {"type": "transformer", "d_model": 8, "heads": 2, "d_ff": 8, "num_layers": 2},
                    input_dim=6)
    layers = lm_layer_of(BiLM(FeatureLM(inp, encoder, vocab), None, vocab))
    by_part = {}
    for name, layer in layers.items():
        by_part.setdefault(".".join(name.split(".")[1:4]), set()).add(layer)
    assert by_part["input_layer.table"] == {0} and by_part["encoder.input_projection.weight"] == {0}
    assert by_part["encoder.blocks.0"] == {1} and by_part["encoder.blocks.1"] == {2}
    assert by_part["encoder.final_norm.weight"] == {2}  # after the blocks: the top layer's


def test_bf16_on_a_device_without_it_runs_fp32_and_says_so(tmp_path, model_dir, monkeypatch, caplog):
    """A GPU before Ampere has no bf16 autocast: the LM runs in fp32 (the same layers as an fp32
    run) and one warning says so."""
    from elmoc.tasks import fine_tune

    _, _, sentences, fp32_inputs, _ = _setup("sst5", tmp_path, model_dir, "full")
    _, _, _, inputs, _ = _setup("sst5", tmp_path, model_dir, "full", precision="bf16")
    monkeypatch.setattr(fine_tune, "bf16_ok", lambda device: False)
    embedder, reference = inputs.embedder(), fp32_inputs.embedder()
    with caplog.at_level("WARNING", logger="elmoc.tasks.fine_tune"):
        first = embedder.lm_layers(sentences[:2])
        embedder.lm_layers(sentences[:2])
    assert first.dtype == torch.float32
    torch.testing.assert_close(first, reference.lm_layers(sentences[:2]), rtol=0, atol=0)
    said = [r for r in caplog.records if "no bf16 autocast" in r.getMessage()]
    assert len(said) == 1
