"""Range checks of a resolved LM spec's numbers (elmoc.config.check_spec_numbers), in
resolve_variant, `elmoc spec` and a Snakemake dry run (issue 20 item 8), with the ranges each
block declares beside its options (``OPTION_RANGES``, read from the source: issue 32 item 3)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from elmoc.cli import main
from elmoc.config import RANGES, OR_NULL, declared_ranges, load_yaml, resolve_variant
from elmoc.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path, overrides=None, variant_overrides=None, preset_train=None):
    presets = tmp_path / "presets"
    presets.mkdir(exist_ok=True)
    train = {"batch_size": 8, "bptt": 5, "epochs": 1, **(preset_train or {})}
    (presets / "tiny.yaml").write_text(json.dumps({
        "input": {"type": "random", "dim": 8},
        "encoder": {"type": "lstm", "hidden_size": 16, "num_layers": 1, "dropout": 0.0},
        "output": {"type": "sampled", "num_samples": 4},
        "optimizer": {"type": "adam", "lr": 1.0e-3},
        "train": train,
    }), encoding="utf-8")
    return {"pretrain": {"presets_dir": str(presets), "overrides": overrides or {},
                         "variants": {"v": {"preset": "tiny", "overrides": variant_overrides or {}}}}}


@pytest.mark.parametrize("section, key, value, expected", [
    ("train", "batch_size", -4, "-4 must be a positive integer"),
    ("train", "batch_size", 0, "0 must be a positive integer"),
    ("train", "batch_size", 2.5, "2.5 must be a positive integer"),
    ("train", "batch_size", True, "True must be a positive integer"),
    ("train", "bptt", -1, "-1 must be a positive integer"),
    ("train", "epochs", 0, "0 must be a positive integer"),
    ("train", "max_steps", 0, "0 must be a positive integer or null"),
    ("train", "eval_every", -5, "-5 must be an integer >= 0"),
    ("train", "checkpoint_minutes", -1, "-1 must be a number >= 0 or null"),
    ("train", "collective_timeout_minutes", 0, "0 must be a number > 0"),
    ("encoder", "hidden_size", 0, "0 must be a positive integer"),
    ("encoder", "dropout", 1.5, "1.5 must be a number in [0, 1)"),
    ("output", "num_samples", -2, "-2 must be a positive integer"),
    ("input", "dim", -8, "-8 must be a positive integer"),
    ("input", "dim", None, "None must be a positive integer"),  # a random table has a width
    ("optimizer", "lr", -0.1, "-0.1 must be a number > 0"),
    ("optimizer", "lr", "1e-3", "'1e-3' must be a number > 0 (YAML reads 1e-4 as a string: write 1.0e-4)"),
])
def test_bad_number_in_pretrain_overrides_names_the_key(tmp_path, section, key, value, expected):
    config = _config(tmp_path, overrides={section: {key: value}})
    with pytest.raises(ConfigError) as e:
        resolve_variant(config, "v")
    assert str(e.value) == f"pretrain.overrides.{section}.{key}: {expected}"


def test_the_message_names_the_layer_that_set_the_value(tmp_path):
    # the variant's own override wins over the config-wide one, which wins over the preset
    config = _config(tmp_path, overrides={"train": {"batch_size": 16}}, variant_overrides={"train": {"bptt": -3}})
    with pytest.raises(ConfigError, match=r"^pretrain\.variants\.v\.overrides\.train\.bptt: -3 must be"):
        resolve_variant(config, "v")
    config = _config(tmp_path, overrides={"train": {"batch_size": -16}}, variant_overrides={"train": {"batch_size": 4}})
    assert resolve_variant(config, "v")["train"]["batch_size"] == 4  # the final value is what counts
    config = _config(tmp_path, overrides={"train": {"bptt": 5}}, preset_train={"epochs": -1})
    preset = tmp_path / "presets" / "tiny.yaml"
    with pytest.raises(ConfigError, match=rf"^{preset}: train\.epochs: -1 must be a positive integer$"):
        resolve_variant(config, "v")
    config = _config(tmp_path, overrides={"train": [1, 2]})
    with pytest.raises(ConfigError, match=r"^pretrain\.overrides\.train: must be a mapping of options"):
        resolve_variant(config, "v")


def test_null_where_allowed_and_the_shipped_configs_resolve(tmp_path):
    config = _config(tmp_path, overrides={"train": {"max_steps": None, "eval_every": 0},
                                          "input": {"type": "fasttext", "vectors": "v.npy", "dim": None}})
    assert resolve_variant(config, "v")["train"]["max_steps"] is None
    base = load_yaml(REPO_ROOT / "config/config.yaml")
    paper = load_yaml(REPO_ROOT / "config/paper.yaml")
    for cfg in (base, paper):
        for variant in cfg["pretrain"]["variants"]:
            resolve_variant(cfg, variant, presets_dir=REPO_ROOT / "config/lm")


def test_a_range_is_read_from_the_class_registered_as_the_type_and_its_bases(tmp_path):
    # fasttext's dim may be null (the table's width), random's may not; fixed inherits num_samples
    config = _config(tmp_path, overrides={"input": {"type": "fasttext", "vectors": "v.npy", "dim": -8}})
    with pytest.raises(ConfigError, match=r"^pretrain\.overrides\.input\.dim: -8 must be a positive integer or null$"):
        resolve_variant(config, "v")
    config = _config(tmp_path, overrides={"output": {"type": "fixed", "vectors": "v.npy", "num_samples": 0}})
    with pytest.raises(ConfigError, match=r"^pretrain\.overrides\.output\.num_samples: 0 must be a positive integer$"):
        resolve_variant(config, "v")
    # an option another type declares is not this type's: the registry refuses it when building
    config = _config(tmp_path, overrides={"encoder": {"cell_size": -1}})
    assert resolve_variant(config, "v")["encoder"]["cell_size"] == -1


def test_the_source_read_ranges_are_the_classes_and_name_their_options():
    """What the workflow reads from the source without importing (no torch) is what the classes
    declare along their bases, every range is known and every ranged option is an argument."""
    import inspect

    from elmoc.registry import accepted_arguments, by_name, list_available
    from elmoc.train.optim import OPTION_RANGES, _KNOWN
    from elmoc.train.settings import TrainSettings

    for kind in ("input", "encoder", "output"):
        for name in list_available(kind):
            cls = by_name(kind, name)
            if not cls.__module__.startswith("elmoc."):  # registered in-process by another test
                continue
            along = {}
            for klass in reversed(inspect.getmro(cls)):
                along.update(vars(klass).get("OPTION_RANGES", {}))
            assert declared_ranges(kind, {"type": name}) == along, (kind, name)
            assert set(along) <= accepted_arguments(cls)[0], (kind, name)
            assert all(rule.removesuffix(OR_NULL) in RANGES for rule in along.values()), (kind, name)
    assert declared_ranges("train", {}) == TrainSettings.OPTION_RANGES
    assert set(TrainSettings.OPTION_RANGES) <= set(TrainSettings.__dataclass_fields__)
    for kind, ranges in OPTION_RANGES.items():
        assert declared_ranges("optimizer", {"type": kind}) == ranges and set(ranges) <= _KNOWN[kind]
    assert declared_ranges("encoder", {"type": "elmo_lstm"})["cell_size"] == "int > 0"


def test_elmoc_spec_checks_both_ways(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps(_config(tmp_path, overrides={"train": {"batch_size": -4}})), encoding="utf-8")
    out = tmp_path / "spec.yaml"
    assert main(["spec", "--config", str(cfg), "--variant", "v", "--output", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pretrain.overrides.train.batch_size: -4 must be a positive integer" in err[0]
    spec = json.dumps({"train": {"batch_size": 8, "bptt": -20}})
    for flag in ("--section-json", "--spec-json"):  # the workflow's flag, and its old name
        assert main(["spec", flag, spec, "--output", str(out)]) == 1
        assert "--section-json train.bptt: -20 must be a positive integer" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_dry_run_stops_naming_the_override(tmp_path):
    """`snakemake -n` with a negative batch size in pretrain.overrides fails before any job runs."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("pretrain:\n  overrides:\n    train: {batch_size: -4}\n", encoding="utf-8")
    r = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--snakefile", str(REPO_ROOT / "Snakefile"),
         "--configfile", str(REPO_ROOT / "config/config.yaml"), str(bad), "--directory", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "pretrain.overrides.train.batch_size: -4 must be a positive integer" in r.stdout + r.stderr
    assert "Job stats" not in r.stdout
