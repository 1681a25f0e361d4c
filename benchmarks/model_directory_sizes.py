"""Model directory sizes before and after issue 53.3: the same directory with ``.pt`` weights
(``torch.save``, written before) and with ``.safetensors`` weights (written now), and the
time ``load_bilm`` takes on each; for AllenNLP's test ELMo (shared data) and for an
original-size ELMo with random weights (the released options, ``elmo_vs_allennlp.py``).

Usage: PYTHONPATH=src .venv/bin/python benchmarks/model_directory_sizes.py [--shared-data ../shared/data]
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from elmo_vs_allennlp import ORIGINAL_OPTIONS, write_random_bilm_tf  # noqa: E402

from elmoc.io.tensor_files import read_state  # noqa: E402
from elmoc.pretrained.bilm_tf import convert_bilm_tf  # noqa: E402
from elmoc.pretrained.compare import directory_size  # noqa: E402
from elmoc.pretrained.loader import load_bilm  # noqa: E402


def as_written_before(new: Path, old: Path) -> None:
    """A copy of the directory ``new`` with its weights as ``.pt`` files (format v1)."""
    shutil.copytree(new, old)
    for stem in ("forward", "backward"):
        torch.save(read_state(old / f"{stem}.safetensors"), old / f"{stem}.pt")
        (old / f"{stem}.safetensors").unlink()
    meta = json.loads((old / "elmoc-model.json").read_text())
    meta["format"] = "elmoc-model-v1"
    meta["files"] = sorted(n.replace(".safetensors", ".pt") for n in meta["files"])
    (old / "elmoc-model.json").write_text(json.dumps(meta))


def measure(options: Path, weights: Path, label: str, tmp: Path) -> None:
    new, old = tmp / f"{label}-new", tmp / f"{label}-old"
    convert_bilm_tf(options, weights, new)
    as_written_before(new, old)
    seconds = {}
    for directory in (old, new):
        start = time.perf_counter()
        load_bilm(directory)
        seconds[directory] = time.perf_counter() - start
    print(f"{label}: before (.pt) {directory_size(old):,} B, after (.safetensors) {directory_size(new):,} B; "
          f"load_bilm {seconds[old]:.2f} s / {seconds[new]:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared-data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        fixture = Path(args.shared_data) / "fixtures" / "allennlp" / "elmo"
        measure(fixture / "options.json", fixture / "lm_weights.hdf5", "allennlp-fixture", tmp)
        options, weights = write_random_bilm_tf(tmp / "original", ORIGINAL_OPTIONS, seed=0)
        measure(options, weights, "original-size-random", tmp)


if __name__ == "__main__":
    main()
