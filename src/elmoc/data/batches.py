"""Stream train shards to LM windows exactly as the paper's code does (spec 1.2, P9).

Per shard:

1. read the lines, drop empty ones, shuffle the sentences;
2. map each sentence to ``[<s>] + ids + [</s>]`` (OOV -> ``<unk>``) and concatenate
   them into one stream ``S`` of length ``N`` (no padding);
3. the backward LM reads ``reversed(S)`` (the whole shard reversed, P6); a joint
   bi-LM (``direction="joint"``) reads both in lockstep (see below);
4. ``L = ((N - 1) // B) * B``; inputs ``S[:L].view(B, -1)``, targets
   ``S[1:L+1].view(B, -1)`` (each row is a contiguous piece of the stream; the tail
   of the shard is dropped, P9);
5. windows are the columns ``[k*bptt, (k+1)*bptt)``; the last one may be shorter;
6. ``mask = inputs > 0`` (``<pad>`` = 0 never occurs without padding, P7).

The shard order is shuffled at the start of each pass.  Randomness is derived,
not carried: the order of pass ``e`` comes from ``numpy.random.default_rng([seed,
e])`` and the sentence order of shard ``j`` in pass ``e`` from
``default_rng([seed, e, j])``.  So a position ``(epoch, shard, window)`` fully
determines every later batch, which is what makes :class:`ShardBatches`
resumable from a checkpoint without saving RNG states.

Data parallelism: the global batch ``B`` (the one the paper's LR schedule uses)
is split into ``world_size`` disjoint, contiguous blocks of ``B / world_size`` rows;
rank ``r`` gets rows ``[r*B/W, (r+1)*B/W)`` of every window.

Joint bi-LMs (:class:`elmoc.lm.BidirectionalLM`, ``train.directions: joint``): with
``direction="joint"`` every batch is a :class:`elmoc.lm.BiLMBatch` of the forward and
the backward window with the same index in the same shard pass (the same position:
one position is checkpointed for both).  The two have equal shapes and token counts,
since the backward stream is the forward one reversed.  Difference from bilm-tf
[inferred from its data code; same loss contract]: its backward batch holds the same
sentences as the forward batch, each reversed within the window, whereas ours is the
window of the shard's reversed stream (the same text read from the other end), as a
separate backward run reads it.

Masked LMs (:class:`elmoc.masked_lm.MaskedLM`, ``train.objective: masked_lm``): with
``direction="masked"`` the rows are the forward stream's inputs (a window reads its words
in both directions at once; there is no next word) and every window is masked by
:class:`elmoc.data.masking.Masking` into a :class:`~elmoc.data.masking.MaskedLMBatch`,
keyed by the same position (pass, shard, window), so a resume masks as the
uninterrupted run did; the draws cover the global batch, so ranks agree with one process.

Speed: a shard is decoded once, split once (boundary tokens are spliced in by
joining the lines with `` </s> <s> ``), and mapped to ids with one C-level
``dict.get(token, <unk>)`` per token (``map`` with ``itertools.repeat``, no Python
frame per token).  Memory: one shard's text and ids.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from functools import partial
from itertools import repeat
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import torch

from elmoc.data.masking import HELDOUT_MASKING_SEED, Masking, MaskedLMBatch
from elmoc.data.vocab.vocabulary import BOS, EOS, UNK_ID, Vocabulary
from elmoc.directions import DIRECTIONS, JOINT, MASKED, RUNS
from elmoc.errors import ConfigError, InputFileError
from elmoc.nn.host_copy import copy_to_device, to_host

log = logging.getLogger(__name__)

READ_DIRECTIONS = RUNS  # what a batcher reads: one direction, both in lockstep (joint), or masked windows


@dataclass
class LMBatch:
    """One training window.

    Shape:
        inputs: (batch, time) long ids; targets: (batch, time) long next-token ids;
        mask: (batch, time) bool, True where the position counts (computed from the
        *inputs*, as in the paper's code, spec P7);
        words: None, or for the subword pieces of an LM with notes (TNF) (batch, time) long:
        each piece's word (:func:`elmoc.nn.notes.piece_words`).
    """

    inputs: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor
    words: torch.Tensor | None = None

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "LMBatch":
        """The batch on ``device``; tensors copied from the CPU keep their CPU original
        (:mod:`elmoc.nn.host_copy`), so the step reads padding and ids without a device read."""
        return LMBatch(*(None if t is None else copy_to_device(t, device, non_blocking)
                         for t in (self.inputs, self.targets, self.mask, self.words)))

    @property
    def num_tokens(self) -> int:
        """Counted on the mask's CPU original when it has one (a batch moved by ``to_device``),
        so the trainer's per-step count does not wait for the device."""
        return int(to_host(self.mask).sum())


@dataclass
class BiLMBatch:
    """One training window of a joint bi-LM: the forward window and the backward one.

    Both come from the same shard pass (the backward stream is the forward stream
    reversed), so they have the same shape and token count.
    """

    forward: LMBatch
    backward: LMBatch

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "BiLMBatch":
        return BiLMBatch(self.forward.to(device, non_blocking), self.backward.to(device, non_blocking))

    @property
    def num_tokens(self) -> int:
        """Tokens of both directions (what a joint step processes)."""
        return self.forward.num_tokens + self.backward.num_tokens



def read_shard_lines(path: str | Path) -> list[str]:
    """Non-empty lines of a UTF-8 shard; undecodable bytes, and a NUL byte (which `elmoc corpus`
    replaces, but a shard made by hand may hold), are an error naming the line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputFileError(path, "shard not found; run `elmoc corpus` first") from None
    nul = raw.find(b"\0")  # one memchr over the bytes: no measurable cost beside the decode
    if nul >= 0:
        raise InputFileError(path, "holds a NUL byte (binary data, or a file cut short by a crash): make the shards "
                             "with `elmoc corpus` (it replaces control characters), or remove it from the line",
                             raw.count(b"\n", 0, nul) + 1)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputFileError(path, "not valid UTF-8", raw.count(b"\n", 0, e.start) + 1) from None
    return [line for line in text.split("\n") if line and not line.isspace()]


def sentences_to_stream(lines: Sequence[str], lookup: dict) -> np.ndarray:
    """``[<s>] + ids + [</s>]`` of every line, concatenated: int64 (num_tokens,)."""
    if not lines:
        return np.empty(0, dtype=np.int64)
    tokens = f"{BOS} {f' {EOS} {BOS} '.join(lines)} {EOS}".split()
    return np.fromiter(map(lookup.get, tokens, repeat(UNK_ID)), dtype=np.int64, count=len(tokens))


def stream_to_rows(stream: np.ndarray, batch_size: int, direction: str) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets of a stream, each (batch, columns) int64 (spec 1.2 step 4); a stream
    of (piece, word) pairs (N, 2) gives (batch, columns, 2) each."""
    if direction == "backward":
        stream = stream[::-1]
    n = len(stream)
    length = ((n - 1) // batch_size) * batch_size if n > 0 else 0
    inputs = stream[:length].reshape(batch_size, -1, *stream.shape[1:])
    targets = stream[1:length + 1].reshape(batch_size, -1, *stream.shape[1:])
    return inputs, targets


def num_windows(columns: int, bptt: int) -> int:
    """``(columns - 1) // bptt + 1`` windows, 0 for an empty shard."""
    return (columns - 1) // bptt + 1 if columns > 0 else 0


def shard_order(num_shards: int, seed: int, epoch: int) -> list[int]:
    """Shard indices in the order of pass ``epoch``."""
    return [int(i) for i in np.random.default_rng([seed, epoch]).permutation(num_shards)]


def shuffled_lines(lines: list[str], seed: int, epoch: int, shard: int) -> list[str]:
    """Sentence order of shard ``shard`` (index in the shard list) in pass ``epoch``."""
    order = np.random.default_rng([seed, epoch, shard]).permutation(len(lines))
    return [lines[i] for i in order]


@dataclass(frozen=True)
class BatchPosition:
    """Where the *next* batch comes from: pass, index into that pass's shard order, window."""

    epoch: int = 0
    shard: int = 0
    window: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "BatchPosition":
        try:
            return cls(int(d["epoch"]), int(d["shard"]), int(d["window"]))
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"a batch position needs integer epoch, shard, window; got {d!r}") from None


def _row_slice(batch_size: int, rank: int, world_size: int) -> slice:
    per = batch_size // world_size
    return slice(rank * per, (rank + 1) * per)


def _check_common(batch_size: int, bptt: int, direction: str, rank: int, world_size: int) -> None:
    if batch_size < 1 or bptt < 1:
        raise ConfigError(f"batch_size and bptt must be >= 1, got {batch_size} and {bptt}")
    if direction not in READ_DIRECTIONS:
        raise ConfigError(f"direction must be one of {READ_DIRECTIONS}, got {direction!r}")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ConfigError(f"need 0 <= rank < world_size, got rank={rank} world_size={world_size}")
    if batch_size % world_size:
        raise ConfigError(
            f"the global batch_size {batch_size} must be divisible by world_size {world_size}; "
            f"use e.g. {batch_size - batch_size % world_size or world_size}"
        )


def direction_rows(stream: np.ndarray, batch_size: int, direction: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`stream_to_rows` of one direction, or of both (forward first) for ``"joint"``;
    all of them (batch, columns) with the same number of columns."""
    return [stream_to_rows(stream, batch_size, d) for d in (DIRECTIONS if direction == JOINT else (direction,))]


# window index, the global window's ids (global_batch, time), this process's rows -> its masked batch
Masker = Callable[[int, np.ndarray, slice], MaskedLMBatch]


def forward_strides(a: np.ndarray) -> np.ndarray:
    """``a`` C-contiguous with no negative stride (torch.from_numpy refuses one): numpy calls a
    window of one row and one token of the backward direction's reversed rows contiguous as it is."""
    a = np.ascontiguousarray(a)
    return a.copy() if any(stride < 0 for stride in a.strides) else a


def _windows(rows_of: list[tuple[np.ndarray, np.ndarray]], bptt: int, start: int,
             rows: slice, masker: Masker | None = None) -> Iterator[LMBatch | BiLMBatch | MaskedLMBatch]:
    """Windows ``start, start + 1, ...``: LMBatch for one direction, BiLMBatch (the same
    window of both) for two, ``masker``'s MaskedLMBatch of the inputs when given."""
    for k in range(start, num_windows(rows_of[0][0].shape[1], bptt)):
        if masker is not None:
            yield masker(k, rows_of[0][0][:, k * bptt:(k + 1) * bptt], rows)
            continue
        parts = []
        for inputs, targets in rows_of:
            x = torch.from_numpy(forward_strides(inputs[rows, k * bptt:(k + 1) * bptt]))
            y = torch.from_numpy(forward_strides(targets[rows, k * bptt:(k + 1) * bptt]))
            if x.dim() == 3:  # (piece, word) pairs: the pieces and, for notes, their words
                parts.append(LMBatch(x[..., 0].contiguous(), y[..., 0].contiguous(), x[..., 0] > 0,
                                     x[..., 1].contiguous()))
                continue
            parts.append(LMBatch(x, y, x > 0))
        yield parts[0] if len(parts) == 1 else BiLMBatch(*parts)


class ShardBatches:
    """Resumable iterator of training windows over shuffled shards.

    Args:
        shards: shard files (their list index is the shard id used for seeding).
        vocab: token -> id map.
        batch_size: the *global* batch ``B`` (rows per window over all ranks).
        bptt: window length in tokens (20 in the paper).
        direction: "forward", "backward" (reads each shard's reversed stream),
            "joint" (both, in lockstep: yields BiLMBatch) or "masked" (the forward
            stream's inputs, masked: yields MaskedLMBatch).
        seed: base seed of shard and sentence shuffles.
        epochs: number of passes, None = endless.
        rank, world_size: data-parallel split; this rank gets ``B / world_size`` rows.
        position: resume from here (from :attr:`position` / :meth:`state_dict`).
        stream_fn: lines -> id stream with sentence boundaries, replacing the word
            lookup (e.g. :meth:`elmoc.data.vocab.subword.SubwordEncoder.stream` for ELMo-Sub;
            its (N, 2) stream of (piece, word) pairs gives LMBatch.words, for notes).
        masking: how "masked" windows are masked (default BERT's 15%, 80/10/10).

    Yields:
        LMBatch with inputs/targets (batch / world_size, time) long, mask bool;
        ``time`` = bptt except for a shard's last window (for "joint" a BiLMBatch of
        two such windows, forward and backward).  After each yield
        :attr:`position` is the position of the *next* batch, so a checkpoint taken
        after processing a batch resumes right after it.  :attr:`shard_start` is
        True while the current batch is the first window of a shard (where a
        trainer carrying LSTM state across windows may reset it).
    """

    def __init__(
        self,
        shards: Sequence[str | Path],
        vocab: Vocabulary,
        batch_size: int,
        bptt: int = 20,
        direction: str = "forward",
        seed: int = 1,
        epochs: int | None = None,
        rank: int = 0,
        world_size: int = 1,
        position: BatchPosition | dict | None = None,
        stream_fn: Callable[[list[str]], np.ndarray] | None = None,
        masking: Masking | None = None,
    ):
        _check_common(batch_size, bptt, direction, rank, world_size)
        if not shards:
            raise ConfigError("no shards to batch; run `elmoc corpus` first")
        if epochs is not None and epochs < 1:
            raise ConfigError(f"epochs must be >= 1 or None, got {epochs}")
        self.shards = [Path(p) for p in shards]
        self.lookup = dict(vocab.index)
        self.to_stream = stream_fn or (lambda lines: sentences_to_stream(lines, self.lookup))
        self.masking = (masking or Masking()) if direction == MASKED else None
        self.vocab_size = len(vocab)
        self.batch_size, self.bptt, self.direction = batch_size, bptt, direction
        self.seed, self.epochs = seed, epochs
        self.rows = _row_slice(batch_size, rank, world_size)
        if isinstance(position, dict):
            position = BatchPosition.from_dict(position)
        self.position = position or BatchPosition()
        self.shard_start = False
        if not 0 <= self.position.shard < len(self.shards) or self.position.window < 0 or self.position.epoch < 0:
            raise ConfigError(f"position {self.position} is outside {len(self.shards)} shard(s)")

    def state_dict(self) -> dict:
        """Serializable position of the next batch (store it in the checkpoint)."""
        return self.position.to_dict()

    def shard_rows(self, shard: int, epoch: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Full-batch inputs and targets of one shard in one pass, (batch, columns) int64
        each, per direction read (:func:`direction_rows`)."""
        lines = shuffled_lines(read_shard_lines(self.shards[shard]), self.seed, epoch, shard)
        return direction_rows(self.to_stream(lines), self.batch_size, self.direction)

    def __iter__(self) -> Iterator[LMBatch]:
        pos = self.position
        while self.epochs is None or pos.epoch < self.epochs:
            order = shard_order(len(self.shards), self.seed, pos.epoch)
            for shard_pos in range(pos.shard, len(order)):
                rows_of = self.shard_rows(order[shard_pos], pos.epoch)
                total = num_windows(rows_of[0][0].shape[1], self.bptt)
                if total == 0:
                    log.warning("%s has fewer than batch_size+1=%d tokens: no window, skipped",
                                self.shards[order[shard_pos]], self.batch_size + 1)
                start = pos.window if shard_pos == pos.shard else 0
                masker = None
                if self.masking is not None:
                    masker = partial(_mask_window, self.masking, self.seed, (pos.epoch, shard_pos), self.vocab_size)
                for k, batch in enumerate(_windows(rows_of, self.bptt, start, self.rows, masker), start):
                    if k + 1 < total:
                        self.position = BatchPosition(pos.epoch, shard_pos, k + 1)
                    elif shard_pos + 1 < len(order):
                        self.position = BatchPosition(pos.epoch, shard_pos + 1, 0)
                    else:
                        self.position = BatchPosition(pos.epoch + 1, 0, 0)
                    self.shard_start = k == 0
                    yield batch
            pos = BatchPosition(pos.epoch + 1, 0, 0)
            self.position = pos


def _mask_window(masking: Masking, seed: int, prefix: tuple[int, ...], vocab_size: int, window: int,
                 ids: np.ndarray, rows: slice) -> MaskedLMBatch:
    """:meth:`Masking.apply` keyed by ``(*prefix, window)``."""
    return masking.apply(ids, seed, (*prefix, window), vocab_size, rows)


def iter_heldout(
    path: str | Path,
    vocab: Vocabulary,
    batch_size: int,
    bptt: int = 20,
    direction: str = "forward",
    rank: int = 0,
    world_size: int = 1,
    stream_fn: Callable[[list[str]], np.ndarray] | None = None,
    masking: Masking | None = None,
) -> Iterator[LMBatch | BiLMBatch | MaskedLMBatch]:
    """Windows of a heldout file, built like a training shard but without shuffling
    (BiLMBatch of both directions' windows for ``direction="joint"``; for "masked" the
    MaskedLMBatch of ``masking`` with the fixed seed ``HELDOUT_MASKING_SEED``, keyed by
    the window index, so every evaluation of every run masks the same positions).

    Raises ConfigError when the file has too few tokens for even one window.
    """
    _check_common(batch_size, bptt, direction, rank, world_size)
    lines = read_shard_lines(path)
    stream = stream_fn(lines) if stream_fn is not None else sentences_to_stream(lines, dict(vocab.index))
    rows_of = direction_rows(stream, batch_size, direction)
    if rows_of[0][0].shape[1] == 0:
        raise ConfigError(
            f"{path} has {len(stream)} tokens (with <s>/</s>), fewer than batch_size+1={batch_size + 1}; "
            "lower the evaluation batch size"
        )
    masker = None
    if direction == MASKED:
        masker = partial(_mask_window, masking or Masking(), HELDOUT_MASKING_SEED, (), len(vocab))
    yield from _windows(rows_of, bptt, 0, _row_slice(batch_size, rank, world_size), masker)
