"""Notes for rare words (TNF: Wu et al., "Taking Notes on the Fly Helps Language
Pre-Training", ICLR 2021, arXiv 2008.01466), a pre-training-only aid of any input layer.

A :class:`NoteDictionary` keeps one note per rare word of the vocabulary (paper section 3.2):

* **read** (:meth:`NoteDictionary.mix`): at an occurrence of a rare word that already has a
  note, the encoder reads ``(1 - lambda) * input + lambda * Note(w)`` instead of the input
  layer's vector (paper eq. 2; lambda = 0.5);
* **write** (:meth:`NoteDictionary.observe`, then :meth:`NoteDictionary.commit` after the
  optimizer step): the note of an occurrence at position t is the mean of the encoder's
  outputs c_j over j = t-k .. t+k (paper eq. 1, clipped to the window and its real tokens),
  detached; the dictionary is an exponential moving average, ``Note(w) <- (1 - gamma) Note(w)
  + gamma * note`` (paper eq. 3), the first note of a word taken as it is.  All occurrences of
  a word in one step are averaged into that step's note, so the update does not depend on the
  order of the rows (nor on how they are split over processes).

Because notes are written only after the step that read them, the note an occurrence reads
was computed from earlier steps' windows only: a causal LM never sees, through a note, a word
of its current window that it has not read yet.

Words, not pieces: a note is keyed by a vocabulary id of a word-level vocabulary.  The band
of rare words (:func:`rare_ids`) is a range of frequency-rank quantiles of the vocabulary's
counts, so it means the same at any corpus size (see :class:`NoteSettings`).  A subword LM
(ELMo-Sub) hands, per piece, the word it belongs to (:func:`piece_words`): every piece of a
rare word reads the word's note, and an occurrence at pieces s..t writes one note, the mean
over s-k .. t+k.

The notes live in the input layer's space (width D).  When the encoder's output width H
differs (ELMo-C: 300-d FastText in, 512-d out), the window means are mapped to D by a fixed
(never trained) semi-orthogonal matrix drawn from the run's seed and kept in the state.

The dictionary is a plain object, not an ``nn.Module``: it is never in a model's
``state_dict``, so ``model.pt``, ``elmoc export`` and features never hold notes; a checkpoint
carries :meth:`NoteDictionary.state_dict` under its own training-only key.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from elmoc.config import check_range
from elmoc.config_section import check_keys
from elmoc.errors import ConfigError

LABEL = "TNF"  # how tables name a variant trained with notes (:func:`variant_label`)
# (rows (N,) long, notes (N, D) float) of every process, concatenated in rank order
Gather = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class NoteSettings:
    """``train.notes`` of an LM spec (defaults: the paper's section 4.1).

    Attributes:
        mix: ``lambda``, the note's weight in a rare word's input (0.5).
        gamma: the discount of the moving average (0.1).
        window: k, the tokens each side of the occurrence whose outputs make its note (16).
        match_norm: scale each note to the norm of the vector it is mixed into before mixing
            (False: the paper's raw mix).  The paper mixes into BERT's embedding sum, which a
            LayerNorm then rescales; elmoc's LSTM reads its input as it is, and its outputs
            (projection clipped at 3 per unit) are several times longer than FastText rows.
        words: the word vocabulary (token<TAB>count) whose counts give the rare words of a
            subword LM (``data.tokenizer``; its ``vocab`` counts pieces); None for word LMs.
        band: ``[lo, hi]``, the rare words as quantiles of frequency rank among the
            vocabulary's words (specials and zero counts excluded), most frequent first:
            rank r (0-based) of n words is rare when ``lo <= r / n < hi``.  The paper's band
            (words seen 100 to 500 times in its 3.3B-token corpus) spans a factor 5 in count;
            under Zipf's law (count ~ 1 / rank) that is a factor 5 in rank, so the default is
            ``[0.2, 1.0]``: the rarest 80% of the vocabulary, at any corpus size.
    """

    OPTION_RANGES = {"lambda": "[0, 1)", "gamma": "> 0", "window": "int >= 0"}

    mix: float = 0.5
    gamma: float = 0.1
    window: int = 16
    band: tuple[float, float] = (0.2, 1.0)
    match_norm: bool = False
    words: str | None = None

    @classmethod
    def from_config(cls, config: Any) -> "NoteSettings":
        if not isinstance(config, dict):
            raise ConfigError(f"train.notes must be a mapping like {{lambda: 0.5, gamma: 0.1, window: 16, "
                              f"band: [0.2, 1.0]}}, got {config!r}")
        check_keys(config, {"lambda", "gamma", "window", "band", "match_norm", "words"}, "train.notes")
        words = config.get("words")
        if words is not None and (not isinstance(words, str) or not words):
            raise ConfigError(f"train.notes.words must be the path of the word vocabulary, got {words!r}")
        match_norm = config.get("match_norm", cls.match_norm)
        if not isinstance(match_norm, bool):
            raise ConfigError(f"train.notes.match_norm must be true or false, got {match_norm!r}")
        for key, rule in cls.OPTION_RANGES.items():
            if key in config:
                check_range(config[key], rule, f"train.notes.{key}")
        gamma = config.get("gamma", cls.gamma)
        if gamma > 1:
            raise ConfigError(f"train.notes.gamma must be in (0, 1], got {gamma}")
        band = config.get("band", list(cls.band))
        if (not isinstance(band, (list, tuple)) or len(band) != 2
                or not all(isinstance(q, (int, float)) and not isinstance(q, bool) for q in band)
                or not 0 <= band[0] < band[1] <= 1):
            raise ConfigError(f"train.notes.band must be [lo, hi] with 0 <= lo < hi <= 1 (frequency-rank "
                              f"quantiles), got {band!r}")
        return cls(mix=float(config.get("lambda", cls.mix)), gamma=float(gamma),
                   window=int(config.get("window", cls.window)), band=(float(band[0]), float(band[1])),
                   match_norm=match_norm, words=words)


def variant_label(spec: dict[str, Any]) -> str | None:
    """"TNF" for an LM spec whose ``train`` section has ``notes``, else None (for tables;
    reads the spec only, builds nothing)."""
    return LABEL if isinstance(spec.get("train"), dict) and spec["train"].get("notes") is not None else None


def rare_ids(counts: Sequence[int], band: tuple[float, float]) -> torch.Tensor:
    """The ids whose frequency rank falls in ``band`` (:class:`NoteSettings`).

    Ranks sort the ids with a count > 0 by descending count (ties by id).  Returns a sorted
    long tensor (rare words,).
    """
    counted = torch.tensor([i for i, c in enumerate(counts) if c > 0], dtype=torch.long)
    if counted.numel() == 0:
        raise ConfigError("train.notes needs a vocabulary with counts (token<TAB>count lines); this one has none")
    by_count = torch.tensor([counts[i] for i in counted.tolist()], dtype=torch.long)
    order = counted[torch.sort(-by_count, stable=True).indices]  # most frequent first
    n = order.numel()
    lo, hi = int(band[0] * n), int(band[1] * n)
    return torch.sort(order[lo:hi]).values


def piece_words(words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Word ids and occurrence ends of a window of subword pieces.

    ``words`` (batch, time) long holds, per piece, the id of its word in the word vocabulary,
    written ``-1 - id`` for the words of odd index in their sentence
    (:meth:`elmoc.data.vocab.subword.SubwordEncoder.stream`), so two neighbouring words always
    differ and an occurrence is a run of equal values, read the same in a reversed stream.
    Returns ids (batch, time) long and ends (batch, time) long: the last position of each
    piece's occurrence (clipped to the window).
    """
    b, t = words.shape
    ids = torch.where(words >= 0, words, -1 - words)
    pos = torch.arange(t, device=words.device).expand(b, t)
    last = torch.ones_like(words, dtype=torch.bool)
    last[:, :-1] = words[:, 1:] != words[:, :-1]
    ends = torch.where(last, pos, t).flip(1).cummin(1).values.flip(1)
    return ids, ends


def window_means(outputs: torch.Tensor, mask: torch.Tensor, k: int, ends: torch.Tensor | None = None) -> torch.Tensor:
    """Mean of ``outputs`` over positions t-k .. e+k that are real tokens, for every t, where
    e is ``ends[t]`` (the last piece of the occurrence that starts at t; default t).

    Shape: outputs (batch, time, dim); mask (batch, time) bool; ends (batch, time) long;
    returns (batch, time, dim) (a position whose window has no real token gets zeros).
    """
    b, t, d = outputs.shape
    weights = mask.to(outputs.dtype).unsqueeze(-1)  # (B, T, 1)
    zero = outputs.new_zeros(b, 1, d + 1)
    cums = torch.cat([zero, torch.cat([outputs * weights, weights], -1).cumsum(1)], 1)  # (B, T+1, D+1)
    pos = torch.arange(t, device=outputs.device)
    lo = (pos - k).clamp(min=0)
    if ends is None:
        sums = cums[:, (pos + k + 1).clamp(max=t)] - cums[:, lo]  # (B, T, D+1)
    else:
        hi = (ends + k + 1).clamp(max=t)  # (B, T)
        sums = cums.gather(1, hi.unsqueeze(-1).expand(b, t, d + 1)) - cums[:, lo]
    return sums[..., :d] / sums[..., d:].clamp(min=1.0)


class NoteDictionary:
    """The notes of the rare words of one run (see the module docstring).

    Args:
        settings: :class:`NoteSettings`.
        rare: long (rare words,) vocabulary ids (:func:`rare_ids`).
        vocab_size: V; dim: D, the input layer's width; hidden_dim: H, the encoder's.
        seed: draws the fixed H -> D map when H != D.

    Attributes:
        row: long (V,), each id's row in :attr:`notes` or -1 for a frequent word.
        notes: float32 (rare words, D); seen: bool (rare words,), True once a word has a note.
        projection: float32 (H, D) or None when H == D.
    """

    def __init__(self, settings: NoteSettings, rare: torch.Tensor, vocab_size: int, dim: int, hidden_dim: int,
                 seed: int = 0, device: torch.device | str = "cpu"):
        self.settings = settings
        self.row = torch.full((vocab_size,), -1, dtype=torch.long)
        self.row[rare] = torch.arange(rare.numel())
        self.notes = torch.zeros(rare.numel(), dim)
        self.seen = torch.zeros(rare.numel(), dtype=torch.bool)
        self.projection = None
        if hidden_dim != dim:
            gen = torch.Generator().manual_seed(seed)
            q, _ = torch.linalg.qr(torch.randn(max(hidden_dim, dim), min(hidden_dim, dim), generator=gen))
            self.projection = q if hidden_dim >= dim else q.T  # (H, D), orthonormal columns or rows
        self.to(device)
        self.pending: list[tuple[torch.Tensor, torch.Tensor]] = []

    def to(self, device: torch.device | str) -> "NoteDictionary":
        self.row, self.notes, self.seen = self.row.to(device), self.notes.to(device), self.seen.to(device)
        if self.projection is not None:
            self.projection = self.projection.to(device)
        return self

    def mix(self, ids: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
        """``vectors`` with each noted rare word's mixed with its note.

        Shape: ids (batch, time) long; vectors (batch, time, D); returns (batch, time, D).
        """
        rows = self.row[ids]  # (B, T)
        has = rows >= 0
        has &= self.seen[rows.clamp(min=0)]
        lam = self.settings.mix
        notes = self.notes[rows.clamp(min=0)].to(vectors.dtype)  # (B, T, D)
        if self.settings.match_norm:
            notes = notes * (vectors.norm(dim=-1, keepdim=True) / notes.norm(dim=-1, keepdim=True).clamp(min=1e-12))
        noted = (1.0 - lam) * vectors + lam * notes
        return torch.where(has.unsqueeze(-1), noted, vectors)

    def mix_pieces(self, words: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
        """:meth:`mix` for subword pieces: every piece of a noted rare word reads its word's
        note.  Shape: words (batch, time) long (:func:`piece_words`); vectors (batch, time, D)."""
        return self.mix(piece_words(words)[0], vectors)

    @torch.no_grad()
    def observe(self, ids: torch.Tensor, mask: torch.Tensor, outputs: torch.Tensor, pieces: bool = False) -> None:
        """Keep this window's notes of its rare words (applied by :meth:`commit`).

        Shape: ids (batch, time) long; mask (batch, time) bool; outputs (batch, time, H).
        ``pieces``: ``ids`` are the words of subword pieces (:func:`piece_words`): one note per
        occurrence, over its first piece - k .. its last piece + k.
        """
        ends = None
        if pieces:
            ids, ends = piece_words(ids)
        rows = self.row[ids]
        at = (rows >= 0) & mask  # (B, T)
        if pieces:  # an occurrence's first piece only (or the window's first position)
            at[:, 1:] &= ends[:, :-1] != ends[:, 1:]
        means = window_means(outputs.detach().float(), mask, self.settings.window, ends)[at]  # (N, H) row-major
        if self.projection is not None:
            means = means @ self.projection
        self.pending.append((rows[at], means))

    @torch.no_grad()
    def commit(self, gather: Gather | None = None) -> None:
        """Apply the notes observed since the last commit: every occurrence of a word in
        them averaged, then the moving average.  ``gather`` (data parallelism) returns every
        process's occurrences in rank order, so every process applies the same update."""
        if not self.pending:
            return
        rows = torch.cat([r for r, _ in self.pending])
        means = torch.cat([m for _, m in self.pending])
        self.pending = []
        if gather is not None:
            rows, means = gather(rows, means)
        if rows.numel() == 0:
            return
        sums = torch.zeros_like(self.notes).index_add_(0, rows, means)
        counts = torch.zeros(self.notes.shape[0], device=rows.device).index_add_(
            0, rows, torch.ones_like(rows, dtype=torch.float32))
        hit = counts > 0
        step = sums[hit] / counts[hit].unsqueeze(-1)
        gamma = self.settings.gamma
        old = self.notes[hit]
        self.notes[hit] = torch.where(self.seen[hit].unsqueeze(-1), (1.0 - gamma) * old + gamma * step, step)
        self.seen |= hit

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps (plain tensors on the CPU)."""
        return {"row": self.row.cpu(), "notes": self.notes.cpu(), "seen": self.seen.cpu(),
                "projection": None if self.projection is None else self.projection.cpu()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["notes"].shape != self.notes.shape or not torch.equal(state["row"], self.row.cpu()):
            raise ConfigError("the checkpoint's notes are for another band of rare words or width; rerun with "
                              "--no-resume, or keep train.notes and the vocabulary as they were")
        device = self.notes.device
        self.row, self.notes, self.seen = state["row"].to(device), state["notes"].to(device), state["seen"].to(device)
        self.projection = None if state["projection"] is None else state["projection"].to(device)
