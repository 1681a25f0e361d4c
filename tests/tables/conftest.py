"""Fixture result files laid out as the workflow writes them."""
import json

import pytest
import yaml


def _write_json(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def _write_lm(root, variant, direction, *, params, tokens, seconds, metric="cosine", after=0.5, log=None,
             cell=128, projection=32, batch=32, epochs=2):
    """results/lm/{variant}/{direction}/heldout.json (+ train_log.jsonl, ../spec.yaml)."""
    d = root / "lm" / variant / direction
    history = [{"metric": metric, "value": 0.1, "step": 0, "tokens": 0, "tag": "before"},
               {"metric": metric, "value": after, "step": 10, "tokens": tokens, "tag": "after"}]
    path = _write_json(d / "heldout.json", {
        "direction": direction, "steps": 10, "tokens": tokens, "seconds": seconds, "metric": metric,
        "before": 0.1, "after": after, "history": history, "trainable_parameters": params, "threads": 1})
    if log is not None:
        (d / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
    spec = {"encoder": {"cell_size": cell, "projection_size": projection}, "train": {"batch_size": batch, "epochs": epochs}}
    (root / "lm" / variant / "spec.yaml").write_text(yaml.safe_dump(spec))
    return path


def _write_task(root, task, variant, seed, test, status="ok", scale="demo", metric="accuracy"):
    return _write_json(root / "tasks" / task / variant / f"seed{seed}.json",
                      {"task": task, "variant": variant, "seed": seed, "metric": metric, "dev": test,
                       "test": test if status == "ok" else None, "status": status, "scale": scale})


@pytest.fixture
def results(tmp_path):
    """A complete-ish run: 3 variants x 2 directions, SST-5 over 3 seeds, NER without data."""
    root = tmp_path / "results"
    heldout = []
    for variant, params, speed in (("elmo-c", 100, 1000.0), ("elmo", 600, 250.0), ("elmo-a", 300, 500.0)):
        for direction in ("forward", "backward"):
            log = [{"event": "train", "step": 5, "tokens": 500, "tokens_per_s": speed * 0.9, "loss": 1.0},
                   {"event": "train", "step": 10, "tokens": 1000, "tokens_per_s": speed, "loss": 0.5}]
            heldout.append(_write_lm(root, variant, direction, params=params, tokens=1000, seconds=1000 / speed + 1,
                                    log=log, metric="cosine" if variant == "elmo-c" else "perplexity"))
    tasks = []
    for variant in ("elmo-c", "elmo", "fasttext"):
        for seed, score in ((1, 0.50), (2, 0.52), (3, 0.54)):
            tasks.append(_write_task(root, "sst5", variant, seed, score))
        tasks.append(_write_task(root, "ner", variant, 1, None, status="no data: set tasks.ner.train", metric="f1"))
    majority = [_write_json(root / "baselines/sst5/majority.json",
                           {"task": "sst5", "variant": "majority", "seed": 0, "metric": "accuracy", "test": 0.25,
                            "status": "ok", "scale": "demo"})]
    return {"root": root, "heldout": heldout, "tasks": tasks, "majority": majority}


@pytest.fixture
def write_json():
    return _write_json


@pytest.fixture
def write_lm():
    return _write_lm


@pytest.fixture
def write_task():
    return _write_task
