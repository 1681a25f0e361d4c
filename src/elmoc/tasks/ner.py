"""CoNLL-2003 named-entity recognition with a biLSTM-CRF and a character CNN (spec 6).

Reader: the CoNLL-2003 column format, ``word POS chunk NER`` per line (spaces or
tabs), blank lines between sentences, ``-DOCSTART-`` lines opening documents
(skipped).  NER tags are IOB1 (``I-X`` inside, ``B-X`` only where two chunks of
one type touch) and are converted to BIOUL for the CRF (AllenNLP's
``coding_scheme: BIOUL``).  A line without exactly four columns or a tag that is
not O/I-X/B-X raises InputFileError naming the file and line.

Model (AllenNLP ``crf_tagger`` of ``ner_elmo.jsonnet``): ``[word vectors
(trainable; FastText standing in for GloVe 6B 50-d) ; char CNN ;
scalar mix of LM layers]`` -> dropout -> 2-layer biLSTM -> dropout -> linear tag
scores -> CRF (loss summed over the batch, as AllenNLP's), decoded by the shared
constrained Viterbi with BIOUL constraints.  Metric: the shared span F1 with
conlleval semantics (:mod:`elmoc.metrics.span_f1`), on dev for early stopping and on test.

Word lookup: AllenNLP's NER lowercases tokens for its word embedding, because GloVe 6B
is uncased.  elmoc's vectors are the cased FastText-CC ones (``crawl-300d-2M-subword``),
so by default a word is looked up with its own case (``Apple`` and ``apple`` get their
own vectors, as the LM features and the char CNN see them); ``lowercase: true`` in the
task section looks words up lowercased, as with GloVe 6B.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import torch
from torch import nn

from elmoc.errors import ConfigError, InputFileError
from elmoc.metrics.span_f1 import SpanF1, spans
from elmoc.registry import register
from elmoc.tasks.base import Task, TaskModel, TaskOutput, read_lines
from elmoc.nn.viterbi import allowed_transitions
from elmoc.tasks.crf import ConditionalRandomField
from elmoc.tasks.embedder import padded_ids
from elmoc.tasks.layers import MaskedLSTM

PAD_CHAR, UNK_CHAR = 0, 1


@dataclass(frozen=True)
class TaggedSentence:
    tokens: tuple[str, ...]
    tags: tuple[str, ...]  # BIOUL


def iob1_to_bioul(tags: Sequence[str]) -> list[str]:
    """IOB1 (or IOB2) tags -> BIOUL tags of the same chunks (conlleval chunking)."""
    out = ["O"] * len(tags)
    for kind, first, last in spans(tags):
        if first == last:
            out[first] = f"U-{kind}"
        else:
            out[first] = f"B-{kind}"
            out[last] = f"L-{kind}"
            for i in range(first + 1, last):
                out[i] = f"I-{kind}"
    return out


def read_conll2003(path: str | Path) -> list[TaggedSentence]:
    """Sentences of a CoNLL-2003 file with BIOUL tags."""
    path = Path(path)
    out: list[TaggedSentence] = []
    tokens: list[str] = []
    tags: list[str] = []

    def flush() -> None:
        if tokens:
            out.append(TaggedSentence(tuple(tokens), tuple(iob1_to_bioul(tags))))
            tokens.clear()
            tags.clear()

    for lineno, line in read_lines(path):
        fields = line.split()
        if not fields:
            flush()
            continue
        if fields[0] == "-DOCSTART-":
            flush()
            continue
        if len(fields) != 4:
            raise InputFileError(path, f"expected 4 columns (word POS chunk NER), found {len(fields)}", lineno)
        tag = fields[3]
        if tag != "O" and (tag[:2] not in ("I-", "B-") or len(tag) < 3):
            raise InputFileError(path, f"NER tag {tag!r} is not O, I-TYPE or B-TYPE (IOB1)", lineno)
        tokens.append(fields[0])
        tags.append(tag)
    flush()
    if not out:
        raise InputFileError(path, "no sentences in file")
    return out


class CharCnn(nn.Module):
    """Character CNN word encoder: embed chars -> Conv1d -> ReLU -> max over characters.

    Shape: chars (batch, time, max_chars) long (0 = padding) -> (batch, time, num_filters).
    """

    def __init__(self, num_chars: int, char_dim: int, num_filters: int, width: int):
        super().__init__()
        self.width = width
        self.embedding = nn.Embedding(num_chars, char_dim, padding_idx=PAD_CHAR)
        self.conv = nn.Conv1d(char_dim, num_filters, width)
        self.output_dim = num_filters

    def forward(self, chars: torch.Tensor) -> torch.Tensor:
        batch, time, length = chars.shape
        x = self.embedding(chars.view(batch * time, length)).transpose(1, 2)  # (B*T, C, L)
        x = torch.relu(self.conv(x)).max(dim=2).values  # (B*T, F)
        return x.view(batch, time, -1)


class CrfTagger(TaskModel):
    """biLSTM-CRF over ``[token embedder ; char CNN]``.

    Shape: batch["text"] TextBatch (batch, time); batch["chars"] (batch, time, max_chars) long;
    batch["tag_ids"] (batch, time) long; predictions: list of tag-string lists.
    """

    def __init__(self, embedder: nn.Module, labels: Sequence[str], num_chars: int, char_dim: int,
                 char_filters: int, char_width: int, hidden: int, num_layers: int, dropout: float):
        super().__init__()
        self.labels = list(labels)
        self.embedder = embedder
        self.chars = CharCnn(num_chars, char_dim, char_filters, char_width)
        self.dropout = nn.Dropout(dropout)
        self.encoder = MaskedLSTM(embedder.output_dim + self.chars.output_dim, hidden, num_layers=num_layers, dropout=dropout)
        self.tag_projection = nn.Linear(self.encoder.output_dim, len(labels))
        allowed, start, end = allowed_transitions(self.labels, "BIOUL")
        self.crf = ConditionalRandomField(len(labels), allowed, start, end, start_end_scores=False)

    def forward(self, batch: dict) -> TaskOutput:
        text = batch["text"]
        x = torch.cat([self.embedder(text), self.chars(batch["chars"])], dim=-1)
        scores = self.tag_projection(self.dropout(self.encoder(self.dropout(x), text.mask)))  # (B, T, K)
        loss = self.crf(scores, batch["tag_ids"], text.mask)  # summed over the batch
        predictions = None
        if not self.training:
            predictions = [[self.labels[i] for i in path] for path in self.crf.viterbi(scores, text.mask)]
        return TaskOutput(loss, predictions)


@register("task", "ner")
class NerTask(Task):
    """CoNLL-2003 NER; span F1 (conlleval semantics).

    Args:
        train, dev, test: CoNLL-2003 files (IOB1).
        model: hyperparameters (paper defaults in ``default_model``).
        lowercase: look static word vectors up lowercased (GloVe 6B's habit, AllenNLP's
            ``ner_elmo``); False (default): with the word's own case, as the cased
            FastText-CC table holds it.
    """

    metric_name = "f1"
    default_model = {"char_dim": 16, "char_filters": 128, "char_width": 3, "hidden": 200, "num_layers": 2,
                     "dropout": 0.5, "layer_norm": False, "feature_dropout": 0.0, "trainable_words": True}
    default_trainer = {"batch_size": 64, "lr": 1e-3, "grad_norm": 5.0, "epochs": 75, "patience": 25, "mix_l2": 0.1}
    default_with_fasttext = True  # GloVe (FastText here) + char CNN + ELMo

    def __init__(self, train: str | None = None, dev: str | None = None, test: str | None = None,
                 model: dict[str, Any] | None = None, lowercase: bool = False):
        super().__init__(train, dev, test, model)
        if not isinstance(lowercase, bool):
            raise ConfigError(f"task ner: lowercase must be true or false, got {lowercase!r}")
        self.lowercase_words = lowercase
        self._labels: list[str] | None = None
        self._chars: dict[str, int] | None = None
        self._char_ids: tuple[dict[str, int] | None, dict[str, list[int]]] = (None, {})  # (of _chars, word -> ids)

    def read(self, split: str) -> list[TaggedSentence]:
        return read_conll2003(self.path(split))

    def sentences(self, instances: Sequence[TaggedSentence]) -> Iterable[list[str]]:
        return (list(x.tokens) for x in instances)

    def length(self, instance: TaggedSentence) -> int:
        return len(instance.tokens)

    def _vocabularies(self) -> None:
        """Tag set (every type of train/dev/test, in BIOUL) and characters of the training data."""
        kinds: set[str] = set()
        chars: dict[str, int] = {}
        for split in ("train", "dev", "test"):
            for x in self.read(split):
                kinds.update(t[2:] for t in x.tags if t != "O")
                if split == "train":
                    for token in x.tokens:
                        for c in token:
                            chars.setdefault(c, len(chars) + 2)
        self._labels = ["O"] + [f"{p}-{k}" for k in sorted(kinds) for p in "BILU"]
        self._chars = chars

    def build_model(self, inputs) -> CrfTagger:
        if self._labels is None:
            self._vocabularies()
        o = dict(self.model_options)
        embedder = inputs.embedder(layer_norm=o.pop("layer_norm"), feature_dropout=o.pop("feature_dropout"),
                                   trainable_words=o.pop("trainable_words"))
        return CrfTagger(embedder, self._labels, len(self._chars) + 2, **{
            "char_dim": o["char_dim"], "char_filters": o["char_filters"], "char_width": o["char_width"],
            "hidden": o["hidden"], "num_layers": o["num_layers"], "dropout": o["dropout"]})

    def collate(self, instances: Sequence[TaggedSentence], inputs) -> dict[str, Any]:
        if self._labels is None:
            self._vocabularies()
        text = inputs.encode([x.tokens for x in instances])
        batch, time = text.mask.shape
        width = max(self.model_options["char_width"], max(len(t) for x in instances for t in x.tokens))
        index = {t: i for i, t in enumerate(self._labels)}
        if self._char_ids[0] is not self._chars:  # each word's character ids, looked up once per vocabulary
            self._char_ids = (self._chars, {})
        known, get = self._char_ids[1], self._chars.get
        tokens = [t for x in instances for t in x.tokens]  # token by token, sentence by sentence
        for t in set(tokens).difference(known):
            known[t] = [get(c, UNK_CHAR) for c in t]
        flat = np.fromiter(chain.from_iterable(map(known.__getitem__, tokens)), dtype=np.int64)
        chars = padded_ids([len(t) for t in tokens], flat, width)
        chars = chars.new_zeros(batch * time, width).index_copy_(0, torch.nonzero(text.mask.view(-1)).view(-1), chars)
        chars = chars.view(batch, time, width)
        tag_ids = padded_ids([len(x.tags) for x in instances], [index[t] for x in instances for t in x.tags], time)
        return {"text": text, "chars": chars, "tag_ids": tag_ids, "tags": [list(x.tags) for x in instances]}

    def new_metric(self) -> SpanF1:
        return SpanF1("tags")

    def vocabularies(self) -> dict[str, Any]:
        """``{"labels": [BIOUL tags], "chars": {char: id}}`` (read from the data when not set)."""
        if self._labels is None:
            self._vocabularies()
        return {"labels": list(self._labels), "chars": dict(self._chars)}

    def use_vocabularies(self, saved: dict[str, Any]) -> None:
        self._labels, self._chars = list(saved["labels"]), dict(saved["chars"])

    def sentence_instance(self, tokens: Sequence[str]) -> TaggedSentence:
        return TaggedSentence(tuple(tokens), ("O",) * len(tokens))

    def prediction_record(self, instance: TaggedSentence, prediction: Sequence[str]) -> dict[str, Any]:
        """``{"tokens", "tags"}``: one BIOUL tag per token."""
        return {"tokens": list(instance.tokens), "tags": list(prediction)}
