"""A trained task model can be used (issue 37.5): ``elmoc task --save-model`` writes a directory,
``elmoc predict`` runs it on new input with the bi-LM of its ``lm/`` in process.

A tiny LM is saved, exported (``elmoc export``) and extracted (``elmoc extract``) as the workflow
does; a 1-epoch run per task on an AllenNLP fixture saves its model; predicting on the run's own test
file gives back the run's test score, and the in-process features equal the extracted HDF5's.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmoc.cli import main
from elmoc.data.vocab.vocabulary import SPECIALS, Vocabulary
from elmoc.errors import InputFileError
from elmoc.lm import LanguageModel
from elmoc.metrics.span_f1 import SpanF1
from elmoc.model_file import save_checkpoint
from elmoc.tasks.config import build_task
from elmoc.tasks.snli import LABELS

FIXTURES = Path(os.environ.get("ELMOC_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data")) \
    / "fixtures" / "allennlp"

SECTIONS = {
    "sst5": {"type": "sst", "file": "sst.txt", "use_subtrees": False,
             "model": {"pre_encode_dim": 8, "encoder_hidden": 6, "integrator_hidden": 6, "output_dims": [8, 6],
                       "output_dropouts": [0.2, 0.2, 0.2]}},
    "snli": {"type": "snli", "file": "snli.jsonl",
             "model": {"encoder_hidden": 6, "projection_dim": 6, "inference_hidden": 6, "output_hidden": 6}},
    "ner": {"type": "ner", "file": "conll2003.txt", "model": {"hidden": 8, "char_filters": 4}},
}
TRAINER = {"epochs": 1, "batch_size": 2, "eval_batch_size": 2, "lr": 0.01, "checkpoint_minutes": 0,
           "progress_seconds": 0}


def _section(name: str, path: str | Path | None = None) -> dict:
    """The section of task ``name`` reading ``path`` (default: its fixture) as train, dev and test."""
    section = dict(SECTIONS[name])
    fixture = FIXTURES / section.pop("file")
    path = str(path or fixture)
    return {**section, "train": path, "dev": path, "test": path, "trainer": TRAINER}


def _sentences(section: dict) -> list[list[str]]:
    task, _ = build_task(section)
    seen = {}
    for split in ("train", "dev", "test"):
        for s in task.sentences(task.read(split)):
            seen.setdefault(" ".join(s), s)
    return list(seen.values())


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    """A tiny random bi-LM under ``results/lm/tiny``, exported to ``model/``; its cwd."""
    if not (FIXTURES / "sst.txt").is_file():
        pytest.skip("AllenNLP fixtures absent (set ELMOC_SHARED_DATA)")
    root = tmp_path_factory.mktemp("predict")
    cwd = Path.cwd()
    os.chdir(root)
    try:
        words = sorted({w for name in SECTIONS for s in _sentences(_section(name)) for w in s})[::2]  # half unseen
        vocab = Vocabulary(list(SPECIALS) + words)
        vocab.save("results/vocab/vocab.txt")
        np.save("results/vocab/vectors.npy", np.random.default_rng(0).normal(size=(len(vocab), 6)).astype("float32"))
        spec = {"name": "tiny", "description": "tiny test LM", "input": {"type": "random", "dim": 8, "seed": 3},
                "encoder": {"type": "elmo_lstm", "num_layers": 2, "cell_size": 10, "projection_size": 6},
                "output": {"type": "cosine", "vectors": "results/vocab/vectors.npy"},
                "optimizer": {"type": "adam", "lr": 0.01}, "train": {"batch_size": 2, "bptt": 5},
                "data": {"train": "results/corpus/train", "heldout": "results/corpus/heldout.txt"},
                "vocab": "results/vocab/vocab.txt"}
        for seed, direction in enumerate(("forward", "backward")):
            torch.manual_seed(seed)
            save_checkpoint(Path(f"results/lm/tiny/{direction}/model.pt"), {
                "spec": spec, "vocab_path": spec["vocab"], "direction": direction, "step": 1, "tokens": 5,
                "model": LanguageModel.from_spec(spec, vocab).state_dict(), "final": True})
        assert main(["export", "--variant", "tiny", "--output-dir", "model"]) == 0
    finally:
        os.chdir(cwd)
    return root


def _train_and_save(lm: Path, name: str) -> tuple[dict, Path, Path]:
    """``elmoc extract`` of the task's sentences, then ``elmoc task --save-model``: (metrics, task model dir,
    a copy of the data to predict on); the data the run read is deleted, so the saved model must not need it.
    sst and ner also read word vectors (the LM's output table, half the words unknown)."""
    work = lm / name
    work.mkdir(exist_ok=True)
    fixture = FIXTURES / SECTIONS[name]["file"]
    data, kept = work / f"train{fixture.suffix}", work / f"input{fixture.suffix}"
    data.write_bytes(fixture.read_bytes())
    kept.write_bytes(fixture.read_bytes())
    section = _section(name, data)
    (work / "s.txt").write_text("".join(" ".join(s) + "\n" for s in _sentences(section)), encoding="utf-8")
    lms = ["--forward", "results/lm/tiny/forward/model.pt", "--backward", "results/lm/tiny/backward/model.pt"]
    assert main(["extract", *lms, "--sentences", f"{name}/s.txt", "--output", f"{name}/f.hdf5"]) == 0
    assert main(["task", "--task", name, "--section-json", json.dumps(section), "--variant", "tiny",
                 "--output", f"{name}/seed1.json", "--features", f"{name}/f.hdf5", "--threads", "1",
                 "--save-model", f"{name}/task-model", "--lm-model", "model"]
                + (["--fasttext", "results/vocab/vectors.npy", "--vocab", "results/vocab/vocab.txt"]
                   if name != "snli" else [])) == 0
    data.unlink()
    return json.loads((work / "seed1.json").read_text()), work / "task-model", kept


def _run_model(name: str, saved: Path, data: Path):
    """(task, model, inputs) of the run: the saved weights in a model over the run's inputs (the HDF5
    of `elmoc extract` and the word table of the run's sentences), in eval mode."""
    from elmoc.io.safe_load import load_weights_only
    from elmoc.tasks.embedder import TaskInputs

    section = _section(name, data)
    task, _ = build_task(section)
    vectors = {} if name == "snli" else {"vectors": "results/vocab/vectors.npy", "vocab": "results/vocab/vocab.txt"}
    inputs = TaskInputs.create(_sentences(section), features=f"{name}/f.hdf5", lowercase=task.lowercase_words,
                               **vectors)
    model = task.build_model(inputs)
    model.load_state_dict(load_weights_only(saved / "weights.pt"))
    return task, model.eval(), inputs


def _run_records(name: str, saved: Path, data: Path) -> list[dict]:
    """The records of the run's own test predictions (:func:`_run_model`)."""
    task, model, inputs = _run_model(name, saved, data)
    with torch.no_grad():
        return [task.prediction_record(x, _rows(model(task.collate([x], inputs)).predictions)[0])
                for x in task.read("test")]


def _predict(*argv: str) -> int:
    return main(["predict", *argv, "--threads", "1"])


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def in_lm(lm, monkeypatch):
    monkeypatch.chdir(lm)
    return lm


def test_sst_predictions_give_the_runs_test_score_and_extract_numbers(in_lm):
    record, saved, test_file = _train_and_save(in_lm, "sst5")
    names = {p.name for p in saved.iterdir()}
    assert {"task-model.json", "weights.pt", "words.json", "lm", "README.md"} <= names
    assert (saved / "lm/elmoc-model.json").is_file() and "elmoc predict" in (saved / "README.md").read_text()
    meta = json.loads((saved / "task-model.json").read_text())
    assert meta["section"]["granularity"] == "5-class" and meta["encoder"] == "features" and meta["seed"] == 1
    assert _predict("--task-model", str(saved), "--input-format", "task", str(test_file), "--output", "p.jsonl") == 0
    task, _ = build_task(_section("sst5", test_file))
    gold = task.read("test")
    out = _records(Path("p.jsonl"))
    assert [r["tokens"] for r in out] == [list(x.tokens) for x in gold]
    assert all(isinstance(r["label"], str) for r in out)
    accuracy = sum(int(r["label"]) == x.label for r, x in zip(out, gold)) / len(gold)
    assert accuracy == pytest.approx(record["test"], abs=1e-9)
    assert out == _run_records("sst5", saved, test_file)
    # sentences.txt is the default input of a single-sentence task: the same predictions
    Path("s.txt").write_text("".join(" ".join(x.tokens) + "\n" for x in gold), encoding="utf-8")
    assert _predict("--task-model", str(saved), "s.txt", "--output", "q.jsonl") == 0
    assert _records(Path("q.jsonl")) == out
    # the in-process features are the numbers `elmoc extract` wrote
    from elmoc.tasks.fine_tune import LMInputs
    from elmoc.tasks.task_model import load_task_model

    loaded = load_task_model(saved)
    # a features model runs its LM as the frozen fine-tuning recipe does, with the weights of lm/
    assert isinstance(loaded.inputs, LMInputs) and loaded.inputs.fine_tune.recipe == "frozen"
    tokens = [list(x.tokens) for x in gold] + [["an", "unseen", "wordzz"]]
    with torch.no_grad():
        layers = loaded.model.embedder.lm_layers(tokens)  # (layers, batch, words, dim)
    with h5py.File("sst5/f.hdf5") as h5:
        index = json.loads(h5["sentence_to_index"][0])
        for i, s in enumerate(tokens[:-1]):
            np.testing.assert_allclose(layers[:, i, :len(s)].numpy(), h5[index[" ".join(s)]][()], atol=1e-5)
    # the token representations (word table rows and mixed layers) are the run's; an unseen word gets unk
    _, model, inputs = _run_model("sst5", saved, test_file)
    with torch.no_grad():
        got = loaded.model.embedder(loaded.inputs.encode(tokens[:-1]))
        torch.testing.assert_close(got, model.embedder(inputs.encode(tokens[:-1])), atol=1e-5, rtol=0)
    assert loaded.inputs.encode(tokens[-1:]).word_ids[0, -1].item() == 1  # UNK_INDEX


def test_ner_tags_give_the_runs_test_f1(in_lm):
    record, saved, test_file = _train_and_save(in_lm, "ner")
    assert _predict("--task-model", str(saved), "--input-format", "task", str(test_file), "--output", "n.jsonl") == 0
    task, _ = build_task(_section("ner", test_file))
    gold = task.read("test")
    out = _records(Path("n.jsonl"))
    assert [r["tokens"] for r in out] == [list(x.tokens) for x in gold]
    metric = SpanF1("tags")
    metric.update([r["tags"] for r in out], {"tags": [list(x.tags) for x in gold]})
    assert metric.compute()["f1"] == pytest.approx(record["test"], abs=1e-9)
    assert out == _run_records("ner", saved, test_file)
    assert json.loads((saved / "task-model.json").read_text())["vocabularies"]["labels"][0] == "O"


def test_snli_pairs_give_the_runs_test_accuracy_and_refuse_sentences(in_lm, capsys):
    record, saved, test_file = _train_and_save(in_lm, "snli")
    test_file = str(test_file)
    assert _predict("--task-model", str(saved), test_file, "--output", "s.jsonl") == 0  # task format: the default
    task, _ = build_task(_section("snli", test_file))
    gold = task.read("test")
    out = _records(Path("s.jsonl"))
    assert [(r["premise"], r["hypothesis"]) for r in out] == [(list(x.premise), list(x.hypothesis)) for x in gold]
    accuracy = sum(r["label"] == LABELS[x.label] for r, x in zip(out, gold)) / len(gold)
    assert accuracy == pytest.approx(record["test"], abs=1e-9)
    assert out == _run_records("snli", saved, Path(test_file))
    capsys.readouterr()
    assert _predict("--task-model", str(saved), "--input-format", "sentences", test_file, "--output", "x") == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "does not read one sentence per line" in err and "--input-format task" in err


def test_a_fine_tuned_model_predicts_with_its_fine_tuned_lm(in_lm):
    """A fine-tuned run (encoder: fine_tune, recipe full) saves the LM weights it trained inside its
    weights and the --lm directory as lm/; predict gives back the run's test score, and the LM it
    predicts with is the fine-tuned one, not the directory's."""
    work = in_lm / "ft"
    work.mkdir(exist_ok=True)
    data = work / "train.txt"
    data.write_bytes((FIXTURES / "sst.txt").read_bytes())
    section = {**_section("sst5", data), "encoder": "fine_tune", "fine_tune": {"recipe": "full"}}
    assert main(["task", "--task", "sst5", "--section-json", json.dumps(section), "--variant", "tiny",
                 "--output", "ft/seed1.json", "--lm", "model", "--threads", "1",
                 "--save-model", "ft/task-model"]) == 0
    record = json.loads((work / "seed1.json").read_text())
    saved = work / "task-model"
    meta = json.loads((saved / "task-model.json").read_text())
    assert (meta["encoder"], meta["recipe"]) == ("fine_tune", "full") and (saved / "lm/elmoc-model.json").is_file()
    assert _predict("--task-model", str(saved), "--input-format", "task", str(data), "--output", "ft.jsonl") == 0
    task, _ = build_task(_section("sst5", data))
    gold = task.read("test")
    out = _records(Path("ft.jsonl"))
    accuracy = sum(int(r["label"]) == x.label for r, x in zip(out, gold)) / len(gold)
    assert accuracy == pytest.approx(record["test"], abs=1e-9)
    from elmoc.pretrained.loader import load_bilm
    from elmoc.tasks.task_model import load_task_model

    loaded = load_task_model(saved)
    tuned = dict(loaded.model.embedder.lm.named_parameters())
    original = dict(load_bilm("model").named_parameters())
    assert any(not torch.equal(tuned[k], original[k]) for k in original), "the LM predicted with is not fine-tuned"
    # a fine-tuned model's weights without one of its LM entries are refused, not filled from lm/
    state = torch.load(saved / "weights.pt", weights_only=True)
    del state[next(k for k in state if ".lm." in k or k.startswith("lm."))]
    torch.save(state, saved / "weights.pt")
    with pytest.raises(InputFileError, match="does not fit the model"):
        load_task_model(saved)


def _one_line(capsys, *parts: str) -> None:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    for part in parts:
        assert part in err, err


def test_bad_input_is_one_line_naming_the_file(in_lm, capsys, tmp_path):
    saved = in_lm / "sst5" / "task-model"
    if not saved.is_dir():
        _train_and_save(in_lm, "sst5")
    capsys.readouterr()
    Path("ok.txt").write_text("a good film\n", encoding="utf-8")
    assert _predict("--task-model", "model", "ok.txt", "--output", "o.jsonl") == 1  # an LM, not a task model
    _one_line(capsys, "model: not a task model directory", "--save-model")
    Path("blank.txt").write_text("a good film\n\nbad\n", encoding="utf-8")
    assert _predict("--task-model", str(saved), "blank.txt", "--output", "o.jsonl") == 1
    _one_line(capsys, "blank.txt:2")
    Path("plain.txt").write_text("a good film\n", encoding="utf-8")
    assert _predict("--task-model", str(saved), "--input-format", "task", "plain.txt", "--output", "o.jsonl") == 1
    _one_line(capsys, "plain.txt:1", "not task sst's input format", "--input-format sentences")
    assert _predict("--task-model", str(saved), "missing.txt", "--output", "o.jsonl") == 1
    _one_line(capsys, "missing.txt: input file not found")
    assert not Path("o.jsonl").exists()
    # an output among the inputs, and a run on features without the LM they came from
    assert _predict("--task-model", str(saved), "ok.txt", "--output", "ok.txt") == 1
    _one_line(capsys, "ok.txt")
    section = json.dumps(_section("sst5", "sst5/input.txt"))
    assert main(["task", "--task", "sst5", "--section-json", section, "--variant", "tiny", "--output",
                 str(tmp_path / "r.json"), "--features", "sst5/f.hdf5", "--save-model", str(tmp_path / "m")]) == 1
    _one_line(capsys, "--lm-model DIR")
    vectors = ["--fasttext", "results/vocab/vectors.npy", "--vocab", "results/vocab/vocab.txt"]
    assert main(["task", "--task", "sst5", "--section-json", section, "--variant", "fasttext", "--output",
                 str(tmp_path / "r.json"), *vectors, "--save-model", str(tmp_path / "m"), "--lm-model", "model"]) == 1
    _one_line(capsys, "names the LM of --features")
    Path("notes").mkdir()
    Path("notes/mine.txt").write_text("keep me\n", encoding="utf-8")
    assert main(["task", "--task", "sst5", "--section-json", section, "--variant", "fasttext", "--output",
                 str(tmp_path / "r.json"), *vectors, "--save-model", "notes"]) == 1  # refused before training
    _one_line(capsys, "notes: the folder exists, is not empty")
    assert Path("notes/mine.txt").is_file() and not (tmp_path / "r.run").exists()
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "m").exists()


def _conll_section(name: str, path: Path) -> dict:
    """The tiny SRL / coref sections of tests/tasks/test_resume.py, reading ``path``."""
    model = ({"hidden_dim": 8, "num_layers": 2, "predicate_dim": 4} if name == "srl" else
             {"contextualization_size": 8, "contextualization_layers": 1, "ffnn_size": 8, "ffnn_depth": 1,
              "feature_size": 4, "max_span_width": 3, "top_span_ratio": 0.8, "max_top_antecedents": 4})
    return {"type": name, "train": str(path), "dev": str(path), "test": str(path), "model": model}


@pytest.mark.parametrize("name", ["srl", "coref"])
def test_conll_tasks_round_trip_on_word_vectors(name, tmp_path, random_inputs):
    """SRL and coref (read in their CoNLL-2012 format) on word vectors alone (the FastText baseline:
    no lm/): the loaded model predicts what the saved one did, records in input order, without the
    training data (SRL's tag set comes from the directory)."""
    import sys

    from elmoc.tasks.runner import to_device
    from elmoc.tasks.task_model import load_task_model, save_task_model

    sys.path.insert(0, str(Path(__file__).parent))
    from test_coref import DOCS
    from test_srl import TINY

    data = tmp_path / "train.gold_conll"
    data.write_text(TINY if name == "srl" else DOCS, encoding="utf-8")
    section = _conll_section(name, data)
    task, _ = build_task(section)
    instances = task.read("test")
    inputs = random_inputs(task, instances)
    torch.manual_seed(0)
    model = task.build_model(inputs).eval()
    with torch.no_grad():
        want = [task.prediction_record(x, p) for x in instances
                for p in _rows(model(to_device(task.collate([x], inputs), "cpu")).predictions)]
    save_task_model(tmp_path / "tm", name=name, section=section, variant="fasttext", seed=1, task=task, model=model,
                    inputs=inputs, lm_dir=None, result={"metric": task.metric_name, "dev": 0.5, "test": 0.25},
                    eval_batch_size=2)
    kept = tmp_path / "input.gold_conll"
    data.rename(kept)
    assert not (tmp_path / "tm" / "lm").exists()
    saved = load_task_model(tmp_path / "tm")
    got = list(saved.predict(saved.task.read_input(kept)))
    assert got == want and len(got) == len(instances)
    key = "tags" if name == "srl" else "clusters"
    assert all(key in r for r in got)


def _rows(predictions):
    return predictions.tolist() if isinstance(predictions, torch.Tensor) else list(predictions)


def test_sigterm_during_predict_is_a_clean_exit_without_temporaries(in_lm):
    """SIGTERM is handled as by `elmoc embed`: exit 143, one line, no output and no temporary left."""
    import signal
    import subprocess
    import sys
    import time

    saved = in_lm / "sst5" / "task-model"
    if not saved.is_dir():
        _train_and_save(in_lm, "sst5")
    Path("many.txt").write_text("it is a good film .\n" * 20_000, encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "elmoc.cli", "predict", "--task-model", str(saved), "many.txt",
                             "--output", "m.jsonl", "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    def writing() -> bool:  # the output's temporary exists: the model is loaded, predictions are being made
        return bool(list(Path(".").glob(".m.*.tmp.jsonl")))

    for _ in range(2400):  # at most 2 minutes
        if writing() or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert writing() and proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, "Traceback" in err) == (143, False), err
    assert err.strip().endswith("elmoc predict: terminated (SIGTERM)"), err
    assert not list(Path(".").glob(".m.*")) and not Path("m.jsonl").exists()
