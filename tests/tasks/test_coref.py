"""Coreference task: documents, span machinery, overfitting two documents, runner, fixtures."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from elmoc.errors import ConfigError
from elmoc.registry import build
from elmoc.tasks.conll2012 import read_conll2012_file
from elmoc.tasks.coref import (
    CorefModel,
    CorefTask,
    distance_bucket,
    document_instances,
    select_non_crossing,
)

DOCS = """\
#begin document (nw/wsj/00/wsj_0001); part 000
nw/wsj/00/wsj_0001 0 0 John   NNP * - - - A * (0)
nw/wsj/00/wsj_0001 0 1 said   VBD * - - - A * -
nw/wsj/00/wsj_0001 0 2 he     PRP * - - - A * (0)
nw/wsj/00/wsj_0001 0 3 would  MD  * - - - A * -
nw/wsj/00/wsj_0001 0 4 leave  VB  * - - - A * -
nw/wsj/00/wsj_0001 0 5 .      .   * - - - A * -

nw/wsj/00/wsj_0001 0 0 The    DT  * - - - B * (1
nw/wsj/00/wsj_0001 0 1 old    JJ  * - - - B * -
nw/wsj/00/wsj_0001 0 2 man    NN  * - - - B * 1)
nw/wsj/00/wsj_0001 0 3 left   VBD * - - - B * -
nw/wsj/00/wsj_0001 0 4 him    PRP * - - - B * (1)
nw/wsj/00/wsj_0001 0 5 .      .   * - - - B * -
#end document
#begin document (bc/cctv/00/cctv_0001); part 001
bc/cctv/00/cctv_0001 1 0 Mary  NNP * - - - - * (3)
bc/cctv/00/cctv_0001 1 1 met   VBD * - - - - * -
bc/cctv/00/cctv_0001 1 2 Sue   NNP * - - - - * (4)
bc/cctv/00/cctv_0001 1 3 .     .   * - - - - * -

bc/cctv/00/cctv_0001 1 0 She   PRP * - - - - * (3)
bc/cctv/00/cctv_0001 1 1 liked VBD * - - - - * -
bc/cctv/00/cctv_0001 1 2 her   PRP * - - - - * (4)
bc/cctv/00/cctv_0001 1 3 .     .   * - - - - * -
#end document
"""

SMALL = {"contextualization_size": 16, "contextualization_layers": 1, "ffnn_size": 32, "ffnn_depth": 1,
         "feature_size": 8, "max_span_width": 3, "top_span_ratio": 0.8, "max_top_antecedents": 6,
         "coref_depth": 2, "dropout": 0.0, "lstm_dropout": 0.0, "lexical_dropout": 0.0,
         "mention_loss": 1.0}



@pytest.fixture
def conll(tmp_path) -> Path:
    path = tmp_path / "docs.gold_conll"
    path.write_text(DOCS, encoding="utf-8")
    return path



def test_read_and_collate(conll, random_inputs):
    task = build("task", {"type": "coref", "train": str(conll), "dev": str(conll), "test": str(conll), "model": SMALL})
    assert isinstance(task, CorefTask)
    docs = task.read("dev")
    assert [d.doc_key for d in docs] == ["nw/wsj/00/wsj_0001_0", "bc/cctv/00/cctv_0001_1"]
    assert docs[0].clusters == [[(0, 0), (2, 2)], [(6, 8), (10, 10)]]
    assert [task.length(d) for d in docs] == [12, 8]
    batch = task.collate(docs, random_inputs(task, docs))
    first = batch["docs"][0]
    assert first["genre"] == 3 and batch["docs"][1]["genre"] == 0  # nw, bc
    assert first["speaker_ids"].tolist() == [0] * 6 + [1] * 6
    assert first["text"].mask.shape == (2, 6)


def test_training_chunks_keep_clusters_inside(conll):
    doc = read_conll2012_file(conll)[0]
    chunks = document_instances(doc, max_sentences=1)
    assert [c.doc_key for c in chunks] == ["nw/wsj/00/wsj_0001_0#0", "nw/wsj/00/wsj_0001_0#1"]
    assert chunks[0].clusters == [[(0, 0), (2, 2)]]
    assert chunks[1].clusters == [[(0, 2), (4, 4)]]
    assert chunks[1].speakers == ["B"] * 6


def test_span_helpers():
    assert distance_bucket(torch.tensor([0, 1, 4, 5, 7, 8, 16, 63, 64, 1000])).tolist() == [0, 1, 4, 5, 5, 6, 7, 8, 9, 9]
    # (0,2) chosen first; (1,3) crosses it; (1,1) nests inside; (3,4) is disjoint
    starts, ends = [0, 1, 1, 3], [2, 3, 1, 4]
    assert select_non_crossing(starts, ends, [0, 1, 2, 3], 3) == [0, 2, 3]
    assert select_non_crossing(starts, ends, [1, 0, 2, 3], 2) == [2, 1]


def test_options_are_checked():
    with pytest.raises(ConfigError, match="top_span_ratio"):
        build("task", {"type": "coref", "model": {"top_span_ratio": 0}})
    with pytest.raises(ConfigError, match="mention_loss"):
        build("task", {"type": "coref", "model": {"mention_loss": -1}})
    with pytest.raises(ConfigError, match="coref_depth"):
        build("task", {"type": "coref", "model": {"coref_depth": 0}})
    assert build("task", {"type": "coref"}).missing_data() == "data_dir (or train)"


def test_overfits_two_documents(conll, random_inputs):
    torch.manual_seed(0)
    task = build("task", {"type": "coref", "train": str(conll), "model": SMALL})
    docs = task.read("train")
    inputs = random_inputs(task, docs)
    model = task.build_model(inputs)
    assert isinstance(model, CorefModel)
    batch = task.collate(docs, inputs)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    start = time.time()
    losses = []
    for _ in range(60):
        model.train()
        loss = model(batch).loss
        losses.append(float(loss.detach()))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        out = model(batch)
    metric = task.new_metric()
    metric.update(out.predictions, batch)
    scores = metric.compute()
    assert losses[-1] < 0.05 * losses[0]
    assert scores["conll_f1"] == pytest.approx(1.0)
    assert out.predictions[0] == [[(0, 0), (2, 2)], [(6, 8), (10, 10)]]
    assert out.predictions[1] == [[(0, 0), (4, 4)], [(2, 2), (6, 6)]]
    assert time.time() - start < 20


def test_runner_is_deterministic_and_reads_fixture(shared_data, random_inputs):
    from elmoc.tasks.runner import TrainerConfig, run_task

    path = str(shared_data / "fixtures/allennlp/coref/coref.gold_conll")
    small = {**SMALL, "max_span_width": 5, "top_span_ratio": 0.4}
    task = build("task", {"type": "coref", "train": path, "dev": path, "test": path, "model": small})
    data = {split: task.read(split) for split in ("train", "dev", "test")}
    assert len(data["train"]) == 2 and data["train"][1].clusters == [[(3, 4), (29, 30), (42, 43)], [(27, 31), (36, 36)]]
    results = []
    for _ in range(2):
        trainer = TrainerConfig.from_dict({"epochs": 2}, CorefTask.default_trainer)
        results.append(run_task(task, random_inputs(task, data["train"]), seed=5, trainer=trainer, data=data))
    assert results[0]["metric"] == "conll_f1" and 0.0 <= results[0]["test"] <= 1.0
    assert results[0]["history"] == results[1]["history"]


def test_paper_objective_reaches_every_scorer(conll, random_inputs):
    """mention_loss 0: gradients of the antecedent likelihood alone reach mention, coarse, fine and gate."""
    torch.manual_seed(1)
    task = build("task", {"type": "coref", "train": str(conll), "model": {**SMALL, "mention_loss": 0.0}})
    docs = task.read("train")
    inputs = random_inputs(task, docs)
    model = task.build_model(inputs)
    model(task.collate(docs, inputs)).loss.backward()
    for part in (model.mention_scorer, model.coarse, model.pair_scorer, model.gate, model.head_scorer, model.context):
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in part.parameters()), part
    one_round = build("task", {"type": "coref", "train": str(conll), "model": {**SMALL, "coref_depth": 1}})
    one = one_round.build_model(inputs)
    one(task.collate(docs, inputs)).loss.backward()
    assert all(p.grad is None for p in one.gate.parameters())  # no refinement with depth 1


def test_sparse_head_attention_matches_dense_gather():
    torch.manual_seed(0)
    from elmoc.tasks.embedder import TokenEmbedder

    model = CorefModel(TokenEmbedder(torch.randn(10, 6), 0, 0), **{k: v for k, v in SMALL.items()})
    context = torch.randn(7, 32, requires_grad=True)
    tokens = torch.randn(7, 6, requires_grad=True)
    starts, ends = model.candidate_spans([4, 3])
    spans = model.span_embeddings(context, tokens, starts, ends)
    head = spans[:, 64:70]
    # dense reference: softmax of head scores over each span's tokens
    logits = model.head_scorer(context).squeeze(-1)
    expected = torch.stack([torch.softmax(logits[s : e + 1], 0) @ tokens[s : e + 1] for s, e in zip(starts.tolist(), ends.tolist())])
    assert torch.allclose(head, expected, atol=1e-6)
    grads = torch.autograd.grad(head.sum(), [tokens, context])
    ref = torch.autograd.grad(expected.sum(), [tokens, context])
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(grads, ref))
