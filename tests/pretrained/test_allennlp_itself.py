"""Issue 53.1 and 53.2 against AllenNLP 2.10.1 itself, where it is installed (the benchmarks'
separate venv, ``benchmarks/allennlp-venv.txt``: ``.bench-venv/bin/python`` or ``$ELMOC_ALLENNLP_PYTHON``;
skipped elsewhere, where test_allennlp_drop_in.py checks against stored references):

- AllenNLP's usage snippet on the bilm-tf test fixture, in AllenNLP and in elmoc (import changed): equal;
- ``elmoc export --to bilm-tf`` of an elmoc char-CNN ELMo-LSTM, loaded by AllenNLP's ``_ElmoBiLm``:
  every layer equal to the elmoc model's (with ``<S> ... </S>``, as AllenNLP reads).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from lm_tree_helpers import run_command

from elmoc.model_file import load_checkpoint, save_checkpoint

REPO = Path(__file__).resolve().parents[2]
SNIPPET = [["First", "sentence", "."], ["Another", "."]]
SENTENCES = [["the", "zebra", "ran", "to", "the", "house"], ["a", "xqzzy"], ["the", "cat", "sat", "."]]

DRIVER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from allennlp_elmo import _import_torchvision_or_placeholder
_import_torchvision_or_placeholder()
import torch
from allennlp.modules.elmo import Elmo, _ElmoBiLm, batch_to_ids
from allennlp.nn.util import remove_sentence_boundaries
args = json.loads(sys.argv[2])
elmo = Elmo(args["options"], args["weights"], 2, dropout=0)
with torch.no_grad():
    embeddings = elmo(batch_to_ids(args["snippet"]))
    out = {"snippet": [r.tolist() for r in embeddings["elmo_representations"]], "mask": embeddings["mask"].tolist()}
    bilm = _ElmoBiLm(args["exported_options"], args["exported_weights"])
    result = bilm(batch_to_ids(args["sentences"]))
    out["layers"] = [remove_sentence_boundaries(a, result["mask"])[0].tolist() for a in result["activations"]]
print(json.dumps(out))
"""


def _allennlp_python() -> Path:
    python = Path(os.environ.get("ELMOC_ALLENNLP_PYTHON", REPO / ".bench-venv" / "bin" / "python"))
    if not python.is_file():
        pytest.skip(f"no AllenNLP 2.10.1 environment at {python} (benchmarks/allennlp-venv.txt; "
                    "set ELMOC_ALLENNLP_PYTHON)")
    return python


@pytest.mark.slow
def test_allennlp_and_elmoc_agree_on_the_snippet_and_on_exported_weights(elmo_fixture_dir, lm_tree, shared_data):
    python = _allennlp_python()
    root = lm_tree("char_cnn", shared_data)
    forward = load_checkpoint(root / "results/lm/tiny/forward/model.pt")
    backward_path = root / "results/lm/tiny/backward/model.pt"
    backward = load_checkpoint(backward_path)
    backward["model"].update({k: v for k, v in forward["model"].items() if k.startswith("input_layer.")})
    save_checkpoint(backward_path, backward)  # one char-CNN, as a joint bi-LM
    assert run_command("export", ["--variant", "tiny", "--to", "bilm-tf", "--output-dir", "bilm_tf"]) == 0
    args = {"options": str(elmo_fixture_dir / "options.json"), "weights": str(elmo_fixture_dir / "lm_weights.hdf5"),
            "snippet": SNIPPET, "sentences": SENTENCES,
            "exported_options": str(root / "bilm_tf/options.json"),
            "exported_weights": str(root / "bilm_tf/weights.hdf5")}
    done = subprocess.run([str(python), "-c", DRIVER, str(REPO / "benchmarks"), json.dumps(args)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])

    from elmoc import Elmo, batch_to_ids
    from elmoc.pretrained.loader import load_checkpoints

    with torch.no_grad():
        ours = Elmo(args["options"], args["weights"], 2, dropout=0)(batch_to_ids(SNIPPET))
        for mine, want in zip(ours["elmo_representations"], theirs["snippet"]):
            want = np.asarray(want, np.float32)
            print(f"snippet representation: max |elmoc - AllenNLP| = {np.abs(mine.numpy() - want).max():.2e}")
            np.testing.assert_allclose(mine.numpy(), want, atol=1e-5, rtol=0)
        assert ours["mask"].tolist() == [[bool(v) for v in row] for row in theirs["mask"]]
        model = load_checkpoints("results/lm/tiny/forward/model.pt", "results/lm/tiny/backward/model.pt",
                                 closed_vocabulary=True, boundaries=True)
        layers, mask, _ = model.embed(SENTENCES)
    for index, want in enumerate(theirs["layers"]):
        got = layers[:, index].numpy() * mask[:, :, None].numpy()
        want = np.asarray(want, np.float32)[:, : got.shape[1]] * mask[:, :, None].numpy()
        print(f"exported layer {index} in AllenNLP's _ElmoBiLm: max |elmoc - AllenNLP| = {np.abs(got - want).max():.2e}")
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
