"""SNLI natural language inference with ESIM (Chen et al. 2017), spec 6.

Reader: SNLI 1.0 jsonl, one JSON object per line with ``gold_label``,
``sentence1``, ``sentence2``.  Items whose gold label is ``-`` (no annotator
majority) or missing are dropped, as in AllenNLP's reader.  Malformed JSON or a
missing sentence raises InputFileError naming the file and line.

Tokens (``tokenizer``):

* ``spacy``: spaCy's English tokenizer on the raw ``sentence{1,2}``, whitespace tokens
  dropped: what the paper's configuration reads (AllenNLP's ``snli`` reader with its
  default ``WordTokenizer``, a spaCy word splitter; ``config/paper.yaml``).  Needs
  spaCy (``pip install spacy``; the blank English pipeline, no model download);
  AllenNLP 0.9 ran spaCy 2.1, whose rules differ from spaCy 3's in rare cases;
* ``binary_parse`` (default): the ``sentence{1,2}_binary_parse`` leaves when present
  (the release's Stanford-parser PTB tokens), otherwise the whitespace split;
* ``whitespace``: the whitespace split of ``sentence{1,2}`` (the shared-data subset is
  already tokenized).

``dev_every: k`` holds out every k-th training pair as the dev set when no dev file
exists (the shared-data setup trains on the 9.8K SNLI dev pairs and tests on test).

Model (AllenNLP ``esim``): encoder biLSTM -> dot-product soft alignment ->
``[a; b; a - b; a * b]`` enhancement -> ReLU projection -> inference biLSTM ->
max+mean pooling of both sentences -> ReLU feedforward -> 3 logits, initialised as the
configuration's ``initializer`` (:meth:`Esim.reset_parameters`).  Word vectors
(the FastText baseline) are frozen unless ``model.trainable_words: true``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch
from torch import nn

from elmoc.config import check_choice
from elmoc.errors import ConfigError, InputFileError
from elmoc.metrics.accuracy import Accuracy
from elmoc.registry import register
from elmoc.tasks.base import Task, TaskModel, TaskOutput, read_lines
from elmoc.tasks.layers import MaskedLSTM, VariationalDropout, masked_max_mean, masked_softmax

LABELS = ("entailment", "contradiction", "neutral")


@dataclass(frozen=True)
class PairInstance:
    premise: tuple[str, ...]
    hypothesis: tuple[str, ...]
    label: int


TOKENIZERS = ("binary_parse", "spacy", "whitespace")


@lru_cache(maxsize=1)
def spacy_english():
    """spaCy's English tokenizer (the blank pipeline: the same rules as ``en_core_web_sm``'s)."""
    try:
        import spacy
    except ImportError:
        raise ConfigError("task snli: tokenizer 'spacy' (AllenNLP's snli reader) needs spaCy: pip install spacy, "
                          "or set the task's tokenizer to binary_parse") from None
    return spacy.blank("en").tokenizer


def spacy_tokens(text: str) -> list[str]:
    """AllenNLP's ``SpacyWordSplitter``: spaCy's tokens of ``text`` without whitespace tokens."""
    return [t.text for t in spacy_english()(text) if not t.is_space]


def _tokens(item: dict, which: str, path: Path, lineno: int, tokenizer: str = "binary_parse") -> tuple[str, ...]:
    parse = item.get(f"sentence{which}_binary_parse")
    if tokenizer == "binary_parse" and isinstance(parse, str) and parse.strip():
        tokens = [t for t in parse.split() if t not in ("(", ")")]
    else:
        text = item.get(f"sentence{which}")
        if not isinstance(text, str):
            raise InputFileError(path, f"item has no string 'sentence{which}'", lineno)
        tokens = spacy_tokens(text) if tokenizer == "spacy" else text.split()
    if not tokens:
        raise InputFileError(path, f"sentence{which} is empty", lineno)
    return tuple(tokens)


def read_snli(path: str | Path, tokenizer: str = "binary_parse") -> list[PairInstance]:
    """Labelled pairs of an SNLI jsonl file (items without a gold label dropped), tokens by
    ``tokenizer`` (module docstring)."""
    path = Path(path)
    out = []
    for lineno, line in read_lines(path):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputFileError(path, f"invalid JSON ({e.msg} at column {e.colno})", lineno) from None
        if not isinstance(item, dict):
            raise InputFileError(path, "each line must be a JSON object", lineno)
        label = item.get("gold_label")
        if label in (None, "-", ""):
            continue
        if label not in LABELS:
            raise InputFileError(path, f"gold_label {label!r} is not one of {', '.join(LABELS)} or '-'", lineno)
        out.append(PairInstance(_tokens(item, "1", path, lineno, tokenizer), _tokens(item, "2", path, lineno, tokenizer),
                                LABELS.index(label)))
    if not out:
        raise InputFileError(path, "no labelled pairs in file")
    return out


class Esim(TaskModel):
    """ESIM over a token embedder.

    Shape: batch["premise"], batch["hypothesis"]: TextBatch (batch, time_p) / (batch, time_h);
    batch["label"] (batch,) long; predictions (batch,) long.
    """

    def __init__(self, embedder: nn.Module, encoder_hidden: int, projection_dim: int, inference_hidden: int,
                 output_hidden: int, dropout: float, num_classes: int = 3):
        super().__init__()
        self.embedder = embedder
        self.rnn_dropout = VariationalDropout(dropout)
        self.encoder = MaskedLSTM(embedder.output_dim, encoder_hidden)
        width = self.encoder.output_dim
        self.projection = nn.Sequential(nn.Linear(4 * width, projection_dim), nn.ReLU())
        self.inference = MaskedLSTM(projection_dim, inference_hidden)
        self.output = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(4 * self.inference.output_dim, output_hidden), nn.ReLU(),
            nn.Dropout(dropout), nn.Linear(output_hidden, num_classes),
        )
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """AllenNLP ``esim_elmo``'s ``initializer``: feedforward and logit weights Xavier-uniform,
        their biases zero; LSTM ``weight_ih`` Xavier-uniform, ``weight_hh`` orthogonal,
        ``bias_ih`` zero, ``bias_hh`` ``lstm_hidden_bias`` (zero, forget gate 1).  The embedder
        (scalar mix, word table) keeps its own initialisation, as there."""
        for name, p in self.named_parameters():
            if name.startswith("embedder"):
                continue
            if "weight_hh" in name:
                nn.init.orthogonal_(p)
            elif "bias_hh" in name:
                nn.init.zeros_(p)
                hidden = p.shape[0] // 4
                p[hidden: 2 * hidden] = 1.0  # torch's gate order i, f, g, o: the forget gate
            elif "bias" in name:  # linear biases, LSTM bias_ih
                nn.init.zeros_(p)
            elif p.dim() == 2:
                nn.init.xavier_uniform_(p)
            else:
                raise AssertionError(f"ESIM parameter {name} has no initialiser")  # a new layer must say how

    def forward(self, batch: dict) -> TaskOutput:
        p_text, h_text = batch["premise"], batch["hypothesis"]
        p_mask, h_mask = p_text.mask, h_text.mask
        p = self.encoder(self.rnn_dropout(self.embedder(p_text)), p_mask)  # (B, Tp, 2H)
        h = self.encoder(self.rnn_dropout(self.embedder(h_text)), h_mask)  # (B, Th, 2H)
        similarity = p @ h.transpose(1, 2)  # (B, Tp, Th)
        p_attended = masked_softmax(similarity, h_mask[:, None, :]) @ h  # (B, Tp, 2H)
        h_attended = masked_softmax(similarity.transpose(1, 2), p_mask[:, None, :]) @ p  # (B, Th, 2H)
        p_enh = torch.cat([p, p_attended, p - p_attended, p * p_attended], dim=-1)
        h_enh = torch.cat([h, h_attended, h - h_attended, h * h_attended], dim=-1)
        p_inf = self.inference(self.rnn_dropout(self.projection(p_enh)), p_mask)
        h_inf = self.inference(self.rnn_dropout(self.projection(h_enh)), h_mask)
        p_max, p_mean = masked_max_mean(p_inf, p_mask)
        h_max, h_mean = masked_max_mean(h_inf, h_mask)
        logits = self.output(torch.cat([p_mean, p_max, h_mean, h_max], dim=-1))  # (B, 3)
        return TaskOutput(nn.functional.cross_entropy(logits, batch["label"]), logits.argmax(dim=-1))


@register("task", "snli")
class SnliTask(Task):
    """SNLI with ESIM; accuracy.

    Args:
        train, dev, test: SNLI jsonl files.
        model: hyperparameters (paper defaults in ``default_model``).
        dev_every: no dev file: hold out every k-th training pair as dev.
        tokenizer: ``binary_parse`` (default), ``spacy`` (the paper's configuration) or
            ``whitespace`` (module docstring).
    """

    metric_name = "accuracy"
    default_model = {"encoder_hidden": 300, "projection_dim": 300, "inference_hidden": 300, "output_hidden": 300,
                     "dropout": 0.5, "layer_norm": False, "feature_dropout": 0.0,
                     "trainable_words": False}
    default_trainer = {"batch_size": 32, "lr": 4e-4, "grad_norm": 10.0, "epochs": 75, "patience": 5,
                       "plateau_factor": 0.5}
    default_with_fasttext = False  # ESIM uses ELMo only in the paper's configuration

    def __init__(self, train: str | None = None, dev: str | None = None, test: str | None = None,
                 model: dict[str, Any] | None = None, dev_every: int | None = None,
                 tokenizer: str = "binary_parse"):
        super().__init__(train, dev, test, model)
        check_choice(tokenizer, TOKENIZERS, "task snli: tokenizer")
        if tokenizer == "spacy":
            spacy_english()  # a missing spaCy is one line now, not after reading the data
        self.tokenizer = tokenizer
        if dev_every is not None and (not isinstance(dev_every, int) or dev_every < 2):
            raise ConfigError(f"task snli: dev_every must be an integer >= 2 or null, got {dev_every!r}")
        if dev_every and dev:
            raise ConfigError("task snli: give either a dev file or dev_every (hold out every k-th training pair), not both")
        self.dev_every = dev_every
        self.required_data = ("train", "test") if dev_every else ("train", "dev", "test")

    def read(self, split: str) -> list[PairInstance]:
        if self.dev_every and split in ("train", "dev"):
            pairs = read_snli(self.path("train"), self.tokenizer)
            held = split == "dev"
            return [x for i, x in enumerate(pairs) if (i % self.dev_every == 0) == held]
        return read_snli(self.path(split), self.tokenizer)

    def sentences(self, instances: Sequence[PairInstance]) -> Iterable[list[str]]:
        for x in instances:
            yield list(x.premise)
            yield list(x.hypothesis)

    def length(self, instance: PairInstance) -> int:
        return len(instance.premise) + len(instance.hypothesis)

    def build_model(self, inputs) -> Esim:
        o = dict(self.model_options)
        embedder = inputs.embedder(layer_norm=o.pop("layer_norm"), feature_dropout=o.pop("feature_dropout"),
                                   trainable_words=o.pop("trainable_words"))
        return Esim(embedder, **o)

    def collate(self, instances: Sequence[PairInstance], inputs) -> dict[str, Any]:
        return {
            "premise": inputs.encode([x.premise for x in instances]),
            "hypothesis": inputs.encode([x.hypothesis for x in instances]),
            "label": torch.tensor([x.label for x in instances], dtype=torch.long),
        }

    def new_metric(self) -> Accuracy:
        return Accuracy("label")

    def prediction_record(self, instance: PairInstance, prediction: Any) -> dict[str, Any]:
        """``{"premise", "hypothesis", "label"}``, the label one of :data:`LABELS`."""
        return {"premise": list(instance.premise), "hypothesis": list(instance.hypothesis),
                "label": LABELS[int(prediction)]}
