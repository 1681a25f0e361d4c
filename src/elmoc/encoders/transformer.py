"""Pre-LN Transformer encoder (Table 5 "TRANS BASE", "TRANS LARGE", "GPT"; issue 25's MLM).

Spec 4: optional ``Linear(input_dim -> d_model)``, sinusoidal positions, dropout,
``num_layers`` pre-LN blocks ``x + drop(sublayer(LN(x)))`` with causal self-attention
and a ReLU feed-forward, then a final LayerNorm.  ``causal: false`` gives the same
blocks full (bidirectional) attention over the unpadded positions, for a masked LM.  The blocks are
``torch.nn.TransformerEncoderLayer(norm_first=True)`` (a well-kept implementation
with fused attention); only the position table and the masks are written here.
The EC code's hand-made LayerNorm (unbiased std, eps added to std) is replaced by
``nn.LayerNorm``; that changes no timing and only slightly the numerics.

``positions: tupe`` / ``tupe_r`` (issue 35) leave the sinusoidal vectors out of the input and
give every block's attention TUPE's untied position term instead (:mod:`elmoc.encoders.tupe`),
carried into the built-in blocks as their additive float attention mask, with the causal and
padding masks as ``-inf`` in it.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import nn

from elmoc.encoders.base import Encoder, EncoderOutput
from elmoc.encoders.tupe import UntiedPositions, untie_block
from elmoc.config import check_choice
from elmoc.errors import ConfigError
from elmoc.nn.host_copy import to_host
from elmoc.registry import register

POSITIONS = ("sinusoidal", "tupe", "tupe_r")  # added to the input | untied (TUPE) | untied + relative (TUPE-R)
POSITION_LABELS = {"sinusoidal": None, "tupe": "TUPE", "tupe_r": "TUPE-R"}


def sinusoidal_positions(length: int, dim: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """The Vaswani et al. table: sin on even, cos on odd channels.  Shape: (length, dim)."""
    position = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim, device=device, dtype=torch.float32)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq[: dim // 2])
    return table.to(dtype)


@register("encoder", "transformer")
class TransformerEncoder(Encoder):
    """Left-to-right (or, ``causal=False``, bidirectional) Transformer LM encoder.

    Args:
        input_dim: token vector size (set by the builder).
        d_model: model width (512 base, 768 large / GPT).
        heads: attention heads (8 base, 12 large / GPT); must divide d_model.
        d_ff: feed-forward width (2048 base, 3072 large / GPT).
        num_layers: blocks (6 base, 12 large / GPT).
        dropout: dropout on the input and inside each block.
        causal: True: position t attends to positions <= t (a next-word LM); False: to
            every position (a masked LM).
        positions: ``sinusoidal`` (added to the input, Vaswani et al.), ``tupe`` (TUPE's
            untied position term in every block's attention) or ``tupe_r`` (TUPE-R: the same
            plus a bucketed relative bias); see :mod:`elmoc.encoders.tupe`.

    Shape:
        inputs (batch, time, input_dim); mask (batch, time) bool; starts (batch, time) bool,
        True at ``<s>`` (read only when :attr:`reads_sentence_starts`: TUPE untying in a
        bidirectional encoder).  Position t attends to
        positions <= t (every position when not ``causal``) whose mask is True (and
        always to itself).  output (batch, time,
        d_model) = the last entry of layers: [input view (projected + positions; TUPE:
        projected only), block 1, ..., LayerNorm(block num_layers)], zero where mask is False.  No state.
    """

    OPTION_RANGES = {"d_model": "int > 0", "heads": "int > 0", "d_ff": "int > 0", "num_layers": "int > 0",
                     "dropout": "[0, 1)"}

    def __init__(self, input_dim: int, d_model: int = 512, heads: int = 8, d_ff: int = 2048,
                 num_layers: int = 6, dropout: float = 0.1, causal: bool = True, positions: str = "sinusoidal"):
        super().__init__()
        for name, value in (("input_dim", input_dim), ("d_model", d_model), ("heads", heads), ("d_ff", d_ff),
                            ("num_layers", num_layers)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"encoder 'transformer': {name} must be a positive integer, got {value!r}")
        if d_model % heads:
            raise ConfigError(f"encoder 'transformer': heads ({heads}) must divide d_model ({d_model})")
        if d_model % 2:
            raise ConfigError(f"encoder 'transformer': d_model must be even for sinusoidal positions, got {d_model}")
        if not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
            raise ConfigError(f"encoder 'transformer': dropout must be in [0, 1), got {dropout!r}")
        if not isinstance(causal, bool):
            raise ConfigError(f"encoder 'transformer': causal must be true or false, got {causal!r}")
        check_choice(positions, POSITIONS, "encoder 'transformer': positions")
        self.positions = positions
        self.causal = causal
        self.input_dim = input_dim
        self.d_model = d_model
        self.heads = heads
        self.output_dim = d_model
        self.num_layers = num_layers + 1
        self.input_projection = nn.Linear(input_dim, d_model) if input_dim != d_model else None
        self.input_dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(d_model, heads, d_ff, dropout, activation="relu", batch_first=True,
                                       norm_first=True)
            for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(d_model)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        # TUPE's own parameters come after the blocks' draws: its blocks start as the baseline's
        self.untied = None
        if positions != "sinusoidal":
            self.untied = UntiedPositions(d_model, heads, bidirectional=not causal, relative=positions == "tupe_r")
            for block in self.blocks:
                untie_block(block)  # the word term's 1/sqrt(2d); the exact path for the float mask

    @property
    def reads_sentence_starts(self) -> bool:
        """True when ``forward`` needs ``starts``: TUPE unties ``<s>`` in a bidirectional encoder."""
        return self.untied is not None and not self.causal

    @classmethod
    def table_option_label(cls, options: dict) -> str | None:
        """The tables' name of the method an ``encoder`` section turns on ("TUPE", "TUPE-R"), None for
        the sinusoidal baseline; reads the section only (no model is built)."""
        return POSITION_LABELS.get(options.get("positions", "sinusoidal"))

    def variant_label(self) -> str | None:
        """:meth:`table_option_label` of this encoder."""
        return self.table_option_label({"positions": self.positions})

    def attention_mask(self, mask: torch.Tensor) -> torch.Tensor | None:
        """bool (time, time) causal mask, or (batch*heads, time, time) when padding exists; True = blocked.
        Not causal: None (nothing blocked) without padding."""
        if bool(to_host(mask).all()):  # the CPU original when to_device kept one: no wait for the GPU
            steps = mask.shape[1]
            return torch.ones(steps, steps, dtype=torch.bool, device=mask.device).triu(1) if self.causal else None
        return self.blocked_pairs(mask).repeat_interleave(self.heads, dim=0)

    def blocked_pairs(self, mask: torch.Tensor) -> torch.Tensor:
        """bool (batch, time, time), True where query i may not read key j: a later key in a causal
        encoder, or a padded one (a query always reads itself)."""
        steps = mask.shape[1]
        future = torch.ones(steps, steps, dtype=torch.bool, device=mask.device).triu(1)
        if not self.causal:
            future = torch.zeros_like(future)
        eye = torch.eye(steps, dtype=torch.bool, device=mask.device)
        return future[None] | (~mask[:, None, :] & ~eye[None])

    def untied_mask(self, mask: torch.Tensor, starts: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor:
        """TUPE's position term with the blocked pairs at -inf: the float attention mask every
        block adds to its (word-only) logits.  Shape: (batch*heads, time, time)."""
        batch, steps = mask.shape
        table = sinusoidal_positions(steps, self.d_model, mask.device, dtype)
        term = self.untied(table, starts if self.reads_sentence_starts else None)  # (H|B,H, T, T)
        blocked = self.blocked_pairs(mask)[:, None]  # (B, 1, T, T)
        term = term.expand(batch, self.heads, steps, steps).masked_fill(blocked, float("-inf"))
        return term.reshape(batch * self.heads, steps, steps)

    mixes_embedded = True  # ``mix_embedded`` sees the projected input plus positions (Encoder.mixes_embedded)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, state: Any = None,
                starts: torch.Tensor | None = None,
                mix_embedded: Callable[[torch.Tensor], torch.Tensor] | None = None) -> EncoderOutput:
        if inputs.dim() != 3 or inputs.shape[-1] != self.input_dim:
            raise ValueError(f"transformer expects (batch, time, {self.input_dim}) inputs, got {tuple(inputs.shape)}")
        if mask.shape != inputs.shape[:2] or mask.dtype != torch.bool:
            raise ValueError(f"mask must be bool (batch, time) = {tuple(inputs.shape[:2])}")
        if starts is not None and (starts.shape != mask.shape or starts.dtype != torch.bool):
            raise ValueError(f"starts must be bool (batch, time) = {tuple(mask.shape)}")
        x = inputs if self.input_projection is None else self.input_projection(inputs)
        if self.untied is None:
            x = x + sinusoidal_positions(x.shape[1], self.d_model, x.device, x.dtype)
        if mix_embedded is not None:  # (batch, time, d_model) -> the same: TNF's notes (place: model)
            x = mix_embedded(x)
        x = self.input_dropout(x)
        maskf = mask.unsqueeze(-1).to(x.dtype)
        if self.untied is None:
            attn = self.attention_mask(mask)
        else:  # computed once, shared by every block
            attn = self.untied_mask(mask, starts, x.dtype)
        causal_only = attn is not None and attn.dim() == 2
        layers = [x * maskf]
        for index, block in enumerate(self.blocks):
            x = block(x, src_mask=attn, is_causal=causal_only)
            out = self.final_norm(x) if index == len(self.blocks) - 1 else x
            layers.append(out * maskf)
        return EncoderOutput(output=layers[-1], layers=layers, state=None)
