"""``elmoc export``: both directions of a trained variant (or a masked LM's one stack, or a
one-direction LM's forward LM)
as a model directory (layout in :mod:`elmoc.pretrained`), everything needed to embed
any sentence on another machine; the directory is loaded back once before it is moved
into place.
"""
from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import torch

from elmoc import __version__
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.directions import BACKWARD, DIRECTIONS, FORWARD, JOINT, MASKED
from elmoc.errors import InputFileError
from elmoc.features.bilm import BiLM
from elmoc.features.oov import oov_vectors_for
from elmoc.inputs.base import input_class
from elmoc.io.atomic import atomic_file
from elmoc.io.output_paths import output_directory
from elmoc.io.tensor_files import SUFFIX, save_tensors
from elmoc.pretrained.card import write_card
from elmoc.pretrained.loader import (FORMAT, FORWARD_ONLY, MODEL_FILE, SINGLE, boundaries_by_kind, load_bilm,
                                    read_checkpoints)

log = logging.getLogger(__name__)


def lm_files(results: str | Path, variant: str) -> dict[str, Path]:
    """``<results>/lm/{variant}/{direction}/model.pt`` (``results``: a run's folder, ``results/<run>``)
    of both directions, or the one ``<results>/lm/{variant}/joint/model.pt`` of a joint bi-LM (``.../masked/model.pt`` of a
    masked LM) as both, or ``{"forward": ...}`` alone for a one-direction LM (its spec's
    ``train.directions: forward``) (``checkpoint.pt`` where no final ``model.pt`` exists yet)."""
    def pick(direction: str) -> Path | None:
        folder = Path(results) / "lm" / variant / direction
        final, partial = folder / "model.pt", folder / "checkpoint.pt"
        if final.is_file():
            return final
        if partial.is_file():
            log.warning("%s: no model.pt, exporting the last checkpoint.pt", folder)
            return partial
        return None

    for run in (JOINT, MASKED):
        single = pick(run)
        if single is not None:
            return {direction: single for direction in DIRECTIONS}
    out = {}
    for direction in DIRECTIONS:
        found = pick(direction)
        if found is None and direction == BACKWARD and _one_direction_file(out[FORWARD]):
            break  # a one-direction LM: no backward LM
        if found is None:
            # the workflow keeps each run's LMs under results/<run>/lm/: name the runs that have this variant
            runs = sorted(p.parent.parent.as_posix() for p in Path(results).glob(f"*/lm/{variant}") if p.is_dir())
            hint = (f"give --results {' or '.join(runs)} (the workflow's runs that trained it)" if runs else
                    f"train variant {variant!r} first (snakemake results/<run>/lm/{variant}/{direction}/model.pt, "
                    "or .../joint/model.pt)")
            raise InputFileError(Path(results) / "lm" / variant / direction / "model.pt",
                                 f"not found (nor a joint or masked model.pt); {hint}")
        out[direction] = found
    return out


def _one_direction_file(path: Path) -> bool:
    """Whether a forward ``model.pt`` is a one-direction LM's (its spec's ``train.directions: forward``)."""
    from elmoc.directions import one_direction
    from elmoc.model_file import load_checkpoint

    payload = load_checkpoint(path, mmap=True)
    return payload.get("direction") == FORWARD and one_direction(payload.get("spec") or {})


def export_model(forward: str | Path, backward: str | Path | None, output: str | Path,
                 fasttext_model: str | Path | None = None, boundaries: bool | None = None,
                 command: str | None = None, char_cnn_model: str | Path | None = None) -> Path:
    """Write the model directory of a trained forward + backward LM.

    Args:
        forward, backward: the two ``model.pt`` (or ``checkpoint.pt``) files; a joint bi-LM's
            (or a masked LM's) one file as both; a one-direction LM's forward file and None.
        output: the directory to write (replaced atomically).
        fasttext_model, char_cnn_model: frozen-table inputs: the ``.bin`` (or ELMo
            ``model.pt``) the input table was made from (default: found beside the
            table, as at extraction; :func:`~elmoc.features.oov.oov_vectors_for`).
        boundaries: wrap sentences in ``<s> ... </s>`` when embedding; None = by the model's kind,
            as extraction (:func:`~elmoc.pretrained.loader.boundaries_by_kind`).
        command: recorded in the model card (default: this process's command line).
    """
    payloads, spec = read_checkpoints(forward, backward)  # a joint model.pt serves both; a masked one is one stack
    if boundaries is None:
        boundaries = boundaries_by_kind(payloads)
    vocab_path = next(iter(payloads.values())).get("vocab_path") or spec.get("vocab")
    if not vocab_path:
        raise InputFileError(forward, "checkpoint records no vocabulary")
    vocab = Vocabulary.load(vocab_path)
    input_cfg = dict(spec["input"])
    tokenizer = (spec.get("data") or {}).get("tokenizer")
    inputs = {"--forward": forward, "--backward": backward, "vocabulary": vocab_path, "tokenizer": tokenizer,
              "input table": input_cfg.get("vectors") if isinstance(input_cfg.get("vectors"), str) else None,
              "--fasttext-model": fasttext_model, "--char-cnn-model": char_cnn_model}
    with output_directory(output, "export", inputs) as tmp:
        meta: dict[str, Any] = {"tokenizer": None, "oov_vectors": None, "vocab": "vocab.txt"}
        if MASKED in payloads:
            meta["stack"] = SINGLE  # masked.pt; a directory without "stack" has forward.pt and backward.pt
        elif set(payloads) == {FORWARD}:
            meta["stack"] = FORWARD_ONLY  # forward.pt alone
        vocab.save(tmp / "vocab.txt")
        input_cfg = input_class(input_cfg).export(input_cfg, tmp)  # the table, inline options...
        composer = None if tokenizer else oov_vectors_for(spec, vocab, fasttext_model, char_cnn_model)
        if composer is not None:
            composer.save(tmp, vocab)
            meta["oov_vectors"] = composer.NAME
        if tokenizer:
            shutil.copyfile(tokenizer, tmp / "tokenizer.json")
            meta["tokenizer"] = "tokenizer.json"
        for direction, payload in payloads.items():
            save_tensors(_feature_state(payload["model"]), tmp / f"{direction}{SUFFIX}")
        from elmoc.config import dump_yaml

        dump_yaml(spec, tmp / "spec.yaml")
        heldout = {d: _read_json(Path(p).parent / "heldout.json") for d, p in zip(payloads, (forward, backward))}
        bilm = write_meta(tmp, spec.get("name", "model"), input_cfg, spec["encoder"], boundaries, meta)
        write_card(tmp, spec, payloads, heldout, bilm, command)
    log.info("exported %s%s to %s", forward, "" if backward is None else f" + {backward}", output)
    return Path(output)


def _feature_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in state.items()
            if k.startswith(("input_layer.", "encoder."))}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def write_meta(tmp: Path, name: str, input_cfg: dict, encoder_cfg: dict, boundaries: bool,
               meta: dict[str, Any]) -> BiLM:
    """Write ``elmoc-model.json`` of the directory being written in ``tmp`` (``meta``: its
    ``tokenizer``, ``oov_vectors`` and ``vocab`` entries) and return the directory loaded."""
    files = sorted(p.name for p in tmp.iterdir()) + [MODEL_FILE, "README.md"]
    record = {"format": FORMAT, "elmoc_version": __version__, "name": name, "input": input_cfg,
              "encoder": encoder_cfg, "boundaries": bool(boundaries), **meta, "files": sorted(set(files))}
    with atomic_file(tmp / MODEL_FILE) as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    bilm = load_bilm(tmp, check_files=False)  # proves the directory loads; sizes for the card
    record.update(layers=bilm.num_layers, dim=bilm.output_dim)
    with atomic_file(tmp / MODEL_FILE) as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    return bilm
