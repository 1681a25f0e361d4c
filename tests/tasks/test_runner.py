"""The runner's device handling: every tensor of a batch follows the run's device."""
from __future__ import annotations

import torch

from elmoc.tasks.embedder import TextBatch
from elmoc.tasks.runner import to_device


def test_to_device_reaches_every_tensor_of_a_batch():
    mask = torch.ones(2, 3, dtype=torch.bool)
    text = TextBatch([["a", "b", "c"], ["d", "e", "f"]], mask, torch.zeros(2, 3, dtype=torch.long), torch.zeros(4, 2, 3, 5))
    batch = {"text": text, "label": torch.tensor([0, 1]), "gold_tags": [["O"] * 3] * 2,
             "docs": [{"text": text, "speaker_ids": torch.zeros(6, dtype=torch.long), "genre": 3,
                       "clusters": [[(0, 1), (2, 2)]]}]}
    moved = to_device(batch, torch.device("meta"))  # "meta": a device other than the CPU, on any machine
    assert moved["label"].device.type == "meta"
    for t in (moved["text"], moved["docs"][0]["text"]):
        assert isinstance(t, TextBatch) and t.tokens == text.tokens
        assert t.mask.is_meta and t.word_ids.is_meta and t.features.is_meta and t.features.shape == (4, 2, 3, 5)
    assert moved["docs"][0]["speaker_ids"].is_meta and moved["docs"][0]["genre"] == 3
    assert moved["docs"][0]["clusters"] == [[(0, 1), (2, 2)]] and moved["gold_tags"] == batch["gold_tags"]
    assert text.mask.device.type == "cpu"  # the original batch is left as it was
    cpu = to_device(batch, torch.device("cpu"))
    assert cpu["label"] is batch["label"]  # .to() of a tensor already there is the tensor itself
