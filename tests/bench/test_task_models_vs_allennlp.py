"""benchmarks/task_models_vs_allennlp.py (issue 45): the inputs both sides draw, elmoc's side at tiny
sizes (its real task model stepping on exactly those inputs), the driver without AllenNLP, and the
refusal to compare sides that drew different features. AllenNLP itself is not needed."""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import pytest
import torch
from benchmark_scripts import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("task_models_vs_allennlp")


@pytest.fixture(autouse=True)
def _same_threads_after():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


NER_SHAPES = {"batch": 3, "lengths": {"text": 9}, "layers": 2, "dim": 4, "words": 7, "chars": 5, "char_width": 3,
              "labels": ["O"] + [f"{p}-{k}" for k in ("LOC", "MISC", "ORG", "PER") for p in "BILU"]}


def test_both_sides_draw_the_same_inputs_and_ner_tags_are_valid_bioul(bench):
    a, b = bench.shared_inputs(NER_SHAPES, 3), bench.shared_inputs(NER_SHAPES, 3)
    assert a.keys() == b.keys() == {"features/text", "words/text", "chars/text", "tags"}
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert bench.checksum(a) == bench.checksum(b) != bench.checksum(bench.shared_inputs(NER_SHAPES, 4))
    assert a["features/text"].shape == (2, 3, 9, 4) and a["features/text"].dtype == np.float32
    assert a["words/text"].min() >= 2 and a["words/text"].max() < 7 and a["chars/text"].shape == (3, 9, 3)
    labels = NER_SHAPES["labels"]
    for row in a["tags"]:
        tags = [labels[i] for i in row]
        for i, tag in enumerate(tags):  # B- is closed by L- of its kind, U- stands alone, no I- here
            if tag.startswith("B-"):
                assert tags[i + 1] == "L-" + tag[2:], tags
            elif tag.startswith("L-"):
                assert tags[i - 1] == "B-" + tag[2:], tags
            else:
                assert tag == "O" or tag.startswith("U-"), tags
        assert any(t != "O" for t in tags)
    pair = bench.shared_inputs({"batch": 2, "lengths": {"premise": 5, "hypothesis": 3}, "layers": 3, "dim": 4,
                                "words": 0, "classes": 3}, 0)
    assert pair.keys() == {"features/premise", "features/hypothesis", "label"}
    assert pair["features/hypothesis"].shape == (3, 2, 3, 4) and set(pair["label"]) <= {0, 1, 2}


@pytest.mark.parametrize("task", ["sst5", "snli", "ner"])
def test_elmoc_s_real_task_model_steps_on_the_shared_inputs(bench, task, tmp_path):
    args = argparse.Namespace(task=task, tiny=True, seed=1, device="cpu")
    side = bench.elmoc_side(args, tmp_path)
    arrays = bench.shared_inputs(side.shapes, 1)
    texts = {k: v for k, v in side.batch.items() if hasattr(v, "features")}
    assert set(side.shapes["lengths"]) == set(texts) and side.shapes["batch"] == 4  # --tiny caps the paper batch
    for field, text in texts.items():
        assert torch.equal(text.features, torch.from_numpy(arrays[f"features/{field}"])), field
        assert text.features.shape[:3] == (side.shapes["layers"], 4, text.mask.shape[1])
        if text.word_ids is not None:
            assert torch.equal(text.word_ids, torch.from_numpy(arrays[f"words/{field}"]))
    if task == "ner":
        assert torch.equal(side.batch["tag_ids"], torch.from_numpy(arrays["tags"]))
        assert torch.equal(side.batch["chars"], torch.from_numpy(arrays["chars/text"]))
    else:
        assert torch.equal(side.batch["label"], torch.from_numpy(arrays["label"]))
    assert side.checksum == bench.checksum(arrays) and type(side).__name__ == "ElmocSide"
    assert {"sst5": "BiattentiveClassificationNetwork", "snli": "Esim", "ner": "CrfTagger"}[task] in side.what
    model_params = list(side.model.parameters())
    snapshot = [p.detach().clone() for p in model_params]
    side.step()
    assert any(not torch.equal(a, p) for a, p in zip(snapshot, model_params))  # the optimizer stepped


@pytest.mark.slow  # starts worker processes
def test_without_allennlp_only_elmoc_s_side_runs_and_a_missing_allennlp_is_one_line(bench, tmp_path, capsys):
    out = tmp_path / "tasks.json"
    assert bench.main(["--tiny", "--tasks", "snli", "--rounds", "2", "--profile", "2", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    row = result["tasks"]["snli"]
    assert list(row["sides"]) == ["elmoc"] and row["allennlp_over_elmoc"] is None
    elmoc = row["sides"]["elmoc"]
    assert len(elmoc["steps"]) == 2 and elmoc["best"]["cpu_s"] > 0 and elmoc["threads"] == 1
    assert elmoc["shapes"]["lengths"] == {"premise": 5, "hypothesis": 3} and len(elmoc["profile"]) == 2
    assert "snli | 4 x 5 + 3 |" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="the allennlp worker .* exited with 1 before it was ready"):
        bench.main(["--tiny", "--tasks", "sst5", "--rounds", "1", "--allennlp-python", sys.executable])


def test_sides_that_drew_different_features_are_not_compared(bench, monkeypatch):
    def rounds(starters, count, sums={"elmoc": 1.0, "allennlp": 2.0}):  # noqa: B006
        return {side: {"checksum": sums[side], "best": {"wall_s": 1.0, "cpu_s": 1.0}} for side in starters}

    monkeypatch.setattr(bench.side_by_side, "rounds", rounds)
    args = argparse.Namespace(allennlp_python="python", threads=1, seed=1, device="cpu", profile=0, tiny=True,
                              rounds=1)
    with pytest.raises(SystemExit, match="sst5: the two sides drew different features"):
        bench.compare("sst5", args)
    monkeypatch.setattr(bench.side_by_side, "rounds", lambda starters, count: rounds(starters, count, {
        "elmoc": 1.0, "allennlp": 1.0}))
    assert bench.compare("sst5", args)["allennlp_over_elmoc"] == {"wall_s": 1.0, "cpu_s": 1.0}
