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
For subword LMs (ELMo-Sub: the checkpoint's spec has ``data.tokenizer``) the LM reads
subwords and each word is represented by its first subword (spec 3.3).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import h5py
import torch
from tqdm import tqdm

from elmoc.data.atomic import atomic_path
from elmoc.data.vocab import BOS_ID, EOS_ID, PAD_ID, Vocabulary
from elmoc.errors import ConfigError, InputFileError
from elmoc.lm import LanguageModel
from elmoc.nn.masking import reverse_padded
from elmoc.train.checkpoint import load_checkpoint

if TYPE_CHECKING:
    from elmoc.data.subword import SubwordEncoder

log = logging.getLogger(__name__)


class BiLM(torch.nn.Module):
    """A forward and a backward :class:`LanguageModel` used together for features."""

    def __init__(self, forward_lm: LanguageModel, backward_lm: LanguageModel, vocab: Vocabulary,
                 subwords: "SubwordEncoder | None" = None):
        super().__init__()
        if forward_lm.encoder.num_layers != backward_lm.encoder.num_layers:
            raise ConfigError("forward and backward LMs have different numbers of layers")
        self.forward_lm = forward_lm
        self.backward_lm = backward_lm
        self.vocab = vocab
        self.subwords = subwords  # ELMo-Sub: words are represented by their first subword

    @classmethod
    def from_checkpoints(cls, forward_path: str | Path, backward_path: str | Path,
                         vocab_path: str | Path | None = None) -> "BiLM":
        lms, vocab, subwords = [], None, None
        for path, direction in ((forward_path, "forward"), (backward_path, "backward")):
            payload = load_checkpoint(path)
            tokenizer = (payload["spec"].get("data") or {}).get("tokenizer")
            if tokenizer and subwords is None:
                from elmoc.data.subword import SubwordEncoder

                subwords = SubwordEncoder(tokenizer)
            if payload.get("direction") != direction:
                raise InputFileError(path, f"expected a {direction} checkpoint, found {payload.get('direction')!r}")
            vpath = vocab_path or payload.get("vocab_path")
            if vocab is None:
                if vpath is None:
                    raise InputFileError(path, "checkpoint records no vocabulary; pass --vocab")
                vocab = Vocabulary.load(vpath)
            lm = LanguageModel.from_spec(payload["spec"], vocab)
            lm.load_state_dict(payload["model"])
            lm.eval()
            lms.append(lm)
        return cls(lms[0], lms[1], vocab, subwords)

    @property
    def num_layers(self) -> int:
        return self.forward_lm.encoder.num_layers

    @property
    def output_dim(self) -> int:
        return self.forward_lm.encoder.output_dim + self.backward_lm.encoder.output_dim

    @torch.no_grad()
    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Layer activations of both directions.

        Shape:
            ids: (batch, time) long, padded with ``<pad>`` after each sentence;
            lengths: (batch,) long.
            returns: (batch, layers, time, 2 * hidden) float32, zero at padding.
        """
        mask = ids != PAD_ID
        fwd = self.forward_lm.encode(ids, mask).layers
        rev_ids = reverse_padded(ids, lengths)
        bwd = self.backward_lm.encode(rev_ids, mask).layers
        layers = []
        for f, b in zip(fwd, bwd):
            b = reverse_padded(b, lengths)
            layers.append(torch.cat([f, b], dim=-1) * mask.unsqueeze(-1))
        return torch.stack(layers, dim=1).float()


def read_sentences(path: str | Path) -> list[list[str]]:
    """One whitespace-tokenized sentence per line; a blank line is an error."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "sentences file not found")
    sentences = []
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputFileError(path, f"not valid UTF-8 ({e.reason})", lineno) from None
            tokens = line.split()
            if not tokens:
                raise InputFileError(path, "blank line: every line must hold one tokenized sentence", lineno)
            sentences.append(tokens)
    if not sentences:
        raise InputFileError(path, "no sentences in file")
    return sentences


def encode_batch(vocab: Vocabulary, sentences: Sequence[Sequence[str]], boundaries: bool,
                 subwords: "SubwordEncoder | None" = None) -> tuple[torch.Tensor, torch.Tensor, list[list[int]]]:
    """Padded ids, lengths, and per sentence the position of each word's representative.

    Returns:
        ids: (batch, time) long, ``<pad>`` after each sequence; lengths: (batch,) long;
        word_positions: for sentence b, the time index standing for each of its words
        (the word itself, or its first subword for subword LMs).
    """
    rows, positions = [], []
    offset = 1 if boundaries else 0
    for tokens in sentences:
        if subwords is not None:
            ids, first = subwords.encode_words(tokens)
        else:
            ids, first = vocab.encode(tokens), list(range(len(tokens)))
        rows.append([BOS_ID] + ids + [EOS_ID] if boundaries else ids)
        positions.append([offset + i for i in first])
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
    ids = torch.full((len(rows), int(lengths.max())), PAD_ID, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return ids, lengths, positions


def export_features(bilm: BiLM, sentences: list[list[str]], output: str | Path, batch_size: int = 64,
                    boundaries: bool = True, device: str | torch.device = "cpu") -> None:
    """Write ``allennlp elmo --all``-style HDF5 for ``sentences`` to ``output`` atomically."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    bilm = bilm.to(device)
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    with atomic_path(output) as tmp, h5py.File(tmp, "w") as h5:
        for start in tqdm(range(0, len(order), batch_size), desc="extract", unit="batch", mininterval=5):
            index = order[start : start + batch_size]
            ids, lengths, positions = encode_batch(bilm.vocab, [sentences[i] for i in index], boundaries,
                                                   bilm.subwords)
            acts = bilm(ids.to(device), lengths.to(device)).cpu().numpy()
            for row, i in enumerate(index):
                h5.create_dataset(str(i), data=acts[row][:, positions[row]], dtype="float32")
        mapping = {" ".join(tokens): str(i) for i, tokens in enumerate(sentences)}
        ds = h5.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())
        ds[0] = json.dumps(mapping)
        h5.attrs["num_layers"] = bilm.num_layers
        h5.attrs["dim"] = bilm.output_dim
        h5.attrs["boundaries"] = boundaries
    log.info("wrote %d sentences x %d layers x %d dims to %s", len(sentences), bilm.num_layers, bilm.output_dim, output)
