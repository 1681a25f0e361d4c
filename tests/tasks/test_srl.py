"""SRL task: reader wiring, collate, overfitting a handful of predicates, runner, features."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from elmoc.registry import build
from elmoc.tasks.embedder import TaskInputs
from elmoc.tasks.srl import IGNORE_TAG, SrlTask

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
nw/wsj/00/wsj_0001 0 4 man    NN  *)))        -    -  - - *        *)        -
nw/wsj/00/wsj_0001 0 5 today  NN  (NP*)))     -    -  - - *        (ARGM-TMP*) -

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
    assert build("task", {"type": "srl"}).missing_data() == "train"
    from elmoc.errors import ConfigError

    with pytest.raises(ConfigError, match="num_layers"):
        build("task", {"type": "srl", "model": {"num_layers": 0}})
    with pytest.raises(ConfigError, match="unknown option"):
        build("task", {"type": "srl", "model": {"hidden": 3}})


def test_overfits_a_handful_of_predicates(conll, random_inputs):
    torch.manual_seed(0)
    task = build("task", {"type": "srl", "train": str(conll), "model": SMALL})
    train = task.read("train")
    inputs = random_inputs(task, train)
    model = task.build_model(inputs)
    batch = task.collate(train, inputs)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    start = time.time()
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
    assert time.time() - start < 20


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
