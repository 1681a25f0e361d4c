"""A newcomer's compressed format in one file: low-rank factorisation.  Every matrix of the
encoder (2 dims, float) whose ``rank`` factors are smaller than it is stored as two factors
``W ~ U @ V`` (the truncated SVD, ``U`` scaled by the singular values) under ``<key>.lowrank_u``
and ``<key>.lowrank_v``; the loader multiplies them back to a float32 matrix."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from elmoc.pretrained.formats import CompressionFormat, State, widen
from elmoc.registry import register

U, V = ".lowrank_u", ".lowrank_v"


@register("compression", "low_rank")
class LowRankFormat(CompressionFormat):

    @dataclass(frozen=True)
    class Options:
        """Attributes:
            rank: the factors' inner dimension.
        """

        rank: int = 2

        OPTION_RANGES = {"rank": "int > 0"}

    compute = "encoder matrices stored as rank-r factors, multiplied back to float32 on load: computed in float32"
    table_group = "factorised"
    TABLE_COPY = False

    def store(self, source: Path, states: dict[str, State]) -> dict[str, State]:
        r = self.options.rank
        out = {}
        for d, state in states.items():
            out[d] = {}
            for key, value in state.items():
                rows, cols = value.shape if value.dim() == 2 else (0, 0)
                if key.startswith("encoder.") and value.is_floating_point() and r * (rows + cols) < rows * cols:
                    u, s, vh = torch.linalg.svd(value.float(), full_matrices=False)
                    out[d][key + U], out[d][key + V] = (u[:, :r] * s[:r]).contiguous(), vh[:r].contiguous()
                else:
                    out[d][key] = value
        return out

    def restore(self, states: dict[str, State]) -> dict[str, State]:
        out = {}
        for d, state in states.items():
            out[d] = {k: v for k, v in widen(state).items() if not k.endswith((U, V))}
            for key in (k.removesuffix(U) for k in state if k.endswith(U)):
                out[d][key] = state[key + U].float() @ state[key + V].float()
        return out

    def record(self, states: dict[str, State]) -> dict[str, Any]:
        return {"rank": self.options.rank,
                "factorised": sorted({k.removesuffix(U) for s in states.values() for k in s if k.endswith(U)})}
