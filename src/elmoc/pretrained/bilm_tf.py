"""The released bilm-tf ELMo (``options.json`` + weights HDF5) in elmoc's formats: a
model directory (:func:`convert_bilm_tf`, the layout of ``elmoc export``) or a pair of
workflow ``model.pt`` files (:func:`bilm_tf_checkpoints`), so ELMo and ELMo-C go
through one API."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Sequence

import torch

from elmoc.data.vocab.vocabulary import SPECIALS, Vocabulary
from elmoc.directions import DIRECTIONS
from elmoc.features.bilm import BiLM
from elmoc.io.atomic import atomic_file
from elmoc.io.output_paths import output_directory
from elmoc.model_file import FORMAT as CHECKPOINT_FORMAT
from elmoc.model_file import save_checkpoint
from elmoc.pretrained.card import write_card
from elmoc.pretrained.loader import build_bilm
from elmoc.pretrained.writer import write_meta

log = logging.getLogger(__name__)


def _bilm_tf_parts(options: str | Path, weights: str | Path) -> tuple[dict, dict, dict[str, dict]]:
    """Input config, encoder config and both directions' state dicts of a bilm-tf model."""
    from elmoc.inputs.bilm_tf_weights import load_elmo_lstm
    from elmoc.inputs.char_cnn import read_options
    from elmoc.registry import build

    opts = read_options(str(options))
    lstm = opts["lstm"]
    input_cfg = {"type": "char_cnn", "options": opts, "trainable": False}
    encoder_cfg = {"type": "elmo_lstm", "num_layers": int(lstm.get("n_layers", 2)), "cell_size": int(lstm["dim"]),
                   "projection_size": int(lstm["projection_dim"]), "cell_clip": float(lstm.get("cell_clip", 3.0)),
                   "proj_clip": float(lstm.get("proj_clip", 3.0)), "layer_norm": False, "recurrent_dropout": 0.0,
                   "residual": bool(lstm.get("use_skip_connections", True))}
    cnn = build("input", {**input_cfg, "weights": str(weights)})
    states = {}
    for index, direction in enumerate(DIRECTIONS):
        encoder = build("encoder", encoder_cfg, input_dim=cnn.output_dim)
        load_elmo_lstm(encoder, weights, index)
        state = {f"input_layer.{k}": v for k, v in cnn.state_dict().items()}
        state.update({f"encoder.{k}": v for k, v in encoder.state_dict().items()})
        states[direction] = state
    return input_cfg, encoder_cfg, states


def load_bilm_tf(options: str | Path, weights: str | Path, device: str | torch.device = "cpu") -> BiLM:
    """The bi-LM of a bilm-tf ``options.json`` + weights HDF5, converted on the fly (no file is
    written; :func:`convert_bilm_tf` writes a model directory instead).  It reads
    ``<S> ... </S>`` around every sentence, as AllenNLP's ``Elmo`` feeds it."""
    from elmoc.devices import resolve_device

    input_cfg, encoder_cfg, states = _bilm_tf_parts(options, weights)
    bilm = build_bilm({"input": input_cfg, "encoder": encoder_cfg}, states,
                      {d: Path(weights) for d in DIRECTIONS}, Vocabulary(list(SPECIALS)), boundaries=True)
    return bilm.to(resolve_device(device))


def convert_bilm_tf(options: str | Path, weights: str | Path, output: str | Path, name: str = "elmo",
                    vocab: str | Path | None = None, command: str | None = None) -> Path:
    """Write the model directory of a released bilm-tf ELMo (``options.json`` + weights HDF5).

    The char-CNN reads every word's characters, so the vocabulary only serves word-id
    inputs: ``vocab`` (e.g. bilm-tf's ``vocab-2016-09-10.txt``), else none is written.
    """
    input_cfg, encoder_cfg, states = _bilm_tf_parts(options, weights)
    inputs = {"--bilm-tf-options": options, "--bilm-tf-weights": weights, "--vocab": vocab}
    with output_directory(output, "export", inputs) as tmp:
        if vocab:
            Vocabulary.from_external_file(vocab).save(tmp / "vocab.txt")
        for direction, state in states.items():
            torch.save(state, tmp / f"{direction}.pt")
        spec = {"name": name, "description": f"released bilm-tf ELMo ({Path(weights).name})",
                "input": input_cfg, "encoder": encoder_cfg}
        from elmoc.config import dump_yaml

        dump_yaml(spec, tmp / "spec.yaml")
        bilm = write_meta(tmp, name, input_cfg, encoder_cfg, True,
                           {"tokenizer": None, "oov_vectors": None, "vocab": "vocab.txt" if vocab else None})
        released = {"step": None, "tokens": None, "final": True}
        write_card(tmp, {**spec, "data": {"train": "1B Word Benchmark (bilm-tf release)"}},
                    {d: released for d in DIRECTIONS}, {d: {} for d in DIRECTIONS}, bilm,
                    command or f"elmoc export --bilm-tf-options {options} --bilm-tf-weights {weights} --output {output}")
    return Path(output)


def bilm_tf_checkpoints(options: str | Path, weights: str | Path, output_dir: str | Path, spec: dict[str, Any],
                        vocab_path: str | Path, directions: Sequence[str] = DIRECTIONS) -> None:
    """The released bilm-tf ELMo as the workflow's ``{output_dir}/{direction}/model.pt``
    and ``heldout.json`` (issue 12.2: the ``elmo`` variant without retraining).

    ``spec`` is the variant's resolved spec; its input and encoder are replaced by the
    released model's (the output layer is not part of the release and is not stored).
    ``directions``: which of the two to write.
    """
    input_cfg, encoder_cfg, states = _bilm_tf_parts(options, weights)
    spec = {**spec, "input": input_cfg, "encoder": encoder_cfg}
    source = {"options": str(options), "weights": str(weights)}
    for direction in directions:
        state = states[direction]
        folder = Path(output_dir) / direction
        save_checkpoint(folder / "model.pt", {
            "spec": spec, "vocab_path": str(vocab_path), "direction": direction, "model": state, "step": 0,
            "tokens": None, "history": [], "final": True, "released": source})
        summary = {"direction": direction, "released": source, "steps": 0, "tokens": None, "seconds": 0.0,
                   "metric": None, "before": None, "after": None, "history": [],
                   "trainable_parameters": 0, "threads": torch.get_num_threads()}
        with atomic_file(folder / "heldout.json") as f:
            json.dump(summary, f, indent=2)
            f.write("\n")
    log.info("released bilm-tf ELMo %s -> %s/{forward,backward}/model.pt (format %s)", weights, output_dir,
             CHECKPOINT_FORMAT)
