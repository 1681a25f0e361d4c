"""A task that is not part of elmoc: binary classification of ``label<TAB>text`` lines.

The one file a new task takes (docs/architecture.md): the tests load it as a plug-in
(``ELMOC_PLUGINS``), the workflow schedules it like a shipped task, and the contract of
``elmoc.tasks.base`` is all it relies on.  Labels are 0 or 1; text is split on whitespace.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from elmoc.errors import InputFileError
from elmoc.metrics.accuracy import Accuracy
from elmoc.registry import register
from elmoc.tasks.base import Task, TaskModel, TaskOutput, read_lines


@dataclass
class LabelledText:
    tokens: list[str]
    label: int  # the gold class: the majority baseline of the tables reads it


class MeanPoolClassifier(TaskModel):
    """Mean of the token vectors -> dropout -> two logits.

    Shape:
        forward(batch) with batch["text"] a TextBatch of (batch, time) and batch["label"]
        (batch,) long -> TaskOutput(loss: scalar mean cross-entropy, predictions: (batch,) long).
    """

    def __init__(self, embedder: nn.Module, dropout: float):
        super().__init__()
        self.embedder = embedder
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(embedder.output_dim, 2)

    def forward(self, batch: dict) -> TaskOutput:
        text = batch["text"]
        mask = text.mask.unsqueeze(-1).float()  # (B, T, 1)
        pooled = (self.embedder(text) * mask).sum(dim=1) / mask.sum(dim=1)  # (B, D)
        logits = self.out(self.dropout(pooled))  # (B, 2)
        return TaskOutput(nn.functional.cross_entropy(logits, batch["label"]), logits.argmax(dim=-1))


@register("task", "tsv_binary")
class TsvBinaryTask(Task):
    """Binary classification of ``label<delimiter>text`` lines.

    Args:
        train, dev, test: the TSV files.
        model: ``dropout`` (default 0.1).
        delimiter: between the label and the text.
    """

    metric_name = "accuracy"
    default_model = {"dropout": 0.1}
    default_trainer = {"batch_size": 4, "epochs": 20, "patience": 20}
    default_with_fasttext = True

    def __init__(self, train: str | None = None, dev: str | None = None, test: str | None = None,
                 model: dict | None = None, delimiter: str = "\t"):
        super().__init__(train, dev, test, model)
        self.delimiter = delimiter

    def read(self, split: str) -> list[LabelledText]:
        path = self.path(split)
        instances = []
        for number, line in read_lines(path):
            if not line.strip():
                continue
            label, found, text = line.partition(self.delimiter)
            if not found or label not in ("0", "1") or not text.split():
                raise InputFileError(path, f"expected 0 or 1, the delimiter {self.delimiter!r}, then text", number)
            instances.append(LabelledText(text.split(), int(label)))
        return instances

    def sentences(self, instances):
        return [x.tokens for x in instances]

    def build_model(self, inputs) -> MeanPoolClassifier:
        return MeanPoolClassifier(inputs.embedder(), self.model_options["dropout"])

    def collate(self, instances, inputs) -> dict:
        return {"text": inputs.encode([x.tokens for x in instances]),
                "label": torch.tensor([x.label for x in instances], dtype=torch.long)}

    def new_metric(self) -> Accuracy:
        return Accuracy("label")
