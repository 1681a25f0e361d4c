"""SAMPLED: sampled softmax over a trainable output table (spec 3.1; ELMo's output).

Training: one set of ``num_samples`` unique log-uniform negatives per batch (per
process under data parallelism) shared by every position; logits ``h.w + b - log E[count]`` for the true id and each
negative; a negative equal to a position's own target ("accidental hit") is masked
out; cross entropy with the true logit first.  The output table and bias are
``nn.Embedding(sparse=True)`` so a step touches only the rows it used: their
gradients are sparse and :meth:`sparse_parameters` hands them to a sparse-capable
optimizer (the trainer's SparseAdam / Adagrad), as in the original.  Under data
parallelism DDP ignores them and the touched rows are exchanged explicitly
(:func:`elmoc.train.distributed.average_sparse_gradients`).

On a GPU the training step never waits for the device: the negatives are drawn on
the CPU (the reproducible stream below) and copied asynchronously from pinned
memory, their expected counts are computed on the device, every position is scored
and padding is masked out of the sum (selecting the valid rows would need their
number on the host), and target ids are range-checked on the batch's CPU original.

Evaluation (:meth:`evaluate`) is the exact full softmax over the vocabulary,
computed in chunks of positions so a 800K vocabulary fits in memory; the heldout
metric is its perplexity.

Initialisation follows bilm-tf: table ``N(0, 1/sqrt(d))``, bias 0.
"""
from __future__ import annotations

import math
from typing import Any, Sized

import torch
from torch import nn

from elmoc.errors import ConfigError
from elmoc.nn.host_copy import attach_host_copy, copy_to_device, host_copy
from elmoc.nn.masking import valid_positions
from elmoc.outputs.base import OutputLoss, SoftmaxOutput
from elmoc.outputs.log_uniform import LogUniformSampler
from elmoc.registry import register

# logits per chunk of the full-softmax evaluation (256 MB of float32)
_EVAL_LOGITS_PER_CHUNK = 1 << 26


class SampledSoftmaxBase(SoftmaxOutput):
    """Sampled-softmax training and full-softmax evaluation over rows given by subclasses.

    Subclasses provide :meth:`rows` (output vectors and biases of some ids) and
    :meth:`full_table` (all of them), and :meth:`project` (encoder state ->
    the table's space).  Shapes as :class:`~elmoc.outputs.base.SoftmaxOutput`.
    """

    OPTION_RANGES = {"num_samples": "int > 0"}

    def __init__(self, vocab_size: int, num_samples: int, seed: int):
        super().__init__()
        name = self.registered_name
        if not isinstance(num_samples, int) or num_samples < 1:
            raise ConfigError(f"output {name!r}: num_samples must be a positive integer, got {num_samples!r}")
        self.vocab_size = vocab_size
        self.num_samples = num_samples
        self.sampler = LogUniformSampler(vocab_size, seed)

    # --- hooks -----------------------------------------------------------------------
    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden

    def rows(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Output vectors ``(n, d)`` and biases ``(n,)`` of ``ids (n,)``."""
        raise NotImplementedError

    def full_table(self) -> tuple[torch.Tensor, torch.Tensor]:
        """All output vectors ``(V, d)`` and biases ``(V,)``."""
        raise NotImplementedError

    # --- loss ------------------------------------------------------------------------
    def _check_range(self, targets: torch.Tensor, mask: torch.Tensor) -> None:
        """Target ids of valid positions must be in ``[0, V)``.  Checked on the CPU values
        (the tensor itself on the CPU, else the original ``to_device`` kept), never by a
        device read; a device tensor without one is left to the table lookup's own check."""
        ids = host_copy(targets)
        if ids is None:
            return
        host_mask = host_copy(mask)
        ids = ids[host_mask] if host_mask is not None else ids
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size):
            raise ValueError(f"target ids must be in [0, {self.vocab_size}), got [{int(ids.min())}, {int(ids.max())}]")

    def _select(self, hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor):
        h, y, count = valid_positions(hidden, targets, mask)
        self._check_range(targets, mask)
        return self.project(h), y, count  # (N, d), (N,), scalar

    @staticmethod
    def _flat_targets(targets: torch.Tensor, mask: torch.Tensor, sampled: torch.Tensor) -> torch.Tensor:
        """Targets of every position ``(batch*time,)``; padding gets the first negative's id,
        a row the step touches anyway, so its zero gradient adds no row to the sparse
        gradient (a sparse optimizer would move such a row by its momentum).  The CPU
        original is attached when ``targets``, ``mask`` and ``sampled`` have one (a
        host-resident table then gathers its rows without reading the device)."""
        flat_mask = mask.reshape(-1)
        y = torch.where(flat_mask, targets.reshape(-1), sampled[:1])  # (masked_fill would read the id back)
        host = [host_copy(t) for t in (targets, mask, sampled)]
        if y.device.type != "cpu" and all(t is not None for t in host):
            attach_host_copy(y, torch.where(host[1].reshape(-1), host[0].reshape(-1), host[2][:1]))
        return y

    def forward(self, hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> OutputLoss:
        if not self.training:
            return self.evaluate(hidden, targets, mask)
        if hidden.dim() != 3 or hidden.shape[:2] != targets.shape or targets.shape != mask.shape:
            raise ValueError(
                f"hidden {tuple(hidden.shape)}, targets {tuple(targets.shape)} and mask {tuple(mask.shape)} "
                "must agree on (batch, time)"
            )
        self._check_range(targets, mask)
        valid = mask.reshape(-1)  # (N,) over all batch*time positions
        count = valid.sum().to(hidden.dtype)
        h = self.project(hidden.reshape(-1, hidden.shape[-1]))  # (N, d)
        sampled_cpu, tries = self.sampler.sample(self.num_samples)  # (K,) on the CPU
        sampled = copy_to_device(sampled_cpu, targets.device)  # asynchronous; keeps its CPU original
        y = self._flat_targets(targets, mask, sampled)  # (N,), padding scored, then masked out
        if tries == 0:  # every id taken: expected count 1 for all, i.e. the full softmax
            log_e_true = torch.zeros_like(y, dtype=h.dtype)
            log_e_sampled = torch.zeros(sampled.numel(), dtype=h.dtype, device=h.device)
        else:  # on the ids' device: no round trip through the host
            log_e_true = torch.log(self.sampler.expected_count(y, tries)).to(h.device, h.dtype)
            log_e_sampled = torch.log(self.sampler.expected_count(sampled, tries)).to(h.device, h.dtype)
        w_true, b_true = self.rows(y)  # (N, d), (N,)
        w_s, b_s = self.rows(sampled)  # (K, d), (K,)
        true_logit = (h * w_true).sum(-1) + b_true - log_e_true  # (N,)
        sampled_logits = h @ w_s.t() + (b_s - log_e_sampled)[None, :]  # (N, K)
        hits = sampled[None, :] == y[:, None]
        sampled_logits = sampled_logits.masked_fill(hits, torch.finfo(sampled_logits.dtype).min)
        logits = torch.cat([true_logit[:, None], sampled_logits], dim=1)  # (N, 1 + K)
        loss = torch.logsumexp(logits, dim=1) - true_logit
        return OutputLoss(torch.where(valid, loss, 0.0).sum(), count, {})

    def full_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """Log-probabilities over the whole vocabulary.  Shape: (n, hidden_dim) -> (n, V)."""
        w, b = self.full_table()
        return torch.log_softmax(self.project(hidden) @ w.t() + b, dim=-1)

    @torch.no_grad()
    def evaluate(self, hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> OutputLoss:
        """Exact full-softmax NLL summed over valid tokens (heldout perplexity)."""
        h, y, count = self._select(hidden, targets, mask)
        w, b = self.full_table()
        chunk = max(1, _EVAL_LOGITS_PER_CHUNK // self.vocab_size)
        total = h.new_zeros(())
        for start in range(0, h.shape[0], chunk):
            logits = h[start : start + chunk] @ w.t() + b  # (n, V)
            target = y[start : start + chunk]
            total = total + (torch.logsumexp(logits, dim=-1) - logits.gather(1, target[:, None]).squeeze(1)).sum()
        return OutputLoss(total, count, {})

    def set_process_rank(self, rank: int) -> None:
        """Each process draws its own negatives (stream (seed, rank, step))."""
        self.sampler.rank = int(rank)

    # the draw counter travels with the checkpoint, so a resumed run draws what it would
    # have, on every rank (all ranks draw the same number of times per step, once, or twice
    # for a joint bi-LM, so rank 0's counter is theirs)
    def get_extra_state(self) -> Any:
        return {"sampler_draws": self.sampler.draws}

    def set_extra_state(self, state: Any) -> None:
        if state and "sampler_draws" in state:
            self.sampler.draws = int(state["sampler_draws"])


@register("output", "sampled")
class SampledSoftmaxOutput(SampledSoftmaxBase):
    """Sampled softmax with a trainable sparse output table (SAMPLED / ELMo).

    Args:
        num_samples: negatives per batch (8192 in the paper; >= V means full softmax).
        embedding_dim: width of the output table; if it differs from ``hidden_dim`` a
            ``Linear(hidden_dim -> embedding_dim)`` is added (default: ``hidden_dim``).
        sparse: sparse gradients for the table and bias (default, as the original).
        seed: sampler seed (1111 as in the paper's code).
        hidden_dim, vocab: (context).
    """

    OPTION_RANGES = {"embedding_dim": "int > 0 or null"}

    def __init__(
        self,
        hidden_dim: int,
        vocab: Sized,
        num_samples: int = 8192,
        embedding_dim: int | None = None,
        sparse: bool = True,
        seed: int = 1111,
    ):
        if vocab is None:
            raise ConfigError("output 'sampled' needs the vocabulary (set `vocab:` in the LM spec)")
        super().__init__(len(vocab), num_samples, seed)
        dim = hidden_dim if embedding_dim is None else int(embedding_dim)
        self.projection = nn.Linear(hidden_dim, dim) if dim != hidden_dim else None
        self.sparse = bool(sparse)
        self.weight = nn.Embedding(self.vocab_size, dim, sparse=self.sparse)
        self.bias = nn.Embedding(self.vocab_size, 1, sparse=self.sparse)
        if not self.weight.weight.is_meta:
            nn.init.normal_(self.weight.weight, std=1.0 / math.sqrt(dim))
            nn.init.zeros_(self.bias.weight)

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden if self.projection is None else self.projection(hidden)

    def rows(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.weight(ids), self.bias(ids).squeeze(-1)

    def full_table(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.weight.weight, self.bias.weight.squeeze(-1)

    def sparse_parameters(self) -> list[nn.Parameter]:
        return [self.weight.weight, self.bias.weight] if self.sparse else []

    def direction_shared_parameters(self) -> list[nn.Parameter]:
        return [self.weight.weight, self.bias.weight]
