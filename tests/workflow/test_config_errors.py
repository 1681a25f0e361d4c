"""Config-file mistakes refused in one line (issue 52.5) and LM blocks checked as training reads
them (issue 46.2): the schema's own text, misspelled keys, overlays used alone, type switches."""
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from elmoc.config import check_whole_config, check_workflow_config, load_yaml, resolve_variant
from elmoc.errors import ConfigError
from elmoc.params import named_specs
from elmoc.train.spec_check import check_spec

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA = REPO_ROOT / "workflow/schemas/config.schema.yaml"
# JSON Schema keywords the workflow's schema uses; any other key of a schema node is a typo or a
# description that YAML split into a key (a flow mapping's ", " inside an unquoted string)
KEYWORDS = {"type", "properties", "additionalProperties", "patternProperties", "description", "default", "enum",
            "items", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "required", "oneOf", "anyOf",
            "$ref", "$defs", "$schema", "minItems", "pattern", "minProperties", "maxProperties", "uniqueItems", "maxItems",
            "const", "minLength", "propertyNames"}


def schema_nodes(node, path=()):
    """(path, schema) of every schema node of the workflow's schema (defaults are data, skipped)."""
    yield path, node
    for key, value in node.items():
        if key in ("properties", "$defs", "patternProperties"):
            for name, sub in value.items():
                yield from schema_nodes(sub, path + (name,))
        elif key in ("additionalProperties", "items") and isinstance(value, dict):
            yield from schema_nodes(value, path + (key,))
        elif key in ("oneOf", "anyOf"):
            for sub in value:
                yield from schema_nodes(sub, path + (key,))


def test_schema_nodes_hold_keywords_only():
    """config.schema.yaml's task_section.train once gave a property named "or what the task's docstring says)"."""
    bad = [(".".join(path), key) for path, node in schema_nodes(load_yaml(SCHEMA))
           for key in node if key not in KEYWORDS]
    assert bad == []


def demo():
    return load_yaml(REPO_ROOT / "config/config.yaml")


def test_a_misspelled_option_beside_free_entries_gets_did_you_mean():
    config = demo()
    config["tasks"]["seed"] = [1, 2]  # tasks.<other> is a task section: read as one before
    with pytest.raises(ConfigError, match=r"tasks: unknown key 'seed' \(did you mean 'seeds'\?\)"):
        check_workflow_config(config, "my.yaml", schema_path=SCHEMA)


def test_a_misspelled_nested_key_is_one_line():
    config = demo()
    config["pretrain"]["varients"] = {}
    with pytest.raises(ConfigError) as e:
        check_workflow_config(config, "my.yaml", schema_path=SCHEMA)
    assert "did you mean 'variants'" in str(e.value) and "\n" not in str(e.value)


def test_an_overlay_alone_is_named_with_how_to_layer_it():
    check_whole_config(demo(), ["config/config.yaml"], "config/config.yaml")
    check_whole_config({}, [], "config/config.yaml")  # no --configfile: the default is used
    overlay = load_yaml(REPO_ROOT / "config/distill.yaml")
    with pytest.raises(ConfigError, match="an overlay .*replaced the default config/config.yaml.*"
                                          "--configfile config/config.yaml config/distill.yaml"):
        check_whole_config(overlay, ["config/distill.yaml"], "config/config.yaml")


def test_a_type_switch_keeps_none_of_the_old_types_keys():
    config = demo()
    config["pretrain"]["variants"]["elmo-c"] = {"overrides": {"output": {"type": "sampled", "num_samples": 8}}}
    config["pretrain"]["overrides_by_type"] = {"output": {"sampled": {"num_samples": 4, "seed": 3}}}
    spec = resolve_variant(config, "elmo-c", presets_dir=REPO_ROOT / "config/lm")
    assert spec["output"] == {"type": "sampled", "num_samples": 8, "seed": 3}  # no cosine `vectors`
    check_spec(spec, "elmo-c")


@pytest.mark.parametrize("section, key, closest", [
    ("input", "vectorz", "vectors"), ("encoder", "cell_sise", "cell_size"), ("output", "vectorz", "vectors"),
    ("optimizer", "warmpu", "warmup"), ("train", "batchsize", "batch_size")])
def test_every_lm_block_is_checked_without_building(section, key, closest):
    config = demo()
    config["pretrain"]["variants"]["elmo-c"] = {"overrides": {section: {key: 1}}}
    spec = resolve_variant(config, "elmo-c", presets_dir=REPO_ROOT / "config/lm")
    with pytest.raises(ConfigError, match=f"'{key}' \\(did you mean '{closest}'\\?\\)"):
        check_spec(spec, "config pretrain.variants.elmo-c")


def test_params_preset_refuses_a_misspelled_nested_key(tmp_path):
    preset = load_yaml(REPO_ROOT / "config/lm/elmo-c.yaml")
    preset["train"]["batchsize"] = preset["train"].pop("batch_size")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(preset))
    with pytest.raises(ConfigError, match=r"train: unknown key 'batchsize' \(did you mean 'batch_size'\?\)"):
        named_specs(presets=[str(bad)])


def snakemake(tmp_path, *configs):
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--snakefile",
                           str(REPO_ROOT / "Snakefile"), "--configfile", *map(str, configs), "--directory",
                           str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_dry_run_names_a_misspelled_key_in_one_line_without_the_schema(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("pretrain:\n  varients: {elmo-c: {}}\n")
    r = snakemake(tmp_path, REPO_ROOT / "config/config.yaml", bad)
    out = r.stdout + r.stderr
    assert r.returncode == 1
    assert "pretrain: unknown key 'varients' (did you mean 'variants'?)" in out
    assert "Failed validating" not in out and len(out.splitlines()) < 8, out


@pytest.mark.slow
def test_dry_run_of_an_overlay_alone_says_how_to_layer_it(tmp_path):
    r = snakemake(tmp_path, REPO_ROOT / "config/finetune.yaml")
    assert r.returncode == 1
    out = r.stdout + r.stderr
    assert "an overlay" in out and "--configfile" in out and "cc.npy" not in out, out


FINE_TUNE = "  variants: [elmo-c]\n  tasks: [sentiment]\n"


@pytest.mark.slow
@pytest.mark.parametrize("overlay, named", [
    # an LM block after a type switch: ELMo-C's cosine `vectors` dropped, the new type's key misspelled
    ("pretrain:\n  variants:\n    elmo-c: {overrides: {output: {type: sampled, num_sample: 8}}}\n",
     "config pretrain.variants.elmo-c (preset + overrides): output 'sampled': unknown key 'num_sample' "
     "(did you mean 'num_samples'?)"),
    ("pretrain:\n  variants:\n    elmo-c: {overrides: {train: {batchsize: 8}}}\n",
     "unknown key 'batchsize' (did you mean 'batch_size'?)"),
    ("fine_tune:\n  recipes: {ulmfit: {recipe: ulmfit, lm_lrr: 0.001}}\n" + FINE_TUNE,
     "config fine_tune.recipes.ulmfit: unknown key 'lm_lrr' (did you mean 'lm_lr'?)"),
    ("fine_tune:\n  recipes: {ulmfit: {recipe: ulmfti}}\n" + FINE_TUNE,
     "fine_tune.recipes.ulmfit.recipe must be one of frozen, full, full_constant, ulmfit, got 'ulmfti' "
     "(did you mean 'ulmfit'?)"),
    ("prune:\n  plans: {magnitude: {method: magnitude, levls: [0.5]}}\n",
     "config prune.plans.magnitude: unknown key 'levls' (did you mean 'levels'?)"),
    ("prune:\n  plans: {magnitude: {method: magnitud}}\n", "got 'magnitud' (did you mean 'magnitude'?)"),
    ("distill:\n  students:\n    small: {teacher: elmo-c, overrides: {encoder: {num_layer: 1}}}\n",
     "config distill.students.small (its LM spec): encoder 'elmo_lstm': unknown key 'num_layer' "
     "(did you mean 'num_layers'?)"),
    ("distill:\n  students:\n    small: {teacher: elmo-c, lm_weigth: 1}\n",
     "distill.students.small: unknown key 'lm_weigth' (did you mean 'lm_weight'?)"),
])
def test_dry_run_refuses_a_misspelled_key_in_each_block(tmp_path, overlay, named):
    """Issue 46.2: every nested block is built at parse time by the parser its command uses."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(overlay)
    r = snakemake(tmp_path, REPO_ROOT / "config/config.yaml", bad)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and named in out, out
    assert len([line for line in out.splitlines() if "unknown key" in line or "must be" in line]) == 1, out
