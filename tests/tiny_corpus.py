"""The tiny corpus of the tests that train through the real `elmoc train` command
(tests/train/test_checkpoint_resume.py and the tests importing its workdir,
tests/joint/test_joint_training.py): random sentences over a 20-word vocabulary in
sharded training files, a heldout file, the vocabulary, fastText-style vectors and a
1-layer LM spec, all relative to one working directory; and the command itself."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from elmoc.data.vocab.vocabulary import Vocabulary

WORDS = "the cat sat on a mat while dog ran after red ball and bird sang over old green tree".split()
DIM = 6  # width of vec.npy
# the installed `elmoc` script beside this Python, else the same entry point through -c
ELMOC = [str(Path(sys.executable).parent / "elmoc")]
if not Path(ELMOC[0]).exists():
    ELMOC = [sys.executable, "-c", "import sys; from elmoc.cli import main; sys.exit(main())"]


def sentences(rng: np.random.Generator, n: int) -> list[str]:
    """`n` sentences of 3 to 7 words drawn from WORDS."""
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 8)))) for _ in range(n)]


def tiny_spec(name: str, output: dict[str, Any], **train: Any) -> dict[str, Any]:
    """A 1-layer LM (cell 8, projection 4, recurrent dropout 0.1) over vec.npy, Adam 0.01,
    one epoch logging every step, reading the files write_workdir writes; `train` keys
    are added to (or replace) the train section."""
    return {
        "name": name,
        "input": {"type": "fasttext", "vectors": "vec.npy"},
        "encoder": {"type": "elmo_lstm", "num_layers": 1, "cell_size": 8, "projection_size": 4,
                    "recurrent_dropout": 0.1},
        "output": output,
        "optimizer": {"type": "adam", "lr": 0.01},
        "train": {"epochs": 1, "log_every": 1, "reset_state": False, "seed": 1, **train},
        "data": {"train": "corpus/train", "heldout": "corpus/heldout.txt"},
        "vocab": "vocab.txt",
    }


def write_workdir(root: Path, shards: list[list[str]], heldout: list[str], spec: dict[str, Any],
                  rng: np.random.Generator) -> tuple[Vocabulary, Path]:
    """Writes under `root`: corpus/train/shard_NNN.txt (one per entry of `shards`),
    corpus/stats.json (so nothing reads the shards up front), corpus/heldout.txt,
    vocab.txt (the shards' word counts), vec.npy ((vocabulary size, DIM) standard
    normal floats drawn from `rng`) and spec.yaml.  Returns (the vocabulary, the
    training folder)."""
    train_dir = root / "corpus/train"
    train_dir.mkdir(parents=True)
    stats = []
    for i, lines in enumerate(shards):
        (train_dir / f"shard_{i:03d}.txt").write_text("\n".join(lines) + "\n")
        stats.append({"name": f"shard_{i:03d}.txt", "sentences": len(lines),
                      "tokens": sum(len(s.split()) for s in lines)})
    (root / "corpus/stats.json").write_text(json.dumps({"shards": stats}))
    (root / "corpus/heldout.txt").write_text("\n".join(heldout) + "\n")
    vocab = Vocabulary.from_counts(Counter(" ".join(line for lines in shards for line in lines).split()))
    vocab.save(root / "vocab.txt")
    np.save(root / "vec.npy", rng.standard_normal((len(vocab), DIM)).astype("float32"))
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    return vocab, train_dir


def elmoc_train(root: Path, out: str = "out", *extra: str, direction: str = "forward", wait: bool = True):
    """`elmoc train --spec spec.yaml` in `root` on 1 thread with the Python LSTM loop
    (no per-process native build; every run of a test uses the same loop).  Waits and
    returns the CompletedProcess (output captured), or with wait=False returns the
    Popen (stderr piped)."""
    cmd = ELMOC + ["train", "--spec", "spec.yaml", "--direction", direction, "--output-dir", out,
                   "--threads", "1", *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ELMOC_NATIVE_LSTM": "0"}
    if wait:
        return subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=300, env=env)
    return subprocess.Popen(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
