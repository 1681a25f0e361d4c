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
  data: the demo config's ``sst5`` section, kept out of its ``tasks.run``); binary.
  When ``dev``/``test`` are not given, the ``train`` file is split
  deterministically: line i goes to dev when ``i % 5 == 3``, to test when
  ``i % 5 == 4`` (keeps both classes balanced whatever the line order).
* ``json-tar``: labelled sentences in JSON files inside a (gzipped) tarball, each
  file a list of ``{"text": "...", "class": 0|1}``: the UCI "Sentiment Labelled
  Sentences" (Kotzias et al., KDD 2015; 1000 Amazon, IMDb and Yelp review
  sentences each) as shipped in the npm package ``sentiment`` 5.0.2, used by the
  offline demo.  ``train`` is the tarball, ``members`` the JSON files in it.  A
  record with empty text and ``"class": null`` is skipped (each of those files
  ends with one).  Texts are tokenized like the demo corpus's raw text
  (:func:`elmoc.data.corpus.tokenize.tokenize`); binary.  The sentences of all members
  are pooled, put in the order of a permutation seeded by ``split_seed``, and
  split by the rule above (3/5 train, 1/5 dev, 1/5 test): an in-domain random
  split, so that every split mixes the three review sources.

Model (BCN, McCann et al. 2017, as in AllenNLP's ``biattentive_classification_network``):
embedding dropout -> ReLU feedforward -> biLSTM encoder -> self bi-attention ->
integrator biLSTM over ``[x; x - ctx; x * ctx]`` -> max/min/mean/self-attentive
pooling -> integrator dropout (on the pooled vector, where AllenNLP applies it) ->
maxout classifier.  The word vectors are frozen as in the paper
(GloVe); ``model.trainable_words: true`` fine-tunes them instead (our shared-data
setting, where the FastText vectors come from a 0.5M-token corpus).
"""
from __future__ import annotations

import json
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import torch
from torch import nn

from elmoc.data.corpus.tokenize import tokenize
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


def read_labelled_json_tar(path: str | Path, members: Sequence[str]) -> list[SentimentInstance]:
    """``{"text": str, "class": 0|1}`` records of JSON list files inside a tarball -> binary instances.

    Members are read in the given order, records in file order; texts are
    tokenized with :func:`elmoc.data.corpus.tokenize.tokenize`.  A record with empty text
    and a null class is skipped; anything else that is not a non-empty text with
    class 0 or 1 is an InputFileError naming the tarball, the member and the record.
    """
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "file not found; check the task's 'train' path or run `elmoc fetch`")
    try:
        archive = tarfile.open(path)
    except (tarfile.TarError, OSError) as e:
        raise InputFileError(path, f"not a readable tar archive ({e}); fetch it again") from None
    out = []
    with archive:
        files = {m.name: m for m in archive.getmembers() if m.isfile()}
        for member in members:
            where = f"{path} (member {member})"
            if member not in files:
                present = sorted(n for n in files if n.endswith(".json"))
                raise InputFileError(path, f"no member {member!r} in the archive; JSON members: {present}")
            raw = archive.extractfile(files[member]).read()
            try:
                records = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                raise InputFileError(where, f"byte {raw[e.start]:#04x} at offset {e.start} is not valid UTF-8"
                                     ) from None
            except ValueError as e:
                raise InputFileError(where, f"not valid JSON: {e}") from None
            if not isinstance(records, list):
                raise InputFileError(where, "expected a JSON list of {'text', 'class'} records, "
                                     f"found {type(records).__name__}")
            for i, record in enumerate(records):
                if not isinstance(record, dict) or "text" not in record or "class" not in record:
                    raise InputFileError(where, f"record {i} must be an object with 'text' and 'class', "
                                         f"found {str(record)[:60]!r}")
                text, label = record["text"], record["class"]
                if not isinstance(text, str):
                    raise InputFileError(where, f"record {i}: 'text' must be a string, found {text!r}")
                if not text.strip() and label is None:
                    continue  # the empty closing record these files carry
                if isinstance(label, bool) or label not in (0, 1):
                    raise InputFileError(where, f"record {i}: 'class' must be 0 or 1, found {label!r}")
                tokens = tokenize(text)
                if not tokens:
                    raise InputFileError(where, f"record {i}: empty text with class {label}")
                out.append(SentimentInstance(tuple(tokens), label))
    if not out:
        raise InputFileError(path, f"no labelled sentences in members {list(members)}")
    return out


def _five_way_split(instances: Sequence[SentimentInstance], split: str) -> list[SentimentInstance]:
    """Position i goes to train when i % 5 < 3, to dev when i % 5 == 3, to test when i % 5 == 4."""
    keep = {"train": lambda i: i % 5 < 3, "dev": lambda i: i % 5 == 3, "test": lambda i: i % 5 == 4}[split]
    return [x for i, x in enumerate(instances) if keep(i)]


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
        format: "ptb" (SST trees), "polarity" (``__label__`` lines) or "json-tar"
            (labelled JSON records in a tarball; see the module doc).
        granularity: "5-class" or "2-class" (ptb only; polarity and json-tar are binary).
        use_subtrees: train on every subtree (ptb only).
        unique_subtrees: keep each distinct (phrase, label) once.
        encoding: of the data files (gensim's polarity file is cp1252; json-tar is UTF-8).
        members: json-tar only: the JSON files inside the ``train`` tarball.
        split_seed: json-tar only: seed of the permutation before the 3/1/1 split.
    """

    metric_name = "accuracy"
    default_model = {
        "pre_encode_dim": 300, "encoder_hidden": 300, "integrator_hidden": 300,
        "embedding_dropout": 0.5, "pre_encode_dropout": 0.25, "integrator_dropout": 0.1,
        "output_dims": [1200, 600], "pool_size": 4, "output_dropouts": [0.2, 0.3, 0.0],
        "layer_norm": False, "feature_dropout": 0.0, "trainable_words": False,
    }
    default_trainer = {"batch_size": 100, "lr": 1e-3, "grad_norm": 5.0, "epochs": 40, "patience": 5}
    default_with_fasttext = True  # BCN's GloVe + ELMo

    def __init__(self, train: str | None = None, dev: str | None = None, test: str | None = None,
                 model: dict[str, Any] | None = None, format: str = "ptb", members: Sequence[str] | None = None,
                 split_seed: int = 1, granularity: str = "5-class", use_subtrees: bool = True,
                 unique_subtrees: bool = False, encoding: str = "utf-8"):
        super().__init__(train, dev, test, model)
        import codecs

        try:
            codecs.lookup(encoding)
        except LookupError:
            raise ConfigError(f"task sst: unknown encoding {encoding!r} (e.g. utf-8, cp1252)") from None
        self.encoding = encoding
        if format not in ("ptb", "polarity", "json-tar"):
            raise ConfigError(f"task sst: format must be 'ptb', 'polarity' or 'json-tar', got {format!r}")
        if format == "json-tar":
            if not members or isinstance(members, str) or not all(isinstance(m, str) and m for m in members):
                raise ConfigError("task sst: format json-tar needs 'members', a list of the JSON files in the "
                                  "train tarball (e.g. [package/test/fixtures/imdb.json])")
            if dev or test:
                raise ConfigError("task sst: format json-tar splits the train tarball itself; leave dev and test unset")
            if isinstance(split_seed, bool) or not isinstance(split_seed, int):
                raise ConfigError(f"task sst: split_seed must be an integer, got {split_seed!r}")
        elif members is not None:
            raise ConfigError("task sst: 'members' applies only to format json-tar")
        self.members, self.split_seed = list(members or []), split_seed
        if granularity not in ("5-class", "2-class"):
            raise ConfigError(f"task sst: granularity must be '5-class' or '2-class', got {granularity!r}")
        self.format, self.granularity = format, granularity
        self.use_subtrees, self.unique_subtrees = bool(use_subtrees), bool(unique_subtrees)
        if len(self.model_options["output_dropouts"]) != len(self.model_options["output_dims"]) + 1:
            raise ConfigError("task sst model: output_dropouts needs one value per output_dims entry plus one for the class layer")
        self.required_data = ("train", "dev", "test") if format == "ptb" else ("train",)

    @property
    def num_classes(self) -> int:
        return 5 if self.format == "ptb" and self.granularity == "5-class" else 2

    def read(self, split: str) -> list[SentimentInstance]:
        if self.format == "json-tar":
            everything = read_labelled_json_tar(self.path("train"), self.members)
            order = np.random.default_rng(self.split_seed).permutation(len(everything))
            return _five_way_split([everything[i] for i in order], split)
        if self.format == "polarity":
            if self.paths.get("dev") and self.paths.get("test"):
                return read_polarity(self.path(split), self.encoding)
            return _five_way_split(read_polarity(self.path("train"), self.encoding), split)
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

    def read_input(self, path: str | Path) -> list[SentimentInstance]:
        """The sentences of ``path`` in the section's format (a polarity file is read whole, not split)."""
        if self.format == "json-tar":
            raise ConfigError(f"{path}: a json-tar task model reads no tarball to predict on; give one sentence "
                              "per line with --input-format sentences")
        if self.format == "polarity":
            return read_polarity(path, self.encoding)
        return super().read_input(path)

    def sentence_instance(self, tokens: Sequence[str]) -> SentimentInstance:
        return SentimentInstance(tuple(tokens), 0)

    def prediction_record(self, instance: SentimentInstance, prediction: Any) -> dict[str, Any]:
        """``{"tokens", "label"}``: the class as the data numbers it (SST 0-4, a binary view 0/1)."""
        return {"tokens": list(instance.tokens), "label": str(int(prediction))}
