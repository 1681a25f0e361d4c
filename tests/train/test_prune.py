"""`elmoc prune`: magnitude masks, structured shrinking, the lottery ticket and resume (tiny LM)."""
import copy
import json
import logging

import numpy as np
import pytest
import torch

from elmoc.config_section import Section
from elmoc.errors import ConfigError, InputFileError
from elmoc.lm import LanguageModel
from elmoc.model_file import load_checkpoint
from elmoc.nn.pruning import MaskConstraint, magnitude_mask, magnitude_masks
from elmoc.train.hooks.base import StartFrom
from elmoc.train import loop
from elmoc.train.loop import seed_everything, train
from elmoc.train.prune_loop import (
    MASK, PruneSettings, encoder_matrices, load_masks, prune, ticket_hooks,
)
from elmoc.train.structured import shrink, unit_count


def settings(**kw):
    return PruneSettings.from_section(Section(kw, "prune", PruneSettings.KEYS))


@pytest.fixture
def trained(tiny_lm, tmp_path):
    """(vocab, spec, make_batches, make_heldout, model.pt) of the tiny LM trained 12 steps with
    its initialisation kept (train.rewind_step: 0) and a checkpoint every 2 steps; one
    direction (train.directions: forward), so that one file exports."""
    vocab, spec, make_batches, make_heldout = tiny_lm
    spec = copy.deepcopy(spec)
    spec["train"].update(max_steps=12, checkpoint_every=2, rewind_step=0, directions="forward")
    vocab.save(tmp_path / "vocab.txt")
    train(spec, vocab, tmp_path / "lm", make_batches, make_heldout, vocab_path=str(tmp_path / "vocab.txt"))
    return vocab, spec, make_batches, make_heldout, tmp_path / "lm" / "model.pt"


def test_magnitude_mask_keeps_the_largest_within_the_previous_mask():
    w = torch.tensor([[0.1, -5.0, 0.3], [2.0, -0.2, 4.0]])
    half = magnitude_mask(w, 0.5)
    assert half.tolist() == [[False, True, False], [True, False, True]]
    within = magnitude_mask(w, 5 / 6, torch.tensor([[True, False, True], [True, True, True]]))
    assert within.tolist() == [[False, False, False], [False, False, True]]  # -5.0 was already gone
    masks = magnitude_masks({"a": w, "b": torch.arange(8.0).view(2, 4)}, 0.75)
    assert [int(m.sum()) for m in masks.values()] == [2, 2]  # layer-wise: each matrix loses 75 %
    with pytest.raises(ValueError, match="sparsity"):
        magnitude_mask(w, 1.0)


def test_masks_stay_applied_while_finetuning_and_in_the_exported_directory(trained, tmp_path):
    from elmoc.pretrained.loader import load_bilm
    from elmoc.pretrained.writer import export_model

    vocab, spec, make_batches, make_heldout, model_pt = trained
    prune(model_pt, tmp_path / "pruned", settings(levels=[0.5, 0.8], finetune_steps=4), vocab, make_batches,
          make_heldout, vocab_path=str(tmp_path / "vocab.txt"))
    first, second = load_masks(tmp_path / "pruned/round1" / MASK), load_masks(tmp_path / "pruned/round2" / MASK)
    assert set(first) == set(encoder_matrices(LanguageModel.from_spec(spec, vocab)))
    for name, mask in second.items():
        assert not (mask & ~first[name]).any()  # a pruned weight never comes back
        assert abs(1 - mask.float().mean().item() - 0.8) < 0.02
    final = load_checkpoint(tmp_path / "pruned/round2/model.pt")
    assert final["step"] == 4
    moved = 0
    for name, mask in second.items():
        assert (final["model"][name][~mask] == 0).all()
        moved += int((final["model"][name][mask] != load_checkpoint(model_pt)["model"][name][mask]).sum())
    assert moved  # fine-tuning changed the survivors
    # an ordinary model directory, its stack's weights the pruned ones
    export_model(tmp_path / "pruned/round2/model.pt", None, tmp_path / "export")
    bilm = load_bilm(tmp_path / "export")
    exported = dict(bilm.forward_lm.named_parameters())
    for name, mask in second.items():
        assert (exported[name][~mask] == 0).all()
    summary = json.loads((tmp_path / "pruned/prune.json").read_text())
    assert [r["run"] for r in summary["runs"]] == ["round1", "round2"]
    assert summary["runs"][1]["nonzero"] < summary["runs"][0]["nonzero"] < summary["original"]["nonzero"]


def test_rewind_weights_are_the_initialisation_and_the_ticket_starts_from_them_under_its_mask(trained):
    vocab, spec, _, _, model_pt = trained
    source = load_checkpoint(model_pt)
    seed_everything(spec["train"]["seed"])
    initial = LanguageModel.from_spec(spec, vocab).state_dict()
    assert source["rewind"]["step"] == 0
    assert all(torch.equal(initial[k], v) for k, v in source["rewind"]["model"].items())
    assert not torch.equal(source["model"]["encoder.lstm_layers.0.state_projection.weight"],
                           initial["encoder.lstm_layers.0.state_projection.weight"])
    model = LanguageModel.from_spec(spec, vocab)
    masks = magnitude_masks(encoder_matrices(model), 0.7)
    runs = ticket_hooks(source, masks, vocab, "forward", 1000, model_pt)
    for hook in runs["ticket"]:
        hook.start(model)
    for name, value in model.state_dict().items():
        expected = initial[name] * masks[name] if name in masks else initial[name]
        assert torch.equal(value, expected), name
    for hook in runs["control"]:
        hook.start(model)
    weight = "encoder.lstm_layers.1.input_linearity.weight"
    assert (model.state_dict()[weight][~masks[weight]] == 0).all()
    assert not torch.equal(model.state_dict()[weight], initial[weight] * masks[weight])  # another init


def test_a_killed_prune_and_ticket_run_resumes_bit_exact(trained, tmp_path, monkeypatch, caplog):
    vocab, spec, make_batches, make_heldout, model_pt = trained
    plan = settings(levels=[0.5, 0.75], finetune_steps=4, ticket=True, ticket_steps=4,
                    ticket_procedure="finetune_rounds_then_rewind_once")
    kwargs = dict(vocab_path=str(tmp_path / "vocab.txt"))
    prune(model_pt, tmp_path / "straight", plan, vocab, make_batches, make_heldout, **kwargs)

    real, calls = loop.Trainer.take_step, []

    def dies_at_the_11th_step(self, *a):  # round2 step 3 (after its step-2 checkpoint)
        calls.append(1)
        if len(calls) == 7:
            raise RuntimeError("killed")
        return real(self, *a)

    monkeypatch.setattr(loop.Trainer, "take_step", dies_at_the_11th_step)
    with pytest.raises(RuntimeError, match="killed"):
        prune(model_pt, tmp_path / "resumed", plan, vocab, make_batches, make_heldout, **kwargs)
    assert load_checkpoint(tmp_path / "resumed/round2/checkpoint.pt")["step"] == 2
    monkeypatch.setattr(loop.Trainer, "take_step", real)
    with caplog.at_level(logging.INFO, logger="elmoc.train.loop"):
        prune(model_pt, tmp_path / "resumed", plan, vocab, make_batches, make_heldout, **kwargs)
    resumed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("resumed ")]
    assert len(resumed) == 1 and "round2" in resumed[0] and "from step 2 " in resumed[0]  # not restarted
    for run in ("round1", "round2", "ticket", "control"):
        a, b = (load_checkpoint(tmp_path / d / run / "model.pt") for d in ("straight", "resumed"))
        assert a["model"].keys() == b["model"].keys()
        assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"]), run
        assert a["history"][-1]["value"] == b["history"][-1]["value"]
    rows = [json.loads((tmp_path / d / "prune.json").read_text())["runs"] for d in ("straight", "resumed")]
    assert rows[0] == rows[1]


def test_the_ticket_rewinds_every_round_and_each_level_has_its_control(trained, tmp_path):
    """Frankle & Carbin 2019: round r's mask comes from round r-1's *retrained ticket* and its
    survivors restart from the LM's step-0 weights; a control (fresh init, same mask) per level."""
    vocab, spec, make_batches, make_heldout, model_pt = trained
    prune(model_pt, tmp_path / "imp", settings(levels=[0.5, 0.75], ticket=True, ticket_steps=3), vocab,
          make_batches, make_heldout, vocab_path=str(tmp_path / "vocab.txt"))
    out, source = tmp_path / "imp", load_checkpoint(model_pt)
    first, second = load_masks(out / "round1" / MASK), load_masks(out / "round2" / MASK)
    round1 = LanguageModel.from_spec(spec, vocab)
    round1.load_state_dict(load_checkpoint(out / "round1/model.pt")["model"])
    expected = magnitude_masks(encoder_matrices(round1), 0.75, first)  # from the retrained ticket, within mask 1
    assert all(torch.equal(second[k], expected[k]) for k in second)
    # round 2 is the mask on the rewound weights trained 3 steps: the same run by hand is bit-identical
    by_hand = copy.deepcopy(spec)
    by_hand["train"]["max_steps"] = 3
    by_hand["train"].pop("rewind_step")
    train(by_hand, vocab, tmp_path / "by_hand", make_batches, make_heldout, vocab_path=str(tmp_path / "vocab.txt"),
          hooks=[StartFrom(source["rewind"]["model"]), MaskConstraint(second)])
    a, b = load_checkpoint(out / "round2/model.pt")["model"], load_checkpoint(tmp_path / "by_hand/model.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    rows = {r["run"]: r for r in json.loads((out / "prune.json").read_text())["runs"]}
    assert list(rows) == ["round1", "control1", "round2", "control2"]
    assert rows["round2"]["nonzero"] == rows["control2"]["nonzero"] < rows["control1"]["nonzero"]
    kept = sum(int(m.sum()) for m in second.values())  # the encoder's weights alone, not the output layer's
    assert rows["round2"]["encoder_nonzero"] == kept < rows["round2"]["nonzero"]
    assert rows["round2"]["encoder_weights"] == sum(m.numel() for m in second.values())
    control = load_checkpoint(out / "control2/model.pt")["model"]
    assert not torch.equal(control[next(iter(second))], a[next(iter(second))])  # another start
    assert (out / "ticket").resolve() == (out / "round2").resolve()
    assert (out / "control").resolve() == (out / "control2").resolve()


def test_late_rewinding_continues_the_schedule_from_step_k(tiny_lm, tmp_path):
    """Frankle et al. 2020: rewound to step k, the ticket trains T - k steps at the LR the LM had
    at those steps (no warmup again)."""
    vocab, spec, make_batches, make_heldout = tiny_lm
    spec = copy.deepcopy(spec)
    spec["optimizer"] = {"type": "scheduled_adam", "warmup": 6}
    spec["train"].update(max_steps=10, rewind_step=4, log_every=1, directions="forward")
    train(spec, vocab, tmp_path / "lm", make_batches, make_heldout)
    prune(tmp_path / "lm/model.pt", tmp_path / "late", settings(levels=[0.5], ticket=True), vocab, make_batches,
          make_heldout)

    def lrs(path):
        return {r["step"]: r["lr"] for r in map(json.loads, path.read_text().splitlines()) if r.get("event") == "train"}

    lm, ticket = lrs(tmp_path / "lm/train_log.jsonl"), lrs(tmp_path / "late/round1/train_log.jsonl")
    assert sorted(ticket) == list(range(5, 11))  # T - k = 6 steps, steps 5 .. 10
    assert all(ticket[s] == lm[s] for s in ticket)
    assert load_checkpoint(tmp_path / "late/control1/model.pt")["step"] == 10


def test_structured_pruning_removes_the_weakest_cells_and_the_model_shrinks(trained, tmp_path, monkeypatch):
    vocab, spec, make_batches, make_heldout, model_pt = trained
    model = LanguageModel.from_spec(spec, vocab)
    model.load_state_dict(load_checkpoint(model_pt)["model"])
    assert unit_count(model) == ("cell_size", 16)
    with torch.no_grad():  # cell 5 of layer 0 feeds nothing: it goes first
        model.encoder.lstm_layers[0].state_projection.weight[:, 5] = 0
    spec_all, state_all = shrink(model, spec, 16)
    assert all(torch.equal(state_all[k], v) for k, v in model.state_dict().items())  # all kept: unchanged
    small_spec, state = shrink(model, spec, 15)
    assert small_spec["encoder"]["cell_size"] == 15 and spec["encoder"]["cell_size"] == 16
    w = model.encoder.lstm_layers[0].input_linearity.weight
    kept = [j for j in range(16) if j != 5]
    rows = [g * 16 + j for g in range(4) for j in kept]
    assert torch.equal(state["encoder.lstm_layers.0.input_linearity.weight"], w[rows])
    small = LanguageModel.from_spec(small_spec, vocab)
    small.load_state_dict(state)
    assert small.num_trainable_parameters() < model.num_trainable_parameters()
    # the structured run: an ordinary, smaller LM after fine-tuning
    prune(model_pt, tmp_path / "cells", settings(method="structured", levels=[0.25, 0.5], finetune_steps=3),
          vocab, make_batches, make_heldout, vocab_path=str(tmp_path / "vocab.txt"))
    final = load_checkpoint(tmp_path / "cells/round2/model.pt")
    assert final["spec"]["encoder"]["cell_size"] == 8
    assert final["model"]["encoder.lstm_layers.1.state_projection.weight"].shape == (8, 8)
    # an ordinary model directory of the smaller shapes, embedded by the native loop and the Python one alike
    from elmoc.pretrained.elmo import embed_sentences
    from elmoc.pretrained.loader import load_bilm
    from elmoc.pretrained.writer import export_model

    export_model(tmp_path / "cells/round2/model.pt", None, tmp_path / "export")
    meta = json.loads((tmp_path / "export/elmoc-model.json").read_text())
    assert meta["encoder"]["cell_size"] == 8
    sentences = [["w1", "w2", "w3", "w7"], ["w5", "w9"]]
    native = embed_sentences(load_bilm(tmp_path / "export"), sentences)
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    python = embed_sentences(load_bilm(tmp_path / "export"), sentences)
    assert native[0].shape == (3, 4, 8)
    assert all(np.allclose(a, b, atol=1e-5) for a, b in zip(native, python))


def test_structured_pruning_of_a_transformer_removes_feed_forward_units(tiny_lm):
    vocab, spec, _, _ = tiny_lm
    spec = {**spec, "encoder": {"type": "transformer", "d_model": 8, "heads": 2, "d_ff": 12, "num_layers": 2}}
    model = LanguageModel.from_spec(spec, vocab)
    small_spec, state = shrink(model, spec, 5)
    small = LanguageModel.from_spec(small_spec, vocab)
    small.load_state_dict(state)
    assert small.encoder.blocks[1].linear2.weight.shape == (8, 5)


def test_bad_settings_and_a_source_without_rewind_weights_are_one_line(tiny_lm, tmp_path):
    with pytest.raises(ConfigError, match="levels must be increasing"):
        settings(levels=[0.5, 0.3])
    with pytest.raises(ConfigError, match=r"in \[0, 1\)"):
        settings(levels=[0.5, 1.0])
    assert settings(levels=[0.0]).levels == (0.0,)  # the dense control: fine-tuning alone
    with pytest.raises(ConfigError, match="ticket needs method: magnitude"):
        settings(method="structured", ticket=True)
    with pytest.raises(ConfigError, match="finetune_steps"):
        settings(finetune_step=3)
    with pytest.raises(ConfigError, match="ticket_procedure must be one of rewind_each_round"):
        settings(ticket=True, ticket_procedure="rewind")
    assert settings().ticket_procedure == "rewind_each_round"
    vocab, spec, make_batches, make_heldout = tiny_lm
    spec = copy.deepcopy(spec)
    spec["train"]["max_steps"] = 2
    train(spec, vocab, tmp_path / "lm", make_batches, make_heldout)
    source = load_checkpoint(tmp_path / "lm/model.pt")
    assert "rewind" not in source  # not asked: model.pt as before
    with pytest.raises(InputFileError, match="train.rewind_step: 0"):
        ticket_hooks(source, {}, vocab, "forward", 1, tmp_path / "lm/model.pt")
    with pytest.raises(InputFileError, match="train.rewind_step: 0"):
        prune(tmp_path / "lm/model.pt", tmp_path / "pruned", settings(ticket=True), vocab, make_batches, make_heldout)
    assert not (tmp_path / "pruned").exists()  # refused before the first round


def test_mask_constraint_refuses_masks_of_another_model(tiny_lm):
    vocab, spec, _, _ = tiny_lm
    with pytest.raises(KeyError, match="lacks"):
        MaskConstraint({"encoder.nope": torch.ones(1, dtype=torch.bool)}).apply(LanguageModel.from_spec(spec, vocab))


def test_magnitude_masks_of_a_transformer_stay_applied_while_it_trains(tiny_lm, tmp_path):
    vocab, spec, make_batches, make_heldout = tiny_lm
    spec = {**spec, "encoder": {"type": "transformer", "d_model": 8, "heads": 2, "d_ff": 12, "num_layers": 1},
            "train": {**spec["train"], "max_steps": 3, "reset_state": True}}
    model = LanguageModel.from_spec(spec, vocab)
    masks = magnitude_masks(encoder_matrices(model), 0.6)
    assert {"encoder.blocks.0.self_attn.in_proj_weight", "encoder.blocks.0.linear1.weight"} <= set(masks)
    train(spec, vocab, tmp_path / "t", make_batches, make_heldout,
          hooks=[StartFrom(model.state_dict()), MaskConstraint(masks)])
    trained = load_checkpoint(tmp_path / "t/model.pt")["model"]
    for name, mask in masks.items():
        assert (trained[name][~mask] == 0).all() and (trained[name][mask] != 0).any(), name
