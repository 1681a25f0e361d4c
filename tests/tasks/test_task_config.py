"""A task section checked and completed by its task class (elmoc.tasks.config), and a task
that is one file outside the package (tsv_binary.py beside this test) trained by the one runner."""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from elmoc.errors import ConfigError, InputFileError
from elmoc.registry import _REGISTRY, list_available
from elmoc.tasks.config import build_task, complete_sections, load_task_section, task_section_from_args

PLUGIN = Path(__file__).with_name("tsv_binary.py")

# What the workflow schema filled in before each task's defaults moved to its class: every
# --section-json of a rule keeps naming these values, in this order after the given keys.
FORMER_SCHEMA_DEFAULTS = {
    "sst": [("train", None), ("dev", None), ("test", None), ("format", "ptb"), ("members", None), ("split_seed", 1),
            ("granularity", "5-class"), ("use_subtrees", True), ("unique_subtrees", False), ("encoding", "utf-8"),
            ("with_fasttext", True)],
    "snli": [("train", None), ("dev", None), ("test", None), ("dev_every", None), ("tokenizer", "binary_parse"),
             ("with_fasttext", False)],
    "ner": [("train", None), ("dev", None), ("test", None), ("lowercase", False), ("with_fasttext", True)],
    "srl": [("train", None), ("dev", None), ("test", None), ("data_dir", None), ("language", "english"),
            ("max_instances", None), ("with_fasttext", False)],
    "coref": [("train", None), ("dev", None), ("test", None), ("data_dir", None), ("language", "english"),
              ("max_training_sentences", 50), ("max_documents", None), ("with_fasttext", True)],
}


@pytest.mark.parametrize("kind", sorted(FORMER_SCHEMA_DEFAULTS))
def test_a_section_is_completed_with_its_class_defaults_after_its_own_keys(kind):
    tasks = {"run": [kind], "seeds": [1], "t": {"type": kind, "model": {}, "with_fasttext": False}}
    complete_sections(tasks)
    expected = [("type", kind), ("model", {}), ("with_fasttext", False)]
    expected += [(k, v) for k, v in FORMER_SCHEMA_DEFAULTS[kind] if k != "with_fasttext"]
    assert list(tasks["t"].items()) == expected
    assert list(tasks) == ["run", "seeds", "t"] and tasks["run"] == [kind]  # options untouched
    bare = {"t": {"type": kind}}
    complete_sections(bare)
    assert list(bare["t"].items()) == [("type", kind), *FORMER_SCHEMA_DEFAULTS[kind]]


@pytest.mark.parametrize("section, message", [
    ({"type": "sst", "granularty": "2-class"}, "config tasks.t: unknown key 'granularty' (did you mean 'granularity'?)"),
    ({"type": "sst", "with_fastext": True}, "unknown key 'with_fastext' (did you mean 'with_fasttext'?)"),
    ({"type": "ner", "model": {"hiden": 3}}, "config tasks.t.model: unknown key 'hiden' (did you mean 'hidden'?)"),
    ({"type": "sts"}, "config tasks.t.type: unknown task type 'sts'. Did you mean 'sst'?"),
    ({"type": 3}, "config tasks.t.type must be the name of a registered task, got 3"),
])
def test_a_bad_section_is_one_line_naming_the_key_and_the_fix(section, message):
    with pytest.raises(ConfigError) as e:
        complete_sections({"t": section})
    assert message in str(e.value) and "\n" not in str(e.value)


def test_section_json_goes_through_the_section_parser():
    def args(text):
        return argparse.Namespace(task="sst5", config=None, section_json=text)

    assert task_section_from_args(args('{"type": "sst", "train": "a"}')) == ({"type": "sst", "train": "a"}, "demo")
    with pytest.raises(ConfigError, match=r"--section-json \(tasks.sst5\) is not valid JSON"):
        task_section_from_args(args("{type: sst"))
    with pytest.raises(ConfigError, match=r"--section-json \(tasks.sst5\) must be a JSON object"):
        task_section_from_args(args("[1]"))
    with pytest.raises(ConfigError, match=r"config tasks.sst5.type is required"):
        task_section_from_args(args('{"train": "a"}'))


def test_a_config_file_is_read_by_the_one_yaml_loader(tmp_path):
    good = tmp_path / "c.yaml"
    good.write_text("scale: cpu\ntasks:\n  sst5: {type: sst, train: a.txt}\n  run: [sst5]\n")
    assert load_task_section(good, "sst5") == ({"type": "sst", "train": "a.txt"}, "cpu")
    with pytest.raises(ConfigError, match="no task section tasks.snli .*configured tasks: sst5"):
        load_task_section(good, "snli")
    bad = tmp_path / "bad.yaml"
    bad.write_text("tasks:\n  sst5: {type: sst\n")
    with pytest.raises(InputFileError, match="invalid YAML") as e:
        load_task_section(bad, "sst5")
    assert str(bad) in str(e.value) and ":3" in str(e.value)  # the file and the line
    with pytest.raises(InputFileError, match="file not found"):
        load_task_section(tmp_path / "missing.yaml", "sst5")


@pytest.fixture
def plugin_task(monkeypatch):
    """tsv_binary.py imported as a plug-in file would be; unregistered afterwards."""
    spec = importlib.util.spec_from_file_location("elmoc_test_plugin_tsv_binary", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    list_available("task")  # the shipped tasks first, as the registry loads them
    spec.loader.exec_module(module)
    yield module.TsvBinaryTask
    _REGISTRY["task"].pop("tsv_binary", None)


def test_a_task_in_one_file_outside_the_package_is_checked_completed_and_trained(plugin_task, tmp_path, random_inputs):
    from elmoc.tables.summary import majority_baseline
    from elmoc.tasks.runner import TrainerConfig, run_task

    lines = [f"{i % 2}\t{'good fine great' if i % 2 else 'bad awful poor'} word{i}" for i in range(12)]
    for split in ("train", "dev", "test"):
        (tmp_path / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    tasks = {"tsv": {"type": "tsv_binary", **{s: str(tmp_path / f"{s}.tsv") for s in ("train", "dev", "test")}}}
    complete_sections(tasks)
    assert tasks["tsv"]["delimiter"] == "\t" and tasks["tsv"]["with_fasttext"] is True
    with pytest.raises(ConfigError, match="unknown key 'delimter' \\(did you mean 'delimiter'\\?\\)"):
        complete_sections({"tsv": {"type": "tsv_binary", "delimter": ","}})
    task, trainer = build_task(json.loads(json.dumps(tasks["tsv"])))
    assert isinstance(task, plugin_task) and trainer == {}
    train = task.read("train")
    result = run_task(task, random_inputs(task, train), seed=1,
                      trainer=TrainerConfig.from_dict({"lr": 0.05}, task.default_trainer))
    assert result["metric"] == "accuracy" and result["test"] == 1.0  # the words give the label away
    majority = majority_baseline(task, "tsv")
    assert majority["status"] == "ok" and majority["test"] == 0.5  # reads each instance's .label


def test_a_registered_class_that_is_no_task_is_refused():
    from elmoc.registry import register

    list_available("task")
    register("task", "not_a_task")(type("Plain", (), {}))
    try:
        with pytest.raises(ConfigError, match="config tasks.t.type: task 'not_a_task' is registered to .*derive it from Task"):
            complete_sections({"t": {"type": "not_a_task"}})
    finally:
        _REGISTRY["task"].pop("not_a_task")
