"""A causal Transformer bi-LM (issue 25) through extract, export, embed and the Elmo module:
layers = the input view + one per block, forward and backward concatenated (2 x d_model),
for a joint bi-LM file (as trans-*-sampled writes) and for two direction files (trans-*-c)."""
from __future__ import annotations

import json

import h5py
import numpy as np
import torch
from lm_tree_helpers import run_command

from elmoc import Elmo, embed_sentences
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.lm import BidirectionalLM, LanguageModel
from elmoc.model_file import save_checkpoint

SENTENCES = ["the zebra ran to the house", "a xqzzy", "the cat sat on a big mat ."]
D_MODEL, BLOCKS = 8, 3


def _spec(output: dict, joint: bool) -> dict:
    return {"name": "trans", "description": "tiny causal Transformer bi-LM",
            "input": {"type": "fasttext", "vectors": "results/vectors/cc.npy"},
            "encoder": {"type": "transformer", "d_model": D_MODEL, "heads": 2, "d_ff": 16, "num_layers": BLOCKS,
                        "dropout": 0.1},
            "output": output, "optimizer": {"type": "adam", "lr": 0.01},
            "train": {"batch_size": 2, "bptt": 5, **({"directions": "joint"} if joint else {})},
            "data": {"train": "results/corpus/train", "heldout": "results/corpus/heldout.txt"},
            "vocab": "results/vocab/vocab.txt"}


def _write(root, variant: str, output: dict, joint: bool) -> None:
    """results/lm/<variant>/joint/model.pt, or forward/ and backward/, with random weights."""
    spec = _spec(output, joint)
    abs_spec = json.loads(json.dumps(spec).replace('"results/', f'"{root}/results/'))
    vocab = Vocabulary.load(root / "results/vocab/vocab.txt")
    runs = [("joint", BidirectionalLM)] if joint else [("forward", LanguageModel), ("backward", LanguageModel)]
    for seed, (direction, cls) in enumerate(runs):
        torch.manual_seed(10 + seed)
        model = cls.from_spec(abs_spec, vocab)
        folder = root / "results/lm" / variant / direction
        save_checkpoint(folder / "model.pt", {
            "spec": spec, "vocab_path": "results/vocab/vocab.txt", "direction": direction,
            "model": model.state_dict(), "step": 3, "tokens": 60, "history": [], "final": True})
        (folder / "heldout.json").write_text(json.dumps({
            "direction": direction, "steps": 3, "tokens": 60, "seconds": 1.0, "metric": "cosine", "after": 0.2,
            "threads": 1, "segments": [{"step": 0, "threads": 1, "processes": 1}]}))


def _models(variant: str, joint: bool) -> tuple[str, str]:
    if joint:
        return (f"results/lm/{variant}/joint/model.pt",) * 2
    return f"results/lm/{variant}/forward/model.pt", f"results/lm/{variant}/backward/model.pt"


def test_transformer_variant_extracts_exports_embeds_and_mixes(lm_tree):
    root = lm_tree("fasttext")
    (root / "s.txt").write_text("\n".join(SENTENCES) + "\n")
    _write(root, "trans-c", {"type": "cosine", "vectors": "results/vectors/cc.npy"}, joint=False)
    _write(root, "trans-sampled", {"type": "sampled", "num_samples": 4}, joint=True)
    for variant, joint in (("trans-c", False), ("trans-sampled", True)):
        forward, backward = _models(variant, joint)
        out = f"{variant}.hdf5"
        assert run_command("extract", ["--forward", forward, "--backward", backward, "--sentences", "s.txt",
                                       "--output", out]) == 0
        with h5py.File(out) as h5:
            extracted = {k: h5[k][()] for k in h5 if k != "sentence_to_index"}
        for i, sentence in enumerate(SENTENCES):
            # the allennlp elmo layout: (layers, words, 2 * hidden); layers = input view + each block
            assert extracted[str(i)].shape == (BLOCKS + 1, len(sentence.split()), 2 * D_MODEL)
            assert extracted[str(i)].dtype == np.float32
        halves = extracted["0"][1:, :, :D_MODEL], extracted["0"][1:, :, D_MODEL:]
        assert np.abs(halves[0] - halves[1]).max() > 1e-3  # two encoders, not one twice
        assert run_command("export", ["--variant", variant, "--output-dir", f"model-{variant}"]) == 0
        assert run_command("embed", ["s.txt", "embed.hdf5", "--model", f"model-{variant}", "--all"]) == 0
        with h5py.File("embed.hdf5") as h5:
            for key, value in extracted.items():
                np.testing.assert_allclose(h5[key][()], value, atol=1e-5)
        elmo = Elmo.from_pretrained(f"model-{variant}", num_output_representations=1, dropout=0.0)
        assert elmo.get_output_dim() == 2 * D_MODEL
        assert len(elmo.scalar_mixes[0].weights) == BLOCKS + 1
        batch = [s.split() for s in SENTENCES]
        reps = elmo(batch)["elmo_representations"][0]
        assert reps.shape == (3, 8, 2 * D_MODEL)
        layers = embed_sentences(f"model-{variant}", batch)
        for b, words in enumerate(batch):  # initial scalar mix: equal weights, gamma 1
            np.testing.assert_allclose(reps[b, : len(words)].detach().numpy(), layers[b].mean(axis=0), atol=1e-5)
