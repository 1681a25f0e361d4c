"""The model card describes the exported model: its own sizes, never a preset's paper size."""
from __future__ import annotations

import json
from pathlib import Path

import yaml
from lm_tree_helpers import run_command

from elmoc.model_file import load_checkpoint, save_checkpoint
from elmoc.pretrained.card import card_description

PRESETS = Path(__file__).resolve().parents[2] / "config" / "lm"


def test_paper_sizes_leave_every_preset_description():
    for path in sorted(PRESETS.glob("*.yaml")):
        text = yaml.safe_load(path.read_text())["description"]
        described = card_description(text)
        assert not any(size in described for size in ("76M", "499M", "196M", "92M")), path.name
        assert described.split(":")[0] == text.split(":")[0]  # the name stays
    assert card_description("ELMo-C: cosine loss vs FastText-CC (76M)") == "ELMo-C: cosine loss vs FastText-CC"
    assert card_description("ELMo-A: adaptive softmax (196M at 793K words; cutoffs chosen)") == "ELMo-A: adaptive softmax"
    kept = "SAMPLED (Table 4): trainable sampled softmax (8192 negatives), a (512-d) table (~30K subwords)"
    assert card_description(kept) == kept
    assert card_description(None) == ""


def test_card_of_a_demo_sized_elmo_c_gives_its_real_sizes(lm_tree):
    root = lm_tree("fasttext")
    preset = yaml.safe_load((PRESETS / "elmo-c.yaml").read_text())["description"]
    assert "(76M)" in preset
    for seed, direction in enumerate(("forward", "backward")):
        folder = root / "results/lm/tiny" / direction
        payload = load_checkpoint(folder / "model.pt")
        payload["spec"]["description"] = preset
        save_checkpoint(folder / "model.pt", payload)
        heldout = json.loads((folder / "heldout.json").read_text())
        (folder / "heldout.json").write_text(json.dumps({**heldout, "trainable_parameters": 76576 + seed}))
    assert run_command("export", ["--variant", "tiny", "--output-dir", "model"]) == 0
    card = (root / "model/README.md").read_text()
    assert "76M" not in card
    assert card_description(preset) in card
    assert "| trainable parameters (whole LM in training) | 76,576 | 76,577 |" in card
    assert "| parameters (input + encoder, exported) | 1,298 | 1,298 |" in card


def test_card_opens_with_the_exported_models_own_settings(lm_tree):
    root = lm_tree("fasttext")
    for direction in ("forward", "backward"):
        path = root / "results/lm/tiny" / direction / "model.pt"
        payload = load_checkpoint(path)
        payload["spec"]["description"] = "ELMo-C: 2-layer LSTM 4096/512 (76M)"  # a preset's full-size words
        save_checkpoint(path, payload)
    assert run_command("export", ["--variant", "tiny", "--output-dir", "model"]) == 0
    card = (root / "model/README.md").read_text().split("\n")
    assert card[2] == ("This model: `fasttext` input, `elmo_lstm` encoder (cell_size 10, num_layers 2, "
                       "projection_size 6); 1,298 / 1,298 parameters (forward / backward, input + encoder); "
                       "features of 3 layers x 12.")
    assert card[4].startswith("Trained from the LM spec `tiny`, described as: \"ELMo-C: 2-layer LSTM 4096/512\" "
                              "(the spec's words")
