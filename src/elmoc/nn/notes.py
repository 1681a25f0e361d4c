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
  + gamma * note`` (paper eq. 3), the first note of a word taken as it is.  By default
  (``update: occurrence``, the paper's) the average takes each occurrence in turn, in the
  order of the step's rows (rank order under data parallelism: the global batch's row order);
  ``update: step`` (elmoc's former rule) averages all occurrences of a word in one step into
  that step's note first, so the update does not depend on the rows' order.

Because notes are written only after the step that read them, the note an occurrence reads
was computed from earlier steps' windows only: a causal LM never sees, through a note, a word
of its current window that it has not read yet.

Words, not pieces: a note is keyed by a vocabulary id of a word-level vocabulary.  The band
of rare words (:func:`rare_ids`, :class:`RareBand`) is by default the paper's count band, words
seen 100 to 500 times, scaled to the corpus (see :class:`RareBand`); the former rank-quantile
band stays an option.  A subword LM
(ELMo-Sub) hands, per piece, the word it belongs to (:func:`piece_words`): every piece of a
rare word reads the word's note, and an occurrence at pieces s..t writes one note, the mean
over s-k .. t+k.

Where a note is mixed (``place``, :meth:`NoteDictionary.place`): by default (``place: model``,
the paper's eq. 2: ``(1 - lambda) * (word + position embedding) + lambda * Note(w)``, BERT's own
input) into the encoder's own model-width input where the encoder has one (a Transformer:
after its input projection and positions; :attr:`elmoc.encoders.base.Encoder.mixes_embedded`),
the notes then as wide as the encoder's output (H) with no map.  An encoder that reads the input
layer's vectors as they are (the LSTMs) is mixed there, and so is every encoder with ``place:
input`` (elmoc's former placement): the notes live in the input layer's space (width D), and when
H differs (ELMo-C: 300-d FastText in, 512-d out) the window means are mapped to D by a fixed
(never trained) semi-orthogonal matrix drawn from the run's seed and kept in the state.

The dictionary is a plain object, not an ``nn.Module``: it is never in a model's
``state_dict``, so ``model.pt``, ``elmoc export`` and features never hold notes; a checkpoint
carries :meth:`NoteDictionary.state_dict` under its own training-only key.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from elmoc.config import check_choice, check_range
from elmoc.config_section import check_keys
from elmoc.errors import ConfigError

LABEL = "TNF"  # how tables name a variant trained with notes (:func:`variant_label`)
# (rows (N,) long, notes (N, D) float) of every process, concatenated in rank order
Gather = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


# Wu et al. (2021) pre-train on BERT's corpus, BooksCorpus (800M words) + English Wikipedia (2,500M words)
# (Devlin et al. 2019, section 3.1): the corpus size their count band refers to.
PAPER_CORPUS_TOKENS = 3_300_000_000
MIN_RARE_COUNT = 2  # a scaled band never starts below 2 occurrences: a rare word recurs, so it can read a note


def _pair(value: Any, key: str, what: str, ok: Callable[[float, float], bool]) -> tuple[float, float]:
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(q, (int, float)) and not isinstance(q, bool) for q in value)
            or not ok(value[0], value[1])):
        raise ConfigError(f"train.notes.{key} must be [lo, hi] with {what}, got {value!r}")
    return float(value[0]), float(value[1])


def _as_given(counts: tuple[float, float], corpus_tokens: int) -> tuple[float, float]:
    return counts


def _scaled_to_corpus(counts: tuple[float, float], corpus_tokens: int) -> tuple[float, float]:
    lo, hi = counts
    low = max(lo * corpus_tokens / PAPER_CORPUS_TOKENS, MIN_RARE_COUNT)
    return low, low * hi / lo


# train.notes.scale: the count band [lo, hi] in a corpus of N tokens
SCALES: dict[str, Callable[[tuple[float, float], int], tuple[float, float]]] = {
    "corpus": _scaled_to_corpus, "none": _as_given}


@dataclass(frozen=True)
class RareBand:
    """Which words are rare (``train.notes.band_by``, ``counts``, ``scale``, ``band``).

    ``band_by: count`` (default; Wu et al. 2021, section 4 [as recalled: 100 to 500 occurrences
    in the pre-training corpus; the figure was not confirmed from the paper's text in this
    project, see docs/beyond-paper.md]): a word is rare when its corpus count c satisfies
    ``lo' <= c <= hi'``, where ``[lo', hi']`` is ``counts`` scaled to the corpus:

    * ``scale: corpus`` (default): s = corpus tokens / 3.3B (the paper's corpus, BERT's), the
      corpus tokens being the sum of the vocabulary's counts; ``lo' = max(lo * s, 2)`` and
      ``hi' = lo' * hi / lo``: the paper's band where the corpus is as large, and below it a
      band that keeps the paper's width (a factor hi / lo in count) but never starts below 2
      occurrences (a word seen once cannot read a note);
    * ``scale: none``: ``counts`` as they are.

    ``band_by: rank`` (elmoc's former default, ``band: [0.2, 1.0]``): quantiles of frequency rank
    among the counted words, most frequent first: rank r (0-based) of n words is rare when
    ``lo <= r / n < hi``.
    """

    by: str = "count"
    counts: tuple[float, float] = (100.0, 500.0)
    scale: str = "corpus"
    ranks: tuple[float, float] = (0.2, 1.0)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "RareBand":
        """The band of ``train.notes`` (a mapping; the other keys are :class:`NoteSettings`')."""
        by = config.get("band_by", cls.by)
        check_choice(by, BANDS, "train.notes.band_by")
        for kind, keys in BAND_KEYS.items():
            for key in keys:
                if kind != by and key in config:
                    raise ConfigError(f"train.notes.{key} is for band_by: {kind}, this band is band_by: {by}; "
                                      f"set band_by: {kind} or remove {key}")
        scale = config.get("scale", cls.scale)
        check_choice(scale, SCALES, "train.notes.scale")
        counts = _pair(config.get("counts", list(cls.counts)), "counts", "0 < lo <= hi (occurrences)",
                       lambda lo, hi: 0 < lo <= hi)
        ranks = _pair(config.get("band", list(cls.ranks)), "band", "0 <= lo < hi <= 1 (frequency-rank quantiles)",
                      lambda lo, hi: 0 <= lo < hi <= 1)
        return cls(by=by, counts=counts, scale=scale, ranks=ranks)

    def count_range(self, corpus_tokens: int) -> tuple[float, float]:
        """``[lo', hi']``, the counts (inclusive) of the rare words in a corpus of
        ``corpus_tokens`` tokens (``band_by: count``; see the class docstring)."""
        return SCALES[self.scale](self.counts, corpus_tokens)


def _count_band(band: RareBand, counted: torch.Tensor, by_count: torch.Tensor) -> torch.Tensor:
    lo, hi = band.count_range(int(by_count.sum()))
    return counted[(by_count >= lo) & (by_count <= hi)]


def _rank_band(band: RareBand, counted: torch.Tensor, by_count: torch.Tensor) -> torch.Tensor:
    order = counted[torch.sort(-by_count, stable=True).indices]  # most frequent first
    n = order.numel()
    return order[int(band.ranks[0] * n):int(band.ranks[1] * n)]


# train.notes.band_by: the rare words among the counted ids (ids, counts) under a band, and the keys it reads
BAND_KEYS = {"count": ("counts", "scale"), "rank": ("band",)}
BANDS: dict[str, Callable[[RareBand, torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "count": _count_band, "rank": _rank_band}


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
        band: :class:`RareBand`, which words are rare (keys ``band_by``, ``counts``, ``scale``,
            ``band``; default: the paper's 100-500 occurrences, scaled to the corpus).
        place: ``model`` (default, the paper's) or ``input`` (elmoc's former placement): where
            a note is mixed (the module docstring; :data:`PLACES`).
        update: ``occurrence`` (default, the paper's eq. 3 as written: the moving average takes
            each occurrence in turn, in the order of the step's rows) or ``step`` (elmoc's former
            rule: a word's occurrences in one step averaged first, then one moving-average step).
    """

    OPTION_RANGES = {"lambda": "[0, 1)", "gamma": "> 0", "window": "int >= 0"}
    KEYS = {"lambda", "gamma", "window", "band_by", "counts", "scale", "band", "place", "update", "match_norm",
            "words"}

    mix: float = 0.5
    gamma: float = 0.1
    window: int = 16
    band: RareBand = RareBand()
    place: str = "model"
    update: str = "occurrence"
    match_norm: bool = False
    words: str | None = None

    @classmethod
    def from_config(cls, config: Any) -> "NoteSettings":
        if not isinstance(config, dict):
            raise ConfigError(f"train.notes must be a mapping like {{lambda: 0.5, gamma: 0.1, window: 16, "
                              f"counts: [100, 500]}}, got {config!r}")
        check_keys(config, cls.KEYS, "train.notes")
        words = config.get("words")
        if words is not None and (not isinstance(words, str) or not words):
            raise ConfigError(f"train.notes.words must be the path of the word vocabulary, got {words!r}")
        match_norm = config.get("match_norm", cls.match_norm)
        if not isinstance(match_norm, bool):
            raise ConfigError(f"train.notes.match_norm must be true or false, got {match_norm!r}")
        update, place = config.get("update", cls.update), config.get("place", cls.place)
        check_choice(update, UPDATES, "train.notes.update")
        check_choice(place, PLACES, "train.notes.place")
        for key, rule in cls.OPTION_RANGES.items():
            if key in config:
                check_range(config[key], rule, f"train.notes.{key}")
        gamma = config.get("gamma", cls.gamma)
        if gamma > 1:
            raise ConfigError(f"train.notes.gamma must be in (0, 1], got {gamma}")
        return cls(mix=float(config.get("lambda", cls.mix)), gamma=float(gamma),
                   window=int(config.get("window", cls.window)), band=RareBand.from_config(config),
                   place=place, update=update, match_norm=match_norm, words=words)


def variant_label(spec: dict[str, Any]) -> str | None:
    """"TNF" for an LM spec whose ``train`` section has ``notes``, else None (for tables;
    reads the spec only, builds nothing)."""
    return LABEL if isinstance(spec.get("train"), dict) and spec["train"].get("notes") is not None else None


def rare_ids(counts: Sequence[int], band: RareBand) -> torch.Tensor:
    """The ids of the rare words under ``band`` (:class:`RareBand`): by corpus count (the
    corpus's tokens: the sum of ``counts``) or by frequency rank (ids with a count > 0 sorted by
    descending count, ties by id).  Returns a sorted long tensor (rare words,); no rare word at
    all is a ConfigError (a run with notes that never take one)."""
    counted = torch.tensor([i for i, c in enumerate(counts) if c > 0], dtype=torch.long)
    if counted.numel() == 0:
        raise ConfigError("train.notes needs a vocabulary with counts (token<TAB>count lines); this one has none")
    by_count = torch.tensor([counts[i] for i in counted.tolist()], dtype=torch.long)
    rare = BANDS[band.by](band, counted, by_count)
    if rare.numel() == 0:
        lo, hi = band.count_range(int(by_count.sum()))
        where = (f"seen {lo:g}-{hi:g} times (counts: [{band.counts[0]:g}, {band.counts[1]:g}], scale: {band.scale})"
                 if band.by == "count" else f"in the rank band {list(band.ranks)}")
        raise ConfigError(f"train.notes: no word of the vocabulary ({by_count.numel()} counted words) is {where}; "
                          "widen train.notes.counts or band, or remove train.notes")
    return torch.sort(rare).values


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


class AttachedNotes:
    """A model's ``notes`` attribute (a data descriptor): None, or the :class:`NoteDictionary`
    assigned to it, placed (:meth:`NoteDictionary.place`) for the encoder the model keeps at
    attribute ``encoder`` when assigned, so its width is settled before a checkpoint is read."""

    def __init__(self, encoder: str):
        self.encoder = encoder

    def __get__(self, model: Any, owner: type | None = None) -> Any:
        return self if model is None else model.__dict__.get("_notes")

    def __set__(self, model: Any, notes: "NoteDictionary | None") -> None:
        model.__dict__["_notes"] = None if notes is None else notes.place(getattr(model, self.encoder))


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
        in_encoder: True once :meth:`place` put the notes in the encoder's own model-width input
            (then D is H and there is no map); False: mixed into the input layer's vectors.
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
        self.in_encoder = False
        self.to(device)
        self.pending: list[tuple[torch.Tensor, torch.Tensor]] = []

    def place(self, encoder: Any) -> "NoteDictionary":
        """Decide where the notes mix, for a model whose encoder is ``encoder`` (a model calls it
        when the dictionary is attached, before any note is written or a checkpoint read):
        ``settings.place`` (:data:`PLACES`).  In the encoder's own input the notes are as wide as
        its output and need no map.  Returns self."""
        if PLACES[self.settings.place](encoder) and not self.in_encoder:
            if self.seen.any():
                raise ValueError("place() after notes were written")
            self.notes = self.notes.new_zeros(self.notes.shape[0], encoder.output_dim)
            self.projection, self.in_encoder = None, True
        return self

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
        """Apply the notes observed since the last commit, in the order observed, by the
        moving average of ``settings.update`` (:data:`UPDATES`).  ``gather`` (data parallelism)
        returns every process's occurrences in rank order, so every process applies the same
        update."""
        if not self.pending:
            return
        rows = torch.cat([r for r, _ in self.pending])
        means = torch.cat([m for _, m in self.pending])
        self.pending = []
        if gather is not None:
            rows, means = gather(rows, means)
        if rows.numel() == 0:
            return
        hit, at = torch.unique(rows, return_inverse=True)  # the words written, each occurrence's word among them
        counts = torch.bincount(at, minlength=hit.numel()).to(torch.float32)
        self.notes[hit] = UPDATES[self.settings.update](self.notes[hit], self.seen[hit], at, means, counts,
                                                        self.settings.gamma)
        self.seen[hit] = True

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps (plain tensors on the CPU, and the update rule)."""
        return {"row": self.row.cpu(), "notes": self.notes.cpu(), "seen": self.seen.cpu(),
                "projection": None if self.projection is None else self.projection.cpu(),
                "update": self.settings.update, "in_encoder": self.in_encoder}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`; refused (one line) when the checkpoint's rare words,
        width, placement or update rule differ from this run's (a checkpoint written before issue 47
        was updated per step and mixed into the input layer's vectors)."""
        if state["notes"].shape != self.notes.shape or not torch.equal(state["row"], self.row.cpu()):
            raise ConfigError("the checkpoint's notes are for another band of rare words or width (before issue 47 "
                              "the defaults were band_by: rank, band: [0.2, 1.0], place: input); rerun with "
                              "--no-resume, or keep train.notes and the vocabulary as they were")
        mixed = bool(state.get("in_encoder", False))
        if mixed != self.in_encoder:
            raise ConfigError(f"the checkpoint's notes were mixed {_WHERE[mixed]}, this run's "
                              f"{_WHERE[self.in_encoder]}; "
                              f"set train.notes.place: {'model' if mixed else 'input'} to resume, or rerun with "
                              "--no-resume")
        saved = state.get("update", "step")
        if saved != self.settings.update:
            raise ConfigError(f"the checkpoint's notes were updated with train.notes.update: {saved}, this run has "
                              f"{self.settings.update}; set update: {saved} to resume, or rerun with --no-resume")
        device = self.notes.device
        self.row, self.notes, self.seen = state["row"].to(device), state["notes"].to(device), state["seen"].to(device)
        self.projection = None if state["projection"] is None else state["projection"].to(device)


def _moving_average_per_step(old: torch.Tensor, seen: torch.Tensor, at: torch.Tensor, means: torch.Tensor,
                             counts: torch.Tensor, gamma: float) -> torch.Tensor:
    """``update: step``: each word's occurrences averaged into one note, then one step of the
    moving average (a word's first note taken as it is)."""
    step = torch.zeros_like(old).index_add_(0, at, means) / counts.unsqueeze(-1)
    return torch.where(seen.unsqueeze(-1), (1.0 - gamma) * old + gamma * step, step)


def _moving_average_per_occurrence(old: torch.Tensor, seen: torch.Tensor, at: torch.Tensor, means: torch.Tensor,
                                   counts: torch.Tensor, gamma: float) -> torch.Tensor:
    """``update: occurrence`` (the paper's eq. 3 applied at every occurrence, in order): for a
    word with notes m_0 .. m_(n-1) in this commit, ``Note <- (1 - gamma)^n Note + sum_j gamma
    (1 - gamma)^(n-1-j) m_j``; a word without a note takes m_0 as it is, then the rest in turn
    (m_0's weight (1 - gamma)^(n-1), no old note).  Computed in closed form (one scatter-add)."""
    order = torch.argsort(at, stable=True)
    first = (torch.cumsum(counts, 0) - counts).long()  # where each word's occurrences start in `order`
    nth = torch.empty_like(at)
    nth[order] = torch.arange(at.numel(), device=at.device) - first[at[order]]
    later = counts[at] - 1 - nth  # the word's occurrences after this one
    weight = torch.where(seen[at] | (nth > 0), gamma * (1.0 - gamma) ** later, (1.0 - gamma) ** later)
    new = torch.zeros_like(old).index_add_(0, at, means * weight.unsqueeze(-1).to(means.dtype))
    return new + torch.where(seen, (1.0 - gamma) ** counts, 0.0).unsqueeze(-1) * old


# train.notes.update: the new notes of the words written in one commit, from (their notes (M, D), seen (M,),
# each occurrence's word among them (N,), the occurrences' notes (N, D), occurrences per word (M,), gamma)
UPDATES: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float],
                            torch.Tensor]] = {
    "occurrence": _moving_average_per_occurrence, "step": _moving_average_per_step}


_WHERE = {True: "in the encoder's own input (place: model)", False: "into the input layer's vectors"}

# train.notes.place: whether the notes mix in the encoder's own model-width input, for an encoder
PLACES: dict[str, Callable[[Any], bool]] = {
    "model": lambda encoder: bool(getattr(encoder, "mixes_embedded", False)), "input": lambda encoder: False}
