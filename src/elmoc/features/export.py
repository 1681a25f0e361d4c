"""Bi-LM feature extraction to HDF5 in the ``allennlp elmo --all`` layout (spec 5.3, 5.4).

For each input line ``i`` (one whitespace-tokenized sentence) the file holds a
float32 dataset ``str(i)`` of shape ``(num_layers, num_tokens, 2 * hidden)``, plus a
dataset ``sentence_to_index``: a one-element variable-length string holding a JSON
dict from sentence text to its key.  Downstream readers look sentences up by text,
so a features file can serve any task whose sentences it contains.

How the two directions are combined (ELMo-C's ``BiDirectionalRNN``): the forward LM
reads the sentence, the backward LM reads it reversed; each returns its encoder
layers (layer 0 = its own projected input); the backward layers are flipped back
to the sentence order and concatenated after the forward ones.

Sentence boundaries (spec P6, our choice): the LMs were trained on streams with
``<s>``/``</s>`` around every sentence, so by default each sentence is wrapped in
them before encoding and the boundary positions are dropped on output, as AllenNLP
does for ELMo.  ``boundaries=False`` feeds the bare tokens (ELMo-C's wrapper).
Every sentence starts from a zero state (spec 5.4: ``reset_hidden_state=true``).

Open vocabulary (issue 12.1, paper sec. 3.2): words outside the LM vocabulary keep
their identity.  A char-CNN input reads their characters; a FastText input reads
the vector fastText composes from their n-grams (the ``.bin`` the input table was
made from, or the bucket table of an exported model directory).  Only inputs with
no open vocabulary (trainable or random word tables) read ``<unk>``.  The output
layer is never built here.
For subword LMs (ELMo-Sub: the checkpoint's spec has ``data.tokenizer``) the LM reads
subwords and each word is represented by its first subword (spec 3.3).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import h5py
import numpy as np
import torch
from tqdm import tqdm

from elmoc.data.atomic import atomic_path
from elmoc.data.vocab import BOS, BOS_ID, EOS, EOS_ID, PAD_ID, Vocabulary
from elmoc.devices import resolve_device
from elmoc.encoders.base import EncoderOutput
from elmoc.errors import ConfigError, InputFileError
from elmoc.inputs.char_cnn import CharCnnInput
from elmoc.inputs.characters import batch_char_ids
from elmoc.nn.masking import reverse_padded
from elmoc.registry import build
from elmoc.train.checkpoint import load_directions

if TYPE_CHECKING:
    from elmoc.data.subword import SubwordEncoder
    from elmoc.inputs.char_cnn_vectors import CharCnnVectors
    from elmoc.inputs.fasttext_subwords import SubwordVectors

log = logging.getLogger(__name__)


class FeatureLM(torch.nn.Module):
    """One direction of a bi-LM as used for features: input layer -> encoder.

    The output layer plays no role at extraction and is not built.  Words keep their
    identity (issue 12.1, paper sec. 3.2): a char-CNN input reads every word's
    characters; a FastText input reads its table row for vocabulary words and, for
    the others, the vector fastText composes from their n-grams (``subwords``);
    only inputs without an open vocabulary (trainable or random word tables, a
    table without a fastText source) read ``<unk>``.

    Args:
        input_layer, encoder: built from the LM spec (weights loaded by the caller).
        vocab: the LM vocabulary the ids refer to.
        subwords: vectors of out-of-vocabulary words for a frozen-table input (fastText
            n-grams, or the char-CNN that made a char-CNN table); see :func:`oov_vectors_for`.
    """

    def __init__(self, input_layer: torch.nn.Module, encoder: torch.nn.Module, vocab: Vocabulary,
                 subwords: "SubwordVectors | CharCnnVectors | None" = None):
        super().__init__()
        self.input_layer = input_layer
        self.encoder = encoder
        self.vocab = vocab
        self.subwords = subwords

    @classmethod
    def from_spec(cls, spec: dict[str, Any], state: dict[str, torch.Tensor], vocab: Vocabulary,
                  where: str | Path, subwords: "SubwordVectors | CharCnnVectors | None" = None) -> "FeatureLM":
        """Build input + encoder from ``spec`` and load their weights from ``state`` (a
        LanguageModel state dict; ``output_layer.*`` entries are ignored)."""
        for section in ("input", "encoder"):
            if not isinstance(spec.get(section), dict):
                raise InputFileError(where, f"the stored LM spec has no {section!r} section")
        input_cfg = dict(spec["input"])
        if input_cfg.get("type") == "char_cnn":
            input_cfg.pop("weights", None)  # the char-CNN weights are in ``state``
        input_layer = build("input", input_cfg, vocab=vocab)
        encoder = build("encoder", spec["encoder"], input_dim=input_layer.output_dim)
        model = cls(input_layer, encoder, vocab, subwords)
        wanted = {k: v for k, v in state.items() if not k.startswith("output_layer.")}
        missing, unexpected = model.load_state_dict(wanted, strict=False)
        if missing or unexpected:
            raise InputFileError(where, f"weights do not match the stored spec (missing {missing[:5]}, "
                                 f"unexpected {unexpected[:5]}); the file was written by another version")
        return model.eval()

    @property
    def open_vocabulary(self) -> bool:
        """True when out-of-vocabulary words get their own input vector."""
        return isinstance(self.input_layer, CharCnnInput) or self.subwords is not None

    def encode(self, ids: torch.Tensor, mask: torch.Tensor | None = None, state: Any = None) -> EncoderOutput:
        """Encoder output of vocabulary ids (closed vocabulary).  Shape: ids (batch, time) long."""
        if mask is None:
            mask = ids != PAD_ID
        return self.encoder(self.input_layer(ids), mask, state)

    def token_vectors(self, ids: torch.Tensor, rows: Sequence[Sequence[str]] | None) -> torch.Tensor:
        """Input vectors of a padded batch.

        Shape:
            ids: (batch, time) long vocabulary ids (``<unk>`` for unknown words);
            rows: the same tokens as strings, row b holding ``lengths[b]`` tokens, or
            None (subword LMs: ids are all there is).
            returns: (batch, time, input_dim).
        """
        if rows is None:
            return self.input_layer(ids)
        if isinstance(self.input_layer, CharCnnInput):
            chars = batch_char_ids(rows, self.input_layer.max_chars).to(ids.device)
            if chars.shape[1] < ids.shape[1]:
                chars = torch.nn.functional.pad(chars, (0, 0, 0, ids.shape[1] - chars.shape[1]))
            return self.input_layer.encode_chars(chars)
        vectors = self.input_layer(ids)
        if self.subwords is None:
            return vectors
        unknown = [(b, t) for b, row in enumerate(rows) for t, w in enumerate(row)
                   if w not in self.vocab]
        if unknown:
            words = sorted({rows[b][t] for b, t in unknown})
            composed = torch.from_numpy(self.subwords.vectors(words)).to(vectors.device, vectors.dtype)
            where = {w: i for i, w in enumerate(words)}
            b_idx = torch.tensor([b for b, _ in unknown], device=vectors.device)
            t_idx = torch.tensor([t for _, t in unknown], device=vectors.device)
            picks = torch.tensor([where[rows[b][t]] for b, t in unknown], device=vectors.device)
            vectors = vectors.clone()
            vectors[b_idx, t_idx] = composed[picks]
        return vectors


class BiLM(torch.nn.Module):
    """A forward and a backward :class:`FeatureLM` used together for features.

    Build with :meth:`from_checkpoints` (a ``results/lm`` tree) or
    :func:`elmoc.pretrained.load_bilm` (an exported model directory).
    """

    def __init__(self, forward_lm: FeatureLM, backward_lm: FeatureLM, vocab: Vocabulary,
                 subwords: "SubwordEncoder | None" = None, boundaries: bool = True):
        super().__init__()
        if forward_lm.encoder.num_layers != backward_lm.encoder.num_layers:
            raise ConfigError("forward and backward LMs have different numbers of layers")
        self.forward_lm = forward_lm
        self.backward_lm = backward_lm
        self.vocab = vocab
        self.subwords = subwords  # ELMo-Sub: words are represented by their first subword
        self.boundaries = boundaries

    @classmethod
    def from_checkpoints(cls, forward_path: str | Path, backward_path: str | Path,
                         vocab_path: str | Path | None = None, fasttext_model: str | Path | None = None,
                         closed_vocabulary: bool = False, char_cnn_model: str | Path | None = None) -> "BiLM":
        """Both directions from their ``model.pt`` (or ``checkpoint.pt``) files; a joint
        bi-LM's one file is passed as both.

        ``fasttext_model``: the ``.bin`` whose n-grams compose out-of-vocabulary words for
        a FastText input (default: the one the table was made from, when it exists;
        :func:`oov_vectors_for`; ``char_cnn_model`` likewise for char-CNN tables).
        ``closed_vocabulary``: map every unknown word to ``<unk>`` (the old behaviour).
        """
        payloads = load_directions(forward_path, backward_path)  # a joint model.pt serves both
        check_same_model(payloads["forward"]["spec"], payloads["backward"]["spec"], forward_path, backward_path)
        spec = payloads["forward"]["spec"]
        vpath = vocab_path or payloads["forward"].get("vocab_path")
        if vpath is None:
            raise InputFileError(forward_path, "checkpoint records no vocabulary; pass --vocab")
        vocab = Vocabulary.load(vpath)
        tokenizer = (spec.get("data") or {}).get("tokenizer")
        subword_encoder = None
        if tokenizer:
            from elmoc.data.subword import SubwordEncoder

            subword_encoder = SubwordEncoder(tokenizer)
        composer = None
        if not closed_vocabulary and not tokenizer:
            composer = oov_vectors_for(spec, vocab, fasttext_model, char_cnn_model)
        lms = [FeatureLM.from_spec(payloads[d]["spec"], payloads[d]["model"], vocab, path, composer)
               for d, path in (("forward", forward_path), ("backward", backward_path))]
        return cls(lms[0], lms[1], vocab, subword_encoder)

    @property
    def num_layers(self) -> int:
        return self.forward_lm.encoder.num_layers

    @property
    def output_dim(self) -> int:
        return self.forward_lm.encoder.output_dim + self.backward_lm.encoder.output_dim

    @property
    def open_vocabulary(self) -> bool:
        return self.forward_lm.open_vocabulary

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, rows: Sequence[Sequence[str]] | None = None,
                states: tuple[Any, Any] = (None, None)) -> tuple[torch.Tensor, tuple[Any, Any]]:
        """Layer activations of both directions.

        Shape:
            ids: (batch, time) long, padded with ``<pad>`` after each sentence;
            lengths: (batch,) long; rows: the tokens as strings (see
            :meth:`FeatureLM.token_vectors`), or None for ids only;
            states: the encoders' carried states (None = zeros, spec 5.4).
            returns: (batch, layers, time, 2 * hidden) float32, zero at padding,
            and the two encoders' final states.
        """
        mask = ids != PAD_ID
        fwd = self.forward_lm.encoder(self.forward_lm.token_vectors(ids, rows), mask, states[0])
        rev_rows = None if rows is None else [list(r)[::-1] for r in rows]
        rev_in = self.backward_lm.token_vectors(reverse_padded(ids, lengths), rev_rows)
        bwd = self.backward_lm.encoder(rev_in, mask, states[1])
        layers = []
        for f, b in zip(fwd.layers, bwd.layers):
            b = reverse_padded(b, lengths)
            layers.append(torch.cat([f, b], dim=-1) * mask.unsqueeze(-1))
        return torch.stack(layers, dim=1).float(), (fwd.state, bwd.state)

    def embed(self, sentences: Sequence[Sequence[str]], device: str | torch.device | None = None,
              states: tuple[Any, Any] = (None, None)) -> tuple[torch.Tensor, torch.Tensor, tuple[Any, Any]]:
        """Per-word activations of a batch of tokenized sentences.

        Shape: returns (batch, layers, words, 2 * hidden) float32 (zero after each
        sentence's words), the word mask (batch, words) bool, and the final states.
        """
        if device is None:
            device = next(self.parameters()).device
        ids, lengths, positions, rows = encode_batch(self.vocab, sentences, self.boundaries, self.subwords)
        acts, states = self(ids.to(device), lengths.to(device), rows, states)
        width = max((len(p) for p in positions), default=0)
        index = torch.zeros(len(positions), width, dtype=torch.long)
        mask = torch.zeros(len(positions), width, dtype=torch.bool)
        for b, pos in enumerate(positions):
            index[b, : len(pos)] = torch.tensor(pos, dtype=torch.long)
            mask[b, : len(pos)] = True
        index, mask = index.to(acts.device), mask.to(acts.device)
        gathered = torch.gather(acts, 2, index[:, None, :, None].expand(-1, acts.shape[1], -1, acts.shape[3]))
        return gathered * mask[:, None, :, None], mask, states


def check_same_model(forward_spec: dict, backward_spec: dict, forward_path: str | Path,
                     backward_path: str | Path) -> None:
    """Refuse a forward and a backward LM of different variants or sizes (their specs
    must agree; the direction is not part of the spec)."""
    sections = sorted(k for k in set(forward_spec) | set(backward_spec)
                      if k != "direction" and forward_spec.get(k) != backward_spec.get(k))
    if sections:
        raise InputFileError(backward_path, f"its LM spec differs from {forward_path} in {', '.join(sections)}: "
                             "the two directions belong to different variants or sizes; pass both checkpoints "
                             "of one variant")


def oov_vectors_for(spec: dict[str, Any], vocab: Vocabulary, fasttext_model: str | Path | None = None,
                    char_cnn_model: str | Path | None = None) -> "SubwordVectors | CharCnnVectors | None":
    """What composes out-of-vocabulary words for a frozen-table (``fasttext``) input, or None.

    The source is ``fasttext_model`` (a ``.bin``), ``char_cnn_model`` (an ELMo
    ``model.pt``, for the char-CNN tables of the ELMo-C-CNN ablations), or found beside
    the table: ``results/fasttext/{name}.bin`` for ``results/vectors/{name}.npy``,
    a joint ELMo's ``results/lm/elmo/joint/model.pt`` (else ``results/lm/elmo/forward/model.pt``)
    for ``results/vectors/cnn.npy``.  A table with
    no such source (the random table) keeps the closed vocabulary, with a warning.
    A source that did not make the table is an error (a few rows are compared).
    """
    from elmoc.inputs.char_cnn_vectors import CharCnnVectors
    from elmoc.inputs.fasttext_subwords import SubwordVectors, check_table_matches, fasttext_model_for_table

    cfg = spec.get("input") or {}
    if cfg.get("type") != "fasttext":
        if fasttext_model is not None or char_cnn_model is not None:
            raise ConfigError("--fasttext-model / --char-cnn-model apply to frozen-table inputs; this LM's input "
                              f"is {cfg.get('type')!r}")
        return None
    table_path = Path(cfg["vectors"])
    if fasttext_model is not None and char_cnn_model is not None:
        raise ConfigError("give --fasttext-model or --char-cnn-model, not both")
    if char_cnn_model is None and fasttext_model is None:
        fasttext_model = fasttext_model_for_table(table_path)
        elmo = table_path.parent.parent / "lm" / "elmo"
        # ELMo's joint bi-LM (one char-CNN shared by both directions), else its forward direction
        default_cnn = next((elmo / d / "model.pt" for d in ("joint", "forward") if (elmo / d / "model.pt").is_file()),
                           None)
        if fasttext_model is None and table_path.stem == "cnn" and default_cnn is not None:
            char_cnn_model = default_cnn
    if fasttext_model is not None:
        composer = SubwordVectors.from_bin(fasttext_model)
    elif char_cnn_model is not None:
        composer = CharCnnVectors.from_checkpoint(char_cnn_model)
    else:
        log.warning("no fastText model or char-CNN found for %s: words outside the LM vocabulary read <unk> "
                    "(pass --fasttext-model or --char-cnn-model to compose their vectors)", table_path)
        return None
    table = np.load(table_path, mmap_mode="r")
    if table.shape[1] != composer.dim:
        raise InputFileError(composer.source, f"gives {composer.dim}-d vectors but the input table {table_path} has "
                             f"{table.shape[1]} columns; pass the model the table was made from")
    check_table_matches(table, vocab.tokens, composer, table_path)
    log.info("words outside the vocabulary: vectors composed by %s", composer.source)
    return composer


def read_sentences(path: str | Path, tokenize: bool = False) -> list[list[str]]:
    """One sentence per line, whitespace-tokenized (or raw text split by
    :func:`elmoc.data.tokenize.tokenize` with ``tokenize``); a blank line is an error."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "sentences file not found")
    if tokenize:
        from elmoc.data.tokenize import tokenize as split_words
    from elmoc.data.readers import read_lines

    sentences = []
    for lineno, line in read_lines(path, empty_ok=True):
        tokens = split_words(line.strip()) if tokenize else line.split()
        if not tokens:
            raise InputFileError(path, "blank line: every line must hold one sentence (remove empty lines)", lineno)
        sentences.append(tokens)
    if not sentences:
        raise InputFileError(path, "no sentences in file")
    return sentences


def encode_batch(vocab: Vocabulary, sentences: Sequence[Sequence[str]], boundaries: bool,
                 subwords: "SubwordEncoder | None" = None
                 ) -> tuple[torch.Tensor, torch.Tensor, list[list[int]], list[list[str]] | None]:
    """Padded ids, lengths, per sentence the position of each word's representative,
    and the tokens as strings.

    Returns:
        ids: (batch, time) long, ``<pad>`` after each sequence; lengths: (batch,) long;
        word_positions: for sentence b, the time index standing for each of its words
        (the word itself, or its first subword for subword LMs);
        rows: row b's ``lengths[b]`` tokens as strings (with ``<s>``/``</s>``), or None
        for subword LMs.
    """
    rows, positions, strings = [], [], []
    offset = 1 if boundaries else 0
    for tokens in sentences:
        if subwords is not None:
            ids, first = subwords.encode_words(tokens)
        else:
            ids, first = vocab.encode(tokens), list(range(len(tokens)))
            strings.append([BOS] + list(tokens) + [EOS] if boundaries else list(tokens))
        rows.append([BOS_ID] + ids + [EOS_ID] if boundaries else ids)
        positions.append([offset + i for i in first])
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
    ids = torch.full((len(rows), int(lengths.max())), PAD_ID, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return ids, lengths, positions, (None if subwords is not None else strings)


def export_features(bilm: BiLM, sentences: list[list[str]], output: str | Path, batch_size: int = 64,
                    boundaries: bool | None = None, device: str | torch.device = "cpu",
                    layers: str = "all") -> None:
    """Write ``allennlp elmo``-style HDF5 for ``sentences`` to ``output`` atomically.

    ``layers``: ``all`` (dataset ``(layers, words, dim)``), ``top`` (``(words, dim)``,
    the last layer) or ``average`` (``(words, dim)``, the mean of the layers), as the
    ``--all/--top/--average`` flags of ``allennlp elmo``.  ``boundaries`` overrides
    the model's setting.
    """
    select_layers(np.zeros((1, 1, 1), np.float32), layers)  # checks the name
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    if boundaries is not None:
        bilm.boundaries = boundaries
    bilm = bilm.to(resolve_device(device)).eval()
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    with atomic_path(output) as tmp, h5py.File(tmp, "w") as h5, torch.no_grad():
        for start in tqdm(range(0, len(order), batch_size), desc="features", unit="batch", mininterval=5):
            index = order[start : start + batch_size]
            acts, _, _ = bilm.embed([sentences[i] for i in index])
            acts = acts.cpu().numpy()
            for row, i in enumerate(index):
                value = select_layers(acts[row][:, : len(sentences[i])], layers)
                h5.create_dataset(str(i), data=value, dtype="float32")
        mapping = {" ".join(tokens): str(i) for i, tokens in enumerate(sentences)}
        ds = h5.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())
        ds[0] = json.dumps(mapping)
        h5.attrs["num_layers"] = bilm.num_layers
        h5.attrs["dim"] = bilm.output_dim
        h5.attrs["boundaries"] = bilm.boundaries
        h5.attrs["open_vocabulary"] = bilm.open_vocabulary
    log.info("wrote %d sentences x %d layers x %d dims to %s", len(sentences), bilm.num_layers, bilm.output_dim, output)


def select_layers(value: np.ndarray, layers: str) -> np.ndarray:
    """``all``: (layers, words, dim) as is; ``top``: the last layer; ``average``: the
    mean over layers (``allennlp elmo --all/--top/--average``)."""
    if layers == "all":
        return value
    if layers == "top":
        return value[-1]
    if layers == "average":
        return value.mean(axis=0)
    raise ConfigError(f"layers must be all, top or average, got {layers!r}")
