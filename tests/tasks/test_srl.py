"""SRL task: reader wiring, collate, overfitting a handful of predicates, runner, features."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from elmoc.registry import build
from elmoc.tasks.embedder import TaskInputs
from elmoc.tasks.srl import IGNORE_TAG, SrlTask, sequence_cross_entropy

TINY = """\
#begin document (nw/wsj/00/wsj_0001); part 000
nw/wsj/00/wsj_0001 0 0 John   NNP (TOP(S(NP*) -    -  - - (PERSON) (ARG0*)   *        (0)
nw/wsj/00/wsj_0001 0 1 said   VBD (VP*        say  01 - - *        (V*)      *        -
nw/wsj/00/wsj_0001 0 2 he     PRP (S(NP*)     -    -  - - *        (ARG1*    (ARG0*)  (0)
nw/wsj/00/wsj_0001 0 3 would  MD  (VP*        -    -  - - *        *         (ARGM-MOD*) -
nw/wsj/00/wsj_0001 0 4 leave  VB  (VP*))))    leave 01 - - *       *)        (V*)     -
nw/wsj/00/wsj_0001 0 5 .      .   *))         -    -  - - *        *         *        -

nw/wsj/00/wsj_0001 0 0 Mary   NNP (TOP(S(NP*) -    -  - - *        (ARG0*)   -
nw/wsj/00/wsj_0001 0 1 saw    VBD (VP*        see  01 - - *        (V*)      -
nw/wsj/00/wsj_0001 0 2 the    DT  (NP*        -    -  - - *        (ARG1*    -
nw/wsj/00/wsj_0001 0 3 old    JJ  *           -    -  - - *        *         -
nw/wsj/00/wsj_0001 0 4 man    NN  *)          -    -  - - *        *)        -
nw/wsj/00/wsj_0001 0 5 today  NN  (NP*))))    -    -  - - *        (ARGM-TMP*) -

nw/wsj/00/wsj_0001 0 0 Hello  UH  (TOP(FRAG*  -    -  - - *        -
nw/wsj/00/wsj_0001 0 1 there  RB  *))         -    -  - - *        -
#end document
"""

SMALL = {"hidden_dim": 24, "num_layers": 2, "recurrent_dropout": 0.0, "predicate_dim": 8, "feature_dropout": 0.0}



@pytest.fixture
def conll(tmp_path) -> Path:
    path = tmp_path / "tiny.gold_conll"
    path.write_text(TINY, encoding="utf-8")
    return path



def test_build_read_collate(conll, random_inputs):
    task = build("task", {"type": "srl", "train": str(conll), "dev": str(conll), "test": str(conll), "model": SMALL})
    assert isinstance(task, SrlTask) and task.missing_data() is None
    train = task.read("train")
    assert [x.predicate_index for x in train] == [1, 4, 1, None]
    assert task.labels == ["O", "B-ARG0", "I-ARG0", "B-ARG1", "I-ARG1", "B-ARGM-MOD", "I-ARGM-MOD",
                           "B-ARGM-TMP", "I-ARGM-TMP", "B-V", "I-V"]
    assert len(list(task.sentences(train))) == 3  # two predicates share a sentence
    batch = task.collate(train, random_inputs(task, train))
    assert batch["predicate"].tolist()[0] == [0, 1, 0, 0, 0, 0] and batch["predicate"][3].sum() == 0
    assert batch["tags"][3, 2:].tolist() == [IGNORE_TAG] * 4  # padding
    assert batch["text"].mask.sum().item() == 6 + 6 + 6 + 2


def test_missing_data_and_bad_options():
    assert build("task", {"type": "srl"}).missing_data() == "data_dir (or train)"
    assert build("task", {"type": "srl", "data_dir": "somewhere"}).missing_data() is None
    from elmoc.errors import ConfigError

    with pytest.raises(ConfigError, match="num_layers"):
        build("task", {"type": "srl", "model": {"num_layers": 0}})
    with pytest.raises(ConfigError, match="unknown key"):
        build("task", {"type": "srl", "model": {"hidden": 3}})


def test_overfits_a_handful_of_predicates(conll, random_inputs):
    torch.manual_seed(0)
    task = build("task", {"type": "srl", "train": str(conll), "model": SMALL})
    train = task.read("train")
    inputs = random_inputs(task, train)
    model = task.build_model(inputs)
    batch = task.collate(train, inputs)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = None
    for _ in range(80):
        model.train()
        loss = model(batch).loss
        first = first if first is not None else float(loss.detach())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        out = model(batch)
    metric = task.new_metric()
    metric.update(out.predictions, batch)
    assert float(out.loss) < 0.05 * first
    assert metric.compute()["f1"] == 1.0
    assert out.predictions[3] == ["O", "O"]


def test_runner_with_lm_features_is_deterministic(conll, tmp_path, features_writer):
    """End to end through the shared runner, with an HDF5 feature file in the `allennlp elmo` layout."""
    from elmoc.features.store import FeatureStore
    from elmoc.tasks.runner import TrainerConfig, run_task

    task = build("task", {"type": "srl", "train": str(conll), "dev": str(conll), "test": str(conll), "model": SMALL})
    sentences = list(task.sentences(task.read("train")))
    path = features_writer(tmp_path / "features.hdf5", sentences, num_layers=3, dim=8)
    results = []
    for _ in range(2):
        inputs = TaskInputs(store=FeatureStore(path))
        trainer = TrainerConfig.from_dict({"epochs": 3, "batch_size": 2, "lr": 1e-2, "mix_l2": 1e-3})
        results.append(run_task(task, inputs, seed=3, trainer=trainer))
    assert results[0]["metric"] == "f1" and 0.0 <= results[0]["test"] <= 1.0
    assert results[0]["history"] == results[1]["history"]
    assert results[0]["num_train"] == 4


def test_loss_is_averaged_per_sequence_then_over_sequences(conll, random_inputs):
    """AllenNLP's sequence_cross_entropy_with_logits (average="batch"), not a token mean."""
    log_probs = torch.log_softmax(torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0)), dim=-1)
    gold = torch.tensor([[1, IGNORE_TAG, IGNORE_TAG, IGNORE_TAG], [0, 2, 4, 3], [IGNORE_TAG] * 4])
    nll = lambda b, t: -float(log_probs[b, t, gold[b, t]])  # noqa: E731
    expected = (nll(0, 0) + sum(nll(1, t) for t in range(4)) / 4) / 2  # the empty sequence does not count
    token_mean = (nll(0, 0) + sum(nll(1, t) for t in range(4))) / 5
    got = float(sequence_cross_entropy(log_probs, gold))
    assert got == pytest.approx(expected) and got != pytest.approx(token_mean)
    assert float(sequence_cross_entropy(log_probs, torch.full((3, 4), IGNORE_TAG))) == 0.0
    # the tagger's loss is this function of its log-probabilities
    task = build("task", {"type": "srl", "train": str(conll), "model": SMALL})
    train = task.read("train")
    inputs = random_inputs(task, train)
    model = task.build_model(inputs)
    captured = {}
    model.projection.register_forward_hook(lambda module, args, out: captured.setdefault("logits", out))
    batch = task.collate(train, inputs)
    with torch.no_grad():
        loss = model(batch).loss
    assert float(loss) == pytest.approx(float(sequence_cross_entropy(torch.log_softmax(captured["logits"], -1), batch["tags"])))


def test_trainer_clips_each_gradient_value_at_one(conll, random_inputs, monkeypatch):
    """SRL's paper trainer: grad_clipping 1.0 = clip values (not the global norm)."""
    from elmoc.tasks.runner import TrainerConfig, run_task

    task = build("task", {"type": "srl", "train": str(conll), "dev": str(conll), "test": str(conll), "model": SMALL})
    trainer = TrainerConfig.from_dict({"epochs": 1, "batch_size": 4, "lr": 1e3}, task.default_trainer)
    assert trainer.grad_value == 1.0 and trainer.grad_norm is None
    calls = []
    real_value = torch.nn.utils.clip_grad_value_

    def clip_value(params, value):
        params = list(params)
        calls.append(max(float(p.grad.abs().max()) for p in params if p.grad is not None))
        real_value(params, value)
        assert all(float(p.grad.abs().max()) <= value for p in params if p.grad is not None)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_value_", clip_value)
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda *a, **k: pytest.fail("grad_norm is off for SRL"))
    run_task(task, random_inputs(task, task.read("train")), seed=1, trainer=trainer)
    assert len(calls) == 1
    from elmoc.errors import ConfigError

    with pytest.raises(ConfigError, match="grad_value"):
        TrainerConfig.from_dict({"grad_value": 0})


def test_paper_optimizer_is_adadelta_and_adam_stays_available(conll, random_inputs, monkeypatch):
    """spec 6 / AllenNLP's semantic_role_labeler_elmo: Adadelta, rho 0.95 (its default lr 1.0)."""
    from elmoc.tasks import runner
    from elmoc.tasks.runner import TrainerConfig, run_task

    task = build("task", {"type": "srl", "train": str(conll), "dev": str(conll), "test": str(conll), "model": SMALL})
    trainer = TrainerConfig.from_dict({"epochs": 1}, task.default_trainer)
    assert (trainer.optimizer, trainer.rho, trainer.lr) == ("adadelta", 0.95, 1.0)
    built = []
    real = runner.task_optimizer
    monkeypatch.setattr(runner, "task_optimizer", lambda p, t: built.append(real(p, t)) or built[-1])
    run_task(task, random_inputs(task, task.read("train")), seed=1, trainer=trainer)
    assert isinstance(built[0], torch.optim.Adadelta)
    assert built[0].defaults["rho"] == 0.95 and built[0].defaults["lr"] == 1.0
    # Adam as an option: its own default lr, not Adadelta's 1.0
    adam = TrainerConfig.from_dict({"optimizer": "adam"}, task.default_trainer)
    assert (adam.optimizer, adam.lr) == ("adam", 1e-3)
    assert TrainerConfig.from_dict({"optimizer": "adam", "lr": 3e-3}, task.default_trainer).lr == 3e-3
    assert isinstance(runner.task_optimizer([torch.nn.Parameter(torch.zeros(1))], adam), torch.optim.Adam)


def test_result_carries_both_scores_named(conll, random_inputs):
    """The span F1 stays the headline; the official CoNLL-2005 score sits beside it, labelled."""
    from elmoc.metrics.srl_conll05 import Conll05Score
    from elmoc.tasks.runner import TrainerConfig, run_task

    task = build("task", {"type": "srl", "train": str(conll), "dev": str(conll), "test": str(conll), "model": SMALL})
    trainer = TrainerConfig.from_dict({"epochs": 2, "batch_size": 2}, task.default_trainer)
    result = run_task(task, random_inputs(task, task.read("train")), seed=1, trainer=trainer)
    assert result["metric"] == "f1" and result["metric_label"].startswith("span F1")
    official = result["extra_scores"]["conll05-f1"]
    assert "CoNLL-2005" in official["label"] and 0.0 <= official["test"] <= 1.0
    assert official["test"] == result["test_all"]["conll05-f1"] and official["dev"] == result["dev_all"]["conll05-f1"]
    # the metric scores predicates only, with C-X merged (one discontinuous argument, predicted exactly)
    metric = task.new_metric()
    gold = ["B-ARG1", "B-V", "B-C-ARG1"]
    metric.update([gold, ["B-ARG0", "I-ARG0"]], {"gold_tags": [gold, ["O", "O"]], "predicate_indices": [1, None]})
    got = metric.compute()
    reference = Conll05Score()
    reference.add(gold, gold)
    assert reference.counts() == (1, 0, 0)
    assert got["conll05-f1"] == 1.0 and got["conll05-precision"] == 1.0
    assert got["f1"] < 1.0  # the span F1 counts the sentence without a predicate's spurious span
