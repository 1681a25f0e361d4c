"""The heldout evaluation: every window through the model, its sums reduced by the output layer.

What the sums mean and which metric they give (perplexity, mean cosine, mean loss) is
the output layer's business (:mod:`elmoc.outputs.heldout`); this module only feeds the
windows, shares them out under data parallelism and handles a joint bi-LM's two directions.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Iterator

import torch

from elmoc.data.batches import BiLMBatch, LMBatch
from elmoc.data.masking import MaskedLMBatch
from elmoc.directions import DIRECTIONS
from elmoc.lm import BidirectionalLM, LanguageModel
from elmoc.masked_lm import MaskedLM
from elmoc.train.distributed import Distributed, all_reduce_sum, shard_rows


def evaluate_heldout(model: LanguageModel | BidirectionalLM | MaskedLM,
                     batches: Iterator[LMBatch | BiLMBatch | MaskedLMBatch],
                     device: torch.device, reset_state: bool, max_windows: int | None = None,
                     ddp: Distributed | None = None) -> dict[str, Any]:
    """Heldout metric of ``model`` over ``batches`` (full softmax for the softmax family).

    Returns ``{"metric", "value", "loss", "eval_tokens"}`` from the output layer's
    ``heldout_reduction``: "perplexity" is exp of the mean NLL; "cosine" is the
    token-weighted mean cosine (higher is better), reported with ``constant_baseline``,
    the mean cosine of the best constant prediction.

    A joint bi-LM (BiLMBatch windows) is evaluated per direction, each carrying its own
    state; the result is the reduction's ``combine`` of the two, with each direction's
    result under ``"forward"`` and ``"backward"``.  A masked LM (MaskedLMBatch windows,
    masked with a fixed seed) is evaluated at its masked positions only: the batch's
    ``mask`` is the chosen positions, ``targets`` the original words.

    Under data parallelism every process calls it with the same ``batches``, evaluates
    rows ``rank::world`` of each window, and the sums are all-reduced: every process
    returns the one-process result.
    """
    ddp = ddp or Distributed()
    joint = isinstance(model, BidirectionalLM)
    lms = {name: model.direction(name) for name in DIRECTIONS} if joint else {None: model}
    sums = {name: lm.output_layer.heldout_sums() for name, lm in lms.items()}
    states: dict[str | None, Any] = dict.fromkeys(lms)
    was_training = model.training
    model.eval()
    for i, batch in enumerate(batches):
        if max_windows is not None and i >= max_windows:
            break
        batch = shard_rows(batch, ddp.rank, ddp.world_size)
        parts = {"forward": batch.forward, "backward": batch.backward} if joint else {None: batch}
        for name, part in parts.items():
            if part.inputs.shape[0] == 0:  # fewer heldout rows than processes
                continue
            part = part.to(device)
            out, states[name] = lms[name].evaluate(part, None if reset_state else states[name])
            sums[name].add(out, part.targets, part.mask)
    model.train(was_training)
    all_reduce = partial(all_reduce_sum, device=device) if ddp.enabled else None
    results = {name: acc.result(all_reduce) for name, acc in sums.items()}
    if joint:
        return model.output_layer.heldout_reduction.combine(results["forward"], results["backward"])
    return results[None]
