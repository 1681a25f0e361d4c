"""ELMo's character CNN input: char embeddings -> convolutions -> highway -> projection.

The original ELMo token encoder (spec 1.3, 5.1), sized from a bilm-tf
``options.json`` and optionally loaded from its ``weights.hdf5``
(:mod:`elmoc.inputs.bilm_tf_weights`).  Word ids are mapped to character ids
through a table built once from the vocabulary (:mod:`elmoc.inputs.characters`).

Why hand-written: no maintained PyTorch package ships this layer (AllenNLP is
archived and pins old torch).  The highway follows AllenNLP's convention
``y = t * x + (1 - t) * relu(W_h x + b_h)`` with ``t = sigmoid(W_t x + b_t)`` the
*carry* gate, so TF's carry weights load negated.  Random init mirrors bilm-tf:
char embeddings uniform(-1, 1) and a carry bias of +2 (TF's transform bias -2).

Characters: bilm-tf trains ``n_characters: 261`` character embeddings (256 bytes, two
sentence boundaries, begin/end of word, padding inside a word); its released
``options.json`` says 262 because at inference bilm-tf (and AllenNLP) shift every id by
one and prepend an all-zero row for "no token" (:mod:`elmoc.inputs.characters`).  Both
values build the same layer here: a ``(262, dim)`` table whose 261 character rows are
trained and whose row 0 is that zero row (``padding_idx``: never updated).  The
retrained-ELMo preset (``config/lm/elmo.yaml``) writes bilm-tf's training value, 261.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from elmoc.errors import ConfigError, InputFileError
from elmoc.inputs.base import InputLayer
from elmoc.inputs.characters import NUM_CHAR_IDS, TRAINED_CHARS, token_char_ids
from elmoc.inputs.vector_table import building_on_meta
from elmoc.registry import register

REQUIRED_OPTIONS = (
    ("char_cnn", "embedding", "dim"),
    ("char_cnn", "filters"),
    ("char_cnn", "n_highway"),
    ("char_cnn", "max_characters_per_token"),
    ("char_cnn", "activation"),
    ("lstm", "projection_dim"),
)


def read_options(source: str | Path | dict[str, Any]) -> dict[str, Any]:
    """bilm-tf options from an ``options.json`` path or an inline mapping, with every
    key this layer needs checked (errors name the file, or "inline options")."""
    if isinstance(source, dict):
        path, options = Path("<inline options>"), source
    else:
        path = Path(source)
        if not path.is_file():
            raise InputFileError(path, "options.json not found")
        try:
            options = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InputFileError(path, f"not valid JSON ({e})", getattr(e, "lineno", None)) from None
    for keys in REQUIRED_OPTIONS:
        node: Any = options
        for depth, key in enumerate(keys):
            if not isinstance(node, dict) or key not in node:
                raise InputFileError(path, f"options are missing the key {'.'.join(keys[: depth + 1])!r}")
            node = node[key]
    cnn = options["char_cnn"]
    filters = cnn["filters"]
    if not isinstance(filters, list) or not filters or not all(
        isinstance(f, list) and len(f) == 2 and all(isinstance(v, int) and v > 0 for v in f) for f in filters
    ):
        raise InputFileError(path, f"char_cnn.filters must be a list of [width, count] pairs, got {filters!r}")
    if cnn["activation"] not in ("relu", "tanh"):
        raise InputFileError(path, f"char_cnn.activation must be 'relu' or 'tanh', got {cnn['activation']!r}")
    n_chars = cnn.get("n_characters", NUM_CHAR_IDS)
    if n_chars not in (TRAINED_CHARS, NUM_CHAR_IDS):
        raise InputFileError(path, f"char_cnn.n_characters must be {TRAINED_CHARS} (bilm-tf's training options) or "
                             f"{NUM_CHAR_IDS} (the released model's options), got {n_chars!r}")
    return options


@lru_cache(maxsize=1 << 17)
def word_char_ids(word: str, max_chars: int) -> tuple[int, ...]:
    """:func:`~elmoc.inputs.characters.token_char_ids`, remembered for the frequent words."""
    return tuple(token_char_ids(word, max_chars))


class Highway(nn.Module):
    """``y = t * x + (1 - t) * relu(W_h x + b_h)``, ``t = sigmoid(W_t x + b_t)`` (carry gate).

    Shape: (..., dim) -> (..., dim).
    """

    def __init__(self, dim: int):
        super().__init__()
        self.nonlinear = nn.Linear(dim, dim)
        self.gate = nn.Linear(dim, dim)
        if not self.gate.bias.is_meta:
            nn.init.constant_(self.gate.bias, 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        carry = torch.sigmoid(self.gate(x))
        return carry * x + (1.0 - carry) * F.relu(self.nonlinear(x))


@register("input", "char_cnn")
class CharCnnInput(InputLayer):
    """Character CNN token encoder of the original ELMo.

    Args:
        options: bilm-tf ``options.json`` path, or the same content inline as a mapping
            (``char_cnn`` sizes; ``lstm.projection_dim`` is the output size).
        weights: optional bilm-tf ``weights.hdf5`` to load (CNN, highway, projection,
            char embeddings).  Omit to train from scratch.
        trainable: False freezes every parameter (e.g. a loaded, fixed ELMo encoder).
        vocab: (context) word vocabulary; each word's character ids are precomputed.

    Shape:
        ids: (batch, time) long word ids; returns (batch, time, projection_dim).
        :meth:`encode_chars`: (batch, time, max_chars) long char ids -> same output.
    """

    open_vocabulary = True  # any word reads its own characters
    oov_note = "read character by character (char-CNN)"

    def __init__(
        self,
        options: str | dict[str, Any],
        weights: str | None = None,
        trainable: bool = True,
        vocab: Sequence[str] | None = None,
    ):
        super().__init__()
        opts = read_options(options)
        self.options = opts
        cnn = opts["char_cnn"]
        self.max_chars = int(cnn["max_characters_per_token"])
        self.activation = cnn["activation"]
        char_dim = int(cnn["embedding"]["dim"])
        self.char_embedding = nn.Embedding(NUM_CHAR_IDS, char_dim, padding_idx=0)
        if not self.char_embedding.weight.is_meta:
            with torch.no_grad():
                self.char_embedding.weight.uniform_(-1.0, 1.0)
                self.char_embedding.weight[0].zero_()
        self.convolutions = nn.ModuleList(nn.Conv1d(char_dim, count, width) for width, count in cnn["filters"])
        total = sum(count for _, count in cnn["filters"])
        self.num_filters = total
        self.highways = nn.ModuleList(Highway(total) for _ in range(int(cnn["n_highway"])))
        self.output_dim = int(opts["lstm"]["projection_dim"])
        self.projection = nn.Linear(total, self.output_dim)
        if any(width > self.max_chars for width, _ in cnn["filters"]):
            raise ConfigError(f"input 'char_cnn': a filter is wider than max_characters_per_token={self.max_chars}")
        if vocab is not None:
            if building_on_meta():  # sizing only (elmoc params): no need to spell the words
                table = torch.empty(len(vocab), self.max_chars, dtype=torch.int16)
            else:
                tokens = getattr(vocab, "tokens", vocab)
                table = torch.tensor([token_char_ids(t, self.max_chars) for t in tokens], dtype=torch.int16)
            self.register_buffer("word_chars", table, persistent=False)  # (V, max_chars)
        else:
            self.word_chars = None
        if weights is not None:
            from elmoc.inputs.bilm_tf_weights import load_char_cnn

            load_char_cnn(self, weights)
        self.weights_path = None if weights is None else str(weights)
        if not trainable:
            for p in self.parameters():
                p.requires_grad_(False)

    def encode_chars(self, chars: torch.Tensor) -> torch.Tensor:
        """Token vectors from character ids.  Shape: (batch, time, max_chars) -> (batch, time, output_dim)."""
        batch, time, width = chars.shape
        x = self.char_embedding(chars.reshape(-1, width).long()).transpose(1, 2)  # (B*T, char_dim, chars)
        act = torch.relu if self.activation == "relu" else torch.tanh
        pooled = [act(conv(x).max(dim=-1).values) for conv in self.convolutions]  # each (B*T, count)
        h = torch.cat(pooled, dim=-1)  # (B*T, filters)
        for highway in self.highways:
            h = highway(h)
        return self.projection(h).view(batch, time, self.output_dim)

    def word_vectors(self, rows: Sequence[Sequence[str]], width: int, device: torch.device) -> torch.Tensor:
        """The char-CNN vectors of a batch of words, each distinct word encoded once.

        A word's vector does not depend on its neighbours, so the batch's distinct words
        go through the CNN as one (1, words, max_chars) sequence and are gathered back to
        their positions (a sentence of 25 words repeats ``<s>``, ``the``, ``,`` ... across
        the batch: at batch 64 about half the positions are repeats).

        Shape: rows: batch lists of tokens; returns (batch, width, output_dim), zero at
        padding positions.
        """
        words: dict[str, int] = {}
        index = torch.zeros(len(rows), width, dtype=torch.long)  # 0 = the zero row
        for b, row in enumerate(rows):
            index[b, : len(row)] = torch.tensor([words.setdefault(w, len(words) + 1) for w in row],
                                                dtype=torch.long)
        chars = torch.tensor([word_char_ids(w, self.max_chars) for w in words], dtype=torch.long)
        vectors = self.encode_chars(chars.to(device).view(1, len(words), self.max_chars))[0]
        table = torch.cat([vectors.new_zeros(1, vectors.shape[1]), vectors])  # (1 + words, output_dim)
        return table[index.to(device)]

    @classmethod
    def state_config(cls, cfg: dict[str, Any]) -> dict[str, Any]:
        """Without ``weights``: the trained weights are in the state dict."""
        cfg = dict(cfg)
        cfg.pop("weights", None)
        return cfg

    @classmethod
    def export(cls, cfg: dict[str, Any], directory: Path) -> dict[str, Any]:
        """The options inline, so the directory needs no ``options.json``."""
        cfg = cls.state_config(cfg)
        if not isinstance(cfg["options"], dict):
            cfg["options"] = json.loads(Path(cfg["options"]).read_text(encoding="utf-8"))
        return cfg

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.word_chars is None:
            raise ConfigError("input 'char_cnn' was built without a vocabulary; call encode_chars() with char ids")
        return self.encode_chars(self.word_chars[ids])

    def extra_repr(self) -> str:
        return f"filters={self.num_filters}, output_dim={self.output_dim}, max_chars={self.max_chars}"
