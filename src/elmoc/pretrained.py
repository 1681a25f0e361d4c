"""A trained bi-LM as a self-contained directory, and the ``Elmo`` module that uses it.

``export_model`` writes everything needed to embed any sentence on another machine
(issue 13); ``load_bilm`` reads it back with nothing but the directory.  Layout::

    elmoc-model.json      format "elmoc-model-v1": the loadable input/encoder config
                          (paths relative to the directory), boundaries, sizes, files
    spec.yaml             the resolved LM spec the model was trained from (verbatim)
    forward.pt            state dict of the forward LM's input layer + encoder
    backward.pt           the same for the backward LM (torch.save of tensors only)
    vocab.txt             the LM vocabulary (token<TAB>count); optional for char-CNN models
    input_vectors.npy     frozen-table inputs: the (vocab, dim) input table
    char_cnn.{json,pt}    char-CNN tables (ELMo-C-CNN): the CNN that made the table
    fasttext*.{json,npy,txt}  FastText inputs: n-gram buckets etc. so words outside
                          the vocabulary get fastText's vector (see
                          :mod:`elmoc.inputs.fasttext_subwords`); not the whole .bin
    tokenizer.json        subword LMs (ELMo-Sub): the BPE tokenizer
    README.md             model card: data, tokens seen, sizes, heldout metric, time,
                          hardware, the command that made it

The output layer is not exported (features never use it).  The released bilm-tf
ELMo (``options.json`` + weights HDF5) converts to the same layout
(:func:`convert_bilm_tf`) and to a pair of ``model.pt`` files for the workflow
(:func:`bilm_tf_checkpoints`), so ELMo and ELMo-C go through one API.

:class:`Elmo` follows AllenNLP's ``Elmo`` contract: token strings (or word ids) in;
``{"elmo_representations": [N tensors (batch, time, dim)], "mask": (batch, time)}``
out, each representation its own learned scalar mix of the layers, with dropout.
"""
from __future__ import annotations

import json
import logging
import platform
import shutil
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from elmoc import __version__
from elmoc.data.atomic import atomic_directory, atomic_file
from elmoc.data.vocab import SPECIALS, Vocabulary
from elmoc.errors import ConfigError, InputFileError
from elmoc.devices import resolve_device
from elmoc.features.export import BiLM, FeatureLM, check_same_model, oov_vectors_for, select_layers
from elmoc.features.scalar_mix import ScalarMix
from elmoc.train.checkpoint import FORMAT as CHECKPOINT_FORMAT
from elmoc.train.checkpoint import load_directions, save_checkpoint

log = logging.getLogger(__name__)

FORMAT = "elmoc-model-v1"
MODEL_FILE = "elmoc-model.json"
DIRECTIONS = ("forward", "backward")


# --------------------------------------------------------------------------- export


def lm_files(results: str | Path, variant: str) -> dict[str, Path]:
    """``results/lm/{variant}/{direction}/model.pt`` of both directions, or the one
    ``results/lm/{variant}/joint/model.pt`` of a joint bi-LM as both (``checkpoint.pt``
    where no final ``model.pt`` exists yet)."""
    def pick(direction: str) -> Path | None:
        folder = Path(results) / "lm" / variant / direction
        final, partial = folder / "model.pt", folder / "checkpoint.pt"
        if final.is_file():
            return final
        if partial.is_file():
            log.warning("%s: no model.pt, exporting the last checkpoint.pt", folder)
            return partial
        return None

    joint = pick("joint")
    if joint is not None:
        return {direction: joint for direction in DIRECTIONS}
    out = {}
    for direction in DIRECTIONS:
        found = pick(direction)
        if found is None:
            raise InputFileError(Path(results) / "lm" / variant / direction / "model.pt",
                                 f"not found (nor a joint model.pt); train variant {variant!r} first "
                                 f"(snakemake results/lm/{variant}/{direction}/model.pt, or .../joint/model.pt)")
        out[direction] = found
    return out


def export_model(forward: str | Path, backward: str | Path, output: str | Path,
                 fasttext_model: str | Path | None = None, boundaries: bool = True,
                 command: str | None = None, char_cnn_model: str | Path | None = None) -> Path:
    """Write the model directory of a trained forward + backward LM.

    Args:
        forward, backward: the two ``model.pt`` (or ``checkpoint.pt``) files; a joint bi-LM's one file as both.
        output: the directory to write (replaced atomically).
        fasttext_model, char_cnn_model: frozen-table inputs: the ``.bin`` (or ELMo
            ``model.pt``) the input table was made from (default: found beside the
            table, as at extraction; :func:`~elmoc.features.export.oov_vectors_for`).
        boundaries: wrap sentences in ``<s> ... </s>`` when embedding (as extraction).
        command: recorded in the model card (default: this process's command line).
    """
    payloads = load_directions(forward, backward)  # a joint model.pt serves both
    check_same_model(payloads["forward"]["spec"], payloads["backward"]["spec"], forward, backward)
    spec = payloads["forward"]["spec"]
    vocab_path = payloads["forward"].get("vocab_path") or spec.get("vocab")
    if not vocab_path:
        raise InputFileError(forward, "checkpoint records no vocabulary")
    vocab = Vocabulary.load(vocab_path)
    input_cfg = dict(spec["input"])
    tokenizer = (spec.get("data") or {}).get("tokenizer")
    with atomic_directory(output) as tmp:
        meta: dict[str, Any] = {"tokenizer": None, "oov_vectors": None, "vocab": "vocab.txt"}
        vocab.save(tmp / "vocab.txt")
        if input_cfg["type"] == "fasttext":
            table = np.load(input_cfg["vectors"], mmap_mode="r")
            with atomic_file(tmp / "input_vectors.npy", "wb", encoding=None) as f:
                np.save(f, np.asarray(table, dtype=np.float32))
            input_cfg["vectors"] = "input_vectors.npy"
            composer = None if tokenizer else oov_vectors_for(spec, vocab, fasttext_model, char_cnn_model)
            if composer is not None:
                composer.save(tmp, vocab)
                meta["oov_vectors"] = "char_cnn" if type(composer).__name__ == "CharCnnVectors" else "fasttext"
        elif input_cfg["type"] == "char_cnn":
            input_cfg.pop("weights", None)
            if not isinstance(input_cfg["options"], dict):
                input_cfg["options"] = json.loads(Path(input_cfg["options"]).read_text(encoding="utf-8"))
        if tokenizer:
            shutil.copyfile(tokenizer, tmp / "tokenizer.json")
            meta["tokenizer"] = "tokenizer.json"
        for direction, payload in payloads.items():
            torch.save(_feature_state(payload["model"]), tmp / f"{direction}.pt")
        from elmoc.config import dump_yaml

        dump_yaml(spec, tmp / "spec.yaml")
        heldout = {d: _read_json(Path(p).parent / "heldout.json") for d, p in zip(DIRECTIONS, (forward, backward))}
        bilm = _write_meta(tmp, spec.get("name", "model"), input_cfg, spec["encoder"], boundaries, meta)
        _write_card(tmp, spec, payloads, heldout, bilm, command)
    log.info("exported %s + %s to %s", forward, backward, output)
    return Path(output)


def _feature_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in state.items()
            if k.startswith(("input_layer.", "encoder."))}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def _write_meta(tmp: Path, name: str, input_cfg: dict, encoder_cfg: dict, boundaries: bool,
                meta: dict[str, Any]) -> BiLM:
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


def _write_card(tmp: Path, spec: dict, payloads: dict, heldout: dict, bilm: BiLM, command: str | None) -> None:
    data = spec.get("data") or {}
    params = {d: sum(t.numel() for t in torch.load(tmp / f"{d}.pt", weights_only=True).values()) for d in DIRECTIONS}
    lines = [f"# {spec.get('name', 'model')}", "", spec.get("description", "") or "", "",
             "Load it with `elmoc.Elmo.from_pretrained(\"<this directory>\", num_output_representations=1)`",
             "or `elmoc embed --model <this directory> sentences.txt out.hdf5 --all`.", "",
             "| | forward | backward |", "|---|---|---|"]

    def row(label: str, values: list[Any]) -> None:
        lines.append(f"| {label} | " + " | ".join("n/a" if v is None else str(v) for v in values) + " |")

    row("training data", [data.get("train")] * 2)
    row("tokens seen", [payloads[d].get("tokens") for d in DIRECTIONS])
    row("optimizer steps", [payloads[d].get("step") for d in DIRECTIONS])
    row("final checkpoint", [payloads[d].get("final", False) for d in DIRECTIONS])
    row("parameters (input + encoder, exported)", [f"{params[d]:,}" for d in DIRECTIONS])
    row("heldout metric", [heldout[d].get("metric") for d in DIRECTIONS])
    row("heldout value (after training)", [_fmt(heldout[d].get("after")) for d in DIRECTIONS])
    row("training time (s)", [_fmt(heldout[d].get("seconds")) for d in DIRECTIONS])
    row("hardware", [_hardware(heldout[d]) for d in DIRECTIONS])
    row("threads x processes (from step)", [_layout(heldout[d].get("segments")) for d in DIRECTIONS])
    if any(len(heldout[d].get("segments") or []) > 1 for d in DIRECTIONS):
        lines += ["", "Resumed under another thread or process count: the weights equal neither layout's "
                  "uninterrupted run bit for bit."]
    lines += ["", f"Layers: {bilm.num_layers} (layer 0 = the encoder's projected input), "
              f"output dim {bilm.output_dim} (forward + backward).",
              f"Input: `{spec['input'].get('type')}`; encoder: `{json.dumps(spec['encoder'], sort_keys=True)}`.",
              f"Words outside the vocabulary: {_oov_note(bilm)}.", "",
              f"Exported with elmoc {__version__} (Python {platform.python_version()}, torch {torch.__version__}) by:",
              "", "```", command or " ".join(["elmoc", *sys.argv[1:]]), "```", ""]
    with atomic_file(tmp / "README.md") as f:
        f.write("\n".join(lines))


def _fmt(value: Any) -> Any:
    return f"{value:.4f}" if isinstance(value, float) else value


def _layout(segments: list[dict] | None) -> str | None:
    """``heldout.json``'s ``segments`` as ``"2 x 1 (0); 4 x 2 (500)"``: threads x processes
    (from step); None for a file written before elmoc recorded them."""
    if not segments:
        return None
    return "; ".join(f"{s.get('threads')} x {s.get('processes')} ({s.get('step')})" for s in segments)


def _hardware(heldout: dict) -> str | None:
    parts = [f"{k} {heldout[k]}" for k in ("device", "hardware", "gpus", "threads") if heldout.get(k) is not None]
    return ", ".join(parts) or None


def _oov_note(bilm: BiLM) -> str:
    lm = bilm.forward_lm
    if bilm.subwords is not None:
        return "split into BPE subwords (a word is represented by its first subword)"
    if lm.subwords is not None and type(lm.subwords).__name__ == "CharCnnVectors":
        return "the char-CNN vector of their characters (char_cnn.pt, the CNN that made the input table)"
    if lm.subwords is not None:
        return "fastText vectors composed from character n-grams (fasttext_buckets.npy)"
    if lm.open_vocabulary:
        return "read character by character (char-CNN)"
    return "mapped to <unk>"


# --------------------------------------------------------------------------- load


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
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise InputFileError(path, f"format {found!r} is not {FORMAT!r} (written by another elmoc version); "
                             "export the model again with this version")
    for key in ("input", "encoder", "boundaries", "files"):
        if key not in meta:
            raise InputFileError(path, f"has no {key!r} entry; export the model again")
    return meta


def load_bilm(directory: str | Path, device: str | torch.device = "cpu", check_files: bool = True) -> BiLM:
    """The :class:`~elmoc.features.export.BiLM` of a model directory (nothing else is read)."""
    directory = Path(directory)
    meta = read_model_meta(directory)
    if check_files:
        for name in meta["files"]:
            if not (directory / name).is_file():
                raise InputFileError(directory / name, "missing from the model directory; copy the whole "
                                     "directory or export it again")
    # a char-CNN model needs no vocabulary (word-id inputs then know only the specials)
    vocab = Vocabulary.load(directory / meta["vocab"]) if meta.get("vocab") else Vocabulary(list(SPECIALS))
    input_cfg = dict(meta["input"])
    if input_cfg.get("type") == "fasttext":
        input_cfg["vectors"] = str(directory / input_cfg["vectors"])
    composer = None
    if meta.get("oov_vectors") == "fasttext":
        from elmoc.inputs.fasttext_subwords import SubwordVectors

        composer = SubwordVectors.load(directory)
    elif meta.get("oov_vectors") == "char_cnn":
        from elmoc.inputs.char_cnn_vectors import CharCnnVectors

        composer = CharCnnVectors.load(directory)
    subword_encoder = None
    if meta.get("tokenizer"):
        from elmoc.data.subword import SubwordEncoder

        subword_encoder = SubwordEncoder(directory / meta["tokenizer"])
    lms = []
    for direction in DIRECTIONS:
        path = directory / f"{direction}.pt"
        from elmoc.train.safe_load import load_weights_only  # weights only: a crafted file runs no code

        state = load_weights_only(path, what="a model directory's weights file", fix="export the model again")
        spec = {"input": input_cfg, "encoder": meta["encoder"]}
        lms.append(FeatureLM.from_spec(spec, state, vocab, path, composer))
    bilm = BiLM(lms[0], lms[1], vocab, subword_encoder, boundaries=bool(meta["boundaries"]))
    return bilm.to(resolve_device(device))


# --------------------------------------------------------------------------- bilm-tf


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


def convert_bilm_tf(options: str | Path, weights: str | Path, output: str | Path, name: str = "elmo",
                    vocab: str | Path | None = None, command: str | None = None) -> Path:
    """Write the model directory of a released bilm-tf ELMo (``options.json`` + weights HDF5).

    The char-CNN reads every word's characters, so the vocabulary only serves word-id
    inputs: ``vocab`` (e.g. bilm-tf's ``vocab-2016-09-10.txt``), else none is written.
    """
    input_cfg, encoder_cfg, states = _bilm_tf_parts(options, weights)
    with atomic_directory(output) as tmp:
        if vocab:
            Vocabulary.from_external_file(vocab).save(tmp / "vocab.txt")
        for direction, state in states.items():
            torch.save(state, tmp / f"{direction}.pt")
        spec = {"name": name, "description": f"released bilm-tf ELMo ({Path(weights).name})",
                "input": input_cfg, "encoder": encoder_cfg}
        from elmoc.config import dump_yaml

        dump_yaml(spec, tmp / "spec.yaml")
        bilm = _write_meta(tmp, name, input_cfg, encoder_cfg, True,
                           {"tokenizer": None, "oov_vectors": None, "vocab": "vocab.txt" if vocab else None})
        released = {"step": None, "tokens": None, "final": True}
        _write_card(tmp, {**spec, "data": {"train": "1B Word Benchmark (bilm-tf release)"}},
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


# --------------------------------------------------------------------------- module


class Elmo(nn.Module):
    """AllenNLP's ``Elmo`` contract over an elmoc bi-LM.

    Args:
        bilm: the frozen (or fine-tunable) bi-LM, e.g. from :func:`load_bilm`.
        num_output_representations: how many scalar mixes (e.g. 2: one for the input
            and one for the output of a task model).
        dropout: applied to each representation after mixing.
        requires_grad: fine-tune the bi-LM too (default: frozen; the mixes are always trained).
        do_layer_norm: normalise each layer before mixing (AllenNLP's option).
        scalar_mix_parameters: fixed (untrainable) mix weights before the softmax, one per layer.
        stateful: carry the LSTM states from one call to the next, row by row, as AllenNLP
            does (default False: every sentence starts from zeros, as ``elmoc extract``).

    ``forward(inputs)`` takes a list of token lists, or word ids (batch, time) long in the
    directory's vocabulary (0 = padding), and returns
    ``{"elmo_representations": [num_output_representations x (batch, time, dim)],
    "mask": (batch, time) bool}``.
    """

    def __init__(self, bilm: BiLM, num_output_representations: int = 1, dropout: float = 0.5,
                 requires_grad: bool = False, do_layer_norm: bool = False,
                 scalar_mix_parameters: Sequence[float] | None = None, stateful: bool = False):
        super().__init__()
        if not isinstance(num_output_representations, int) or num_output_representations < 1:
            raise ConfigError(f"num_output_representations must be >= 1, got {num_output_representations!r}")
        self.bilm = bilm.eval()
        self.requires_grad = bool(requires_grad)
        for p in self.bilm.parameters():
            p.requires_grad_(self.requires_grad)
        self.dropout = nn.Dropout(p=dropout)
        self.scalar_mixes = nn.ModuleList(
            ScalarMix(bilm.num_layers, layer_norm=do_layer_norm, initial_weights=scalar_mix_parameters,
                      trainable=scalar_mix_parameters is None)
            for _ in range(num_output_representations))
        self.stateful = bool(stateful)
        self._states: tuple[Any, Any] | None = None

    @classmethod
    def from_pretrained(cls, directory: str | Path, num_output_representations: int = 1, dropout: float = 0.5,
                        requires_grad: bool = False, device: str | torch.device = "cpu", **kwargs: Any) -> "Elmo":
        """Load a model directory written by ``elmoc export``."""
        return cls(load_bilm(directory, device), num_output_representations, dropout, requires_grad,
                   **kwargs).to(resolve_device(device))

    def get_output_dim(self) -> int:
        return self.bilm.output_dim

    def train(self, mode: bool = True) -> "Elmo":
        super().train(mode)
        self.bilm.eval()  # the bi-LM never applies its training dropout here
        return self

    def reset_states(self) -> None:
        """Forget the carried states (``stateful=True``)."""
        self._states = None

    def forward(self, inputs: Sequence[Sequence[str]] | torch.Tensor) -> dict[str, Any]:
        sentences = self._sentences(inputs)
        states = self._carried(len(sentences)) if self.stateful else (None, None)
        with torch.set_grad_enabled(self.requires_grad and torch.is_grad_enabled()):
            layers, mask, new_states = self.bilm.embed(sentences, states=states)
        if self.stateful:
            self._keep(new_states)
        layers = layers.transpose(0, 1)  # (layers, batch, time, dim)
        reps = [self.dropout(mix(layers, mask)) for mix in self.scalar_mixes]
        return {"elmo_representations": reps, "mask": mask}

    def _sentences(self, inputs: Sequence[Sequence[str]] | torch.Tensor) -> list[list[str]]:
        if isinstance(inputs, torch.Tensor):
            if inputs.dim() != 2 or inputs.dtype != torch.long:
                raise ConfigError(f"word ids must be a (batch, time) long tensor, got {inputs.dtype} "
                                  f"{tuple(inputs.shape)}")
            tokens = self.bilm.vocab.tokens
            if inputs.numel() and (int(inputs.max()) >= len(tokens) or int(inputs.min()) < 0):
                raise ConfigError(f"word ids must lie in [0, {len(tokens)}) (the model's vocab.txt)")
            sentences = [[tokens[i] for i in row if i != 0] for row in inputs.tolist()]
        else:
            sentences = [list(s) for s in inputs]
        empty = [i for i, s in enumerate(sentences) if not s]
        if not sentences or empty:
            raise ConfigError(f"sentence {empty[0] if empty else 0} of the batch is empty; pass at least one "
                              "token per sentence")
        return sentences

    def _carried(self, batch: int) -> tuple[Any, Any]:
        if self._states is None:
            return (None, None)
        return tuple(_resize(s, batch) for s in self._states)

    def _keep(self, new: tuple[Any, Any]) -> None:
        new = tuple(_detach(s) for s in new)
        if self._states is not None:
            new = tuple(_merge(n, o) for n, o in zip(new, self._states))
        self._states = new


def _detach(state: Any) -> Any:
    if isinstance(state, torch.Tensor):
        return state.detach()
    return type(state)(_detach(s) for s in state)


def _resize(state: Any, batch: int) -> Any:
    """Rows ``[:batch]`` of a carried state, zeros for rows it never had."""
    if isinstance(state, torch.Tensor):
        if state.shape[0] >= batch:
            return state[:batch]
        return torch.cat([state, state.new_zeros(batch - state.shape[0], *state.shape[1:])])
    return type(state)(_resize(s, batch) for s in state)


def _merge(new: Any, old: Any) -> Any:
    """The new rows, and the old ones beyond the new batch (AllenNLP's stateful update)."""
    if isinstance(new, torch.Tensor):
        return torch.cat([new, old[new.shape[0]:]]) if old.shape[0] > new.shape[0] else new
    return type(new)(_merge(n, o) for n, o in zip(new, old))


def embed_sentences(model: str | Path | BiLM, sentences: Sequence[Sequence[str]], layers: str = "all",
                    batch_size: int = 64, device: str | torch.device = "cpu") -> list[np.ndarray]:
    """Features of tokenized sentences, one float32 array per sentence.

    ``layers``: ``all`` -> (layers, words, dim); ``top`` / ``average`` -> (words, dim).
    ``model`` is a model directory or a loaded :class:`BiLM`.
    """
    select_layers(np.zeros((1, 1, 1), np.float32), layers)  # checks the name
    bilm = load_bilm(model, device) if not isinstance(model, BiLM) else model.to(resolve_device(device))
    bilm.eval()
    out: list[np.ndarray] = [np.empty(0)] * len(sentences)
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            index = order[start:start + batch_size]
            batch = [list(sentences[i]) for i in index]
            if any(not s for s in batch):
                raise ConfigError("an empty sentence: pass at least one token per sentence")
            acts = bilm.embed(batch)[0].cpu().numpy()
            for row, i in enumerate(index):
                out[i] = select_layers(acts[row][:, : len(sentences[i])], layers)
    return out
