import pytest
import yaml

from elmoc.config import artifact_paths, deep_merge, load_yaml, resolve_variant
from elmoc.errors import ConfigError, InputFileError


def test_deep_merge_recurses_into_mappings_only():
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    merged = deep_merge(base, {"a": {"c": [3]}, "e": 2})
    assert merged == {"a": {"b": 1, "c": [3]}, "d": 1, "e": 2}
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": 1}


def test_resolve_variant_merges_global_then_variant_overrides(tmp_path):
    (tmp_path / "elmo-c.yaml").write_text(yaml.safe_dump({
        "input": {"type": "fasttext", "vectors": "results/vectors/cc.npy"},
        "encoder": {"type": "elmo_lstm", "cell_size": 4096, "projection_size": 512},
        "train": {"batch_size": 1536},
    }))
    config = {"pretrain": {
        "presets_dir": str(tmp_path),
        "overrides": {"encoder": {"cell_size": 64}},
        "variants": {"small": {"preset": "elmo-c", "overrides": {"train": {"batch_size": 8}}}},
    }}
    spec = resolve_variant(config, "small")
    assert spec["name"] == "small"
    assert spec["encoder"] == {"type": "elmo_lstm", "cell_size": 64, "projection_size": 512}
    assert spec["train"]["batch_size"] == 8
    assert spec["vocab"] == "results/vocab/vocab.txt"
    assert artifact_paths(spec) == sorted({
        "results/vectors/cc.npy", "results/vocab/vocab.txt", "results/corpus/train", "results/corpus/heldout.txt"})


def test_unknown_variant_and_preset(tmp_path):
    config = {"pretrain": {"presets_dir": str(tmp_path), "variants": {"x": {}}}}
    with pytest.raises(ConfigError, match="unknown variant 'y'"):
        resolve_variant(config, "y")
    with pytest.raises(ConfigError, match="no preset"):
        resolve_variant(config, "x")


def test_bad_yaml_names_file_and_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(InputFileError, match=r"bad.yaml:\d+: invalid YAML"):
        load_yaml(p)
