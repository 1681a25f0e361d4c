"""Untied positional encoding (TUPE; Ke, He and Liu, ICLR 2021, arXiv 2006.15595).

The position term of TUPE's attention logits, for :class:`elmoc.encoders.transformer.TransformerEncoder`
with ``positions: tupe`` or ``tupe_r``.  Positions are not added to the words; instead every
attention logit of every block is

    alpha_ij = (x_i W^Q)(x_j W^K)^T / sqrt(2 d)  +  (p_i U^Q)(p_j U^K)^T / sqrt(2 d)  [+ b_(j-i)]

per head, ``d`` the head width (section 3.1: the word-position cross terms are dropped, and both
terms are scaled by ``1/sqrt(2d)`` so that their sum keeps the size of the usual ``1/sqrt(d)``
logit).  The position term has its own projections ``U^Q, U^K`` (no bias), is computed once per
forward pass from the position vectors ``p`` alone, and is shared by every block (section 3.3).
``p`` is the baseline encoder's sinusoidal table [inferred: the paper reuses BERT's learned
absolute table; the fixed table keeps TUPE's one change the untying, and extraction reads
sentences of any length as the baseline does].  TUPE-R (section 3.3) adds ``b_(j-i)``, one
learned scalar per head and relative-distance bucket, bucketed as T5 buckets them (Raffel et
al. 2020: half of the buckets exact distances, the rest logarithmic up to ``RELATIVE_MAX_DISTANCE``;
a bidirectional encoder gives each sign its own half, a causal one spends all of them on the past).

Untying ``[CLS]`` (section 3.2): the row of ``[CLS]`` as a query is replaced by a learned scalar
``theta_1`` per head and its column as a key (for every other query) by ``theta_2``, so the token
that summarises the sentence is not pulled towards its neighbours by its position.  elmoc has no
``[CLS]``; in a bidirectional encoder (the masked LM) the sentence start ``<s>`` takes its place.
Masked-LM windows are cut from a stream of sentences (``... </s> <s> w w w </s> <s> ...``, see
:mod:`elmoc.data.batches`), so a window holds several ``<s>`` at arbitrary positions and starts
with one only by chance; every ``<s>`` in the window is untied, its row by ``theta_1`` and its
column by ``theta_2`` [inferred].  A window or sentence that starts with ``<s>`` and holds no other
is exactly the paper's case: only row 0 and column 0 change.  The reset replaces the whole
position term of those entries, the relative bias of TUPE-R included [inferred: otherwise the
relative bias would tie them to positions again].  ``theta_1`` fills the whole row, and a
softmax ignores a constant added to its row, so ``theta_1`` never changes the attention (its
gradient is 0): what counts is that the row of ``<s>`` has no position term; ``theta_2``, the
column, is what trains.  It is kept because the paper defines it.  A causal LM (TRANS BASE, TRANS LARGE, GPT)
has no ``[CLS]``: its ``<s>`` only ever sees the words before it and no feature is read from it as
a summary, so nothing is untied there and ``starts`` is ignored.

The word term's ``1/sqrt(2d)``: ``torch.nn.MultiheadAttention`` scales by ``1/sqrt(d)``; the
query rows of its packed projection (weight and bias) are multiplied by the constant
``1/sqrt(2)`` through a parametrization (:func:`untie_block`), so ``q = (x W^Q + b^Q) / sqrt(2)``
as the paper's implementation scales its queries; the stored parameters are the unscaled ones
and their gradients carry the same factor.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils import parametrize

RELATIVE_BUCKETS = 32  # T5's and TUPE-R's number of buckets
RELATIVE_MAX_DISTANCE = 128  # distances at or beyond this share the last bucket (T5, TUPE-R)


class _ScaleRows(nn.Module):
    """``tensor * factor`` on its first ``rows`` rows (the query part of a packed in-projection)."""

    def __init__(self, rows: int, factor: float):
        super().__init__()
        self.rows = rows
        self.factor = factor

    def forward(self, packed: torch.Tensor) -> torch.Tensor:
        return torch.cat([packed[: self.rows] * self.factor, packed[self.rows:]])


def _keep_off_fast_path(module: nn.Module, args: tuple) -> None:
    """A forward pre-hook that does nothing: see :func:`untie_block`."""


def untie_block(block: nn.TransformerEncoderLayer) -> None:
    """Make a built-in block compute TUPE's word term, to which its float attention mask adds the
    position term: the queries of its attention are multiplied by the constant ``1/sqrt(2)``
    (weight and bias rows of ``W^Q`` in the packed ``in_proj``), so its logits are
    ``q k^T / sqrt(2 d)``.  And the block is kept off torch's inference fast path
    (``torch._transformer_encoder_layer_fwd``, taken in eval mode without gradients), which
    reads a float attention mask as a bool one (torch 2.13 on CPU: every non-zero entry blocks
    its pair, so the position term would block everything); any forward hook sends the block
    down the exact path, which is what the do-nothing hook is for."""
    attention = block.self_attn
    for name in ("in_proj_weight", "in_proj_bias"):
        parametrize.register_parametrization(attention, name, _ScaleRows(attention.embed_dim, 1.0 / math.sqrt(2.0)))
    block.register_forward_pre_hook(_keep_off_fast_path)


def relative_buckets(steps: int, bidirectional: bool, buckets: int = RELATIVE_BUCKETS,
                     max_distance: int = RELATIVE_MAX_DISTANCE, device=None) -> torch.Tensor:
    """T5's bucket of every (query i, key j) pair, from the distance ``j - i``.

    A bidirectional encoder uses ``buckets / 2`` buckets per sign (keys after the query in the
    upper half); a causal one uses all of them for keys at or before the query (later keys, which
    it never reads, share bucket 0).  Of a sign's buckets the first half are the exact distances
    0, 1, ...; the rest cover the distances up to ``max_distance`` on a log scale.

    Shape: (steps, steps) long, entry [i, j].
    """
    position = torch.arange(steps, device=device)
    distance = position[None, :] - position[:, None]  # (T, T): key - query
    if bidirectional:
        per_sign = buckets // 2
        offset = (distance > 0).long() * per_sign
        distance = distance.abs()
    else:
        per_sign = buckets
        offset = torch.zeros_like(distance)
        distance = (-distance).clamp(min=0)
    exact = per_sign // 2
    far = exact + (torch.log(distance.clamp(min=1).float() / exact) / math.log(max_distance / exact)
                   * (per_sign - exact)).long()
    far = far.clamp(max=per_sign - 1)
    return offset + torch.where(distance < exact, distance, far)


class UntiedPositions(nn.Module):
    """TUPE's position term, once per forward pass, for every block and head.

    Args:
        d_model: width of the position vectors and the model.
        heads: attention heads (the term is per head, ``d_model / heads`` wide).
        bidirectional: False for a causal LM (relative buckets for the past only, nothing untied).
        relative: add TUPE-R's bucketed relative bias.

    Attributes:
        query, key: ``U^Q``, ``U^K`` (d_model -> d_model, no bias).
        theta: (2, heads) ``theta_1`` (row of ``<s>``), ``theta_2`` (its column); bidirectional only.
        relative_bias: (buckets, heads) ``b``; TUPE-R only.
    """

    def __init__(self, d_model: int, heads: int, bidirectional: bool, relative: bool):
        super().__init__()
        self.heads = heads
        self.head_dim = d_model // heads
        self.bidirectional = bidirectional
        self.query = nn.Linear(d_model, d_model, bias=False)
        self.key = nn.Linear(d_model, d_model, bias=False)
        for projection in (self.query, self.key):
            nn.init.xavier_uniform_(projection.weight)  # as the blocks' projections
        # theta and b start at 0: no preference until training finds one
        self.theta = nn.Parameter(torch.zeros(2, heads)) if bidirectional else None
        self.relative_bias = nn.Embedding(RELATIVE_BUCKETS, heads) if relative else None
        if relative:
            nn.init.zeros_(self.relative_bias.weight)

    def forward(self, positions: torch.Tensor, starts: torch.Tensor | None = None) -> torch.Tensor:
        """The position term of the logits.

        Args:
            positions: (time, d_model) the position vectors ``p``.
            starts: (batch, time) bool, True where the token is ``<s>`` (bidirectional only;
                None or all False: nothing untied).

        Returns:
            (heads, time, time), or (batch, heads, time, time) when ``starts`` is given to a
            bidirectional term; entry [h, i, j] is added to the logit of query i, key j.
        """
        steps = positions.shape[0]
        q = self.query(positions).view(steps, self.heads, self.head_dim)  # (T, H, d)
        k = self.key(positions).view(steps, self.heads, self.head_dim)
        term = torch.einsum("ihd,jhd->hij", q, k) / math.sqrt(2 * self.head_dim)  # (H, T, T)
        if self.relative_bias is not None:
            bucket = relative_buckets(steps, self.bidirectional, device=positions.device)
            term = term + self.relative_bias(bucket).permute(2, 0, 1)
        if self.theta is None or starts is None:
            return term
        theta = self.theta.to(term.dtype)
        query_is_start = starts[:, None, :, None]  # (B, 1, T, 1)
        key_is_start = starts[:, None, None, :]  # (B, 1, 1, T)
        untied = torch.where(key_is_start, theta[1][None, :, None, None], term[None])
        return torch.where(query_is_start, theta[0][None, :, None, None], untied)  # (B, H, T, T)
