"""A joint bi-LM's one model.pt serves extraction and export as both directions, with the
same numbers as the two separate files holding the same weights."""
from __future__ import annotations

import json

import h5py
import numpy as np
from lm_tree_helpers import run_command

from elmoc.lm import BidirectionalLM, LanguageModel
from elmoc.model_file import load_checkpoint, save_checkpoint

SENTENCES = ["the zebra ran to the house", "a xqzzy", "the cat sat on a big mat ."]


def _joint_from_directions(root):
    """results/lm/tiny/joint/model.pt holding the two direction files' encoders (and their
    shared input and output layers, equal in both files: frozen tables and a cosine output)."""
    fwd = load_checkpoint(root / "results/lm/tiny/forward/model.pt")
    bwd = load_checkpoint(root / "results/lm/tiny/backward/model.pt")
    state = {}
    for key, value in fwd["model"].items():
        state[key.replace("encoder.", "forward_encoder.", 1) if key.startswith("encoder.") else key] = value
    for key, value in bwd["model"].items():
        if key.startswith("encoder."):
            state["backward_encoder." + key[len("encoder."):]] = value
    spec = {**fwd["spec"], "train": {**fwd["spec"]["train"], "directions": "joint"}}
    abs_spec = json.loads(json.dumps(spec).replace('"results/', f'"{root}/results/'))
    from elmoc.data.vocab.vocabulary import Vocabulary

    model = BidirectionalLM.from_spec(abs_spec, Vocabulary.load(root / "results/vocab/vocab.txt"))
    model.load_state_dict(state)  # strict: the joint layout
    save_checkpoint(root / "results/lm/tiny/joint/model.pt", {
        **fwd, "spec": spec, "direction": "joint", "model": model.state_dict()})
    return model


def _extract(forward, backward, out):
    assert run_command("extract", ["--forward", forward, "--backward", backward, "--sentences", "s.txt",
                                   "--output", out]) == 0
    with h5py.File(out) as h5:
        return {k: h5[k][()] for k in h5 if k != "sentence_to_index"}


def test_joint_file_extracts_and_exports_like_the_two_directions(lm_tree):
    root = lm_tree("fasttext")
    (root / "s.txt").write_text("\n".join(SENTENCES) + "\n")
    model = _joint_from_directions(root)
    separate = _extract("results/lm/tiny/forward/model.pt", "results/lm/tiny/backward/model.pt", "sep.hdf5")
    joint = _extract("results/lm/tiny/joint/model.pt", "results/lm/tiny/joint/model.pt", "joint.hdf5")
    assert separate.keys() == joint.keys() and len(joint) == len(SENTENCES)
    for key in separate:
        np.testing.assert_allclose(joint[key], separate[key], atol=1e-6)
    # the backward half is the joint model's backward encoder, not the forward one again
    fwd_view = model.direction("forward")
    assert isinstance(fwd_view, LanguageModel)
    half = joint["0"].shape[-1] // 2
    assert np.abs(joint["0"][1:, :, :half] - joint["0"][1:, :, half:]).max() > 1e-3
    # export --variant finds the joint file; embedding with the exported model gives the same layers
    (root / "results/lm/tiny/forward/model.pt").unlink()
    (root / "results/lm/tiny/backward/model.pt").unlink()
    assert run_command("export", ["--variant", "tiny", "--output-dir", "model"]) == 0
    assert run_command("embed", ["s.txt", "embed.hdf5", "--model", "model", "--all"]) == 0
    with h5py.File("embed.hdf5") as h5:
        for key in separate:
            np.testing.assert_allclose(h5[key][()], separate[key], atol=1e-6)
