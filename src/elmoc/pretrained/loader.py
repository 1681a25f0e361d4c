"""The one loader of a trained bi-LM for features: :func:`build_bilm` makes the
:class:`~elmoc.features.bilm.BiLM` from weights and configs; two readers feed it,
one per format:

- :func:`load_checkpoints`: the workflow's ``model.pt`` (or ``checkpoint.pt``) files of
  both directions (a joint bi-LM's or a masked LM's one file as both; a one-direction LM's
  forward file alone); ``elmoc extract``;
- :func:`load_bilm`: a model directory written by ``elmoc export``
  (:mod:`elmoc.pretrained.writer`; ``elmoc embed``, :class:`~elmoc.pretrained.elmo.Elmo`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from elmoc.data.vocab.vocabulary import SPECIALS, Vocabulary
from elmoc.devices import resolve_device
from elmoc.directions import DIRECTIONS, FORWARD, MASKED
from elmoc.errors import ConfigError, InputFileError
from elmoc.features.bilm import BiLM, FeatureLM
from elmoc.model_file import load_directions
from elmoc.inputs.base import input_class
from elmoc.pretrained import formats

if TYPE_CHECKING:
    from elmoc.data.vocab.subword import SubwordEncoder
    from elmoc.inputs.base import Composer

FORMAT = "elmoc-model-v2"  # weights in .safetensors files (issue 53.3)
READABLE = ("elmoc-model-v1", FORMAT)  # v1: the same with .pt weights files
MODEL_FILE = "elmoc-model.json"
SINGLE = "single"  # elmoc-model.json "stack": one bidirectional stack (a masked LM), weights in masked.pt;
FORWARD_ONLY = "forward"  # "stack": one forward LM (train.directions: forward), weights in forward.pt;
# absent (directories written before) or "pair": forward.pt and backward.pt


def stacks_of(meta: dict[str, Any]) -> tuple[str, ...]:
    """The weights files' stems of a model directory: ``("masked",)``, ``("forward",)`` (a
    one-direction LM) or the two directions."""
    stack = meta.get("stack")
    return (MASKED,) if stack == SINGLE else (FORWARD,) if stack == FORWARD_ONLY else DIRECTIONS


def build_bilm(spec: dict[str, Any], states: dict[str, dict[str, torch.Tensor]], where: dict[str, str | Path],
               vocab: Vocabulary, composer: "Composer | None" = None,
               subword_encoder: "SubwordEncoder | None" = None, boundaries: bool = True) -> BiLM:
    """Both directions' input layer + encoder from ``spec`` (its ``input`` and
    ``encoder`` sections), their weights from ``states[direction]`` (read from
    ``where[direction]``, named in errors); with ``states`` keyed ``"masked"`` alone,
    the one bidirectional stack of a masked LM; keyed ``"forward"`` alone, a one-direction
    LM (features of width H, the forward direction's).

    ``composer``: vectors of out-of-vocabulary words (:func:`elmoc.features.oov.oov_vectors_for`);
    ``subword_encoder``: ELMo-Sub's BPE tokenizer; ``boundaries``: wrap sentences in ``<s> ... </s>``.
    """
    if MASKED in states:
        lm = FeatureLM.from_spec(spec, states[MASKED], vocab, where[MASKED], composer)
        return BiLM(lm, None, vocab, subword_encoder, boundaries=boundaries)
    if set(states) == {FORWARD}:
        lm = FeatureLM.from_spec(spec, states[FORWARD], vocab, where[FORWARD], composer)
        return BiLM(lm, None, vocab, subword_encoder, boundaries=boundaries)
    lms = [FeatureLM.from_spec(spec, states[d], vocab, where[d], composer) for d in DIRECTIONS]
    return BiLM(lms[0], lms[1], vocab, subword_encoder, boundaries=boundaries)


# --------------------------------------------------------------------------- model.pt files


def check_same_model(forward_spec: dict, backward_spec: dict, forward_path: str | Path,
                     backward_path: str | Path) -> None:
    """Refuse a forward and a backward LM of different variants or sizes (their specs
    must agree; the direction is not part of the spec)."""
    sections = sorted(k for k in set(forward_spec) | set(backward_spec)
                      if k != "direction" and forward_spec.get(k) != backward_spec.get(k))
    if sections:
        raise InputFileError(backward_path, f"its LM spec differs from {forward_path} in {', '.join(sections)}: "
                             "the two directions belong to different variants or sizes; pass both checkpoints "
                             "of one variant")


def read_checkpoints(forward: str | Path, backward: str | Path | None) -> tuple[dict[str, dict], dict[str, Any]]:
    """Both directions' payloads (``{"forward": ..., "backward": ...}``, a joint
    ``model.pt`` read once serving both; ``{"masked": ...}`` for a masked LM's one file;
    ``{"forward": ...}`` for a one-direction LM's, ``backward`` None) and their common spec."""
    payloads = load_directions(forward, backward)
    if len(payloads) == 1:
        return payloads, next(iter(payloads.values()))["spec"]
    check_same_model(payloads["forward"]["spec"], payloads["backward"]["spec"], forward, backward)
    return payloads, payloads["forward"]["spec"]


def boundaries_by_kind(payloads: dict[str, dict[str, Any]]) -> bool:
    """Whether a model's features wrap each sentence in ``<s> ... </s>`` by default (issue 31.8).

    The paper is silent.  The released bilm-tf ELMo (a ``model.pt`` converted by
    :func:`~elmoc.pretrained.bilm_tf.bilm_tf_checkpoints`, marked ``released``) gets them,
    as AllenNLP's ``ElmoBiLm`` adds them for it; every LM elmoc trained (ELMo-C, its
    ablations, ELMo-A, ELMo-Sub, a retrained ELMo, the extra variants) reads the bare
    tokens, as the authors' ELMo-C code feeds them.  Decided by the file's kind, not by
    the variant's name.
    """
    return any(bool(p.get("released")) for p in payloads.values())


def load_checkpoints(forward: str | Path, backward: str | Path | None, vocab_path: str | Path | None = None,
                     fasttext_model: str | Path | None = None, closed_vocabulary: bool = False,
                     char_cnn_model: str | Path | None = None, boundaries: bool | None = None) -> BiLM:
    """The bi-LM of both directions' ``model.pt`` (or ``checkpoint.pt``) files; a joint
    bi-LM's (or a masked LM's: one stack) one file is passed as both; a one-direction LM's
    (``train.directions: forward``) forward file with ``backward`` None (one stack).

    ``fasttext_model``: the ``.bin`` whose n-grams compose out-of-vocabulary words for
    a FastText input (default: the one the table was made from, when it exists;
    :func:`~elmoc.features.oov.oov_vectors_for`; ``char_cnn_model`` likewise for char-CNN
    tables).  ``closed_vocabulary``: map every unknown word to ``<unk>`` (the old behaviour).
    ``boundaries``: wrap sentences in ``<s> ... </s>``; None = by the model's kind
    (:func:`boundaries_by_kind`: the released ELMo yes, trained LMs no).
    """
    from elmoc.features.oov import oov_vectors_for

    payloads, spec = read_checkpoints(forward, backward)
    vpath = vocab_path or next(iter(payloads.values())).get("vocab_path")
    if vpath is None:
        raise InputFileError(forward, "checkpoint records no vocabulary; pass --vocab")
    vocab = Vocabulary.load(vpath)
    tokenizer = (spec.get("data") or {}).get("tokenizer")
    subword_encoder = None
    if tokenizer:
        from elmoc.data.vocab.subword import SubwordEncoder

        subword_encoder = SubwordEncoder(tokenizer)
    composer = None
    if not closed_vocabulary and not tokenizer:
        composer = oov_vectors_for(spec, vocab, fasttext_model, char_cnn_model)
    if boundaries is None:
        boundaries = boundaries_by_kind(payloads)
    return build_bilm(spec, {d: p["model"] for d, p in payloads.items()},
                      {"forward": forward, "backward": backward, MASKED: forward}, vocab, composer, subword_encoder,
                      boundaries=boundaries)


# --------------------------------------------------------------------------- model directory


def read_model_meta(directory: str | Path) -> dict[str, Any]:
    """The checked ``elmoc-model.json`` of a model directory."""
    directory = Path(directory)
    path = directory / MODEL_FILE
    if not directory.is_dir():
        raise InputFileError(directory, "model directory not found; write one with `elmoc export`")
    if not path.is_file():
        raise InputFileError(path, "missing: not an elmoc model directory (write one with `elmoc export`)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputFileError(path, f"not valid JSON ({e}); export the model again") from None
    if not isinstance(meta, dict) or meta.get("format") not in READABLE:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise InputFileError(path, f"format {found!r} is not one this elmoc reads ({', '.join(READABLE)}; written by "
                             "another elmoc version); export the model again with this version")
    for key in ("input", "encoder", "boundaries", "files"):
        if key not in meta:
            raise InputFileError(path, f"has no {key!r} entry; export the model again")
    return meta


def load_bilm(directory: str | Path, device: str | torch.device = "cpu", check_files: bool = True) -> BiLM:
    """The bi-LM of a model directory (nothing else is read)."""
    from elmoc.io.tensor_files import read_state, stored_file  # no pickle (an older .pt: weights only)

    directory = Path(directory)
    meta = read_model_meta(directory)
    if check_files:
        for name in meta["files"]:
            if not (directory / name).is_file():
                raise InputFileError(directory / name, "missing from the model directory; copy the whole "
                                     "directory or export it again")
    # a char-CNN model needs no vocabulary (word-id inputs then know only the specials)
    vocab = Vocabulary.load(directory / meta["vocab"]) if meta.get("vocab") else Vocabulary(list(SPECIALS))
    layer_class = input_class(meta["input"])
    input_cfg = layer_class.from_directory(meta["input"], directory)  # e.g. its table's path
    composer = None
    if meta.get("oov_vectors"):
        composer = layer_class.load_composer(meta["oov_vectors"], directory)
        if composer is None:
            raise InputFileError(directory / MODEL_FILE, f"oov_vectors {meta['oov_vectors']!r} is not a composer of "
                                 f"input {meta['input'].get('type')!r}; export the model again")
    subword_encoder = None
    if meta.get("tokenizer"):
        from elmoc.data.vocab.subword import SubwordEncoder

        subword_encoder = SubwordEncoder(directory / meta["tokenizer"])
    where = {d: stored_file(directory, d) for d in stacks_of(meta)}
    fmt = formats.stored_format(meta, directory / MODEL_FILE)  # float32, or a compressed copy's format
    method = None if fmt == "float32" else formats.format_of(fmt)
    if method is not None and method.cpu_only and resolve_device(device).type != "cpu":
        raise ConfigError(f"{directory}: an {fmt} model runs on the CPU only ({method.cpu_only}); use "
                          "--device cpu, or another compressed copy or the uncompressed model on the GPU")
    with formats.quiet_quantization():
        states = {d: read_state(where[d], what="a model directory's weights file", fix="export the model again")
                  for d in where}
    # compressed copies are restored to float32 to build (and compute, on the CPU, unless the format says)
    bilm = build_bilm({"input": input_cfg, "encoder": meta["encoder"]},
                      formats.widen_all(states) if method is None else method.restore(states), where, vocab,
                      composer, subword_encoder, boundaries=bool(meta["boundaries"]))
    if method is not None:
        lms = [bilm.forward_lm] if bilm.single else [bilm.forward_lm, bilm.backward_lm]
        method.finish(dict(zip(where, lms)), states, where)
    return bilm.to(resolve_device(device))
