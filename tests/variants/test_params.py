"""`elmoc params` reproduces the paper's parameter counts at paper sizes (meta device)."""
import json

import pytest
import yaml

from elmoc.cli import main
from elmoc.params import count_parameters
from elmoc.config import load_yaml

PAPER = {  # millions, paper Tables 2 and 4
    ("elmo-c", None): 76,
    ("elmo-sub", None): 92,
    ("elmo-a", None): 196,
    ("elmo", None): 499,
    ("elmo-fixed", None): 76,
    ("elmo-sampled", None): 483,
    ("elmo-sampled", 2_000_000): 1102,
    ("elmo-sampled", 40_000): 96,
}


@pytest.mark.parametrize("variant,vocab", list(PAPER))
def test_paper_counts_within_two_percent(repo_root, monkeypatch, tmp_path, variant, vocab):
    monkeypatch.chdir(tmp_path)  # no results/: sizes come from the paper defaults
    spec = load_yaml(repo_root / "config" / "lm" / f"{variant}.yaml")
    size = vocab or (30_004 if variant == "elmo-sub" else 793_475)
    counts = count_parameters(spec, size)
    expected = PAPER[(variant, vocab)] * 1e6
    assert abs(counts["paper"] - expected) / expected < 0.02, counts
    assert counts["trained"] == (counts["paper"] if counts["joint"] else 2 * counts["per_direction"])


@pytest.mark.parametrize("variant,millions", [("elmo", 499), ("elmo-a", 196), ("elmo-sub", 92)])
def test_joint_models_count_the_paper_numbers(repo_root, monkeypatch, tmp_path, variant, millions):
    """The softmax family trained as joint bi-LMs (built on the meta device) is the paper's size."""
    monkeypatch.chdir(tmp_path)
    spec = load_yaml(repo_root / "config" / "lm" / f"{variant}.yaml")
    spec["train"] = {**spec.get("train", {}), "directions": "joint"}
    counts = count_parameters(spec, 30_004 if variant == "elmo-sub" else 793_475)
    assert counts["joint"]
    assert abs(counts["trained"] - millions * 1e6) / (millions * 1e6) < 0.02, counts
    separate = count_parameters({**spec, "train": {}}, counts["vocab"])
    assert not separate["joint"] and separate["trained"] == 2 * separate["per_direction"] > counts["trained"]


def test_elmo_c_exact_and_frozen_tables_do_not_count(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    counts = count_parameters(load_yaml(repo_root / "config" / "lm" / "elmo-c.yaml"), 793_475)
    assert counts["paper"] == 76_185_176  # spec 1.3: 38,092,588 per direction
    assert counts["input"] == 0


def test_cli_with_workflow_config(repo_root, monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    config = {"pretrain": {"presets_dir": str(repo_root / "config" / "lm"),
                           "variants": {"elmo-c": {}, "elmo-a": {}, "small": {"preset": "elmo-c", "overrides": {
                               "encoder": {"cell_size": 64, "projection_size": 16}}}}}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    assert main(["params", "--config", "c.yaml", "--json"]) == 0
    rows = {r["variant"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"elmo-c", "elmo-a", "small"}
    assert rows["small"]["paper"] < rows["elmo-c"]["paper"] < rows["elmo-a"]["paper"]


def test_cli_bad_cutoffs_named(repo_root, monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["params", "--preset", str(repo_root / "config" / "lm" / "elmo-a.yaml"), "--vocab-size", "40000"])
    assert code == 1
    assert "cutoffs [100000, 600000]" in capsys.readouterr().err


TRANSFORMER_SIZES = {"trans-base": (512, 2048, 6), "trans-large": (768, 3072, 12), "gpt": (768, 3072, 12)}
OUTPUT_KINDS = ("c", "fixed", "sub", "a", "sampled")


def transformer_encoder_count(input_dim: int, d: int, ff: int, blocks: int) -> int:
    """By hand: Linear(input_dim -> d) unless equal; per block self-attention (q, k, v, out:
    4 d x d + 4 d), ReLU FFN (2 d ff + ff + d) and two LayerNorms (4 d); a final LayerNorm (2 d)."""
    projection = input_dim * d + d if input_dim != d else 0
    return projection + blocks * (4 * d * d + 4 * d + 2 * d * ff + ff + d + 4 * d) + 2 * d


@pytest.mark.parametrize("size", list(TRANSFORMER_SIZES))
@pytest.mark.parametrize("kind", OUTPUT_KINDS)
def test_transformer_presets_at_paper_size(repo_root, monkeypatch, tmp_path, size, kind):
    """The Table 5 Transformer presets build on the meta device at paper size (793K words, 300-d
    FastText tables, 30K subwords) with the encoder of paper-spec section 4, counted by hand."""
    monkeypatch.chdir(tmp_path)
    spec = load_yaml(repo_root / "config" / "lm" / f"{size}-{kind}.yaml")
    d, ff, blocks = TRANSFORMER_SIZES[size]
    assert spec["name"] == f"{size}-{kind}" and spec["encoder"]["type"] == "transformer"
    assert spec["train"]["bptt"] == (512 if size == "gpt" else 20)
    vocab = 30_004 if kind == "sub" else 793_475
    counts = count_parameters(spec, vocab)
    assert counts["encoder"] == transformer_encoder_count(d if kind == "sub" else 300, d, ff, blocks)
    expected_output = {"c": d * 300 + 300, "fixed": d * 300 + 300, "sub": vocab, "sampled": vocab * (d + 1)}
    if kind in expected_output:
        assert counts["output"] == expected_output[kind]
    else:  # ADAPTIVE at 793K words: the head and two tails of ELMo-A's cutoffs
        assert spec["output"]["cutoffs"] == [100_000, 600_000] and 1e8 < counts["output"] < 2e8
    assert counts["input"] == (vocab * d if kind == "sub" else 0)
    if size == "gpt":  # "a uni-directional Transformer" (paper section 5.2.2): one forward LM, counted once
        assert counts["one_direction"] and not counts["joint"]
        assert counts["trained"] == counts["paper"] == counts["per_direction"] == (
            counts["input"] + counts["encoder"] + counts["output"])
        return
    assert not counts["one_direction"]
    joint = kind in ("sub", "a", "sampled")  # as the LSTM presets elmo-sub, elmo-a, elmo-sampled
    assert counts["joint"] == joint
    total = counts["input"] + counts["output"] + 2 * counts["encoder"] if joint else 2 * counts["per_direction"]
    assert counts["trained"] == total


def test_cli_counts_opt_in_variants_with_overrides_by_type(repo_root, monkeypatch, tmp_path, capsys):
    """`elmoc params --config` lists pretrain.extra_variants after pretrain.variants, each
    encoder family shrunk by its own pretrain.overrides_by_type entry."""
    monkeypatch.chdir(tmp_path)
    config = {"pretrain": {"presets_dir": str(repo_root / "config" / "lm"), "variants": {"elmo-c": {}},
                           "extra_variants": ["trans-base-c", "gpt-sampled"],
                           "overrides_by_type": {"encoder": {
                               "elmo_lstm": {"cell_size": 64, "projection_size": 16},
                               "transformer": {"d_model": 16, "heads": 2, "d_ff": 32, "num_layers": 2}}}}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    assert main(["params", "--config", "c.yaml", "--json", "--vocab-size", "1000"]) == 0
    rows = [(r["variant"], r["encoder"]) for r in json.loads(capsys.readouterr().out)]
    assert [name for name, _ in rows] == ["elmo-c", "trans-base-c", "gpt-sampled"]
    assert dict(rows)["trans-base-c"] == dict(rows)["gpt-sampled"] == transformer_encoder_count(300, 16, 32, 2)
