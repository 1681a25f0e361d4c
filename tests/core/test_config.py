import pytest
import yaml

from elmoc.config import artifact_paths, deep_merge, load_yaml, resolve_variant, variant_names
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


def _two_families(tmp_path):
    """Presets of an LSTM and a Transformer LM, and a config that opts into the Transformer."""
    (tmp_path / "lstm.yaml").write_text(yaml.safe_dump({
        "encoder": {"type": "elmo_lstm", "cell_size": 4096, "projection_size": 512},
        "output": {"type": "sampled", "num_samples": 8192},
        "optimizer": {"type": "adagrad", "lr": 0.2}}))
    (tmp_path / "trans.yaml").write_text(yaml.safe_dump({
        "encoder": {"type": "transformer", "d_model": 512, "heads": 8, "num_layers": 6},
        "output": {"type": "cosine", "vectors": "results/vectors/cc.npy"},
        "optimizer": {"type": "scheduled_adam", "base_scale": 4.0e-5, "warmup": 4000}}))
    return {"pretrain": {
        "presets_dir": str(tmp_path),
        "variants": {"lstm": {"overrides": {"output": {"num_samples": 64}}}},
        "extra_variants": ["trans"],
        "overrides": {"train": {"batch_size": 8}},
        "overrides_by_type": {
            "encoder": {"elmo_lstm": {"cell_size": 32, "projection_size": 16},
                        "transformer": {"d_model": 16, "heads": 2}},
            "output": {"sampled": {"num_samples": 32}},
            "optimizer": {"scheduled_adam": {"warmup": 5}}}}}


def test_extra_variants_are_opt_in_presets_after_the_variants(tmp_path):
    config = _two_families(tmp_path)
    assert variant_names(config) == ["lstm", "trans"]
    assert variant_names({"pretrain": {"variants": {"lstm": {}}}}) == ["lstm"]  # none listed: none added
    spec = resolve_variant(config, "trans")
    assert spec["name"] == "trans" and spec["train"] == {"batch_size": 8}
    config["pretrain"]["variants"]["trans"] = {}
    with pytest.raises(ConfigError, match="extra_variants lists 'trans', which pretrain.variants defines too"):
        variant_names(config)
    with pytest.raises(ConfigError, match="more than once"):
        variant_names({"pretrain": {"extra_variants": ["a", "b", "a"]}})


def test_overrides_by_type_reach_only_sections_of_that_type(tmp_path):
    config = _two_families(tmp_path)
    lstm, trans = resolve_variant(config, "lstm"), resolve_variant(config, "trans")
    assert lstm["encoder"] == {"type": "elmo_lstm", "cell_size": 32, "projection_size": 16}
    assert trans["encoder"] == {"type": "transformer", "d_model": 16, "heads": 2, "num_layers": 6}
    assert lstm["output"]["num_samples"] == 64  # the variant's own overrides come last
    assert lstm["optimizer"] == {"type": "adagrad", "lr": 0.2}  # not scheduled_adam: untouched
    assert trans["optimizer"] == {"type": "scheduled_adam", "base_scale": 4.0e-5, "warmup": 5}
    # a variant's overrides may change a section's type: the entry of the new type applies
    config["pretrain"]["variants"]["lstm"]["overrides"]["encoder"] = {"type": "transformer"}
    assert resolve_variant(config, "lstm")["encoder"]["d_model"] == 16
    # a bad number is named by the key path where it was set
    config["pretrain"]["overrides_by_type"]["encoder"]["transformer"]["heads"] = 0
    with pytest.raises(ConfigError, match=r"^pretrain\.overrides_by_type\.encoder\.transformer\.heads: 0 must be"):
        resolve_variant(config, "trans")
    config["pretrain"]["overrides_by_type"]["encoder"]["transformer"]["heads"] = 2
    config["pretrain"]["overrides"]["train"]["batch_size"] = -1
    with pytest.raises(ConfigError, match=r"^pretrain\.overrides\.train\.batch_size: -1 must be"):
        resolve_variant(config, "trans")


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


def test_load_yaml_is_the_one_reader_and_names_the_file(tmp_path):
    """Missing, not UTF-8, invalid, or not the mapping asked for: one InputFileError naming the file;
    the result tables read a run's spec.yaml through it too (tables.runs.read_spec_file)."""
    from elmoc.tables.runs import read_spec_file

    with pytest.raises(InputFileError, match=r"absent.yaml: file not found"):
        load_yaml(tmp_path / "absent.yaml")
    (tmp_path / "latin1.yaml").write_bytes("a: caf\xe9\n".encode("latin-1"))
    with pytest.raises(InputFileError, match=r"latin1.yaml: not valid UTF-8"):
        load_yaml(tmp_path / "latin1.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    assert load_yaml(tmp_path / "list.yaml") == [1, 2]
    with pytest.raises(InputFileError, match=r"list.yaml: an LM spec must be a mapping of keys to values, got a list"):
        load_yaml(tmp_path / "list.yaml", mapping="an LM spec")
    with pytest.raises(InputFileError, match=r"list.yaml: an LM spec must be a mapping"):
        read_spec_file(tmp_path / "list.yaml")
    (tmp_path / "empty.yaml").write_text("")
    assert load_yaml(tmp_path / "empty.yaml") is None and load_yaml(tmp_path / "empty.yaml", mapping="x") == {}
    (tmp_path / "bad.yaml").write_text("a: [1\n")
    with pytest.raises(InputFileError, match=r"bad.yaml:\d+: invalid YAML"):
        read_spec_file(tmp_path / "bad.yaml")
    assert read_spec_file(tmp_path / "absent.yaml") is None
