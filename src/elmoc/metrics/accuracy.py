"""Classification accuracy over batches."""
from __future__ import annotations

import torch

from elmoc.metrics.base import Metric


class Accuracy(Metric):
    """Fraction of predictions equal to the gold labels.

    ``update(predictions, batch)`` reads ``batch[label_key]``.

    Shape:
        predictions, batch[label_key]: (batch,) long.
    """

    def __init__(self, label_key: str = "label"):
        self.label_key = label_key
        self.reset()

    def reset(self) -> None:
        self.correct = 0
        self.total = 0

    def update(self, predictions: torch.Tensor, batch: dict) -> None:
        gold = batch[self.label_key]
        if predictions.shape != gold.shape:
            raise ValueError(f"predictions {tuple(predictions.shape)} vs gold {tuple(gold.shape)}")
        self.correct += int((predictions == gold).sum())
        self.total += int(gold.numel())

    def compute(self) -> dict[str, float]:
        return {"accuracy": self.correct / self.total if self.total else 0.0}
