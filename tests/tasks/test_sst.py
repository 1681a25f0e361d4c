import json

import pytest
import torch

from elmoc.cli import main
from elmoc.errors import InputFileError
from elmoc.registry import build
from elmoc.tasks.embedder import TaskInputs
from elmoc.tasks.runner import TrainerConfig, run_task
from elmoc.tasks.sst import parse_tree, read_polarity

TREES = """(3 (2 The) (4 (3 film) (4 rocks)))
(1 (2 It) (0 (2 is) (0 awful)))
(2 (2 Meh) (2 .))
"""


def _task(tmp_path, **kw):
    for split in ("train", "dev", "test"):
        (tmp_path / f"{split}.txt").write_text(TREES)
    config = {"type": "sst", **{s: str(tmp_path / f"{s}.txt") for s in ("train", "dev", "test")}, **kw}
    return build("task", config)


def test_parse_tree_leaves_and_labels():
    tree = parse_tree("(3 (2 The) (4 (3 film) (4 rocks)))")
    assert tree.label == 3 and tree.leaves() == ["The", "film", "rocks"]
    assert [n.label for n in tree.nodes()] == [3, 2, 4, 3, 4]


def test_leaf_with_several_words_like_nltk():
    tree = parse_tree(r"(2 (2 like) (2 8 1\/2))")
    assert tree.leaves() == ["like", "8", r"1\/2"]


def test_subtrees_for_train_roots_for_eval(tmp_path):
    task = _task(tmp_path)
    train, test = task.read("train"), task.read("test")
    assert len(train) == 5 + 5 + 3  # every node of every tree
    assert [(" ".join(x.tokens), x.label) for x in test] == [
        ("The film rocks", 3), ("It is awful", 1), ("Meh .", 2)]
    assert ("film rocks".split(), 4) in [(list(x.tokens), x.label) for x in train]


def test_unique_subtrees_and_binary_view(tmp_path):
    task = _task(tmp_path, unique_subtrees=True)
    (tmp_path / "train.txt").write_text(TREES + "(2 (2 Meh) (2 .))\n")  # 3 repeated (phrase, label) pairs
    train = task.read("train")
    assert len(train) == len(set(train)) == 13
    plain = build("task", {"type": "sst", "train": str(tmp_path / "train.txt"), "dev": "d", "test": "t"})
    assert len(plain.read("train")) == 16
    binary = _task(tmp_path, granularity="2-class")
    assert [(" ".join(x.tokens), x.label) for x in binary.read("dev")] == [("The film rocks", 1), ("It is awful", 0)]
    assert all(x.label in (0, 1) for x in binary.read("train"))
    assert binary.num_classes == 2


@pytest.mark.parametrize("text,message", [
    ("(3 (2 The) (4 film)", "missing '\\)'"),
    ("(3 (2 The) (4 film (2 x)))", "not closed"),
    ("(7 (2 The))", "label '7'"),
    ("(3 (2 The)) extra", "trailing text"),
    ("(3)", "neither a word nor children"),
    ("3 The", "expected '\\('"),
])
def test_malformed_tree_names_file_and_line(tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text("(2 (2 ok) (2 .))\n" + text + "\n")
    task = build("task", {"type": "sst", "train": str(path), "dev": str(path), "test": str(path)})
    with pytest.raises(InputFileError, match=rf"bad.txt:2: malformed sentiment tree: .*{message}"):
        task.read("train")


def test_allennlp_fixture(shared_data):
    path = shared_data / "fixtures/allennlp/sst.txt"
    task = build("task", {"type": "sst", "train": str(path), "dev": str(path), "test": str(path)})
    roots = task.read("test")
    assert [x.label for x in roots] == [4, 0, 2]
    assert roots[1].tokens == ("It", "was", "terrible", ".")


def test_shared_sst5_sizes(shared_data):
    d = shared_data / "sst5"
    task = build("task", {"type": "sst", "train": str(d / "train.txt"), "dev": str(d / "dev.txt"), "test": str(d / "test.txt")})
    assert len(task.read("test")) == 2210 and len(task.read("dev")) == 1101


def test_polarity_reader_and_split(tmp_path):
    lines = [f"__label__{'neg' if i < 10 else 'pos'} w{i} film ." for i in range(20)]
    path = tmp_path / "pol.cor"
    path.write_text("\n".join(lines) + "\n")
    assert len(read_polarity(path)) == 20
    task = build("task", {"type": "sst", "format": "polarity", "train": str(path)})
    assert task.missing_data() is None
    parts = {s: task.read(s) for s in ("train", "dev", "test")}
    assert [len(parts[s]) for s in ("train", "dev", "test")] == [12, 4, 4]
    assert sorted(x.label for x in parts["test"]) == [0, 0, 1, 1]
    assert not set(parts["train"]) & set(parts["test"])
    path.write_text("__label__meh bad line\n")
    with pytest.raises(InputFileError, match="pol.cor:1: line must start with __label__neg"):
        read_polarity(path)


def test_undecodable_bytes_name_the_line(tmp_path):
    path = tmp_path / "pol.cor"
    path.write_bytes(b"__label__pos fine .\n__label__neg clich\xe9s .\n")
    with pytest.raises(InputFileError, match=r"pol.cor:2: byte 0xe9 is not valid utf-8; set the task's encoding"):
        read_polarity(path)
    assert read_polarity(path, "cp1252")[1].tokens == ("clichés", ".")


def test_missing_data_is_reported(tmp_path):
    task = build("task", {"type": "sst", "train": "x.txt"})
    assert task.missing_data() == "dev"


SMALL_MODEL = {"pre_encode_dim": 16, "encoder_hidden": 8, "integrator_hidden": 8, "output_dims": [16, 8],
               "embedding_dropout": 0.0, "pre_encode_dropout": 0.0, "integrator_dropout": 0.0,
               "output_dropouts": [0.0, 0.0, 0.0]}


def test_bcn_overfits_with_features_and_vectors(tmp_path, features_writer, vectors_writer):
    task = _task(tmp_path, model=SMALL_MODEL)
    data = {s: task.read(s) for s in ("train", "dev", "test")}
    sentences = [list(x.tokens) for s in data.values() for x in s]
    h5 = features_writer(tmp_path / "f.hdf5", list({" ".join(s): s for s in sentences}.values()))
    npy, vocab = vectors_writer(tmp_path, [t for s in sentences for t in s])
    inputs = TaskInputs.create(sentences, vectors=npy, vocab=vocab, features=h5)
    trainer = TrainerConfig.from_dict({"batch_size": 4, "lr": 1e-2, "epochs": 40, "patience": 40}, task.default_trainer)
    result = run_task(task, inputs, seed=3, trainer=trainer, data=data)
    assert result["dev"] == 1.0 and result["test"] == 1.0
    assert result["history"][0]["train_loss"] > result["history"][-1]["train_loss"]
    again = run_task(task, inputs, seed=3, trainer=trainer, data=data)
    assert again["history"] == result["history"]  # deterministic on CPU


def test_cli_end_to_end_and_no_data(tmp_path, vectors_writer):
    lines = [f"__label__{'neg' if i % 2 else 'pos'} {'bad awful' if i % 2 else 'good great'} film{i} ." for i in range(30)]
    (tmp_path / "pol.cor").write_text("\n".join(lines) + "\n")
    npy, vocab = vectors_writer(tmp_path, ["bad", "awful", "good", "great", "."])
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"scale": "demo", "tasks": {
        "demo": {"type": "sst", "format": "polarity", "train": str(tmp_path / "pol.cor"), "model": SMALL_MODEL,
                 "trainer": {"batch_size": 8, "epochs": 15, "lr": 1e-2, "patience": 15}},
        "ner": {"type": "sst", "train": None}}}))
    out = tmp_path / "res" / "seed1.json"
    assert main(["task", "--task", "demo", "--config", str(config), "--variant", "fasttext", "--seed", "1",
                 "--fasttext", str(npy), "--vocab", str(vocab), "--output", str(out)]) == 0
    record = json.loads(out.read_text())
    for key in ("task", "variant", "seed", "metric", "dev", "test", "scale", "num_train", "num_test", "seconds", "status",
                "device", "threads"):
        assert key in record
    assert record["device"] == "cpu" and record["threads"] == torch.get_num_threads()
    assert record["status"] == "ok" and record["metric"] == "accuracy" and record["test"] == 1.0
    assert (record["num_train"], record["num_test"]) == (18, 6)
    sentences = tmp_path / "sentences.txt"
    assert main(["task-sentences", "--task", "demo", "--config", str(config), "--output", str(sentences)]) == 0
    assert len(sentences.read_text().splitlines()) == 30
    section = json.loads(config.read_text())["tasks"]["demo"]
    again = tmp_path / "again.txt"
    assert main(["task-sentences", "--task", "demo", "--section-json", json.dumps(section), "--output", str(again)]) == 0
    assert again.read_text() == sentences.read_text()
    assert main(["task-sentences", "--task", "demo", "--output", str(again)]) == 1  # neither --config nor --section-json
    # --split-dir: each split's distinct sentences in its own file (the LM fine-tuning text, read by split)
    assert main(["task-sentences", "--task", "demo", "--config", str(config), "--split-dir", str(tmp_path / "text")]) == 0
    per_split = {split: (tmp_path / "text" / f"{split}.txt").read_text().splitlines() for split in ("train", "dev", "test")}
    assert all(len(set(lines)) == len(lines) > 0 for lines in per_split.values())
    assert set().union(*per_split.values()) == set(sentences.read_text().splitlines())
    assert len(per_split["test"]) == 6 and not set(per_split["test"]) <= set(per_split["train"] + per_split["dev"])
    assert main(["task-sentences", "--task", "demo", "--config", str(config)]) == 1  # nothing to write
    out2 = tmp_path / "ner.json"
    assert main(["task", "--task", "ner", "--config", str(config), "--variant", "x", "--output", str(out2)]) == 0
    assert json.loads(out2.read_text())["status"] == "no data: set tasks.ner.train"


def test_device_flag(tmp_path, vectors_writer, monkeypatch, capsys):
    """--device cpu / auto run on the CPU here; --device cuda without CUDA is one clear line."""
    lines = [f"__label__{'neg' if i % 2 else 'pos'} {'bad' if i % 2 else 'good'} film{i} ." for i in range(10)]
    (tmp_path / "pol.cor").write_text("\n".join(lines) + "\n")
    npy, vocab = vectors_writer(tmp_path, ["bad", "good", "."])
    section = json.dumps({"type": "sst", "format": "polarity", "train": str(tmp_path / "pol.cor"), "model": SMALL_MODEL,
                          "trainer": {"batch_size": 4, "epochs": 1}})
    args = ["task", "--task", "demo", "--section-json", section, "--variant", "fasttext",
            "--fasttext", str(npy), "--vocab", str(vocab)]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for device in ("cpu", "auto"):
        out = tmp_path / f"{device}.json"
        assert main(args + ["--device", device, "--output", str(out)]) == 0
        assert json.loads(out.read_text())["device"] == "cpu"
    capsys.readouterr()
    for device in ("cuda", "cuda:1"):
        assert main(args + ["--device", device, "--output", str(tmp_path / "gpu.json")]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "CUDA is not available" in err and "--device cpu" in err
    assert not (tmp_path / "gpu.json").exists()
    assert main(args + ["--device", "tpu", "--output", str(tmp_path / "x.json")]) == 1
    assert "--device must be" in capsys.readouterr().err


def test_bcn_integrator_dropout_acts_on_the_pooled_vector(tmp_path, vectors_writer):
    """AllenNLP's BCN: dropout after max/min/mean/self-attentive pooling, right before the output layer."""
    task = _task(tmp_path, model={**SMALL_MODEL, "integrator_dropout": 0.5})
    data = task.read("train")
    sentences = [list(x.tokens) for x in data]
    npy, vocab = vectors_writer(tmp_path, [t for s in sentences for t in s])
    inputs = TaskInputs.create(sentences, vectors=npy, vocab=vocab)
    model = task.build_model(inputs)
    seen = {}
    model.integrator_dropout.register_forward_hook(lambda m, args, out: seen.update(inp=args[0], out=out))
    model.output.register_forward_pre_hook(lambda m, args: seen.update(classifier_in=args[0]))
    model.train()
    model(task.collate(data[:4], inputs))
    width = model.integrator.output_dim
    assert seen["inp"].shape == (4, 4 * width)  # the pooled vector, not (batch, time, width)
    assert seen["classifier_in"] is seen["out"]
    dropped = seen["out"] == 0
    assert dropped.any() and torch.equal(seen["out"][~dropped], 2 * seen["inp"][~dropped])
