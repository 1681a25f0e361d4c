"""Helpers of tests/pretrained: a tiny trained-LM tree (results/ layout) with a real fastText .bin, built without the trainer.

``lm_tree(variant_kind)`` returns the root of a temporary workflow directory holding
``results/fasttext/cc.bin``, ``results/vocab/vocab.txt``, ``results/vectors/cc.npy`` and
``results/lm/tiny/{forward,backward}/{model.pt,heldout.json}`` (random weights, distinct
per direction, as ``elmoc train`` would write them).  Some corpus words are left out
of the LM vocabulary on purpose (``OUT_OF_VOCAB``).
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from elmoc.data.vectors.tables import fasttext_table, save_table
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.lm import LanguageModel
from elmoc.model_file import save_checkpoint

WORDS = "the cat sat on a mat dog ran to big small house mouse zebra giraffe".split()
OUT_OF_VOCAB = ["zebra", "giraffe"]  # in fastText's dictionary, not in the LM vocabulary
H = 6


def _spec(kind: str, shared_data: Path | None) -> dict:
    encoder = {"type": "elmo_lstm", "num_layers": 2, "cell_size": 10, "projection_size": H, "recurrent_dropout": 0.1}
    if kind == "fasttext":
        inp = {"type": "fasttext", "vectors": "results/vectors/cc.npy"}
    elif kind == "char_cnn":
        options = json.loads((shared_data / "fixtures/allennlp/elmo/options.json").read_text())
        options["lstm"]["projection_dim"] = H
        inp = {"type": "char_cnn", "options": options}
        encoder["layer_norm"] = False
    else:
        inp = {"type": "random", "dim": 8, "seed": 3}
    return {"name": "tiny", "description": "tiny test LM", "input": inp, "encoder": encoder,
            "output": {"type": "cosine", "vectors": "results/vectors/cc.npy"},
            "optimizer": {"type": "adam", "lr": 0.01}, "train": {"batch_size": 2, "bptt": 5},
            "data": {"train": "results/corpus/train", "heldout": "results/corpus/heldout.txt"},
            "vocab": "results/vocab/vocab.txt"}


def build_tree(root: Path, kind: str, fasttext_bin: Path, shared_data: Path | None = None) -> Path:
    """Write the tree under ``root`` (paths in it are relative to ``root``)."""
    (root / "results/fasttext").mkdir(parents=True)
    (root / "results/fasttext/cc.bin").write_bytes(fasttext_bin.read_bytes())
    counts = Counter({w: 20 - i for i, w in enumerate(WORDS) if w not in OUT_OF_VOCAB})
    vocab = Vocabulary.from_counts(counts)
    vocab.save(root / "results/vocab/vocab.txt")
    table, _ = fasttext_table(vocab, root / "results/fasttext/cc.bin")
    save_table(root / "results/vectors/cc.npy", table)
    spec = _spec(kind, shared_data)
    abs_spec = json.loads(json.dumps(spec).replace('"results/', f'"{root}/results/'))
    for seed, direction in enumerate(("forward", "backward")):
        torch.manual_seed(seed)
        lm = LanguageModel.from_spec(abs_spec, vocab)
        folder = root / "results/lm/tiny" / direction
        save_checkpoint(folder / "model.pt", {
            "spec": spec, "vocab_path": "results/vocab/vocab.txt", "direction": direction,
            "model": lm.state_dict(), "step": 3, "tokens": 60, "history": [], "final": True})
        (folder / "heldout.json").write_text(json.dumps({
            "direction": direction, "steps": 3, "tokens": 60, "seconds": 1.5, "metric": "cosine",
            "after": 0.25 + seed / 10, "threads": 1,
            # as the trainer records them: the forward LM was resumed at step 2 under 2 processes
            "segments": [{"step": 0, "threads": 1, "processes": 1}]
            + ([{"step": 2, "threads": 1, "processes": 2}] if direction == "forward" else [])}))
    return root


def save_lm_pair(root: Path, spec: dict, vocab: Vocabulary) -> None:
    """``results/lm/tiny/{forward,backward}/model.pt`` of ``spec`` under ``root`` (random weights,
    seeds 0 and 1; ``spec``'s paths are read relative to the current directory)."""
    for seed, direction in enumerate(("forward", "backward")):
        torch.manual_seed(seed)
        save_checkpoint(root / f"results/lm/tiny/{direction}/model.pt", {
            "spec": spec, "vocab_path": spec["vocab"], "direction": direction,
            "model": LanguageModel.from_spec(spec, vocab).state_dict(), "step": 1, "tokens": 5, "final": True})


def run_command(name: str, argv: list[str]) -> int:
    """``elmoc NAME ARGV`` through that command module only, with the CLI's error handling
    (one line on stderr, status 1), so unrelated commands' imports cannot interfere."""
    import argparse
    import importlib
    import sys

    from elmoc.errors import ElmocError

    module = importlib.import_module(f"elmoc.commands.{name}")
    parser = argparse.ArgumentParser(prog=f"elmoc {name}")
    module.add_arguments(parser)
    try:
        return module.run(parser.parse_args(argv))
    except ElmocError as e:
        print(f"elmoc {name}: error: {e}", file=sys.stderr)
        return 1
