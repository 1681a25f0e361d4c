"""`elmoc lm-finetune`: ULMFiT's LM fine-tuning on a task's text, exported; resume; bad input.

A tiny two-direction cosine LM is trained (through `elmoc train`) on random sentences over 20
words; the task text is a few fixed sentences over the same words, which the LM has not seen.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_corpus import sentences, tiny_spec, write_workdir

from elmoc.cli import main
from elmoc.config_section import Section
from elmoc.errors import ConfigError
from elmoc.directions import runs
from elmoc.model_file import load_checkpoint
from elmoc.outputs.heldout import metric_class
from elmoc.train import loop
from elmoc.train.lm_finetune import LMFineTuneSettings, split_text
from elmoc.train.signals import EXIT_INTERRUPTED

TASK = ["the cat sat on a mat", "a dog ran after the red ball", "the old bird sang over a green tree",
        "the red cat ran after a bird"]
TEST = ["a green dog sat on the old cat", "the mat ran over a red tree"]  # the test split's own sentences
SECTION = json.dumps({"epochs": 3, "lr": 0.03, "batch_size": 1})  # the slanted schedule, 1 row a step


def trained_variant(root: Path, spec: dict) -> Path:
    """``root`` with vocab.txt, vec.npy, the corpus, lm/tiny/{spec.yaml, <run>/} (``spec`` trained
    one epoch per run), task.txt (40 sentences) and the split folder task/ (train.txt: the first
    32 of them, dev.txt: the last 8, test.txt: :data:`TEST`)."""
    rng = np.random.default_rng(0)
    write_workdir(root, [sentences(rng, 30)], sentences(np.random.default_rng(1), 6), spec, rng)
    (root / "lm/tiny").mkdir(parents=True)
    shutil.copy(root / "spec.yaml", root / "lm/tiny/spec.yaml")
    (root / "task.txt").write_text("\n".join(TASK * 10) + "\n")
    (root / "task").mkdir()
    for split, lines in (("train", TASK * 8), ("dev", TASK * 2), ("test", TEST)):
        (root / "task" / f"{split}.txt").write_text("\n".join(lines) + "\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("ELMOC_NATIVE_LSTM", "0")
        for run in runs(spec):
            assert main(["train", "--spec", "spec.yaml", "--direction", run, "--output-dir", f"lm/tiny/{run}",
                         "--threads", "1"]) == 0
    return root


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 1-layer cosine LM trained one epoch per direction (:func:`trained_variant`)."""
    spec = tiny_spec("tiny", {"type": "cosine", "vectors": "vec.npy"}, batch_size=2, bptt=5,
                     checkpoint_every=10, log_every=10)
    return trained_variant(tmp_path_factory.mktemp("lmft"), spec)


@pytest.fixture
def work(trained, tmp_path, monkeypatch):
    """A copy of ``trained`` as the current directory (the Python LSTM loop, one thread)."""
    root = tmp_path / "w"
    shutil.copytree(trained, root)
    monkeypatch.chdir(root)
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    return root


def lm_finetune(*extra: str, output: str = "ft/tiny/task/model", text: str = "task") -> int:
    return main(["lm-finetune", "--lm-dir", "lm/tiny", "--text", text, "--output-dir", output,
                 "--threads", "1", *extra])


def test_finetuning_improves_the_heldout_text_and_the_output_loads_and_embeds(work):
    from elmoc.pretrained.elmo import embed_sentences
    from elmoc.pretrained.loader import load_bilm

    assert lm_finetune("--section-json", SECTION) == 0
    for direction in ("forward", "backward"):
        summary = json.loads((work / "ft/tiny/task" / direction / "heldout.json").read_text())
        assert summary["metric"] == "cosine"
        assert summary["after"] > summary["before"] + 0.05, summary  # mean cosine: higher is better
        payload = load_checkpoint(work / "ft/tiny/task" / direction / "model.pt")
        assert payload["lm_finetuned"] == {"source": f"lm/tiny/{direction}/model.pt", "text": "train_dev",
                                           "splits": ["train", "dev"]}
        assert "lm_finetune" not in payload["spec"]
        assert payload["spec"]["train"]["epochs"] == 3
        source = load_checkpoint(work / "lm/tiny" / direction / "model.pt")["model"]
        assert any(not torch.equal(source[k], v) for k, v in payload["model"].items())
    # the last 10 % of the text is heldout; the rest is the training shard
    assert (work / "ft/tiny/task/text/heldout.txt").read_text().splitlines() == (TASK * 10)[-4:]
    assert len((work / "ft/tiny/task/text/train/shard_000.txt").read_text().splitlines()) == 36
    bilm = load_bilm(work / "ft/tiny/task/model")
    tuned = load_checkpoint(work / "ft/tiny/task/forward/model.pt")["model"]
    exported = dict(bilm.forward_lm.named_parameters())
    assert all(torch.equal(exported[k], tuned[k]) for k in exported if k in tuned)
    layers = embed_sentences(bilm, [s.split() for s in TASK[:2]])
    assert layers[0].shape[1] == len(TASK[0].split()) and np.isfinite(layers[0]).all()
    # a rerun reuses the finished runs (not trained again) and rewrites the same directory
    stamps = [(work / "ft/tiny/task" / d / "model.pt").stat().st_mtime_ns for d in ("forward", "backward")]
    assert lm_finetune("--section-json", SECTION) == 0
    assert stamps == [(work / "ft/tiny/task" / d / "model.pt").stat().st_mtime_ns for d in ("forward", "backward")]
    # another text is another run: the finished one is not reused
    Path("task/train.txt").write_text("\n".join(reversed(TASK * 8)) + "\n")
    assert lm_finetune("--section-json", SECTION) == 0
    assert (work / "ft/tiny/task/forward/model.pt").stat().st_mtime_ns != stamps[0]


@pytest.mark.parametrize("kind", ["joint", "masked"])
def test_a_joint_softmax_lm_and_a_masked_lm_are_fine_tuned_as_one_run_each(kind, tmp_path, monkeypatch):
    from elmoc.pretrained.elmo import embed_sentences

    if kind == "joint":  # the softmax family's bi-LM: one shared output layer, sampled softmax
        spec = tiny_spec("tiny", {"type": "sampled", "num_samples": 5}, batch_size=2, bptt=5, directions="joint")
    else:
        spec = tiny_spec("tiny", {"type": "cosine", "vectors": "vec.npy"}, batch_size=2, bptt=5,
                         objective="masked_lm", reset_state=True)
        spec["encoder"] = {"type": "transformer", "d_model": 8, "heads": 2, "d_ff": 16, "num_layers": 2,
                           "dropout": 0.1, "causal": False}
    root = trained_variant(tmp_path / "w", spec)
    monkeypatch.chdir(root)
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    assert lm_finetune("--section-json", SECTION) == 0
    assert sorted(p.name for p in (root / "ft/tiny/task").iterdir() if p.name not in (".train.lock",)) == \
        sorted([kind, "model", "text"])
    summary = json.loads((root / "ft/tiny/task" / kind / "heldout.json").read_text())
    better = summary["after"] > summary["before"] if metric_class(summary["metric"]).higher_is_better else \
        summary["after"] < summary["before"]
    assert better, summary
    layers = embed_sentences("ft/tiny/task/model", [TASK[0].split()])
    assert layers[0].shape[1] == len(TASK[0].split()) and np.isfinite(layers[0]).all()


def test_the_runs_start_from_the_trained_weights(work):
    assert lm_finetune("--section-json", json.dumps({"lr": 1e-12})) == 0  # Adam moves no weight by more than lr
    for direction in ("forward", "backward"):
        tuned = load_checkpoint(work / "ft/tiny/task" / direction / "model.pt")["model"]
        source = load_checkpoint(work / "lm/tiny" / direction / "model.pt")["model"]
        assert tuned.keys() == source.keys()
        assert all(torch.allclose(tuned[k], source[k], rtol=0, atol=1e-9) for k in tuned)


@pytest.mark.parametrize("schedule", ["slanted", "pretraining"])
def test_a_run_stopped_by_sigterm_resumes_bit_exact(schedule, work, monkeypatch, caplog):
    SECTION = json.dumps({**json.loads(globals()["SECTION"]), "schedule": schedule})
    assert lm_finetune("--section-json", SECTION, output="straight/model") == 0
    real, calls = loop.Trainer.take_step, []

    def sigterm_in_the_backward_run(self, *a):
        out = real(self, *a)
        calls.append(self.direction)
        if calls.count("backward") == 13:  # after its step-10 checkpoint
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    monkeypatch.setattr(loop.Trainer, "take_step", sigterm_in_the_backward_run)
    assert lm_finetune("--section-json", SECTION, output="resumed/model") == EXIT_INTERRUPTED
    assert load_checkpoint(work / "resumed/backward/checkpoint.pt")["step"] == 13  # the step was finished, saved
    assert (work / "resumed/forward/model.pt").is_file() and not (work / "resumed/backward/model.pt").exists()
    assert not (work / "resumed/model").exists()
    monkeypatch.setattr(loop.Trainer, "take_step", real)
    with caplog.at_level(logging.INFO, logger="elmoc.train.loop"):
        assert lm_finetune("--section-json", SECTION, output="resumed/model") == 0
    resumed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("resumed ")]
    assert len(resumed) == 1 and "backward" in resumed[0] and "from step 13 " in resumed[0]  # not restarted
    for name in ("forward/model.pt", "backward/model.pt"):
        a, b = (load_checkpoint(work / d / name) for d in ("straight", "resumed"))
        assert a["model"].keys() == b["model"].keys()
        assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"]), name
    for name in ("forward.safetensors", "backward.safetensors"):  # the exported directory's weights
        assert (work / "straight/model" / name).read_bytes() == (work / "resumed/model" / name).read_bytes()
    a, b = (json.loads((work / d / "backward/heldout.json").read_text()) for d in ("straight", "resumed"))
    assert (a["before"], a["after"], a["steps"]) == (b["before"], b["after"], b["steps"])


def test_bad_input_is_one_line(work, capsys):
    Path("empty.txt").write_text("\n  \n")
    assert main(["lm-finetune", "--lm-dir", "lm/tiny", "--text", "empty.txt", "--output-dir", "o/model"]) == 1
    assert "empty.txt: has 0 sentence(s); LM fine-tuning needs at least 2" in capsys.readouterr().err
    shutil.rmtree("lm/tiny/backward")
    assert lm_finetune() == 1
    err = capsys.readouterr().err
    assert "lm/tiny/backward/model.pt: not found; train the backward run first" in err and "Traceback" not in err
    assert lm_finetune("--epochs", "2", "--section-json", "{}") == 1
    assert "drop --epochs" in capsys.readouterr().err
    assert lm_finetune("--section-json", '{"epoch": 2}') == 1
    assert "did you mean 'epochs'" in capsys.readouterr().err


def test_a_text_shorter_than_one_window_is_one_line(tmp_path, monkeypatch, capsys, caplog):
    spec = tiny_spec("tiny", {"type": "cosine", "vectors": "vec.npy"}, batch_size=16, bptt=5, directions="forward")
    monkeypatch.chdir(trained_variant(tmp_path / "w", spec))
    Path("short.txt").write_text("the cat\nthe dog\n")  # 4 tokens to train on: no row of 16
    for section in ({"batch_size": 16}, {"schedule": "pretraining"}):  # rows given, or the spec's 16
        assert main(["lm-finetune", "--lm-dir", "lm/tiny", "--text", "short.txt", "--output-dir", "o/model",
                     "--section-json", json.dumps(section)]) == 1
        err = capsys.readouterr().err
        assert "short.txt: is too short for one training window of lm/tiny/forward/model.pt (16 rows x bptt 5 " \
               "tokens): give a longer task text, or a smaller lm_finetune.batch_size" in err and "Traceback" not in err
        assert not Path("o/model").exists()
    # the slanted schedule's default 64 rows are halved until the text gives a step, with a warning line
    with caplog.at_level(logging.WARNING, logger="elmoc.train.lm_finetune"):
        assert main(["lm-finetune", "--lm-dir", "lm/tiny", "--text", "short.txt", "--output-dir", "o/model"]) == 0
    assert "short.txt: 1 optimizer steps in all (2 rows x 5 tokens per step, 1 epoch(s)), fewer than " \
           "lm_finetune.min_steps 20" in caplog.text
    assert load_checkpoint(Path("o/forward/model.pt"))["spec"]["train"]["batch_size"] == 2


def test_settings_and_the_split():
    default = LMFineTuneSettings.from_section(Section({}, "lm_finetune"))
    assert default == LMFineTuneSettings(1, "slanted", None, 2.6, 0.1, 32.0, None, 20, "train_dev")
    assert default.rows == 64 and default.optimizer(100) == {
        "type": "slanted_adam", "lr": 0.004, "betas": [0.7, 0.99], "decay": 2.6, "cut_frac": 0.1, "ratio": 32.0,
        "total_steps": 100}
    former = LMFineTuneSettings.from_section(Section({"schedule": "pretraining"}, "lm_finetune"))
    assert former.rows is None and former.optimizer(100) is None  # the LM's own optimizer and batch
    assert LMFineTuneSettings(lr=0.01, schedule="pretraining").optimizer(5) == {"type": "adam", "lr": 0.01}
    for bad, message in (({"epochs": 0}, "epochs must be a positive integer"), ({"lr": -1}, "lr must be a number > 0"),
                         ({"lr": 0}, "lr must be"), ({"schedule": "slanted_triangle"},
                          "schedule must be one of slanted, pretraining, got 'slanted_triangle' (did you mean 'slanted'?)"),
                         ({"text": "transdutive"}, "text must be one of train_dev, transductive, got 'transdutive' "
                          "(did you mean 'transductive'?)"), ({"batch_size": 0}, "batch_size must be a positive"),
                         ({"cut_frac": 1}, "cut_frac must be in (0, 1)"), ({"decay": 0}, "decay must be a number > 0"),
                         ({"min_steps": -1}, "min_steps must be an integer >= 0"), ({"ratio": "32"}, "ratio must be")):
        with pytest.raises(ConfigError, match=re.escape(f"config lm_finetune.{message}")):
            LMFineTuneSettings.from_section(Section(bad, "lm_finetune"))


def test_split_keeps_the_last_tenth_heldout(tmp_path):
    train_part, heldout = split_text([f"s{i}" for i in range(25)], "s.txt")
    assert heldout == ["s22", "s23", "s24"] and train_part == [f"s{i}" for i in range(22)]
    assert split_text(["a b", "c d"], "s.txt") == (["a b"], ["c d"])


def test_a_heldout_shorter_than_a_batch_gets_fewer_rows_not_an_error(work):
    """A test fixture's task text (CI's rehearsal: 20 SST sentences, 2 heldout of one word each)
    may hold fewer heldout tokens than the LM's heldout batch has rows: the job fine-tunes with
    fewer heldout rows instead of failing."""
    from elmoc.model_file import save_checkpoint

    for run in runs(load_checkpoint(Path("lm/tiny/forward/model.pt"))["spec"]):
        payload = load_checkpoint(Path(f"lm/tiny/{run}/model.pt"))
        payload["spec"]["train"]["eval_batch_size"] = 8  # 8 rows need 9 heldout tokens
        save_checkpoint(Path(f"lm/tiny/{run}/model.pt"), payload)
    Path("short.txt").write_text("\n".join(TASK * 3 + ["no", "yes"]) + "\n")  # 14 lines: "no", "yes" heldout
    assert main(["lm-finetune", "--lm-dir", "lm/tiny", "--text", "short.txt", "--output-dir", "ft/tiny/short/model",
                 "--threads", "1", "--section-json", SECTION]) == 0
    assert Path("ft/tiny/short/text/heldout.txt").read_text().split() == ["no", "yes"]
    assert Path("ft/tiny/short/model/elmoc-model.json").is_file()


def test_the_default_text_is_train_and_dev_and_transductive_adds_test(work, caplog):
    """The test split's sentences are read only when asked for, and the fine-tuned model says so."""
    trained_on = lambda out: set((work / out / "text/train/shard_000.txt").read_text().splitlines()) | set(
        (work / out / "text/heldout.txt").read_text().splitlines())
    assert lm_finetune("--section-json", SECTION, output="inductive/model") == 0
    assert trained_on("inductive") == set(TASK)
    with caplog.at_level(logging.WARNING, logger="elmoc.train.lm_finetune"):
        assert lm_finetune("--section-json", json.dumps({**json.loads(SECTION), "text": "transductive"}),
                           output="transductive/model") == 0
    assert "the LM is fine-tuned on the test split's sentences too" in caplog.text
    assert trained_on("transductive") == set(TASK) | set(TEST)
    for out, text, splits in (("inductive", "train_dev", ["train", "dev"]),
                              ("transductive", "transductive", ["train", "dev", "test"])):
        for direction in ("forward", "backward"):
            record = load_checkpoint(work / out / direction / "model.pt")["lm_finetuned"]
            assert record == {"source": f"lm/tiny/{direction}/model.pt", "text": text, "splits": splits}
    # a sentences file is read whole and recorded as such, with a warning line
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="elmoc.train.lm_finetune"):
        assert lm_finetune("--section-json", SECTION, output="file/model", text="task.txt") == 0
    assert "task.txt is a sentences file: its splits are unknown" in caplog.text
    assert load_checkpoint(work / "file/forward/model.pt")["lm_finetuned"]["text"] == "file"
    Path("task/dev.txt").unlink()
    assert lm_finetune("--section-json", SECTION, output="nodev/model") == 1  # a split folder without dev.txt


def test_the_slanted_schedule_and_discriminative_rates_per_step_and_layer(work, monkeypatch):
    """ULMFiT section 3.2: every step's rate of layer l is lr * slanted(step) / 2.6^(top - l)."""
    from elmoc.lm import parameter_layers
    from elmoc.train.schedule import slanted_triangular

    real, seen = loop.Trainer.take_step, []

    def record(self, *a):
        out = real(self, *a)
        layer_of = parameter_layers(self.core)
        name_of = {id(p): n for n, p in self.core.named_parameters(remove_duplicate=False)}
        seen.append((self.direction, self.step, max(layer_of.values()), [
            (g["lr"], {layer_of[name_of[id(p)]] for p in g["params"]}) for o in self.bundle.optimizers
            for g in o.param_groups]))
        return out

    monkeypatch.setattr(loop.Trainer, "take_step", record)
    assert lm_finetune("--section-json", SECTION) == 0
    optimizer = load_checkpoint(work / "ft/tiny/task/forward/model.pt")["spec"]["optimizer"]
    total = optimizer["total_steps"]
    assert optimizer == {"type": "slanted_adam", "lr": 0.03, "betas": [0.7, 0.99], "decay": 2.6, "cut_frac": 0.1,
                         "ratio": 32.0, "total_steps": total}
    assert [step for d, step, _, _ in seen if d == "forward"] == list(range(1, total + 1)) and total >= 20
    for _, step, top, groups in seen:
        assert sorted(layer for _, layers in groups for layer in layers) == list(range(top + 1))  # one group a layer
        for lr, (layer,) in groups:
            assert lr == pytest.approx(0.03 * slanted_triangular(step - 1, total, 0.1, 32) / 2.6 ** (top - layer))
    top_rates = [max(lr for lr, _ in groups) for d, _, _, groups in seen if d == "forward"]
    cut = int(total * 0.1)
    assert top_rates[0] == pytest.approx(0.03 / 32) and top_rates[cut] == pytest.approx(0.03) == max(top_rates)
    assert all(a < b for a, b in zip(top_rates[:cut], top_rates[1:cut + 1]))  # the short rise
    assert all(a > b for a, b in zip(top_rates[cut:], top_rates[cut + 1:]))  # the long fall


def test_parameter_layers_count_the_output_layer_as_the_top():
    from elmoc.data.vocab.vocabulary import SPECIALS, Vocabulary
    from elmoc.lm import LanguageModel, parameter_layers

    vocab = Vocabulary(list(SPECIALS) + "a b c d".split())
    spec = {"input": {"type": "random", "dim": 8, "seed": 1, "trainable": True},
            "encoder": {"type": "elmo_lstm", "num_layers": 2, "cell_size": 10, "projection_size": 6},
            "output": {"type": "sampled", "num_samples": 4}}
    layers = parameter_layers(LanguageModel.from_spec(spec, vocab))
    by_layer = {}
    for name, layer in layers.items():
        by_layer.setdefault(layer, set()).add(".".join(name.split(".")[:3 if ".lstm_layers." in name else 2]))
    assert by_layer == {0: {"input_layer.table", "encoder.input_projection", "encoder.input_norm"},
                        1: {"encoder.lstm_layers.0"}, 2: {"encoder.lstm_layers.1"}, 3: {"output_layer.weight",
                                                                                         "output_layer.bias"}}


def test_a_bad_slanted_adam_section_is_one_line():
    from elmoc.train.optim import check_optimizer

    assert check_optimizer({"type": "slanted_adam", "lr": 0.004, "decay": 2.6, "total_steps": 5})[0] == "slanted_adam"
    for bad, message in (({"total_steps": 1.5}, "optimizer.total_steps must be an integer"),
                         ({"decay": 0}, "optimizer.decay"), ({"warmup": 10}, "warmup")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            check_optimizer({"type": "slanted_adam", **bad})
