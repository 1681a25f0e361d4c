"""The released bilm-tf ELMo (``options.json`` + weights HDF5) in elmoc's formats: a
model directory (:func:`convert_bilm_tf`, the layout of ``elmoc export``) or a pair of
workflow ``model.pt`` files (:func:`bilm_tf_checkpoints`), so ELMo and ELMo-C go
through one API."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from elmoc.data.vocab.vocabulary import SPECIALS, Vocabulary
from elmoc.directions import DIRECTIONS
from elmoc.features.bilm import BiLM
from elmoc.io.atomic import atomic_file
from elmoc.io.output_paths import output_directory
from elmoc.io.tensor_files import SUFFIX, save_tensors
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
                   "projection_size": int(lstm["projection_dim"]), "cell_clip": _clip(lstm.get("cell_clip", 3.0)),
                   "proj_clip": _clip(lstm.get("proj_clip", 3.0)), "layer_norm": False, "recurrent_dropout": 0.0,
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


def _clip(value: Any) -> float | None:
    """An options.json clip value; null (or 0) = no clipping, as bilm-tf and AllenNLP read it."""
    return float(value) if value else None


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
            save_tensors(state, tmp / f"{direction}{SUFFIX}")
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


ELMO_C_REFUSAL = ("no bilm-tf/AllenNLP format exists for input {kind!r}: bilm-tf and AllenNLP's Elmo read words "
                  "only through a char-CNN, while this model reads a word table ({kind}: ELMo-C's frozen FastText "
                  "vectors, fastText's n-grams for unseen words); export a model directory instead (elmoc export "
                  "--output DIR) and load it with elmoc.Elmo.from_pretrained(DIR), or write AllenNLP-layout "
                  "feature files with `elmoc embed`")


def bilm_tf_refusal(bilm: BiLM, spec: dict[str, Any]) -> str | None:
    """Why ``bilm`` has no bilm-tf form (one line), or None when it has one: a char-CNN input
    shared by both directions and bilm-tf's LSTM (no LayerNorm, no input projection, the skip
    connections AllenNLP always adds)."""
    from elmoc.encoders.elmo_lstm import ElmoLstmEncoder
    from elmoc.inputs.char_cnn import CharCnnInput

    kind = (spec.get("input") or {}).get("type")
    if not isinstance(bilm.forward_lm.input_layer, CharCnnInput):
        return ELMO_C_REFUSAL.format(kind=kind)
    if bilm.single:
        return ("bilm-tf holds a forward and a backward LSTM; this model is one stack (a masked or one-direction "
                "LM); export a model directory instead (elmoc export --output DIR)")
    if not bilm.shared_input:
        return ("bilm-tf holds one char-CNN shared by both directions; this model's forward and backward LMs "
                "have different char-CNNs (trained separately): train a joint bi-LM (train.directions: joint, "
                "as config/lm/elmo.yaml), or export a model directory instead")
    encoder = bilm.forward_lm.encoder
    if not isinstance(encoder, ElmoLstmEncoder):
        return f"bilm-tf's encoder is its LSTM; this model's is {spec['encoder'].get('type')!r}: export a model directory instead"
    if encoder.input_projection is not None or any(l.layer_norm is not None for l in encoder.lstm_layers):
        return ("bilm-tf's LSTM has no LayerNorm and no input projection; this encoder has them (layer_norm: true "
                "or an input_dim != projection_size): export a model directory instead")
    if not encoder.residual:
        return ("AllenNLP's Elmo always adds the skip connections from layer 1 up; this encoder has residual: "
                "false, so AllenNLP would compute other layers: export a model directory instead")
    return None


def export_bilm_tf(forward: str | Path, backward: str | Path | None, output: str | Path) -> Path:
    """Write ``options.json`` + ``weights.hdf5`` (bilm-tf's layout, AllenNLP's ``Elmo`` reads
    them) of a trained char-CNN ELMo-LSTM bi-LM into the directory ``output``; any other
    model is refused in one line (:func:`bilm_tf_refusal`).  The output layer is not part of
    the format.  AllenNLP wraps every sentence in ``<S> ... </S>``; the layers are equal to
    this model's run that way (``elmoc embed --model``'s default is the model's own)."""
    import h5py

    from elmoc.errors import ConfigError
    from elmoc.inputs.bilm_tf_weights import char_cnn_datasets, elmo_lstm_datasets
    from elmoc.pretrained.loader import load_checkpoints, read_checkpoints

    _, spec = read_checkpoints(forward, backward)
    bilm = load_checkpoints(forward, backward, closed_vocabulary=True, boundaries=True)
    refusal = bilm_tf_refusal(bilm, spec)
    if refusal:
        raise ConfigError(f"--to bilm-tf: {refusal}")
    cnn, encoder = bilm.forward_lm.input_layer, bilm.forward_lm.encoder
    layer = encoder.lstm_layers[0]
    options = json.loads(json.dumps(cnn.options))
    options["char_cnn"]["n_characters"] = 262  # bilm-tf's inference value (its training one is 261)
    options["lstm"] = {"dim": layer.cell_size, "projection_dim": layer.projection_size,
                       "n_layers": len(encoder.lstm_layers), "cell_clip": layer.cell_clip, "proj_clip": layer.proj_clip,
                       "use_skip_connections": True}
    datasets = char_cnn_datasets(cnn)
    for index, lm in enumerate((bilm.forward_lm, bilm.backward_lm)):
        datasets.update(elmo_lstm_datasets(lm.encoder, index))
    inputs = {"--forward": forward, "--backward": backward}
    with output_directory(output, "export", inputs) as tmp:
        with atomic_file(tmp / "options.json") as f:
            json.dump(options, f, indent=2)
            f.write("\n")
        with h5py.File(tmp / "weights.hdf5", "w") as h5:
            for name, value in sorted(datasets.items()):
                h5.create_dataset(name, data=np.ascontiguousarray(value, dtype=np.float32))
    log.info("wrote bilm-tf options.json + weights.hdf5 of %s to %s", forward, output)
    return Path(output)
