"""Log-uniform (Zipfian) candidate sampler for the sampled softmax (spec 3.1, P13).

Ids are assumed sorted by descending frequency (our vocabulary is, after its four
specials).  ``P(k) = (log(k+2) - log(k+1)) / log(V+1)`` for ``k in [0, V)``, and a
draw maps a uniform ``u`` to ``floor(exp(u * log(V+1))) - 1``, which has exactly
that distribution (the paper's C++ sampler drew with ``log V``, a mismatch, P13).
Draws are *without replacement*: ids are drawn until ``num_samples`` distinct ones
appear, and the number of draws ("tries") gives each id's expected count
``1 - (1 - P(k))^tries`` (TensorFlow's ``unique=True`` convention).

Why hand-written: PyTorch has no candidate sampler, and the paper's is a compiled
C++/Cython extension.

Streams: draw number ``n`` of process ``rank`` uses a ``torch.Generator`` seeded
from ``(seed, rank, n)`` (mixed by ``numpy.random.SeedSequence``), so under data
parallelism every process draws its own negatives (as bilm-tf did per GPU), and
any draw is reproducible from (seed, rank, step) alone.  The owning module saves
the draw counter in its checkpoint (``get_extra_state``); the rank is set by the
trainer (:func:`elmoc.train.distributed.wrap_model`), so a resumed run continues
every process's stream.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from elmoc.errors import ConfigError


class LogUniformSampler:
    """Unique log-uniform samples over ``num_classes`` frequency-sorted ids.

    Args:
        num_classes: vocabulary size ``V``.
        seed: generator seed (1111 in the paper's code).
    """

    def __init__(self, num_classes: int, seed: int = 1111):
        if not isinstance(num_classes, int) or num_classes < 2:
            raise ConfigError(f"log-uniform sampler needs at least 2 classes, got {num_classes!r}")
        self.num_classes = num_classes
        self.log_range = math.log(num_classes + 1.0)
        self.seed = int(seed)
        self.rank = 0  # this process's rank under data parallelism
        self.draws = 0  # calls of :meth:`sample` so far (checkpointed by the owner)

    def generator(self, rank: int, draw: int) -> torch.Generator:
        """The generator of draw number ``draw`` of process ``rank``."""
        key = np.random.SeedSequence([self.seed, rank, draw]).generate_state(1, dtype=np.uint64)[0]
        return torch.Generator().manual_seed(int(key))

    def probability(self, ids: torch.Tensor) -> torch.Tensor:
        """P(id) per element.  Shape: any; returns float64 of the same shape."""
        ids = ids.to(torch.float64)
        return (torch.log(ids + 2.0) - torch.log(ids + 1.0)) / self.log_range

    def expected_count(self, ids: torch.Tensor, tries: int) -> torch.Tensor:
        """``1 - (1 - P)^tries``, computed as ``-expm1(tries * log1p(-P))`` (float64)."""
        return -torch.expm1(tries * torch.log1p(-self.probability(ids)))

    def sample(self, num_samples: int) -> tuple[torch.Tensor, int]:
        """``num_samples`` distinct ids (CPU long, in draw order) and the number of draws.

        Uses the stream of (seed, :attr:`rank`, :attr:`draws`) and advances :attr:`draws`.
        ``num_samples >= V`` returns every id with ``tries = 0`` (meaning: no sampling;
        the caller uses expected count 1, which turns the loss into the full softmax).
        """
        generator = self.generator(self.rank, self.draws)
        self.draws += 1
        if num_samples >= self.num_classes:
            return torch.arange(self.num_classes), 0
        seen = torch.zeros(self.num_classes, dtype=torch.bool)
        found, tries = 0, 0
        chunk = max(64, 2 * num_samples)
        picked: list[torch.Tensor] = []
        while found < num_samples:
            u = torch.rand(chunk, generator=generator, dtype=torch.float64)
            ids = (torch.exp(u * self.log_range).floor().long() - 1).clamp_(0, self.num_classes - 1)
            # first occurrence of each id inside the chunk and not seen before
            first = torch.zeros(chunk, dtype=torch.bool)
            uniq, inverse = torch.unique(ids, return_inverse=True)
            first_pos = torch.full((uniq.numel(),), chunk, dtype=torch.long).scatter_reduce_(
                0, inverse, torch.arange(chunk), reduce="amin"
            )
            first[first_pos] = True
            new = first & ~seen[ids]
            positions = new.nonzero().squeeze(1)
            need = num_samples - found
            if positions.numel() >= need:
                cut = int(positions[need - 1])
                picked.append(ids[positions[:need]])
                tries += cut + 1
                found = num_samples
            else:
                picked.append(ids[positions])
                seen[ids[positions]] = True
                tries += chunk
                found += positions.numel()
        return torch.cat(picked), tries
