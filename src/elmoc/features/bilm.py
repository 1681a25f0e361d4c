"""The bi-LM of feature extraction: a forward and a backward LM read a batch of
sentences and return every layer of both, per word (spec 5.3, 5.4); or one stack
returns its layers alone: a masked LM's bidirectional encoder (issue 25), or a
one-direction LM's forward LM (``train.directions: forward``, the GPT presets: the
paper's GPT is uni-directional, issue 31).

How the two directions are combined (ELMo-C's ``BiDirectionalRNN``): the forward LM
reads the sentence, the backward LM reads it reversed; each returns its encoder
layers (layer 0 = its own projected input); the backward layers are flipped back
to the sentence order and concatenated after the forward ones.  A masked LM or a
one-direction LM is a single stack (``backward_lm`` None): its layers are the features
as they are (a masked LM's read without any masking), ``hidden`` wide, not ``2 * hidden``.

Sentence boundaries (the paper is silent; issue 31.8): ``boundaries=True`` wraps each
sentence in ``<s>``/``</s>`` before encoding and drops the boundary positions on
output, as AllenNLP does for the released ELMo; ``boundaries=False`` feeds the bare
tokens, as the authors' ELMo-C code does.  The loaders choose by the model's kind
(:func:`elmoc.pretrained.loader.boundaries_by_kind`: the released bilm-tf ELMo with
boundaries, every LM elmoc trained without); ``features.boundaries`` overrides it.
Every sentence starts from a zero state (spec 5.4: ``reset_hidden_state=true``).

Open vocabulary (issue 12.1, paper sec. 3.2): words outside the LM vocabulary keep
their identity.  A char-CNN input reads their characters; a FastText input reads
the vector fastText composes from their n-grams (:mod:`elmoc.features.oov`).  Only
inputs with no open vocabulary (trainable or random word tables) read ``<unk>``.
The output layer is never built here.
For subword LMs (ELMo-Sub: the checkpoint's spec has ``data.tokenizer``) the LM reads
subwords and each word is represented by its first subword (spec 3.3).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import torch

from elmoc.data.vocab.vocabulary import BOS, BOS_ID, EOS, EOS_ID, PAD_ID, Vocabulary
from elmoc.encoders.base import map_state
from elmoc.encoders.elmo_lstm import ElmoLstmEncoder
from elmoc.errors import ConfigError, InputFileError
from elmoc.inputs.base import input_class
from elmoc.lm import LanguageModel
from elmoc.nn.masking import reverse_padded
from elmoc.nn.skip_init import skip_weight_init
from elmoc.registry import build

if TYPE_CHECKING:
    from elmoc.data.vocab.subword import SubwordEncoder
    from elmoc.inputs.base import Composer


class FeatureLM(LanguageModel):
    """One direction of a bi-LM as used for features: input layer -> encoder, a
    :class:`~elmoc.lm.LanguageModel` without its output layer (its ``encode`` runs it).

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
            n-grams, or the char-CNN that made a char-CNN table); see
            :func:`elmoc.features.oov.oov_vectors_for` (the input class's ``oov_composer``).
    """

    def __init__(self, input_layer: torch.nn.Module, encoder: torch.nn.Module, vocab: Vocabulary,
                 subwords: "Composer | None" = None):
        super().__init__(input_layer, encoder, output_layer=None)
        self.vocab = vocab
        self.subwords = subwords

    @classmethod
    def from_spec(cls, spec: dict[str, Any], state: dict[str, torch.Tensor], vocab: Vocabulary,
                  where: str | Path, subwords: "Composer | None" = None) -> "FeatureLM":
        """Build input + encoder from ``spec`` and load their weights from ``state`` (a
        LanguageModel or MaskedLM state dict; ``output_layer.*`` entries and a masked
        LM's ``mask_vector`` are ignored)."""
        for section in ("input", "encoder"):
            if not isinstance(spec.get(section), dict):
                raise InputFileError(where, f"the stored LM spec has no {section!r} section")
        input_cfg = input_class(spec["input"]).state_config(spec["input"])  # its weights are in ``state``
        with skip_weight_init():  # every parameter is loaded from ``state`` below (a missing one is refused)
            input_layer = build("input", input_cfg, vocab=vocab)
            encoder = build("encoder", spec["encoder"], input_dim=input_layer.output_dim)
        model = cls(input_layer, encoder, vocab, subwords)
        wanted = {k: v for k, v in state.items() if not k.startswith(("output_layer.", "mask_vector"))}
        missing, unexpected = model.load_state_dict(wanted, strict=False)
        if missing or unexpected:
            raise InputFileError(where, f"weights do not match the stored spec (missing {missing[:5]}, "
                                 f"unexpected {unexpected[:5]}); the file was written by another version")
        return model.eval()

    @property
    def open_vocabulary(self) -> bool:
        """True when out-of-vocabulary words get their own input vector."""
        return self.input_layer.open_vocabulary or self.subwords is not None

    def encode_sorted(self, ids: torch.Tensor, lengths: torch.Tensor, mask: torch.Tensor, state: Any,
                      vectors: torch.Tensor) -> tuple[list[torch.Tensor], Any]:
        """Every encoder layer of a padded batch, skipping the padding of an ELMo LSTM.

        :meth:`encode` runs every row for as many steps as the longest; at batch 64 of
        length-sorted text that is ~1.4x the real tokens.  Without gradients, an ELMo
        LSTM (whose state carries across calls, as between training windows) runs instead
        in up to four time segments, each over only the rows still going at its start
        (rows taken longest first; the cuts at the quartiles of the lengths), with each
        row's state carried from one segment to the next: the same numbers up to float
        rounding, for ~1.1x the real tokens.  Anything else (a Transformer attends over
        the whole sentence, a gradient is wanted) is one :meth:`encode` call.

        Shape: ids (batch, time) long; lengths (batch,) long; mask (batch, time) bool;
        vectors (batch, time, input_dim); returns the layers, each (batch, time, dim), zero
        at padding, and the encoder's final state (batch first, per row).
        """
        batch, steps = ids.shape
        if torch.is_grad_enabled() or not isinstance(self.encoder, ElmoLstmEncoder) or batch < 8:
            out = self.encode(ids, mask, state, vectors=vectors)
            return out.layers, out.state
        lengths = lengths.cpu()
        order = torch.argsort(lengths, descending=True, stable=True)
        ordered = lengths[order]
        cuts = sorted({0, steps} | {int(ordered[int(batch * q)]) for q in (0.25, 0.5, 0.75)})
        layers: list[torch.Tensor] | None = None
        rows_state = map_state(lambda t: t[order.to(t.device)], state)  # longest rows first
        for start, end in zip(cuts, cuts[1:]):
            active = int((ordered > start).sum())
            if active == 0:
                break
            index = order[:active].to(ids.device)
            carried = map_state(lambda t: t[:active], rows_state)
            out = self.encode(ids[index, start:end], mask[index, start:end], carried,
                              vectors=vectors[index, start:end])
            if layers is None:
                layers = [x.new_zeros(batch, steps, x.shape[-1]) for x in out.layers]
            for full, part in zip(layers, out.layers):
                full[index, start:end] = part
            rows_state = (out.state if rows_state is None
                          else map_state(lambda old, new: torch.cat([new, old[active:]]), rows_state, out.state))
        inverse = torch.argsort(order)
        return layers, map_state(lambda t: t[inverse.to(t.device)], rows_state)  # back to the input order

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
        if self.input_layer.open_vocabulary:  # reads every word itself (a char-CNN)
            return self.input_layer.word_vectors(rows, ids.shape[1], ids.device)
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
    """A forward and a backward :class:`FeatureLM` used together for features, or
    (``backward_lm`` None) one stack: a masked LM's bidirectional encoder, or a
    one-direction LM's forward LM (``train.directions: forward``).

    Load one with :mod:`elmoc.pretrained.loader` (``model.pt`` files or an exported
    model directory).
    """

    def __init__(self, forward_lm: FeatureLM, backward_lm: FeatureLM | None, vocab: Vocabulary,
                 subwords: "SubwordEncoder | None" = None, boundaries: bool = True):
        super().__init__()
        if backward_lm is not None and forward_lm.encoder.num_layers != backward_lm.encoder.num_layers:
            raise ConfigError("forward and backward LMs have different numbers of layers")
        if (backward_lm is not None and forward_lm.input_layer is not backward_lm.input_layer
                and same_input(forward_lm, backward_lm)):
            backward_lm.input_layer = forward_lm.input_layer  # one module: its vectors are computed once
        self.forward_lm = forward_lm
        self.backward_lm = backward_lm
        self.vocab = vocab
        self.subwords = subwords  # ELMo-Sub: words are represented by their first subword
        self.boundaries = boundaries

    @property
    def shared_input(self) -> bool:
        """Whether both directions read one input layer (bilm-tf's char-CNN, a joint bi-LM's
        input, ELMo-C's frozen FastText table): its vectors are then computed once."""
        return self.backward_lm is not None and self.forward_lm.input_layer is self.backward_lm.input_layer and (
            self.forward_lm.subwords is self.backward_lm.subwords)

    @property
    def num_layers(self) -> int:
        return self.forward_lm.encoder.num_layers

    @property
    def single(self) -> bool:
        """True for one stack (a masked LM, or a one-direction LM's forward LM), False for a
        forward + backward pair."""
        return self.backward_lm is None

    @property
    def output_dim(self) -> int:
        if self.single:
            return self.forward_lm.encoder.output_dim
        return self.forward_lm.encoder.output_dim + self.backward_lm.encoder.output_dim

    @property
    def open_vocabulary(self) -> bool:
        return self.forward_lm.open_vocabulary

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, rows: Sequence[Sequence[str]] | None = None,
                states: tuple[Any, Any] = (None, None)) -> tuple[torch.Tensor, tuple[Any, Any]]:
        """Layer activations of both directions (of the one stack when :attr:`single`).

        Shape:
            ids: (batch, time) long, padded with ``<pad>`` after each sentence;
            lengths: (batch,) long; rows: the tokens as strings (see
            :meth:`FeatureLM.token_vectors`), or None for ids only;
            states: the encoders' carried states (None = zeros, spec 5.4).
            returns: (batch, layers, time, output_dim) float32 (``output_dim`` = 2 *
            hidden for a pair, hidden for one stack), zero at padding, and the two
            encoders' final states (the second None for one stack).
        """
        mask = ids != PAD_ID
        vectors = self.forward_lm.token_vectors(ids, rows)
        fwd_layers, fwd_state = self.forward_lm.encode_sorted(ids, lengths, mask, states[0], vectors)
        if self.single:
            layers = [layer * mask.unsqueeze(-1) for layer in fwd_layers]
            return torch.stack(layers, dim=1).float(), (fwd_state, None)
        rev_ids = reverse_padded(ids, lengths)
        if self.shared_input:  # a word's input vector does not depend on the direction
            rev_vectors = reverse_padded(vectors, lengths)
        else:
            rev_rows = None if rows is None else [list(r)[::-1] for r in rows]
            rev_vectors = self.backward_lm.token_vectors(rev_ids, rev_rows)
        bwd_layers, bwd_state = self.backward_lm.encode_sorted(rev_ids, lengths, mask, states[1], rev_vectors)
        layers = []
        for f, b in zip(fwd_layers, bwd_layers):
            b = reverse_padded(b, lengths)
            layers.append(torch.cat([f, b], dim=-1) * mask.unsqueeze(-1))
        return torch.stack(layers, dim=1).float(), (fwd_state, bwd_state)

    def embed(self, sentences: Sequence[Sequence[str]], device: str | torch.device | None = None,
              states: tuple[Any, Any] = (None, None)) -> tuple[torch.Tensor, torch.Tensor, tuple[Any, Any]]:
        """Per-word activations of a batch of tokenized sentences.

        Shape: returns (batch, layers, words, output_dim) float32 (zero after each
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


def same_input(a: FeatureLM, b: FeatureLM) -> bool:
    """Whether two directions' input layers compute the same vectors: same class and
    settings, equal parameters and buffers (a frozen FastText table, a trained char-CNN
    loaded twice from one bilm-tf file or one joint checkpoint)."""
    x, y = a.input_layer, b.input_layer
    if type(x) is not type(y) or x.extra_repr() != y.extra_repr() or a.subwords is not b.subwords:
        return False
    tensors_x = dict(x.named_parameters()) | dict(x.named_buffers())
    tensors_y = dict(y.named_parameters()) | dict(y.named_buffers())
    return tensors_x.keys() == tensors_y.keys() and all(
        tensors_x[k].shape == tensors_y[k].shape and tensors_x[k].dtype == tensors_y[k].dtype
        and torch.equal(tensors_x[k], tensors_y[k]) for k in tensors_x)


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
