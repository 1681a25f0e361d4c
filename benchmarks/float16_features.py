"""Float16 features downstream: train a task on one feature file, then score the trained model's
test predictions with every given feature file (float32, float16, either layout).

Prints and writes ``{"trained_on", "seed", "dev", "test", "best_epoch", "test_with": {name: metrics},
"predictions_differing_from_own_features": {name: count}, "n_test", "history", "seconds"}``.

Usage: PYTHONPATH=src .venv/bin/python benchmarks/float16_features.py --section sst.json \\
    --features f32=sst-f32.hdf5 f16=sst-f16.hdf5 c16=sst-c16.hdf5 --train-on f32 --seed 1 \\
    [--vectors vectors.npy --vocab vocab.txt] --json out.json
(docs/downstream.md, "Float16 features downstream"; the measured runs used this code with the
paths written in.)
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--section", required=True, help="task section JSON (with its trainer)")
    p.add_argument("--features", nargs="+", required=True, metavar="NAME=FILE")
    p.add_argument("--train-on", required=True, help="the NAME of --features to train on")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--vectors")
    p.add_argument("--vocab")
    p.add_argument("--json", required=True)
    args = p.parse_args(argv)
    from elmoc.registry import build
    from elmoc.tasks.embedder import TaskInputs
    from elmoc.tasks.runner import TrainerConfig, bucket_batches, evaluate, run_task

    torch.set_num_threads(1)
    section = json.loads(open(args.section, encoding="utf-8").read())
    trainer_values = section.pop("trainer", {})
    section.pop("with_fasttext", None)
    task = build("task", section)
    data = {s: task.read(s) for s in ("train", "dev", "test")}
    sentences = [x for split in data.values() for x in task.sentences(split)]
    files = dict(item.split("=", 1) for item in args.features)
    inputs = {name: TaskInputs.create(sentences, vectors=args.vectors, vocab=args.vocab, features=path,
                                      lowercase=task.lowercase_words) for name, path in files.items()}
    trainer = TrainerConfig.from_dict(trainer_values, task.default_trainer)
    kept, t0 = {}, time.time()
    result = run_task(task, inputs[args.train_on], args.seed, trainer, data,
                      finished=lambda m: kept.setdefault("model", m))
    model = kept["model"]
    scores, predictions = {}, {}
    for name, given in inputs.items():
        scores[name] = evaluate(task, model, data["test"], given, 256)
        model.eval()
        found = []
        with torch.no_grad():
            for idx in bucket_batches([task.length(x) for x in data["test"]], 256, None):
                found += model(task.collate([data["test"][i] for i in idx], given)).predictions.tolist()
        predictions[name] = found
    own = predictions[args.train_on]
    differing = {name: sum(a != b for a, b in zip(own, p)) for name, p in predictions.items()}
    out = {"trained_on": args.train_on, "seed": args.seed, "dev": result["dev"], "test": result["test"],
           "best_epoch": result["best_epoch"], "test_with": scores, "predictions_differing_from_own_features": differing,
           "n_test": len(data["test"]), "history": result["history"], "seconds": time.time() - t0}
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
    print(args.train_on, args.seed, result["dev"], result["test"], scores, differing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
