"""Fixtures of tests/io: ``world``, a tiny trained variant and what reads it (issue 42)."""
from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest
import yaml
from tiny_corpus import sentences, tiny_spec, write_workdir

from elmoc.cli import main

TASK = ["the cat sat on a mat", "a dog ran after the red ball", "the old bird sang over a green tree"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The trained variant, its export, a task config with data files and a task-model folder."""
    root = tmp_path_factory.mktemp("implicit")
    rng = np.random.default_rng(0)
    spec = tiny_spec("tiny", {"type": "cosine", "vectors": "vec.npy"}, batch_size=2, bptt=5, checkpoint_every=4,
                     log_every=10, max_steps=4)
    write_workdir(root, [sentences(rng, 12)], sentences(np.random.default_rng(1), 4), spec, rng)
    (root / "lm/tiny").mkdir(parents=True)
    shutil.copy(root / "spec.yaml", root / "lm/tiny/spec.yaml")
    (root / "task.txt").write_text("\n".join(TASK) + "\n")
    handlers = list(logging.getLogger().handlers)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("ELMOC_NATIVE_LSTM", "0")
        for run in ("forward", "backward"):
            assert main(["train", "--spec", "spec.yaml", "--direction", run, "--output-dir", f"lm/tiny/{run}",
                         "--threads", "1"]) == 0
        assert main(["export", "--forward", "lm/tiny/forward/model.pt", "--backward", "lm/tiny/backward/model.pt",
                     "--output-dir", "models/tiny"]) == 0
    for handler in set(logging.getLogger().handlers) - set(handlers):  # train.log: later tests must not grow it
        logging.getLogger().removeHandler(handler)
        handler.close()
    (root / "lm/tiny/forward/checkpoint.pt").write_bytes((root / "lm/tiny/forward/model.pt").read_bytes())
    data = root / "data/sst"
    data.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (data / f"{split}.txt").write_text("3\tthe cat sat on a mat\n")
    (root / "config.yaml").write_text(yaml.safe_dump({"tasks": {"sst5": {
        "type": "sst", "train": "data/sst/train.txt", "dev": "data/sst/dev.txt", "test": "data/sst/test.txt"}}}))
    (root / "feats.hdf5").write_bytes(b"features")
    (root / "tm/lm").mkdir(parents=True)
    (root / "tm/lm/forward.pt").write_bytes(b"the task model's LM")
    (root / "tm/weights.pt").write_bytes(b"the task model's weights")
    student = {**spec, "name": "student"}
    (root / "student.yaml").write_text(yaml.safe_dump(student))
    return root
