"""TNF's notes for rare words (:mod:`elmoc.nn.notes`) as a hook of the training loop.

With ``train.notes`` the run's :class:`~elmoc.nn.notes.NoteDictionary` is set as the model's
plain attribute ``notes`` (its forward mixes notes in and records the windows' outputs); after
every step the hook commits what the step recorded (under DDP: every process's rows), and
``checkpoint.pt`` keeps the dictionary under ``notes`` (never ``model.pt``).
"""
from __future__ import annotations

from typing import Any

import torch

from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.errors import ConfigError
from elmoc.lm import BidirectionalLM
from elmoc.masked_lm import MaskedLM
from elmoc.nn.notes import NoteDictionary, rare_ids
from elmoc.registry import register
from elmoc.train.distributed import gather_note_rows
from elmoc.train.hooks.base import TrainHook
from elmoc.train.settings import TrainSettings


def build_notes(spec: dict[str, Any], settings: TrainSettings, vocab: Vocabulary | None,
                core: torch.nn.Module, device: torch.device) -> NoteDictionary | None:
    """The note dictionary of a run with ``train.notes`` (TNF, :mod:`elmoc.nn.notes`), or None.

    Its rare words come from the vocabulary's counts (a subword LM's: from the word
    vocabulary ``train.notes.words``, its batches naming each piece's word); it is as wide as
    the input layer, and its map from the encoder's output width (when that differs) is drawn
    from ``train.seed`` (the same on every process).
    """
    note_settings = settings.note_settings
    if note_settings is None:
        return None
    if (spec.get("data") or {}).get("tokenizer"):
        if note_settings.words is None:
            raise ConfigError("train.notes keeps one note per word, but this spec reads subword pieces "
                              "(data.tokenizer): set train.notes.words to the word vocabulary (e.g. "
                              "results/vocab/vocab.txt) whose counts give the rare words")
        if isinstance(core, MaskedLM):
            raise ConfigError("train.notes on subword pieces is for next-word LMs; a masked LM with "
                              "data.tokenizer takes no notes: remove train.notes")
        vocab = Vocabulary.load(note_settings.words)
    elif note_settings.words is not None:
        raise ConfigError("train.notes.words is for subword LMs (data.tokenizer); a word LM's notes take the "
                          "spec's vocab: remove train.notes.words")
    if vocab is None:
        raise ConfigError("train.notes needs the vocabulary with its counts (set `vocab:` in the LM spec)")
    encoder = core.forward_encoder if isinstance(core, BidirectionalLM) else core.encoder
    return NoteDictionary(note_settings, rare_ids(vocab.counts, note_settings.band), len(vocab),
                          core.input_layer.output_dim, encoder.output_dim, seed=settings.seed, device=device)


@register("train_hook", "notes")
class NotesHook(TrainHook):
    """The note dictionary of a run, committed after every step (module docstring).

    Args:
        notes: the dictionary (the model's ``notes``).
        gather: under DDP, the exchange of every process's rows (None: one process).
    """

    def __init__(self, notes: NoteDictionary, gather=None):
        self.notes, self.gather = notes, gather

    @classmethod
    def from_run(cls, trainer: Any) -> "NotesHook | None":
        notes = build_notes(trainer.spec, trainer.settings, trainer.vocab, trainer.core, trainer.device)
        if notes is None:
            return None
        trainer.core.notes = notes
        return cls(notes, gather_note_rows if trainer.ddp.enabled else None)

    def after_step(self, model: torch.nn.Module, step: int) -> None:
        self.notes.commit(self.gather)  # after the step that read them: a note never serves its own window

    def state_dict(self) -> dict[str, Any]:
        return {"notes": self.notes.state_dict()}

    def load_state_dict(self, payload: dict[str, Any]) -> None:
        self.notes.load_state_dict(payload["notes"])
