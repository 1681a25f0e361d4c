"""No ``.pt`` reader runs code from the file (#20.3): a pickle whose ``__reduce__`` calls
``os.system`` is refused with one line naming the file, and the command never runs (the
file it would create does not appear).  Readers: load_checkpoint (hence extraction,
export, the CNN table, the char-CNN vectors of a model and a training resume), a model
directory's weights (load_bilm, CharCnnVectors.load)."""
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from elmoc.errors import InputFileError
from elmoc.model_file import FORMAT, load_checkpoint
from elmoc.train.checkpoint import set_rng_state
from elmoc.train.loop import train

ELMOC = [sys.executable, "-c", "import sys; from elmoc.cli import main; sys.exit(main())"]


class Payload:
    """Unpickling this runs ``touch <marker>``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.fixture
def crafted(tmp_path):
    """(path of a crafted checkpoint-looking .pt, the marker its payload would create)."""
    marker = tmp_path / "pwned"
    path = tmp_path / "evil" / "model.pt"
    path.parent.mkdir()
    torch.save({"format": FORMAT, "direction": "forward", "model": {"w": torch.zeros(2)}, "spec": Payload(marker)},
               path)
    return path, marker


def _assert_refused(err, path, marker):
    message = str(err)
    assert "\n" not in message and str(path) in message
    assert "weights only" in message and "os.system" in message.replace("posix.system", "os.system")
    assert not marker.exists()


def test_load_checkpoint_refuses_code(crafted):
    path, marker = crafted
    with pytest.raises(InputFileError) as err:
        load_checkpoint(path)
    _assert_refused(err.value, path, marker)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["extract", "export", "cnn-table"])
def test_commands_give_one_line_and_run_nothing(crafted, tmp_path, command):
    path, marker = crafted
    (tmp_path / "s.txt").write_text("a b\n")
    from elmoc.data.vocab.vocabulary import Vocabulary

    Vocabulary.from_counts({"a": 2, "b": 1}).save(tmp_path / "vocab.txt")
    args = {"extract": ["--forward", path, "--backward", path, "--sentences", tmp_path / "s.txt",
                        "--output", tmp_path / "o.hdf5"],
            "export": ["--forward", path, "--backward", path, "--output-dir", tmp_path / "exported"],
            "cnn-table": ["--checkpoint", path, "--vocab", tmp_path / "vocab.txt", "--output", tmp_path / "t.npy"]}[command]
    r = subprocess.run(ELMOC + [command, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and str(path) in errors[0] and "weights only" in errors[0], r.stderr
    assert not marker.exists()


def test_training_resume_refuses_or_sets_aside_a_crafted_checkpoint(tmp_path, tiny_lm, crafted):
    vocab, spec, make_batches, _ = tiny_lm
    evil, marker = crafted
    out = tmp_path / "run"
    out.mkdir()
    (out / "checkpoint.pt").write_bytes(evil.read_bytes())
    short = {**spec, "train": {**spec["train"], "max_steps": 2}}
    with pytest.raises(InputFileError) as err:
        train(short, vocab, out, make_batches, None)
    _assert_refused(err.value, out / "checkpoint.pt", marker)
    result = train(short, vocab, out, make_batches, None, stale_checkpoint="set-aside")
    assert result.steps == 2 and (out / "checkpoint.unreadable.pt").is_file() and not marker.exists()


def test_model_directory_weights_are_read_weights_only(tmp_path):
    from elmoc.inputs import char_cnn_vectors
    from elmoc.pretrained.loader import FORMAT as MODEL_FORMAT, load_bilm

    marker = tmp_path / "pwned"
    model_dir = tmp_path / "exported"
    model_dir.mkdir()
    meta = {"format": MODEL_FORMAT, "input": {"type": "subword", "dim": 4}, "encoder": {}, "boundaries": True,
            "files": [], "vocab": None}
    (model_dir / "elmoc-model.json").write_text(json.dumps(meta))
    torch.save({"w": Payload(marker)}, model_dir / "forward.pt")
    with pytest.raises(InputFileError) as err:
        load_bilm(model_dir)
    _assert_refused(err.value, model_dir / "forward.pt", marker)

    options = {"char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4]], "n_highway": 0, "n_characters": 262,
                            "activation": "relu", "max_characters_per_token": 10}, "lstm": {"projection_dim": 4}}
    (model_dir / "char_cnn.json").write_text(json.dumps({"format": char_cnn_vectors.FORMAT, "options": options}))
    torch.save({"w": Payload(marker)}, model_dir / "char_cnn.pt")
    with pytest.raises(InputFileError) as err:
        char_cnn_vectors.CharCnnVectors.load(model_dir)
    _assert_refused(err.value, model_dir / "char_cnn.pt", marker)


def test_checkpoints_of_the_previous_format_still_load(tmp_path, tiny_lm):
    """A checkpoint written before RNG states were plain lists (numpy's state an ndarray,
    rank 0's dict alone) loads weights-only and resumes."""
    vocab, spec, make_batches, _ = tiny_lm
    first = {**spec, "train": {**spec["train"], "max_steps": 10}}
    train(first, vocab, tmp_path / "run", make_batches, None)
    path = tmp_path / "run/checkpoint.pt"
    payload = load_checkpoint(path)
    old_rng = {"torch": payload["rng"]["ranks"][0]["torch"], "numpy": np.random.get_state(),
               "python": random.getstate()}
    torch.save({**payload, "rng": old_rng}, path)  # what the previous code wrote
    assert isinstance(load_checkpoint(path)["rng"]["numpy"][1], np.ndarray)
    set_rng_state(load_checkpoint(path)["rng"])
    assert train(spec, vocab, tmp_path / "run", make_batches, None).steps == 30
    assert Path(tmp_path / "run/model.pt").is_file()
