"""The model card (``README.md``) of a model directory: data, tokens seen, sizes,
heldout metric, time, hardware and the command that made it."""
from __future__ import annotations

import json
import platform
import re
import sys
from pathlib import Path
from typing import Any

import torch

from elmoc import __version__
from elmoc.features.bilm import BiLM
from elmoc.io.atomic import atomic_file
from elmoc.io.tensor_files import read_state, stored_file

# a preset's paper-size figure in its description: "(76M)", "(196M at 793K words; ...)"
PAPER_SIZE = re.compile(r"\s*\(\d+(?:\.\d+)?[KMB]\b[^()]*\)")


def card_description(description: str | None) -> str:
    """The spec's description without the preset's paper-size figures: a demo-sized
    ``elmo-c`` is not "(76M)"; the card's sizes are the model's own, measured."""
    return PAPER_SIZE.sub("", description or "").strip()


def write_card(tmp: Path, spec: dict, payloads: dict, heldout: dict, bilm: BiLM, command: str | None) -> None:
    """The card of the directory being written in ``tmp``: one column per weights file
    (forward and backward, a masked LM's one stack, or a one-direction LM's forward LM)."""
    data = spec.get("data") or {}
    stacks = list(payloads)  # ["forward", "backward"], ["masked"] or ["forward"]
    params = {d: sum(t.numel() for t in read_state(stored_file(tmp, d)).values()) for d in stacks}
    described = card_description(spec.get("description"))
    lines = [f"# {spec.get('name', 'model')}", "", _summary(spec, bilm, params, stacks), "",
             *([f"Trained from the LM spec `{spec.get('name', 'model')}`, described as: \"{described}\" (the spec's "
                "words, which may name a preset's full-size settings; the sizes on this card are this model's)."]
               if described else []), "",
             "Load it with `elmoc.Elmo.from_pretrained(\"<this directory>\", num_output_representations=1)`",
             "or `elmoc embed --model <this directory> sentences.txt out.hdf5 --all`.", "",
             "| | " + " | ".join(stacks) + " |", "|---|" + "---|" * len(stacks)]

    def row(label: str, values: list[Any]) -> None:
        lines.append(f"| {label} | " + " | ".join("n/a" if v is None else str(v) for v in values) + " |")

    row("training data", [data.get("train")] * len(stacks))
    row("tokens seen", [payloads[d].get("tokens") for d in stacks])
    row("optimizer steps", [payloads[d].get("step") for d in stacks])
    row("final checkpoint", [payloads[d].get("final", False) for d in stacks])
    row("parameters (input + encoder, exported)", [f"{params[d]:,}" for d in stacks])
    row("trainable parameters (whole LM in training)", [_count(heldout[d].get("trainable_parameters"))
                                                        for d in stacks])
    row("heldout metric", [heldout[d].get("metric") for d in stacks])
    row("heldout value (after training)", [_fmt(heldout[d].get("after")) for d in stacks])
    row("training time (s)", [_fmt(heldout[d].get("seconds")) for d in stacks])
    row("hardware", [_hardware(heldout[d]) for d in stacks])
    row("threads x processes (from step)", [_layout(heldout[d].get("segments")) for d in stacks])
    if any(len(heldout[d].get("segments") or []) > 1 for d in stacks):
        lines += ["", "Resumed under another thread or process count: the weights equal neither layout's "
                  "uninterrupted run bit for bit."]
    lines += ["", f"Layers: {bilm.num_layers} (layer 0 = the encoder's projected input), "
              f"output dim {bilm.output_dim} ({_stack_words(stacks)}).",
              f"Input: `{spec['input'].get('type')}`; encoder: `{json.dumps(spec['encoder'], sort_keys=True)}`.",
              f"Words outside the vocabulary: {_oov_note(bilm)}.", "",
              f"Exported with elmoc {__version__} (Python {platform.python_version()}, torch {torch.__version__}) by:",
              "", "```", command or " ".join(["elmoc", *sys.argv[1:]]), "```", ""]
    with atomic_file(tmp / "README.md") as f:
        f.write("\n".join(lines))


def _summary(spec: dict, bilm: BiLM, params: dict[str, int], stacks: list[str]) -> str:
    """One sentence about the model exported, from its own settings and weights."""
    encoder = spec["encoder"]
    sizes = ", ".join(f"{k} {v}" for k, v in sorted(encoder.items())
                      if isinstance(v, int) and not isinstance(v, bool))
    per_file = " / ".join(f"{params[d]:,}" for d in stacks)
    return (f"This model: `{spec['input'].get('type')}` input, `{encoder.get('type')}` encoder ({sizes}); "
            f"{per_file} parameters ({' / '.join(stacks)}, input + encoder); features of {bilm.num_layers} layers "
            f"x {bilm.output_dim}.")


def _stack_words(stacks: list[str]) -> str:
    """What the weights files are, in words."""
    if stacks == ["forward"]:
        return "one forward LM (train.directions: forward): the forward direction's features alone"
    return "one bidirectional stack" if len(stacks) == 1 else "forward + backward"


def _count(value: Any) -> Any:
    return f"{value:,}" if isinstance(value, int) else value


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
    return lm.input_layer.oov_note if lm.subwords is None else lm.subwords.NOTE  # the input's or its composer's
