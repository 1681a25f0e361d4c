"""The equality figures of issue 53 on AllenNLP's test ELMo (shared data), as the tests check them:

1. AllenNLP's usage snippet with the import changed (``Elmo(options, weights, 2, dropout=0)``)
   against ``tests/pretrained/data/allennlp_snippet_reference.json`` (the path verified before);
2. ``stateful=True``, the top layer alone, against bilm-tf's own ``lm_embeddings_0.hdf5``
   (batches of 3, the state carried);
3. ``elmoc export --to bilm-tf`` read back by elmoc's bilm-tf importer: a char-CNN ELMo-LSTM bi-LM with
   random weights (the fixture's sizes, one char-CNN for both directions), every layer, with ``<S> ... </S>``.

Usage: PYTHONPATH=src .venv/bin/python benchmarks/drop_in_equality.py [--shared-data ../shared/data]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import h5py
import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared-data", default=str(ROOT.parent / "shared" / "data"))
    args = parser.parse_args()
    fixture = Path(args.shared_data) / "fixtures" / "allennlp" / "elmo"
    files = (str(fixture / "options.json"), str(fixture / "lm_weights.hdf5"))
    from elmoc import Elmo, batch_to_ids

    reference = json.loads((ROOT / "tests/pretrained/data/allennlp_snippet_reference.json").read_text())
    elmo = Elmo(*files, 2, dropout=0)
    with torch.no_grad():
        reps = elmo(batch_to_ids(reference["sentences"]))["elmo_representations"]
    want = np.asarray(reference["representation"], dtype=np.float32)
    print(f"1. snippet vs stored reference: max abs diff {max(float(np.abs(r.numpy() - want).max()) for r in reps):.2e}")

    sentences = json.loads((fixture / "sentences.json").read_text())
    top = Elmo(*files, 1, dropout=0.0, scalar_mix_parameters=[-1e9, -1e9, 0.0], stateful=True)
    worst = 0.0
    with h5py.File(fixture / "lm_embeddings_0.hdf5") as h5, torch.no_grad():
        for i in range(len(sentences[0])):
            batch = [sentences[k][i].split() for k in range(len(sentences))]
            got = top(batch_to_ids(batch))["elmo_representations"][0][0, : len(batch[0])].numpy()
            want = np.concatenate([h5[str(i)][()][0], h5[str(i)][()][1]], axis=-1)
            worst = max(worst, float(np.abs(got - want).max()))
    print(f"2. stateful top layer vs bilm-tf's lm_embeddings_0.hdf5: max abs diff {worst:.2e}")

    from elmoc.data.vocab.vocabulary import Vocabulary
    from elmoc.lm import LanguageModel
    from elmoc.model_file import save_checkpoint
    from elmoc.pretrained.bilm_tf import export_bilm_tf, load_bilm_tf
    from elmoc.pretrained.loader import load_checkpoints

    options = json.loads((fixture / "options.json").read_text())
    spec = {"name": "elmo-tiny", "input": {"type": "char_cnn", "options": options},
            "encoder": {"type": "elmo_lstm", "num_layers": 2, "cell_size": 64, "projection_size": 16,
                        "layer_norm": False}, "output": {"type": "sampled", "num_samples": 2}}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        Vocabulary(["<pad>", "<s>", "</s>", "<unk>", "the", "cat"]).save(tmp / "vocab.txt")
        spec["vocab"] = str(tmp / "vocab.txt")
        vocab = Vocabulary.load(tmp / "vocab.txt")
        shared = None
        for seed, direction in enumerate(("forward", "backward")):
            torch.manual_seed(seed)
            state = LanguageModel.from_spec(spec, vocab).state_dict()
            if shared is None:
                shared = {k: v for k, v in state.items() if k.startswith("input_layer.")}
            state.update(shared)  # one char-CNN, as a joint bi-LM (and bilm-tf) has
            save_checkpoint(tmp / f"{direction}.pt", {"spec": spec, "vocab_path": spec["vocab"], "direction": direction,
                                                      "model": state, "step": 1, "tokens": 1, "final": True})
        export_bilm_tf(tmp / "forward.pt", tmp / "backward.pt", tmp / "bilm_tf")
        original = load_checkpoints(tmp / "forward.pt", tmp / "backward.pt", closed_vocabulary=True, boundaries=True)
        back = load_bilm_tf(tmp / "bilm_tf/options.json", tmp / "bilm_tf/weights.hdf5")
        tokens = [s.split() for batch in sentences for s in batch]
        with torch.no_grad():
            a, _, _ = original.embed(tokens)
            b, _, _ = back.embed(tokens)
    print(f"3. export --to bilm-tf round trip, {len(tokens)} sentences, all 3 layers: max abs diff "
          f"{float((a - b).abs().max()):.2e} (largest activation {float(a.abs().max()):.2f})")


if __name__ == "__main__":
    sys.exit(main())
