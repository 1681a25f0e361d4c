import json

import pytest

from elmoc.errors import ConfigError, InputFileError
from elmoc.registry import build
from elmoc.tasks.embedder import TaskInputs
from elmoc.tasks.runner import TrainerConfig, run_task
from elmoc.tasks.snli import LABELS, read_snli

ROWS = [
    {"gold_label": "entailment", "sentence1": "A man sleeps .", "sentence2": "A person sleeps ."},
    {"gold_label": "contradiction", "sentence1": "A man sleeps .", "sentence2": "A man runs ."},
    {"gold_label": "-", "sentence1": "A dog barks .", "sentence2": "Something ."},
    {"gold_label": "neutral", "sentence1": "A dog barks .", "sentence2": "A dog barks loudly at night ."},
]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_reader_drops_items_without_gold_label(tmp_path):
    pairs = read_snli(_write(tmp_path / "s.jsonl", ROWS))
    assert len(pairs) == 3
    assert pairs[0].premise == ("A", "man", "sleeps", ".") and LABELS[pairs[0].label] == "entailment"
    assert [LABELS[p.label] for p in pairs] == ["entailment", "contradiction", "neutral"]


def test_binary_parse_tokens_preferred(shared_data):
    pairs = read_snli(shared_data / "fixtures/allennlp/snli.jsonl")
    assert pairs[0].premise[-2:] == ("airplane", ".")  # "airplane." split by the official parse
    assert all(p.label in (0, 1, 2) for p in pairs)


def test_shared_snli_sizes(shared_data):
    assert len(read_snli(shared_data / "snli/test.jsonl")) == 9824


@pytest.mark.parametrize("line,message", [
    ("{not json", "invalid JSON"),
    ('{"gold_label": "maybe", "sentence1": "a", "sentence2": "b"}', "gold_label 'maybe'"),
    ('{"gold_label": "neutral", "sentence1": "a"}', "no string 'sentence2'"),
    ("[1, 2]", "JSON object"),
])
def test_malformed_lines_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n" + line + "\n")
    with pytest.raises(InputFileError, match=rf"bad.jsonl:2: .*{message}"):
        read_snli(path)


def test_esim_overfits(tmp_path, features_writer):
    path = _write(tmp_path / "s.jsonl", [r for r in ROWS if r["gold_label"] != "-"] * 2)
    task = build("task", {"type": "snli", "train": str(path), "dev": str(path), "test": str(path),
                          "model": {"encoder_hidden": 8, "projection_dim": 8, "inference_hidden": 8,
                                    "output_hidden": 8, "dropout": 0.0}})
    data = {s: task.read(s) for s in ("train", "dev", "test")}
    sentences = [s for split in data.values() for s in task.sentences(split)]
    h5 = features_writer(tmp_path / "f.hdf5", list({" ".join(s): s for s in sentences}.values()))
    inputs = TaskInputs.create(sentences, features=h5)
    trainer = TrainerConfig.from_dict({"batch_size": 3, "lr": 1e-2, "epochs": 30, "patience": 30, "plateau_factor": None}, task.default_trainer)
    result = run_task(task, inputs, seed=1, trainer=trainer, data=data)
    assert result["test"] == 1.0
    assert result["history"][-1]["train_loss"] < 0.5 * result["history"][0]["train_loss"]


def test_dev_every_holds_out_training_pairs(tmp_path):
    path = _write(tmp_path / "s.jsonl", [r for r in ROWS if r["gold_label"] != "-"] * 4)  # 12 pairs
    task = build("task", {"type": "snli", "train": str(path), "test": str(path), "dev_every": 4})
    assert task.missing_data() is None
    train, dev = task.read("train"), task.read("dev")
    assert (len(train), len(dev)) == (9, 3)
    with pytest.raises(ConfigError, match="either a dev file or dev_every"):
        build("task", {"type": "snli", "train": str(path), "dev": str(path), "dev_every": 4})


def test_esim_initialisation_is_allennlp_esim_elmo(tmp_path, features_writer):
    """esim_elmo.jsonnet's initializer: linear weights Xavier, linear biases 0, LSTM weight_ih
    Xavier, weight_hh orthogonal, bias_ih 0, bias_hh lstm_hidden_bias (0, forget gate 1)."""
    import re

    import torch

    path = _write(tmp_path / "s.jsonl", [r for r in ROWS if r["gold_label"] != "-"])
    task = build("task", {"type": "snli", "train": str(path), "dev": str(path), "test": str(path),
                          "model": {"encoder_hidden": 6, "projection_dim": 5, "inference_hidden": 7,
                                    "output_hidden": 4}})
    sentences = [s for s in task.sentences(task.read("train"))]
    inputs = TaskInputs.create(sentences, features=features_writer(tmp_path / "f.hdf5", sentences))
    torch.manual_seed(0)
    model = task.build_model(inputs)
    seen = set()
    for name, p in model.named_parameters():
        if name.startswith("embedder"):
            continue
        seen.add(re.sub(r"_l\d+(_reverse)?$", "", name.split(".")[-1]))
        if "bias_hh" in name:
            hidden = p.shape[0] // 4
            assert torch.equal(p[hidden: 2 * hidden], torch.ones(hidden)), name
            assert not p[:hidden].any() and not p[2 * hidden:].any(), name
        elif name.endswith("bias") or "bias_ih" in name:
            assert not p.any(), name
        elif "weight_hh" in name:  # orthogonal columns: W^T W = I (W is 4H x H)
            torch.testing.assert_close(p.T @ p, torch.eye(p.shape[1]), atol=1e-5, rtol=0)
        else:  # Xavier uniform: inside +-sqrt(6 / (fan_in + fan_out)), and not torch's default bound
            bound = (6.0 / (p.shape[0] + p.shape[1])) ** 0.5
            assert p.abs().max() <= bound and p.abs().max() > 0.8 * bound, name
    assert {"weight", "bias", "weight_ih", "weight_hh", "bias_ih", "bias_hh"} <= seen


RAW = {"gold_label": "neutral", "sentence1": "A well-known man's dog,  running.", "sentence2": "It runs.",
       "sentence1_binary_parse": "( ( A ( well-known ( man 's ) ) ) ( dog ( , ( running . ) ) ) )",
       "sentence2_binary_parse": "( It ( runs . ) )"}


def test_tokenizer_choices(tmp_path, monkeypatch):
    import sys

    from elmoc.tasks import snli

    path = _write(tmp_path / "raw.jsonl", [RAW])
    assert read_snli(path)[0].premise == ("A", "well-known", "man", "'s", "dog", ",", "running", ".")
    assert read_snli(path, "whitespace")[0].premise == ("A", "well-known", "man's", "dog,", "running.")
    with pytest.raises(ConfigError, match="tokenizer must be one of binary_parse, spacy, whitespace"):
        build("task", {"type": "snli", "train": str(path), "tokenizer": "nltk"})
    # without spaCy, the paper's tokenizer is one line naming the fix, when the task is built
    snli.spacy_english.cache_clear()
    monkeypatch.setitem(sys.modules, "spacy", None)
    with pytest.raises(ConfigError, match="needs spaCy: pip install spacy"):
        build("task", {"type": "snli", "train": str(path), "tokenizer": "spacy"})
    snli.spacy_english.cache_clear()


def test_spacy_tokens_as_allennlp_snli_reader(tmp_path):
    """AllenNLP's snli reader: spaCy's English tokenizer on the raw sentence, spaces dropped."""
    pytest.importorskip("spacy")
    path = _write(tmp_path / "raw.jsonl", [RAW])
    task = build("task", {"type": "snli", "train": str(path), "dev": str(path), "test": str(path),
                          "tokenizer": "spacy"})
    pair = task.read("train")[0]
    assert pair.premise == ("A", "well", "-", "known", "man", "'s", "dog", ",", "running", ".")
    assert pair.hypothesis == ("It", "runs", ".")
