"""Coreference on CoNLL-2012 with Lee et al. (2018)'s higher-order coarse-to-fine span ranker (spec 6).

Data: CoNLL-2012 shared-task ``*_gold_conll`` files (a file or a directory, or
``data_dir`` + ``splits``), one instance per document part, with its sentences,
speakers, genre and gold clusters (:mod:`elmoc.tasks.conll2012`).  The paper's
coreference data is the CoNLL-2012 shared task (Pradhan et al. 2012): the v4 train and
development files (``conll-2012/v4/data/{train,development}``) and the shared-task test
(``conll-2012/v4/data/test`` with the released key; ``conll-2012-test`` in the v12
``conll-formatted-ontonotes-5.0/data`` layout), as e2e-coref builds them.

Model (e2e-coref ``best`` configuration; defaults below are the paper values):

1. Tokens: the shared token embedder (scalar mix of LM layers - e2e-coref's
   ``lm_scores``/``lm_scaling`` mix is the same thing - and/or FastText vectors for
   the baseline) with lexical dropout, then a ``contextualization_layers``-deep
   biLSTM (``contextualization_size`` per direction) per sentence.
2. Spans: every span of up to ``max_span_width`` tokens inside one sentence,
   represented as ``[x_start; x_end; head attention over the span's token
   embeddings; width embedding]``.
3. Mention scores (FFNN), then the top ``top_span_ratio * num_tokens`` spans that do
   not cross an already chosen span (nesting is allowed).
4. Coarse-to-fine antecedents: coarse score ``s_m(i) + s_m(j) + g_i' W g_j`` over
   all earlier top spans, keep the best ``max_top_antecedents``; the fine score adds
   an FFNN over ``[g_i; g_j; g_i * g_j; phi(i, j)]`` with same-speaker, genre and
   bucketed-distance embeddings; the dummy antecedent scores 0.
5. Higher-order inference (``coref_depth`` rounds): attend over the antecedent
   distribution, gate ``f = sigmoid(W [g; a])``, refine ``g <- f * g + (1 - f) * a``,
   rescore.
6. Loss: marginal log-likelihood of all gold antecedents of each top span (the
   dummy when it has none), summed over spans, averaged over the documents of a
   batch.  Optionally (``mention_loss`` > 0; 0 = the paper) plus that weight times
   the binary cross-entropy of every candidate's mention score against "is a gold
   mention", summed over candidates (the auxiliary loss of Xu & Choi 2020).  Without
   it the objective has a degenerate optimum that small data sets reach quickly:
   prune every gold mention and let all kept spans pick the dummy (loss -> 0).

Deviations from Lee et al. (2018), stated here because they change numbers:

* GloVe 840B / ``glove_50_300_2`` head embeddings and the character CNN are
  replaced by the shared token embedder (FastText vectors and/or LM features);
  head attention runs over that embedder's output.
* The contextualization biLSTM layers are plain stacked layers (e2e-coref adds
  highway connections between them).
* Long training documents are cut into consecutive chunks of
  ``max_training_sentences`` sentences when read (e2e-coref picks one random chunk
  per step); dev and test documents are whole.

Trainer (e2e-coref's ``best``): Adam at 1e-3, decayed by 0.999 every 100 optimizer
steps (``trainer.lr_decay`` / ``lr_decay_steps``; e2e-coref's staircase decay),
gradient norm 5.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import torch
from torch import nn

from elmoc.errors import ConfigError
from elmoc.metrics.coref import CorefScores
from elmoc.registry import register
from elmoc.tasks.base import Metric, Task, TaskModel, TaskOutput
from elmoc.tasks.conll2012 import DEFAULT_LANGUAGE, ConllDocument, read_conll2012, resolve_conll_paths
from elmoc.tasks.layers import MaskedLSTM, masked_softmax

GENRES = ("bc", "bn", "mz", "nw", "pt", "tc", "wb")  # OntoNotes genres; anything else shares one extra row
NUM_DISTANCE_BUCKETS = 10

Span = tuple[int, int]


@dataclass
class CorefInstance:
    """One document part (or a training chunk of one).

    Attributes:
        doc_key: e2e-coref key ``<doc id>_<part>`` (plus ``#<chunk>`` for training chunks).
        genre: two-letter genre.
        sentences: token lists.
        speakers: speaker of every token of the document (flattened).
        clusters: gold clusters of inclusive document-level ``(start, end)`` offsets.
    """

    doc_key: str
    genre: str
    sentences: list[list[str]]
    speakers: list[str]
    clusters: list[list[Span]]

    @property
    def num_tokens(self) -> int:
        return sum(len(s) for s in self.sentences)


def document_instances(doc: ConllDocument, max_sentences: int | None = None) -> list[CorefInstance]:
    """The document as one instance, or as chunks of at most ``max_sentences`` sentences.

    Mentions of a chunk keep their clusters; offsets are re-based on the chunk.
    """
    sentences = [s.words for s in doc.sentences if s.words]
    speakers = doc.speakers
    clusters = doc.clusters
    if not max_sentences or len(sentences) <= max_sentences:
        return [CorefInstance(doc.doc_key, doc.genre, sentences, speakers, clusters)]
    starts = doc.sentence_starts + [len(speakers)]
    out = []
    for k, first in enumerate(range(0, len(sentences), max_sentences)):
        last = min(first + max_sentences, len(sentences))
        lo, hi = starts[first], starts[last]
        chunk_clusters = []
        for cluster in clusters:
            inside = [(a - lo, b - lo) for a, b in cluster if lo <= a and b < hi]
            if inside:
                chunk_clusters.append(inside)
        out.append(CorefInstance(f"{doc.doc_key}#{k}", doc.genre, sentences[first:last], speakers[lo:hi], chunk_clusters))
    return out


def distance_bucket(distance: torch.Tensor) -> torch.Tensor:
    """e2e-coref's buckets [0, 1, 2, 3, 4, 5-7, 8-15, 16-31, 32-63, 64+] of non-negative ints (long)."""
    log_index = torch.floor(torch.log2(distance.clamp(min=1).float())).long() + 3
    return torch.where(distance <= 4, distance, log_index).clamp(max=NUM_DISTANCE_BUCKETS - 1)


def feedforward(input_dim: int, hidden: int, depth: int, dropout: float, output_dim: int = 1) -> nn.Sequential:
    """``depth`` ReLU layers of ``hidden`` units with dropout, then a linear output."""
    layers: list[nn.Module] = []
    dim = input_dim
    for _ in range(depth):
        layers += [nn.Linear(dim, hidden), nn.ReLU(), nn.Dropout(dropout)]
        dim = hidden
    layers.append(nn.Linear(dim, output_dim))
    return nn.Sequential(*layers)


def select_non_crossing(starts: list[int], ends: list[int], order: list[int], k: int) -> list[int]:
    """First ``k`` span indices in ``order`` (best first) that cross no earlier choice.

    Two spans cross when they overlap without one containing the other.  Returns
    the chosen indices sorted by (start, end).
    """
    chosen: list[int] = []
    for i in order:
        if len(chosen) == k:
            break
        s, e = starts[i], ends[i]
        if any((s < starts[j] <= e < ends[j]) or (starts[j] < s <= ends[j] < e) for j in chosen):
            continue
        chosen.append(i)
    return sorted(chosen, key=lambda i: (starts[i], ends[i]))


class CorefModel(TaskModel):
    """Lee et al. (2018) span-ranking coreference over one document at a time.

    Shape:
        batch["docs"]: list of dicts with ``text`` (TextBatch, (sentences, time)),
        ``speaker_ids`` (num_tokens,) long, ``genre`` int, ``clusters`` gold clusters.
        predictions: list (per document) of predicted clusters of ``(start, end)``.
    """

    def __init__(self, embedder: nn.Module, contextualization_size: int, contextualization_layers: int,
                 ffnn_size: int, ffnn_depth: int, feature_size: int, max_span_width: int, top_span_ratio: float,
                 max_top_antecedents: int, coref_depth: int, dropout: float, lstm_dropout: float,
                 lexical_dropout: float, mention_loss: float = 0.0):
        super().__init__()
        self.mention_loss = mention_loss
        self.embedder = embedder
        self.max_span_width = max_span_width
        self.top_span_ratio = top_span_ratio
        self.max_top_antecedents = max_top_antecedents
        self.coref_depth = coref_depth
        self.lexical_dropout = nn.Dropout(lexical_dropout)
        self.lstm_dropout = nn.Dropout(lstm_dropout)
        self.context = MaskedLSTM(embedder.output_dim, contextualization_size, contextualization_layers,
                                  dropout=lstm_dropout)
        context_dim = self.context.output_dim
        self.head_scorer = nn.Linear(context_dim, 1)
        self.width_embedding = nn.Embedding(max_span_width, feature_size)
        self.span_dim = 2 * context_dim + embedder.output_dim + feature_size
        self.mention_scorer = feedforward(self.span_dim, ffnn_size, ffnn_depth, dropout)
        self.coarse = nn.Linear(self.span_dim, self.span_dim)
        self.coarse_dropout = nn.Dropout(dropout)
        self.same_speaker_embedding = nn.Embedding(2, feature_size)
        self.genre_embedding = nn.Embedding(len(GENRES) + 1, feature_size)
        self.distance_embedding = nn.Embedding(NUM_DISTANCE_BUCKETS, feature_size)
        self.pair_scorer = feedforward(3 * self.span_dim + 3 * feature_size, ffnn_size, ffnn_depth, dropout)
        self.gate = nn.Linear(2 * self.span_dim, self.span_dim)

    # -- spans -------------------------------------------------------------------
    def candidate_spans(self, sentence_lengths: list[int], device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(num_spans,) long starts and ends of every span within a sentence up to the max width."""
        starts, ends, offset = [], [], 0
        for n in sentence_lengths:
            for s in range(n):
                for e in range(s, min(s + self.max_span_width, n)):
                    starts.append(offset + s)
                    ends.append(offset + e)
            offset += n
        return (torch.tensor(starts, dtype=torch.long, device=device),
                torch.tensor(ends, dtype=torch.long, device=device))

    def span_embeddings(self, context: torch.Tensor, tokens: torch.Tensor, starts: torch.Tensor,
                        ends: torch.Tensor) -> torch.Tensor:
        """Shape: context (num_tokens, context_dim), tokens (num_tokens, embed_dim),
        starts/ends (num_spans,) -> (num_spans, span_dim)."""
        widths = ends - starts  # 0-based width
        positions = starts.unsqueeze(1) + torch.arange(self.max_span_width, device=starts.device).unsqueeze(0)  # (S, W)
        inside = positions <= ends.unsqueeze(1)
        positions = positions.clamp(max=context.shape[0] - 1)
        head_logits = self.head_scorer(context).squeeze(-1)[positions]  # (S, W)
        attention = masked_softmax(head_logits, inside)  # (S, W)
        # sum_w attention[s, w] * tokens[positions[s, w]] as a sparse (S, N) @ (N, D) product:
        # gathering tokens[positions] would hold S * W * D floats (GBs for long documents)
        rows = torch.arange(len(starts), device=starts.device).unsqueeze(1).expand_as(positions)
        weights = torch.sparse_coo_tensor(
            torch.stack([rows[inside], positions[inside]]), attention[inside], (len(starts), tokens.shape[0]),
            check_invariants=False,
        )
        head = torch.sparse.mm(weights, tokens)  # (S, embed_dim)
        return torch.cat([context[starts], context[ends], head, self.width_embedding(widths)], dim=-1)

    # -- one document --------------------------------------------------------------
    def score_document(self, doc: dict) -> tuple[torch.Tensor, list[list[Span]]]:
        text = doc["text"]
        mask = text.mask  # (sentences, time)
        embedded = self.lexical_dropout(self.embedder(text))  # (sentences, time, D)
        context = self.lstm_dropout(self.context(embedded, mask))  # (sentences, time, C)
        tokens = embedded[mask]  # (N, D)
        context = context[mask]  # (N, C)
        num_tokens = tokens.shape[0]
        device = tokens.device
        starts, ends = self.candidate_spans(text.lengths.tolist(), device)
        spans = self.span_embeddings(context, tokens, starts, ends)  # (S, G)
        mention_scores = self.mention_scorer(spans).squeeze(-1)  # (S,)

        k = max(1, min(len(starts), int(math.floor(num_tokens * self.top_span_ratio))))
        order = torch.argsort(mention_scores.detach(), descending=True, stable=True).tolist()
        top = torch.tensor(select_non_crossing(starts.tolist(), ends.tolist(), order, k), dtype=torch.long, device=device)
        top_starts, top_ends = starts[top], ends[top]
        g = spans[top]  # (K, G)
        s_m = mention_scores[top]  # (K,)
        k = len(top)

        # coarse pruning: antecedents are earlier top spans
        c = min(self.max_top_antecedents, k)
        position = torch.arange(k, device=device)
        earlier = position.unsqueeze(1) > position.unsqueeze(0)  # (K, K) [i, j]: j < i
        coarse = s_m.unsqueeze(1) + s_m.unsqueeze(0) + self.coarse_dropout(self.coarse(g)) @ g.t()
        coarse = coarse.masked_fill(~earlier, float("-inf"))
        coarse_top, antecedents = coarse.topk(c, dim=1)  # (K, c)
        valid = torch.isfinite(coarse_top)  # (K, c)
        antecedents = torch.where(valid, antecedents, torch.zeros_like(antecedents))

        speakers = doc["speaker_ids"]
        same_speaker = (speakers[top_starts].unsqueeze(1) == speakers[top_starts][antecedents]).long()
        offsets = position.unsqueeze(1) - antecedents  # (K, c)
        features = torch.cat([
            self.same_speaker_embedding(same_speaker),
            self.genre_embedding(torch.full_like(antecedents, doc["genre"])),
            self.distance_embedding(distance_bucket(offsets.clamp(min=0))),
        ], dim=-1)  # (K, c, 3F)

        scores = self.refined_scores(g, antecedents, coarse_top, valid, features)
        loss = self.antecedent_loss(doc, starts, ends, top_starts, top_ends, antecedents, valid, scores, mention_scores)
        return loss, self.clusters(top_starts.tolist(), top_ends.tolist(), antecedents, scores.detach())

    def refined_scores(self, g: torch.Tensor, antecedents: torch.Tensor, coarse_top: torch.Tensor,
                       valid: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """(K, 1 + c) antecedent scores, the dummy first, after ``coref_depth`` rounds of
        higher-order refinement of the span representations ``g`` (K, G)."""
        k = g.shape[0]
        scores = None
        for depth in range(self.coref_depth):
            g_ant = g[antecedents]  # (K, c, G)
            g_i = g.unsqueeze(1).expand_as(g_ant)
            fine = self.pair_scorer(torch.cat([g_i, g_ant, g_i * g_ant, features], dim=-1)).squeeze(-1)
            pair = (coarse_top + fine).masked_fill(~valid, float("-inf"))  # (K, c)
            scores = torch.cat([pair.new_zeros(k, 1), pair], dim=1)  # (K, 1 + c), dummy first
            if depth + 1 < self.coref_depth:
                probs = torch.softmax(scores, dim=1)  # (K, 1 + c)
                attended = probs[:, :1] * g + (probs[:, 1:].unsqueeze(-1) * g_ant).sum(dim=1)  # (K, G)
                f = torch.sigmoid(self.gate(torch.cat([g, attended], dim=-1)))
                g = f * g + (1 - f) * attended
        return scores

    def antecedent_loss(self, doc: dict, starts, ends, top_starts, top_ends, antecedents, valid, scores,
             mention_scores) -> torch.Tensor:
        """The marginal log-likelihood of the gold antecedents (same gold cluster; the dummy for
        a span without one), plus the mention loss when ``mention_loss`` > 0."""
        device = scores.device
        cluster_of = {span: i for i, cluster in enumerate(doc["clusters"]) for span in cluster}
        top_spans = list(zip(top_starts.tolist(), top_ends.tolist()))
        ids = torch.tensor([cluster_of.get(span, -1) for span in top_spans], dtype=torch.long, device=device)
        gold = (ids[antecedents] == ids.unsqueeze(1)) & (ids.unsqueeze(1) >= 0) & valid  # (K, c)
        gold = torch.cat([~gold.any(dim=1, keepdim=True), gold], dim=1)  # (K, 1 + c)
        loss = (torch.logsumexp(scores, dim=1) - torch.logsumexp(scores.masked_fill(~gold, float("-inf")), dim=1)).sum()
        if self.mention_loss > 0:
            is_gold = torch.tensor([span in cluster_of for span in zip(starts.tolist(), ends.tolist())],
                                   dtype=mention_scores.dtype, device=device)
            loss = loss + self.mention_loss * nn.functional.binary_cross_entropy_with_logits(
                mention_scores, is_gold, reduction="sum")
        return loss

    @staticmethod
    def clusters(starts: list[int], ends: list[int], antecedents: torch.Tensor, scores: torch.Tensor) -> list[list[Span]]:
        """Clusters from each top span's best antecedent (the dummy leaves it alone)."""
        best = scores.argmax(dim=1).tolist()
        antecedents = antecedents.tolist()
        cluster_of: dict[Span, int] = {}
        clusters: list[list[Span]] = []
        for i, choice in enumerate(best):
            if choice == 0:
                continue
            j = antecedents[i][choice - 1]
            antecedent, mention = (starts[j], ends[j]), (starts[i], ends[i])
            if antecedent not in cluster_of:
                cluster_of[antecedent] = len(clusters)
                clusters.append([antecedent])
            if mention not in cluster_of:
                cluster_of[mention] = cluster_of[antecedent]
                clusters[cluster_of[antecedent]].append(mention)
        return [sorted(c) for c in clusters]

    def forward(self, batch: dict) -> TaskOutput:
        losses, predictions = [], []
        for doc in batch["docs"]:
            loss, clusters = self.score_document(doc)
            losses.append(loss)
            predictions.append(clusters)
        return TaskOutput(torch.stack(losses).mean(), predictions)


class CorefMetric(Metric):
    """CoNLL F1 (average of MUC, B-cubed, CEAF-phi4) over documents, in [0, 1]."""

    def __init__(self) -> None:
        self.scores = CorefScores()

    def reset(self) -> None:
        self.scores.reset()

    def update(self, predictions: list[list[list[Span]]], batch: dict) -> None:
        for doc, predicted in zip(batch["docs"], predictions):
            self.scores.update(doc["clusters"], predicted)

    def compute(self) -> dict[str, float]:
        return self.scores.compute()


@register("task", "coref")
class CorefTask(Task):
    """CoNLL-2012 coreference (average F1 of MUC, B-cubed, CEAF-phi4).

    Args:
        train, dev, test: a ``*_gold_conll`` file or a directory of them.
        data_dir: instead of train/dev/test, a release's data directory: the paper's data is
            the CoNLL-2012 shared task's ``conll-2012/v4/data``.
        splits: ``{train, dev, test}`` -> subdirectory of ``data_dir`` (default ``train``,
            ``development``, ``test``; ``test: conll-2012-test`` reads the shared-task test
            of the v12 ``conll-formatted-ontonotes-5.0/data`` layout).
        language: the ``data/<language>`` subtree read in a split directory (english).
        model: hyperparameters (paper defaults in ``default_model``).
        max_training_sentences: chunk training documents to this many sentences (50 in the paper).
        max_documents: keep only the first N documents of each split (None = all); for CPU demos.
    """

    metric_name = "conll_f1"
    default_model = {
        "contextualization_size": 200, "contextualization_layers": 3, "ffnn_size": 150, "ffnn_depth": 2,
        "feature_size": 20, "max_span_width": 30, "top_span_ratio": 0.4, "max_top_antecedents": 50,
        "coref_depth": 2, "dropout": 0.2, "lstm_dropout": 0.4, "lexical_dropout": 0.5,
        "feature_dropout": 0.0, "layer_norm": False, "mention_loss": 0.0,
    }
    default_trainer = {"batch_size": 1, "eval_batch_size": 1, "lr": 1e-3, "lr_decay": 0.999, "lr_decay_steps": 100,
                       "grad_norm": 5.0, "epochs": 150, "patience": 10}
    default_with_fasttext = True  # FastText vectors stand in for e2e-coref's GloVe next to the LM features
    merged_options = ("model", "splits")

    def __init__(self, train: str | None = None, dev: str | None = None, test: str | None = None,
                 model: dict[str, Any] | None = None, data_dir: str | None = None,
                 splits: dict[str, str] | None = None, language: str = DEFAULT_LANGUAGE,
                 max_training_sentences: int | None = 50, max_documents: int | None = None):
        paths = resolve_conll_paths("task coref", train, dev, test, data_dir, splits)
        super().__init__(paths["train"], paths["dev"], paths["test"], model)
        self.language = language
        o = self.model_options
        for key in ("contextualization_size", "contextualization_layers", "ffnn_size", "feature_size",
                    "max_span_width", "max_top_antecedents", "coref_depth"):
            if not isinstance(o[key], int) or o[key] < 1:
                raise ConfigError(f"task coref model.{key} must be a positive integer, got {o[key]!r}")
        if not isinstance(o["ffnn_depth"], int) or o["ffnn_depth"] < 0:
            raise ConfigError(f"task coref model.ffnn_depth must be a non-negative integer, got {o['ffnn_depth']!r}")
        if not 0 < o["top_span_ratio"] <= 1:
            raise ConfigError(f"task coref model.top_span_ratio must be in (0, 1], got {o['top_span_ratio']!r}")
        if not isinstance(o["mention_loss"], (int, float)) or o["mention_loss"] < 0:
            raise ConfigError(f"task coref model.mention_loss must be >= 0 (0 = the paper's objective), got {o['mention_loss']!r}")
        for key in ("dropout", "lstm_dropout", "lexical_dropout"):
            if not 0 <= o[key] < 1:
                raise ConfigError(f"task coref model.{key} must be in [0, 1), got {o[key]!r}")
        for name, value in (("max_training_sentences", max_training_sentences), ("max_documents", max_documents)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"task coref: {name} must be a positive integer or null, got {value!r}")
        self.max_training_sentences = max_training_sentences
        self.max_documents = max_documents

    def missing_data(self) -> str | None:
        """``data_dir (or train)`` when neither is set (either configures the task)."""
        missing = super().missing_data()
        return f"data_dir (or {missing})" if missing else None

    def read(self, split: str) -> list[CorefInstance]:
        if not self.paths.get(split):
            raise ConfigError(f"task coref: no {split!r} path configured (set tasks.coref.{split})")
        documents = read_conll2012(self.paths[split], self.language)
        if self.max_documents:
            documents = documents[: self.max_documents]
        limit = self.max_training_sentences if split == "train" else None
        return [x for doc in documents for x in document_instances(doc, limit)]

    def sentences(self, instances: Sequence[CorefInstance]) -> Iterable[list[str]]:
        seen: set[tuple[str, ...]] = set()
        for x in instances:
            for s in x.sentences:
                if tuple(s) not in seen:
                    seen.add(tuple(s))
                    yield list(s)

    def length(self, instance: CorefInstance) -> int:
        return instance.num_tokens

    def build_model(self, inputs) -> CorefModel:
        o = dict(self.model_options)
        embedder = inputs.embedder(layer_norm=o.pop("layer_norm"), feature_dropout=o.pop("feature_dropout"))
        return CorefModel(embedder, **o)

    def collate(self, instances: Sequence[CorefInstance], inputs) -> dict:
        docs = []
        for x in instances:
            speaker_index: dict[str, int] = {}
            speaker_ids = torch.tensor([speaker_index.setdefault(s, len(speaker_index)) for s in x.speakers], dtype=torch.long)
            genre = GENRES.index(x.genre) if x.genre in GENRES else len(GENRES)
            docs.append({"text": inputs.encode(x.sentences), "speaker_ids": speaker_ids, "genre": genre,
                         "clusters": x.clusters, "doc_key": x.doc_key})
        return {"docs": docs}

    def new_metric(self) -> CorefMetric:
        return CorefMetric()

    def prediction_record(self, instance: CorefInstance, prediction: list[list[Span]]) -> dict[str, Any]:
        """``{"doc_key", "sentences", "clusters"}``: clusters of inclusive document-level ``[start, end]`` token offsets."""
        return {"doc_key": instance.doc_key, "sentences": [list(s) for s in instance.sentences],
                "clusters": [[[int(a), int(b)] for a, b in cluster] for cluster in prediction]}
