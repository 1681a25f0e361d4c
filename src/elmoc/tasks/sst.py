"""SST sentiment classification with the Biattentive Classification Network (spec 6).

Data formats (``format`` option):

* ``ptb``: the Stanford Sentiment Treebank, one PTB-style tree per line with a
  label 0-4 on every node, e.g. ``(3 (2 The) (4 (2 film) (4 rocks)))``.
  ``granularity: 5-class`` keeps the 5 labels; ``2-class`` is the binary view
  (drops neutral 2, maps 0/1 -> negative, 3/4 -> positive).  With ``use_subtrees``
  every node of a training tree is an instance (AllenNLP's ``use_subtrees``);
  ``unique_subtrees`` keeps each distinct (phrase, label) once (about 159K instead
  of 319K training phrases on SST-5: the CPU-friendly choice).  Dev and test are
  evaluated on whole sentences (the roots).
* ``polarity``: fastText-style lines ``__label__neg text ...`` /
  ``__label__pos text ...`` (the 200 movie-review sentences in gensim's test
  data, used by the offline demo); binary.  When ``dev``/``test`` are not given,
  the ``train`` file is split deterministically: line i goes to dev when
  ``i % 5 == 3``, to test when ``i % 5 == 4`` (keeps both classes balanced
  whatever the line order).

Model (BCN, McCann et al. 2017, as in AllenNLP's ``biattentive_classification_network``):
embedding dropout -> ReLU feedforward -> biLSTM encoder -> self bi-attention ->
integrator biLSTM over ``[x; x - ctx; x * ctx]`` -> max/min/mean/self-attentive
pooling -> integrator dropout (on the pooled vector, where AllenNLP applies it) ->
maxout classifier.  The word vectors are frozen as in the paper
(GloVe); ``model.trainable_words: true`` fine-tunes them instead (our shared-data
setting, where the FastText vectors come from a 0.5M-token corpus).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch
from torch import nn

from elmoc.errors import ConfigError, InputFileError
from elmoc.metrics.accuracy import Accuracy
from elmoc.registry import register
from elmoc.tasks.base import Task, TaskModel, TaskOutput, read_lines
from elmoc.tasks.layers import MaskedLSTM, Maxout, masked_softmax

_TREE_TOKEN = re.compile(r"\(|\)|[^\s()]+")
POLARITY_LABELS = {"__label__neg": 0, "__label__pos": 1}


@dataclass(frozen=True)
class SentimentInstance:
    tokens: tuple[str, ...]
    label: int


@dataclass
class Tree:
    """A labelled PTB tree node: ``label`` and either ``children`` or a ``word`` (leaf)."""

    label: int
    children: list["Tree"]
    word: str | None = None

    def leaves(self) -> list[str]:
        if self.word is not None:
            return [self.word]
        return [w for c in self.children for w in c.leaves()]

    def nodes(self) -> Iterable["Tree"]:
        yield self
        for c in self.children:
            yield from c.nodes()


def parse_tree(text: str, path: str | Path = "<string>", line: int | None = None) -> Tree:
    """Parse one labelled PTB tree; malformed input raises InputFileError(path, ..., line)."""
    tokens = _TREE_TOKEN.findall(text)

    def fail(msg: str) -> InputFileError:
        return InputFileError(path, f"malformed sentiment tree: {msg}", line)

    if not tokens:
        raise fail("empty line")
    pos = 0

    def node() -> Tree:
        nonlocal pos
        if pos >= len(tokens) or tokens[pos] != "(":
            raise fail(f"expected '(' at token {pos + 1}, found {tokens[pos] if pos < len(tokens) else 'end of line'!r}")
        pos += 1
        if pos >= len(tokens) or tokens[pos] in "()":
            raise fail(f"missing label after '(' at token {pos}")
        label_text = tokens[pos]
        if not label_text.isdigit() or not 0 <= int(label_text) <= 4:
            raise fail(f"label {label_text!r} is not an integer 0-4")
        pos += 1
        if pos < len(tokens) and tokens[pos] not in "()":
            words = []  # a leaf may hold several words, e.g. SST's "(2 8 1\/2)" (as nltk reads it)
            while pos < len(tokens) and tokens[pos] not in "()":
                words.append(tokens[pos])
                pos += 1
            if pos >= len(tokens) or tokens[pos] != ")":
                raise fail(f"leaf ({label_text} {' '.join(words)}) is not closed")
            pos += 1
            if len(words) == 1:
                return Tree(int(label_text), [], words[0])
            return Tree(int(label_text), [Tree(int(label_text), [], w) for w in words])
        children = []
        while pos < len(tokens) and tokens[pos] == "(":
            children.append(node())
        if not children:
            raise fail(f"node with label {label_text} has neither a word nor children")
        if pos >= len(tokens) or tokens[pos] != ")":
            raise fail("unbalanced parentheses (missing ')')")
        pos += 1
        return Tree(int(label_text), children)

    tree = node()
    if pos != len(tokens):
        raise fail(f"trailing text after the tree: {' '.join(tokens[pos:pos + 5])!r}")
    return tree


def read_trees(path: str | Path, encoding: str = "utf-8") -> list[Tree]:
    """All trees of a PTB sentiment file (blank lines skipped)."""
    path = Path(path)
    trees = []
    for lineno, line in read_lines(path, encoding):
        if line.strip():
            trees.append(parse_tree(line, path, lineno))
    if not trees:
        raise InputFileError(path, "no trees in file")
    return trees


def read_polarity(path: str | Path, encoding: str = "utf-8") -> list[SentimentInstance]:
    """``__label__neg|__label__pos tokens...`` lines -> binary instances."""
    path = Path(path)
    out = []
    for lineno, line in read_lines(path, encoding):
        if not line.strip():
            continue
        parts = line.split()
        if parts[0] not in POLARITY_LABELS:
            raise InputFileError(path, f"line must start with __label__neg or __label__pos, found {parts[0]!r}", lineno)
        if len(parts) < 2:
            raise InputFileError(path, "label without text", lineno)
        out.append(SentimentInstance(tuple(parts[1:]), POLARITY_LABELS[parts[0]]))
    if not out:
        raise InputFileError(path, "no labelled sentences in file")
    return out


def _map_label(label: int, granularity: str) -> int | None:
    if granularity == "5-class":
        return label
    return None if label == 2 else int(label > 2)


class BiattentiveClassificationNetwork(TaskModel):
    """BCN over a token embedder.

    Shape: batch["text"] is a TextBatch of (batch, time); batch["label"] (batch,) long;
    predictions (batch,) long.
    """

    def __init__(self, embedder: nn.Module, num_classes: int, pre_encode_dim: int, encoder_hidden: int,
                 integrator_hidden: int, embedding_dropout: float, pre_encode_dropout: float,
                 integrator_dropout: float, output_dims: Sequence[int], pool_size: int,
                 output_dropouts: Sequence[float]):
        super().__init__()
        self.embedder = embedder
        self.embedding_dropout = nn.Dropout(embedding_dropout)
        self.pre_encode = nn.Sequential(nn.Linear(embedder.output_dim, pre_encode_dim), nn.ReLU(), nn.Dropout(pre_encode_dropout))
        self.encoder = MaskedLSTM(pre_encode_dim, encoder_hidden)
        self.integrator = MaskedLSTM(3 * self.encoder.output_dim, integrator_hidden)
        self.integrator_dropout = nn.Dropout(integrator_dropout)
        width = self.integrator.output_dim
        self.self_attentive = nn.Linear(width, 1)
        self.output = Maxout(4 * width, list(output_dims) + [num_classes], pool_size, output_dropouts)

    def forward(self, batch: dict) -> TaskOutput:
        text = batch["text"]
        mask = text.mask  # (B, T)
        x = self.pre_encode(self.embedding_dropout(self.embedder(text)))
        encoded = self.encoder(x, mask)  # (B, T, 2H)
        attention = masked_softmax(encoded @ encoded.transpose(1, 2), mask[:, None, :])  # (B, T, T)
        context = attention @ encoded
        integrated = self.integrator(torch.cat([encoded, encoded - context, encoded * context], dim=-1), mask)
        m = mask.unsqueeze(-1)
        max_pool = integrated.masked_fill(~m, -1e7).max(dim=1).values
        min_pool = integrated.masked_fill(~m, 1e7).min(dim=1).values
        mean_pool = (integrated * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)
        weights = masked_softmax(self.self_attentive(integrated).squeeze(-1), mask)  # (B, T)
        self_pool = (weights.unsqueeze(-1) * integrated).sum(dim=1)
        pooled = torch.cat([max_pool, min_pool, mean_pool, self_pool], dim=-1)  # (B, 4 * width)
        logits = self.output(self.integrator_dropout(pooled))  # (B, C): dropout after pooling, as AllenNLP's BCN
        loss = nn.functional.cross_entropy(logits, batch["label"])
        return TaskOutput(loss, logits.argmax(dim=-1))


@register("task", "sst")
class SstTask(Task):
    """Sentiment classification (SST-5 / SST-2 / polarity demo) with BCN.

    Args:
        format: "ptb" (SST trees) or "polarity" (``__label__`` lines).
        granularity: "5-class" or "2-class" (ptb only; polarity is always binary).
        use_subtrees: train on every subtree (ptb only).
        unique_subtrees: keep each distinct (phrase, label) once.
        encoding: of the data files (gensim's polarity file is cp1252).
    """

    metric_name = "accuracy"
    default_model = {
        "pre_encode_dim": 300, "encoder_hidden": 300, "integrator_hidden": 300,
        "embedding_dropout": 0.5, "pre_encode_dropout": 0.25, "integrator_dropout": 0.1,
        "output_dims": [1200, 600], "pool_size": 4, "output_dropouts": [0.2, 0.3, 0.0],
        "layer_norm": False, "feature_dropout": 0.0, "trainable_words": False,
    }
    default_trainer = {"batch_size": 100, "lr": 1e-3, "grad_norm": 5.0, "epochs": 40, "patience": 5}

    def __init__(self, train: str | None = None, dev: str | None = None, test: str | None = None,
                 model: dict[str, Any] | None = None, format: str = "ptb", granularity: str = "5-class",
                 use_subtrees: bool = True, unique_subtrees: bool = False, encoding: str = "utf-8"):
        super().__init__(train, dev, test, model)
        import codecs

        try:
            codecs.lookup(encoding)
        except LookupError:
            raise ConfigError(f"task sst: unknown encoding {encoding!r} (e.g. utf-8, cp1252)") from None
        self.encoding = encoding
        if format not in ("ptb", "polarity"):
            raise ConfigError(f"task sst: format must be 'ptb' or 'polarity', got {format!r}")
        if granularity not in ("5-class", "2-class"):
            raise ConfigError(f"task sst: granularity must be '5-class' or '2-class', got {granularity!r}")
        self.format, self.granularity = format, granularity
        self.use_subtrees, self.unique_subtrees = bool(use_subtrees), bool(unique_subtrees)
        if len(self.model_options["output_dropouts"]) != len(self.model_options["output_dims"]) + 1:
            raise ConfigError("task sst model: output_dropouts needs one value per output_dims entry plus one for the class layer")
        self.required_data = ("train",) if format == "polarity" else ("train", "dev", "test")

    @property
    def num_classes(self) -> int:
        return 5 if self.format == "ptb" and self.granularity == "5-class" else 2

    def read(self, split: str) -> list[SentimentInstance]:
        if self.format == "polarity":
            if self.paths.get("dev") and self.paths.get("test"):
                return read_polarity(self.path(split), self.encoding)
            everything = read_polarity(self.path("train"), self.encoding)
            keep = {"train": lambda i: i % 5 < 3, "dev": lambda i: i % 5 == 3, "test": lambda i: i % 5 == 4}[split]
            return [x for i, x in enumerate(everything) if keep(i)]
        out: list[SentimentInstance] = []
        seen: set[SentimentInstance] = set()
        for tree in read_trees(self.path(split), self.encoding):
            nodes = tree.nodes() if (split == "train" and self.use_subtrees) else [tree]
            for node in nodes:
                label = _map_label(node.label, self.granularity)
                if label is None:
                    continue
                inst = SentimentInstance(tuple(node.leaves()), label)
                if self.unique_subtrees and split == "train":
                    if inst in seen:
                        continue
                    seen.add(inst)
                out.append(inst)
        return out

    def sentences(self, instances: Sequence[SentimentInstance]) -> Iterable[list[str]]:
        return (list(x.tokens) for x in instances)

    def length(self, instance: SentimentInstance) -> int:
        return len(instance.tokens)

    def build_model(self, inputs) -> BiattentiveClassificationNetwork:
        o = dict(self.model_options)
        embedder = inputs.embedder(layer_norm=o.pop("layer_norm"), feature_dropout=o.pop("feature_dropout"),
                                   trainable_words=o.pop("trainable_words"))
        return BiattentiveClassificationNetwork(embedder, self.num_classes, **o)

    def collate(self, instances: Sequence[SentimentInstance], inputs) -> dict:
        return {
            "text": inputs.encode([x.tokens for x in instances]),
            "label": torch.tensor([x.label for x in instances], dtype=torch.long),
        }

    def new_metric(self) -> Accuracy:
        return Accuracy("label")
