"""Semantic role labelling on CoNLL-2012 with He et al. (2017)'s deep BIO tagger (spec 6).

Data: OntoNotes 5.0 ``*_gold_conll`` files (a file or a directory searched
recursively, or ``data_dir`` + ``splits``), one instance per predicate
(:func:`elmoc.tasks.conll2012.srl_instances`).  The paper takes SRL "from Pradhan et al.
(2013)" (section 4.1): the OntoNotes train / development / test split of *Towards Robust
Linguistic Analysis using OntoNotes* (the ``conll-formatted-ontonotes-5.0`` v12 release),
the one AllenNLP's SRL model trains and reports on, not the CoNLL-2012 shared task's v4 files.

Model (AllenNLP's ``srl_elmo`` configuration, the one the paper ran):
token embedder (scalar mix of LM layers with dropout, and/or FastText vectors for
the baseline) concatenated with a 100-d embedding of the binary predicate
indicator -> deep alternating highway LSTM (8 x 300, recurrent dropout 0.1;
:mod:`elmoc.nn.alternating_lstm`) -> linear tag projection (orthogonal init) ->
softmax; trained with token-level cross-entropy averaged per sequence (AllenNLP's
``sequence_cross_entropy_with_logits``: the mean over a sentence's tokens, then the
mean over sentences), with every gradient value clipped to [-1, 1] (AllenNLP's
``grad_clipping: 1.0``; ``trainer.grad_value``), Adadelta with rho 0.95 and its
default learning rate 1.0 (``trainer.optimizer: adadelta``; ``adam`` is available).
Decoding is the shared constrained Viterbi over BIO tags (:mod:`elmoc.nn.viterbi`).

Two scores, each named in the metrics JSON:

* ``f1`` (the headline, early stopping, the paper's Table 2 value): AllenNLP's span F1
  over BIO spans without ``V`` (:mod:`elmoc.metrics.span_f1`); ``C-X`` and ``R-X``
  spans are labels of their own;
* ``conll05-f1`` (``extra_scores``): the official CoNLL-2005 script's argument F1
  (:mod:`elmoc.metrics.srl_conll05`), what the rest of the SRL literature reports and
  the paper's footnote 6 mentions: a ``C-X`` piece is merged into its ``X`` and the
  argument counts once, right only if every piece is.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import torch
from torch import nn

from elmoc.errors import ConfigError
from elmoc.metrics.base import Metric
from elmoc.metrics.span_f1 import SpanF1
from elmoc.metrics.srl_conll05 import Conll05Score
from elmoc.nn.alternating_lstm import AlternatingHighwayLstm
from elmoc.nn.viterbi import allowed_transitions, constraint_scores, viterbi_decode
from elmoc.registry import register
from elmoc.tasks.base import Task, TaskModel, TaskOutput
from elmoc.tasks.conll2012 import DEFAULT_LANGUAGE, SrlInstance, read_conll2012, resolve_conll_paths, srl_instances

IGNORE_TAG = -100  # gold tags not seen in training: no loss, still scored by the metric


class SrlTagger(TaskModel):
    """Predicate-conditioned BIO tagger.

    Args:
        embedder: a TokenEmbedder (``output_dim`` attribute).
        labels: the tag strings, index = tag id.
        hidden_dim, num_layers, recurrent_dropout: of the alternating LSTM.
        predicate_dim: size of the predicate-indicator embedding.

    Shape:
        batch["text"]: TextBatch (batch, time); batch["predicate"]: (batch, time) long 0/1;
        batch["tags"]: (batch, time) long tag ids (IGNORE_TAG at padding / unknown tags).
        predictions: list of tag-string lists, one per sentence (Viterbi decoded; None in training).
    """

    def __init__(self, embedder: nn.Module, labels: Sequence[str], hidden_dim: int, num_layers: int,
                 recurrent_dropout: float, predicate_dim: int):
        super().__init__()
        self.embedder = embedder
        self.labels = list(labels)
        self.predicate_embedding = nn.Embedding(2, predicate_dim)
        self.encoder = AlternatingHighwayLstm(embedder.output_dim + predicate_dim, hidden_dim, num_layers, recurrent_dropout)
        self.projection = nn.Linear(hidden_dim, len(self.labels))
        nn.init.orthogonal_(self.projection.weight)
        nn.init.zeros_(self.projection.bias)
        transitions, start, _ = allowed_transitions(self.labels, "BIO")
        self.register_buffer("transitions", constraint_scores(transitions), persistent=False)
        self.register_buffer("start", constraint_scores(start), persistent=False)

    def forward(self, batch: dict) -> TaskOutput:
        text = batch["text"]
        mask = text.mask  # (B, T)
        x = torch.cat([self.embedder(text), self.predicate_embedding(batch["predicate"])], dim=-1)
        logits = self.projection(self.encoder(x, mask))  # (B, T, tags)
        log_probs = torch.log_softmax(logits, dim=-1)
        loss = sequence_cross_entropy(log_probs, batch["tags"])
        predictions = None
        if not self.training:
            paths = viterbi_decode(log_probs, mask, self.transitions, self.start)
            predictions = [[self.labels[i] for i in path] for path in paths]
        return TaskOutput(loss, predictions)


def sequence_cross_entropy(log_probs: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """Token NLL averaged over each sequence's scored tokens, then over the sequences that have any.

    Shape: log_probs (batch, time, tags); gold (batch, time) long, IGNORE_TAG = not scored
    (padding, tags unseen in training).  A batch without any scored token gives 0.
    """
    weights = (gold != IGNORE_TAG).to(log_probs.dtype)  # (B, T)
    nll = -log_probs.gather(2, gold.clamp(min=0).unsqueeze(2)).squeeze(2) * weights
    tokens = weights.sum(dim=1)
    per_sequence = nll.sum(dim=1) / tokens.clamp(min=1)
    return per_sequence.sum() / (tokens > 0).sum().clamp(min=1)


class SrlMetric(Metric):
    """Both SRL scores of the same predictions: the span F1's keys (``f1``, ``precision``,
    ``recall``, ``f1-<type>``) and the official score's under ``conll05-`` (``conll05-f1``,
    ``conll05-precision``, ``conll05-recall``, ``conll05-perfect_props``, ``conll05-f1-<type>``)."""

    def __init__(self):
        self.span = SpanF1("gold_tags", ignore_types=("V",))
        self.official = Conll05Score("gold_tags", "predicate_indices")

    def reset(self) -> None:
        self.span.reset()
        self.official.reset()

    def update(self, predictions, batch: dict) -> None:
        self.span.update(predictions, batch)
        self.official.update(predictions, batch)

    def compute(self) -> dict[str, float]:
        return {**self.span.compute(), **{f"conll05-{k}": v for k, v in self.official.compute().items()}}


@register("task", "srl")
class SrlTask(Task):
    """CoNLL-2012 semantic role labelling (span F1 without V, and the official CoNLL-2005 score).

    Args:
        train, dev, test: a ``*_gold_conll`` file or a directory of them.
        data_dir: instead of train/dev/test, a release's data directory: the paper's split
            (Pradhan et al. 2013, "CoNLL-2012 v12") is ``conll-formatted-ontonotes-5.0/data``.
        splits: ``{train, dev, test}`` -> subdirectory of ``data_dir`` (default
            ``train``, ``development``, ``test``).
        language: the ``data/<language>`` subtree read in a split directory (english).
        model: hyperparameters (paper defaults in ``default_model``).
        max_instances: keep only the first N instances of each split (None = all);
            for CPU demos.
    """

    metric_name = "f1"
    metric_label = "span F1 (AllenNLP SpanBasedF1Measure: BIO spans, V ignored; the paper's Table 2 value)"
    extra_metrics = {"conll05-f1": "official CoNLL-2005 script F1 (srl-eval.pl: arguments, C-X merged into X, "
                                   "V ignored; the paper's footnote 6)"}
    default_model = {
        "hidden_dim": 300, "num_layers": 8, "recurrent_dropout": 0.1, "predicate_dim": 100,
        "feature_dropout": 0.1, "layer_norm": False,
    }
    default_trainer = {"batch_size": 80, "optimizer": "adadelta", "rho": 0.95, "lr": 1.0, "grad_norm": None,
                       "grad_value": 1.0, "epochs": 500, "patience": 200, "mix_l2": 1e-3}
    default_with_fasttext = False  # the paper's SRL input is ELMo only (+ predicate indicator)
    merged_options = ("model", "splits")

    def __init__(self, train: str | None = None, dev: str | None = None, test: str | None = None,
                 model: dict[str, Any] | None = None, data_dir: str | None = None,
                 splits: dict[str, str] | None = None, language: str = DEFAULT_LANGUAGE,
                 max_instances: int | None = None):
        paths = resolve_conll_paths("task srl", train, dev, test, data_dir, splits)
        super().__init__(paths["train"], paths["dev"], paths["test"], model)
        self.language = language
        o = self.model_options
        for key in ("hidden_dim", "num_layers", "predicate_dim"):
            if not isinstance(o[key], int) or o[key] < 1:
                raise ConfigError(f"task srl model.{key} must be a positive integer, got {o[key]!r}")
        if max_instances is not None and (not isinstance(max_instances, int) or max_instances < 1):
            raise ConfigError(f"task srl: max_instances must be a positive integer or null, got {max_instances!r}")
        self.max_instances = max_instances
        self.labels: list[str] | None = None

    def missing_data(self) -> str | None:
        """``data_dir (or train)`` when neither is set (either configures the task)."""
        missing = super().missing_data()
        return f"data_dir (or {missing})" if missing else None

    def read(self, split: str) -> list[SrlInstance]:
        if not self.paths.get(split):
            raise ConfigError(f"task srl: no {split!r} path configured (set tasks.srl.{split})")
        instances = list(srl_instances(read_conll2012(self.paths[split], self.language)))
        if self.max_instances:
            instances = instances[: self.max_instances]
        if split == "train":
            self.labels = self.label_set(instances)
        return instances

    @staticmethod
    def label_set(instances: Iterable[SrlInstance]) -> list[str]:
        """``O`` first, then every B-/I- tag of the training data (each role gets both), sorted."""
        roles = {t[2:] for x in instances for t in x.tags if t != "O"}
        return ["O"] + [f"{p}-{r}" for r in sorted(roles) for p in ("B", "I")]

    def sentences(self, instances: Sequence[SrlInstance]) -> Iterable[list[str]]:
        seen: set[tuple[str, ...]] = set()
        for x in instances:
            key = tuple(x.words)
            if key not in seen:
                seen.add(key)
                yield list(x.words)

    def length(self, instance: SrlInstance) -> int:
        return len(instance.words)

    def _labels(self) -> list[str]:
        if self.labels is None:
            self.read("train")
        assert self.labels is not None
        return self.labels

    def build_model(self, inputs) -> SrlTagger:
        o = dict(self.model_options)
        embedder = inputs.embedder(layer_norm=o.pop("layer_norm"), feature_dropout=o.pop("feature_dropout"))
        return SrlTagger(embedder, self._labels(), **o)

    def collate(self, instances: Sequence[SrlInstance], inputs) -> dict:
        index = {t: i for i, t in enumerate(self._labels())}
        text = inputs.encode([x.words for x in instances])
        batch, time = text.mask.shape
        predicate = torch.zeros(batch, time, dtype=torch.long)
        tags = torch.full((batch, time), IGNORE_TAG, dtype=torch.long)
        for b, x in enumerate(instances):
            if x.predicate_index is not None:
                predicate[b, x.predicate_index] = 1
            tags[b, : len(x.tags)] = torch.tensor([index.get(t, IGNORE_TAG) for t in x.tags], dtype=torch.long)
        return {"text": text, "predicate": predicate, "tags": tags, "gold_tags": [list(x.tags) for x in instances],
                "predicate_indices": [x.predicate_index for x in instances]}

    def new_metric(self) -> SrlMetric:
        return SrlMetric()

    def vocabularies(self) -> dict[str, Any]:
        """``{"labels": [BIO tags]}`` of the training data."""
        return {"labels": list(self._labels())}

    def use_vocabularies(self, saved: dict[str, Any]) -> None:
        self.labels = list(saved["labels"])

    def prediction_record(self, instance: SrlInstance, prediction: Sequence[str]) -> dict[str, Any]:
        """``{"tokens", "predicate", "tags"}``: the predicate's token index (None: none) and one BIO tag per token."""
        return {"tokens": list(instance.words), "predicate": instance.predicate_index, "tags": list(prediction)}
