"""Section 5.1's random input embedding (preset elmo-c-rnd-input, Table 3's -RND-INPUT row): a
randomly initialized table trained with the LM by default; the former frozen table is the option
input.trainable: false (issue 47 item 5)."""
from __future__ import annotations

from pathlib import Path

from torch import nn

from elmoc.config import load_yaml, resolve_variant
from elmoc.registry import build

REPO_ROOT = Path(__file__).resolve().parents[2]


def _paper(entry=None):
    config = load_yaml(REPO_ROOT / "config" / "paper.yaml")
    pretrain = config["pretrain"]
    pretrain["presets_dir"] = str(REPO_ROOT / "config" / "lm")
    if entry is None:
        pretrain["extra_variants"] = ["elmo-c-rnd-input"]
    else:
        pretrain["variants"]["elmo-c-rnd-input"] = entry
    return config


def test_the_random_input_row_trains_its_table_and_frozen_stays_an_option():
    vocab = [f"w{i}" for i in range(7)]
    spec = resolve_variant(_paper(), "elmo-c-rnd-input")
    trained = build("input", spec["input"], vocab=vocab)
    assert isinstance(trained.table, nn.Parameter) and trained.table.requires_grad
    assert [n for n, _ in trained.named_parameters()] == ["table"]
    frozen_spec = resolve_variant(_paper({"overrides": {"input": {"trainable": False}}}), "elmo-c-rnd-input")
    frozen = build("input", frozen_spec["input"], vocab=vocab)
    assert not list(frozen.parameters()) and "table" in dict(frozen.named_buffers())
    assert frozen.table.equal(trained.table.detach())  # the same N(0, 1) start, from the preset's seed
