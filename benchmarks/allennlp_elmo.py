"""`allennlp elmo` (AllenNLP 0.9.0's command) on AllenNLP 2.10.1's ELMo modules.

Runs in the *AllenNLP* environment (not elmoc's), as a subprocess of
``benchmarks/elmo_vs_allennlp.py``.  AllenNLP 2.x dropped the ``allennlp elmo``
subcommand; this driver, written for the benchmark, computes what that command
computed, with 2.10.1's own modules (``_ElmoBiLm``, ``batch_to_ids``,
``remove_sentence_boundaries``): sentences batched in file order, ``--batch-size`` at a
time (no length sorting), inside ``torch.no_grad()``; each sentence's
``(3, tokens, 2 * projection)`` array written as dataset ``str(line)`` plus the
``sentence_to_index`` JSON, the ``allennlp elmo --all`` layout.

One deliberate difference, on by default: ``--reset-states``.  AllenNLP's ELMo LSTM is
*stateful*: each batch starts from the final states of the previous batch (the 0.9.0
command's docstring warns that the same sentence gives different vectors on a second
call), whereas ``elmoc embed`` starts every batch from zero states (as bilm-tf's
``dump_bilm_embeddings`` starts from zeros).  To compare the outputs the driver resets
the LSTM states before every batch (``_ElmoBiLm._elmo_lstm.reset_states()``, a public
method of AllenNLP's ``_EncoderBase``); it costs nothing measurable.  ``--stateful``
runs the command exactly as AllenNLP shipped it.

Import fix (AllenNLP 2.10.1 pins torch<1.13 and torchvision<0.14): ``import allennlp``
pulls in ``allennlp.data.image_loader``, which imports ``torchvision`` at module level.
No CPU build of torchvision for torch 2.13 is reachable here (PyPI's is a CUDA build),
so unless a real torchvision imports, an empty placeholder module named ``torchvision``
is registered first; nothing on the ELMo code path uses torchvision.

Usage (inside the AllenNLP venv):
    python benchmarks/allennlp_elmo.py --options-file O.json --weight-file W.hdf5 \
        [--batch-size 64] [--threads N] [--device cuda] [--stateful] input.txt output.hdf5
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import types
from typing import List


def _import_torchvision_or_placeholder() -> str:
    try:
        import torchvision  # noqa: F401
        return "torchvision " + torchvision.__version__
    except Exception:  # absent, or a build that does not load against this torch
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        placeholder = types.ModuleType("torchvision")
        placeholder.__path__ = []  # a package, so `import torchvision.x` fails loudly if ever reached
        sys.modules["torchvision"] = placeholder
        return "placeholder torchvision module (not used by ELMo)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("input_file")
    parser.add_argument("output_file")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--all", action="store_const", const="all", dest="output_format", default="all")
    which.add_argument("--top", action="store_const", const="top", dest="output_format")
    which.add_argument("--average", action="store_const", const="average", dest="output_format")
    parser.add_argument("--options-file", required=True)
    parser.add_argument("--weight-file", required=True)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (the command left "
                        "it to OMP_NUM_THREADS; the benchmark sets both)")
    parser.add_argument("--device", default="cpu", help="torch device of the bi-LM and its inputs (default cpu)")
    parser.add_argument("--stateful", action="store_true", help="carry LSTM states across batches as "
                        "AllenNLP's command does (default: reset before every batch)")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    torchvision_note = _import_torchvision_or_placeholder()
    import h5py
    import numpy
    import torch

    import allennlp
    from allennlp.modules.elmo import _ElmoBiLm, batch_to_ids
    from allennlp.nn.util import remove_sentence_boundaries

    if args.threads:
        torch.set_num_threads(args.threads)

    def layers_of(bilm, tokens: List[List[str]]) -> List[numpy.ndarray]:
        """One batch through AllenNLP's bi-LM: per sentence, (3, length, 2 * projection)."""
        out = bilm(batch_to_ids(tokens).to(device))
        trimmed = [remove_sentence_boundaries(layer, out["mask"]) for layer in out["activations"]]
        stacked = torch.stack([values for values, _ in trimmed], dim=1)  # (B, 3, T, 2 * projection)
        lengths = trimmed[0][1].sum(dim=1).tolist()
        stacked = stacked.cpu()
        return [stacked[i, :, :n].numpy() for i, n in enumerate(lengths)]

    def write_file(bilm, lines: List[str], path: str, batch_size: int, reduce: str, reset: bool) -> int:
        if any(not line for line in lines):
            raise SystemExit(f"{args.input_file}: blank line {lines.index('') + 1}; every line must hold a sentence")
        index = {}
        with h5py.File(path, "w") as out:
            for start in range(0, len(lines), batch_size):
                if reset:
                    bilm._elmo_lstm.reset_states()  # each batch from zero states, as elmoc embed
                batch = lines[start:start + batch_size]
                for offset, layers in enumerate(layers_of(bilm, [line.split() for line in batch])):
                    key = str(start + offset)
                    value = {"all": layers, "top": layers[-1]}.get(reduce)
                    value = layers.mean(axis=0) if value is None else value
                    out.create_dataset(key, data=value.astype("float32"))
                    index[batch[offset]] = key
            out.create_dataset("sentence_to_index", (1,), dtype=h5py.special_dtype(vlen=str))[0] = json.dumps(index)
        return sum(len(line.split()) for line in lines)

    device = torch.device(args.device)
    bilm = _ElmoBiLm(args.options_file, args.weight_file).to(device)
    loaded = time.perf_counter()
    with open(args.input_file, encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    with torch.no_grad():
        tokens = write_file(bilm, lines, args.output_file, args.batch_size, args.output_format, not args.stateful)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    done = time.perf_counter()
    print(json.dumps({"tool": "allennlp", "allennlp": allennlp.__version__, "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "device": str(device), "stateful": args.stateful,
                      "torchvision": torchvision_note,
                      "tokens": tokens, "load_seconds": loaded - start, "embed_seconds": done - loaded}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
