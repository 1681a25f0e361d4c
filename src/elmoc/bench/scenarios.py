"""LM specs of the speed tables (paper Tables 4 and 5), at paper size or scaled.

Every benchmarked model is an ordinary :class:`elmoc.lm.LanguageModel` built from an
LM spec through the registry, so the bench times exactly the code that trains.
Widths (cell, projection, embedding, d_model, d_ff) are multiplied by
``width_scale`` and vocabularies (and the sampled-softmax sample count) by
``vocab_scale``; with both at 1.0 the specs are the paper's (spec 1.1, 3, 4).
Vectors for CONT/FIXED are random ``.npy`` tables written to a scratch folder
(speed does not depend on their values; the paper's FIXED runs used random ones too).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from elmoc.errors import ConfigError

OUTPUT_LAYERS = ("CONT", "FIXED", "SUBWORD", "ADAPTIVE", "SAMPLED")
VOCABS = {"40K": 40_000, "800K": 800_000, "2000K": 2_000_000}
# Table 4 rows: (layer, vocab label or None for vocabulary-free layers).
TABLE4_ROWS = [("CONT", None), ("FIXED", None), ("SUBWORD", None)] + [
    (layer, v) for layer in ("ADAPTIVE", "SAMPLED") for v in VOCABS
]
ENCODERS = ("LSTM", "LSTMX2", "TRANS BASE", "ELMO", "TRANS LARGE", "GPT")
SUBWORD_VOCAB = 30_000  # ~30K BPE units (spec 3.3)
SUBWORD_TOKENS_PER_WORD = 1.1  # subword streams are ~1.1x longer (paper 5.2.1)
EMBEDDING_DIM = 300  # FastText
SAMPLES = 8192  # negatives per batch (spec 3.1)
# the adaptive-softmax cutoffs of the ELMo-A preset, config/lm/elmo-a.yaml (a test keeps them equal;
# the presets are not installed with the package, so the bench cannot read the file)
ELMO_A_CUTOFFS = (100_000, 600_000)
# ADAPTIVE 2000K: ELMo-A's clusters plus a third at 1,040,000 words (width d/64 = 8 beyond it), which
# gives the paper's 213M (213.02M); with ELMo-A's two cutoffs alone the 1.4M-word last cluster at width
# 32 gives 236M.  A preset cannot carry this cutoff (cutoffs must lie below its own vocabulary), so the
# bench adds it to the cutoffs below the vocabulary; at 800K and 40K it is dropped.
ADAPTIVE_2000K_CUTOFF = 1_040_000


@dataclass(frozen=True)
class Scale:
    """How far below paper size a run is; recorded next to every figure."""

    width: float = 1.0
    vocab: float = 1.0

    def __post_init__(self):
        for name in ("width", "vocab"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ConfigError(f"bench: {name} scale must be in (0, 1], got {value}")

    def dim(self, size: int, multiple: int = 8) -> int:
        return max(multiple, int(round(size * self.width / multiple)) * multiple)

    def vocab_size(self, size: int) -> int:
        return max(64, int(round(size * self.vocab)))


def encoder_spec(name: str, scale: Scale, gpt_length: int = 512) -> tuple[dict, int]:
    """Encoder config of a Table 5 column and its sequence length (``gpt_length`` for GPT, else 20)."""
    d = scale.dim
    if name == "ELMO":
        return {"type": "elmo_lstm", "num_layers": 2, "cell_size": d(4096), "projection_size": d(512),
                "cell_clip": 3.0, "proj_clip": 3.0, "layer_norm": True, "recurrent_dropout": 0.1}, 20
    if name in ("LSTM", "LSTMX2"):
        return {"type": "lstm", "hidden_size": d(2048), "num_layers": 1 if name == "LSTM" else 2}, 20
    if name == "TRANS BASE":
        return {"type": "transformer", "d_model": d(512), "heads": 8, "d_ff": d(2048), "num_layers": 6,
                "dropout": 0.1}, 20
    if name in ("TRANS LARGE", "GPT"):
        return {"type": "transformer", "d_model": d(768, 24), "heads": 12, "d_ff": d(3072), "num_layers": 12,
                "dropout": 0.1}, (gpt_length if name == "GPT" else 20)
    raise ConfigError(f"bench: unknown encoder {name!r}; choose from {', '.join(ENCODERS)}")


def adaptive_cutoffs(vocab_size: int, scale: Scale) -> list[int]:
    """Cutoffs of the ADAPTIVE rows: the ELMo-A preset's (``config/lm/elmo-a.yaml``) and
    :data:`ADAPTIVE_2000K_CUTOFF`, scaled; those at or beyond the vocabulary are dropped.

    The paper's cutoffs are unreleased (spec 3.2); these give its counts at paper size
    (PyTorch's layout, tails d/4, d/16, d/64): 800K words 198M (ELMo-A's cutoffs; the
    preset at 793,475 words 197.5M, paper 196M), 2000K words 213.0M (paper 213M).  At
    40K words no tail is left and the row is a full softmax: 96.4M (paper 97M: the
    paper's code keeps its first tail at full width, d^2 = 0.26M more, which a full
    softmax has no tail to hold).
    """
    cuts = [scale.vocab_size(c) for c in (*ELMO_A_CUTOFFS, ADAPTIVE_2000K_CUTOFF)]
    return [c for c in cuts if c < vocab_size]


@dataclass
class BenchModel:
    """One benchmarked LM: its spec, vocabulary size and sequence length."""

    label: str
    spec: dict
    vocab_size: int
    seq_len: int
    tokens_per_word: float = 1.0


def table_path(scratch: Path, rows: int, dim: int) -> str:
    """A random float32 ``[rows, dim]`` table in ``scratch`` (written once, atomically)."""
    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / f"table_{rows}x{dim}.npy"
    if not path.is_file():
        rng = np.random.default_rng(0)
        tmp = path.with_name(path.name + ".tmp.npy")
        np.save(tmp, rng.standard_normal((rows, dim), dtype=np.float32))
        tmp.replace(path)
    return str(path)


def build_spec(layer: str, vocab_label: str | None, encoder: str, scale: Scale, scratch: Path | None,
               host_resident: bool = False, gpt_length: int = 512) -> BenchModel:
    """LM spec for output ``layer`` (CONT, FIXED, ...) on ``encoder`` at ``vocab_label``.

    ``scratch`` None builds specs for the meta device (parameter counts only): the
    vectors paths then need not exist and ``dim`` sizes the tables.
    CONT and FIXED need no vocabulary of their own (any word has a FastText vector);
    they are given the 800K vocabulary unless another is named.
    """
    if layer not in OUTPUT_LAYERS:
        raise ConfigError(f"bench: unknown output layer {layer!r}; choose from {', '.join(OUTPUT_LAYERS)}")
    enc, seq_len = encoder_spec(encoder, scale, gpt_length)
    emb = scale.dim(EMBEDDING_DIM, 4)
    if layer == "SUBWORD":
        vocab = scale.vocab_size(SUBWORD_VOCAB)
        proj = enc.get("projection_size") or enc.get("hidden_size") or enc.get("d_model")
        spec = {"input": {"type": "subword", "dim": proj}, "encoder": enc, "output": {"type": "subword", "tie": True}}
        return BenchModel(f"{layer}", spec, vocab, seq_len, SUBWORD_TOKENS_PER_WORD)
    vocab = scale.vocab_size(VOCABS[vocab_label or "800K"])
    vectors = table_path(scratch, vocab, emb) if scratch is not None else f"results/bench/meta_{vocab}x{emb}.npy"
    inp = {"type": "fasttext", "vectors": vectors, "dim": emb, "host_resident": host_resident}
    samples = min(vocab, max(64, int(round(SAMPLES * scale.vocab))))
    if layer == "CONT":
        out = {"type": "cosine", "vectors": vectors, "dim": emb, "host_resident": host_resident}
    elif layer == "FIXED":
        out = {"type": "fixed", "vectors": vectors, "dim": emb, "num_samples": samples,
               "host_resident": host_resident}
    elif layer == "ADAPTIVE":
        out = {"type": "adaptive", "cutoffs": adaptive_cutoffs(vocab, scale)}
    else:
        out = {"type": "sampled", "num_samples": samples}
    label = layer if vocab_label is None else f"{layer} {vocab_label}"
    return BenchModel(label, {"input": inp, "encoder": enc, "output": out}, vocab, seq_len)
