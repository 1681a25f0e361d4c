"""ADAPTIVE: adaptive softmax (Grave et al. 2017; ELMo-A, spec 3.2).

Built on ``torch.nn.AdaptiveLogSoftmaxWithLoss``: a head over the ``cutoffs[0]``
most frequent ids plus one logit per tail cluster; tail ``i`` projects to
``d / div_value^(i+1)`` dims.  Difference from the paper's code (documented, not
emulated): its *first* tail cluster is not reduced (``d / 4^i`` for ``i = 0, 1,
..``: 512, 128, 32 ...), whereas PyTorch reduces every tail (128, 32, 8 ...), and
its tails have biases while PyTorch's have none.  The paper's cutoffs are not
published; ``config/lm/elmo-a.yaml`` chooses cutoffs that give the paper's 196M
parameters with this layout (see ``elmoc params``).  Unlike the paper's code (P7),
the loss is masked.  The log-probabilities are exactly normalized, so
:meth:`evaluate` is the same computation and the heldout metric is perplexity.

Every parameter gets a gradient at every step: PyTorch skips a tail cluster with no
target in the batch, so the loss adds ``0 * sum(tail weights)`` (a zero gradient
where a cluster is unused).  Data parallelism needs this: DDP (without the costly
``find_unused_parameters``) waits for a gradient of every parameter on every rank,
and a rank whose share of the batch misses a cluster would otherwise stall it.
One process computes the same, so 1 and N processes stay equal (Adam also moves a
parameter whose gradient is zero, by its momentum).
"""
from __future__ import annotations

from typing import Sized

import torch
from torch import nn

from elmoc.errors import ConfigError
from elmoc.nn.masking import valid_positions
from elmoc.outputs.base import OutputLoss, SoftmaxOutput
from elmoc.registry import register


@register("output", "adaptive")
class AdaptiveOutput(SoftmaxOutput):
    """Adaptive softmax over the frequency-sorted vocabulary (shapes as :class:`~elmoc.outputs.base.SoftmaxOutput`).

    Args:
        cutoffs: increasing ids splitting the vocabulary into the head ``[0, c0)`` and
            tail clusters ``[c0, c1), ..., [c_last, V)``; each must be in ``(0, V)``.
            An empty list is the single-cluster case: a plain full softmax (a head
            ``Linear(hidden_dim -> V)``), which PyTorch's class cannot express.
        div_value: tail width divisor (PyTorch's; 4 as the paper's ``reduce_factor``).
        head_bias: bias on the head (the paper's head has one).
        hidden_dim, vocab: (context).
    """

    OPTION_RANGES = {"div_value": "> 0"}

    def __init__(
        self,
        hidden_dim: int,
        vocab: Sized,
        cutoffs: list[int],
        div_value: float = 4.0,
        head_bias: bool = True,
    ):
        super().__init__()
        if vocab is None:
            raise ConfigError("output 'adaptive' needs the vocabulary (set `vocab:` in the LM spec)")
        size = len(vocab)
        if (
            not isinstance(cutoffs, (list, tuple))
            or any(not isinstance(c, int) or isinstance(c, bool) for c in cutoffs)
            or list(cutoffs) != sorted(set(cutoffs))
        ):
            raise ConfigError(f"output 'adaptive': cutoffs must be a non-empty increasing list of integers, got {cutoffs!r}")
        if cutoffs and (cutoffs[0] <= 0 or cutoffs[-1] >= size):
            raise ConfigError(
                f"output 'adaptive': cutoffs {list(cutoffs)} must lie strictly between 0 and the vocabulary "
                f"size {size}; drop or lower the cutoffs beyond it"
            )
        if not div_value >= 1.0:
            raise ConfigError(f"output 'adaptive': div_value must be >= 1, got {div_value}")
        self.vocab_size = size
        self.cutoffs = list(cutoffs)
        if self.cutoffs:
            self.softmax = nn.AdaptiveLogSoftmaxWithLoss(
                hidden_dim, size, self.cutoffs, div_value=float(div_value), head_bias=bool(head_bias)
            )
        else:
            self.head = nn.Linear(hidden_dim, size, bias=bool(head_bias))

    def forward(self, hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> OutputLoss:
        if not self.cutoffs:
            return self._full_softmax(hidden, targets, mask)
        # Host syncs that stay (GPU): selecting the valid rows (one nonzero) and PyTorch's
        # adaptive softmax, which gathers the rows of each cluster (head included) with
        # nonzero, one sync per cluster.  The row counts size the tail products, which is
        # the saving adaptive softmax exists for; scoring every row in every tail instead
        # would cost more than the syncs.
        h, y, count = valid_positions(hidden, targets, mask)  # (N, hidden_dim), (N,)
        if y.numel() == 0:  # zero gradients for the encoder and every weight here
            return OutputLoss(hidden.sum() * 0.0 + self._zero_touch(self.parameters()), count, {})
        log_prob = self._target_log_probs(h, y)  # (N,)
        touch = self._zero_touch(self.softmax.tail.parameters())  # clusters without a target
        return OutputLoss(-log_prob.sum() + touch, count, {})

    def _target_log_probs(self, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """PyTorch's adaptive softmax: (N, hidden_dim), (N,) -> (N,) float32 target log-probabilities.

        It copies each tail cluster's log-probabilities into a tensor of ``h``'s dtype, so
        under bf16 autocast ``h`` is made float32 (when it is 16-bit) and the clusters' log_softmax must come out in
        float32: CUDA autocast computes log_softmax in float32 (its products stay bf16);
        CPU autocast keeps it in bf16, so on the CPU the softmax runs in float32 whole.
        """
        if h.dtype in (torch.float16, torch.bfloat16):
            h = h.float()
        if h.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            with torch.autocast(device_type="cpu", enabled=False):
                return self.softmax(h, y).output
        return self.softmax(h, y).output

    def _full_softmax(self, hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> OutputLoss:
        """No cutoffs: every position scored by the head, padding masked out of the sum
        (no row selection, so no host sync; an all-padding window still gives every
        weight a zero gradient)."""
        if hidden.dim() != 3 or hidden.shape[:2] != targets.shape or targets.shape != mask.shape:
            raise ValueError(f"hidden {tuple(hidden.shape)}, targets {tuple(targets.shape)} and mask "
                             f"{tuple(mask.shape)} must agree on (batch, time)")
        valid = mask.reshape(-1)  # (N,) over all batch*time positions
        y = targets.reshape(-1).masked_fill(~valid, 0)  # padding scored against id 0, then dropped
        logits = self.head(hidden.reshape(-1, hidden.shape[-1]))  # (N, V)
        log_prob = torch.log_softmax(logits, dim=-1).gather(1, y[:, None]).squeeze(1)
        return OutputLoss(torch.where(valid, -log_prob, 0.0).sum(), valid.sum().to(hidden.dtype), {})

    @staticmethod
    def _zero_touch(params) -> torch.Tensor:
        """``0 * sum(p)`` over ``params``: value 0, gradient 0 for each of them."""
        return sum(p.sum() for p in params) * 0.0

    @torch.no_grad()
    def evaluate(self, hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> OutputLoss:
        return self.forward(hidden, targets, mask)

    def full_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """Shape: (n, hidden_dim) -> (n, V)."""
        if self.cutoffs:
            return self.softmax.log_prob(hidden)
        return torch.log_softmax(self.head(hidden), dim=-1)

    def direction_shared_parameters(self) -> list[nn.Parameter]:
        return list(self.parameters())
