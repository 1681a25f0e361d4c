"""``int8``: every ``Linear`` weight (the LSTM's input, recurrent and projection matrices, the
encoder's input projection, the char-CNN's highway and projection, the Transformer's
feed-forward) stored as a per-output-row qint8 tensor and multiplied in int8 (torch's dynamic
quantization, activations quantized per call); biases and everything else float32.  CPU only."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from elmoc.directions import BACKWARD
from elmoc.pretrained.formats import CompressionFormat, State, int8_state, load_int8, quantize_int8
from elmoc.registry import register


@register("compression", "int8")
class Int8Format(CompressionFormat):
    compute = ("int8 matrix products on the CPU (torch dynamic quantization, per-output-row int8 weights, "
               "activations quantized per call); the LSTM time loop runs in Python around them; the rest float32")
    table_group = "quantized"
    TABLE_COPY = True
    cpu_only = "torch's quantized kernels"

    def store(self, source: Path, states: dict[str, State]) -> dict[str, State]:
        from elmoc.pretrained.loader import load_bilm

        bilm = load_bilm(source)
        out = {}
        for d, state in states.items():
            lm = quantize_int8((bilm.backward_lm if d == BACKWARD else bilm.forward_lm).eval())
            out[d] = int8_state(lm, {k: v.float() for k, v in state.items()})
        return out

    def finish(self, lms: dict[str, nn.Module], states: dict[str, State], where: dict[str, Path]) -> None:
        for d, lm in lms.items():  # the int8 products, with exactly the stored int8 weights
            load_int8(quantize_int8(lm), states[d], where[d])

    def record(self, states: dict[str, State]) -> dict[str, Any]:
        names = [k.removesuffix(".weight") for s in states.values() for k, v in s.items() if v.is_quantized]
        return {"int8_modules": sorted(set(names))}

    def card_lines(self, record: dict[str, Any]) -> list[str]:
        return ["Runs on the CPU only. int8 layers: " + ", ".join(f"`{n}`" for n in record["int8_modules"]) + "."]
