""":class:`Elmo`, AllenNLP's ``Elmo`` (``allennlp.modules.elmo``, 2.10) over an elmoc bi-LM,
:func:`batch_to_ids` and :func:`embed_sentences`.

Code written for AllenNLP runs with one changed import::

    from elmoc import Elmo, batch_to_ids      # was: from allennlp.modules.elmo import ...
    elmo = Elmo(options_file, weight_file, 2, dropout=0)
    character_ids = batch_to_ids([["First", "sentence", "."], ["Another", "."]])
    embeddings = elmo(character_ids)          # {"elmo_representations": [2 x (2, 3, 1024)], "mask": (2, 3)}

The bilm-tf ``options.json`` + weights HDF5 (paths, or URLs downloaded once into the cache
of :mod:`elmoc.pretrained.hub`) are converted on the fly.  Differences from AllenNLP, on
purpose: every call starts from zero LSTM states (AllenNLP carries them from batch to batch;
``stateful=True`` does that too), and the module also takes token lists and model directories
(:meth:`Elmo.from_pretrained`).  As AllenNLP's, the module starts in training mode: its
dropout (default 0.5) is applied until ``.eval()``.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from elmoc.data.vocab.vocabulary import PAD_ID
from elmoc.devices import resolve_device
from elmoc.errors import ConfigError
from elmoc.features.bilm import BiLM, encode_batch
from elmoc.features.embed import check_batching, select_layers, sentence_features
from elmoc.features.scalar_mix import ScalarMix
from elmoc.inputs.characters import allennlp_char_ids, decode_char_ids
from elmoc.pretrained.loader import load_bilm

log = logging.getLogger(__name__)


class Elmo(nn.Module):
    """AllenNLP's ``Elmo``: a bi-LM's layers mixed into ``num_output_representations``
    learned scalar mixes, each followed by dropout.

    Args (AllenNLP 2.10's, in its order):
        options_file, weight_file: a bilm-tf ``options.json`` and weights HDF5 (paths or
            http(s)/file URLs, fetched once into the cache with a pin); None with ``module``.
        num_output_representations: how many scalar mixes (e.g. 2: one for the input
            and one for the output of a task model).
        requires_grad: fine-tune the bi-LM too (default: frozen; the mixes are always trained).
        do_layer_norm: normalise each layer before mixing (over the unmasked positions,
            sentence boundaries included, as AllenNLP).
        dropout: applied to each representation after mixing (the module starts in training
            mode, as AllenNLP's and every ``nn.Module``: call ``.eval()`` for features).
        vocab_to_cache: words whose ids ``forward``'s ``word_inputs`` holds (id 0 = padding).
        keep_sentence_boundaries: keep the ``<S>`` / ``</S>`` positions in the output (and mask).
        scalar_mix_parameters: fixed (untrainable) mix weights before the softmax, one per layer.
        module: an elmoc :class:`~elmoc.features.bilm.BiLM` to use instead of the files.
        stateful (elmoc's, keyword only): carry the LSTM states from one call to the next,
            row by row, as AllenNLP does (default False: every sentence starts from zeros,
            as ``elmoc extract`` and bilm-tf's ``dump_bilm_embeddings``).

    ``forward(inputs, word_inputs=None)``: ``inputs`` is :func:`batch_to_ids`' character
    ids (batch, time, 50) (or with more leading dimensions), a list of token lists, or word
    ids (batch, time) long (in ``vocab_to_cache``, else the model directory's vocabulary;
    0 = padding).  Returns ``{"elmo_representations": [num_output_representations x
    (batch, time, dim)], "mask": (batch, time) bool}``.
    """

    def __init__(self, options_file: str | Path | None, weight_file: str | Path | None,
                 num_output_representations: int, requires_grad: bool = False, do_layer_norm: bool = False,
                 dropout: float = 0.5, vocab_to_cache: Sequence[str] | None = None,
                 keep_sentence_boundaries: bool = False, scalar_mix_parameters: Sequence[float] | None = None,
                 module: BiLM | None = None, *, stateful: bool = False):
        super().__init__()
        if not isinstance(num_output_representations, int) or num_output_representations < 1:
            raise ConfigError(f"num_output_representations must be >= 1, got {num_output_representations!r}")
        if module is not None:
            if options_file is not None or weight_file is not None:
                raise ConfigError("give options_file and weight_file, or module, not both (pass None for the files)")
            if not isinstance(module, BiLM):
                raise ConfigError(f"module must be an elmoc BiLM (elmoc.load_bilm), got {type(module).__name__}; "
                                  "AllenNLP's own bi-LM modules are not supported")
            bilm = module
        elif options_file is None or weight_file is None:
            raise ConfigError("give the bilm-tf options_file and weight_file (or a model directory: "
                              "Elmo.from_pretrained(DIR))")
        else:
            from elmoc.pretrained.bilm_tf import load_bilm_tf
            from elmoc.pretrained.hub import local_file

            bilm = load_bilm_tf(local_file(options_file), local_file(weight_file))
        if keep_sentence_boundaries and (not bilm.boundaries or bilm.subwords is not None):
            raise ConfigError("keep_sentence_boundaries=True: this model reads no <S> ... </S> around sentences "
                              "(an LM elmoc trained reads the bare tokens); leave it False")
        self.bilm = bilm.eval()
        self.requires_grad = bool(requires_grad)
        for p in self.bilm.parameters():
            p.requires_grad_(self.requires_grad)
        self.dropout = nn.Dropout(p=dropout)
        self.scalar_mixes = nn.ModuleList(
            ScalarMix(bilm.num_layers, layer_norm=do_layer_norm, initial_weights=scalar_mix_parameters,
                      trainable=scalar_mix_parameters is None)
            for _ in range(num_output_representations))
        self.vocab_to_cache = None if vocab_to_cache is None else [str(w) for w in vocab_to_cache]
        self.keep_sentence_boundaries = bool(keep_sentence_boundaries)
        self.stateful = bool(stateful)
        self._states: tuple[Any, Any] | None = None

    @classmethod
    def from_pretrained(cls, directory: str | Path, num_output_representations: int = 1, dropout: float = 0.5,
                        requires_grad: bool = False, device: str | torch.device = "cpu", **kwargs: Any) -> "Elmo":
        """Load a model directory (``elmoc export``), a released ELMo by name (``original``,
        ``medium``, ``small``) or a model directory's archive at a URL (both fetched once into
        the cache, :mod:`elmoc.pretrained.hub`; offline afterwards).

        The module starts in training mode, as AllenNLP's: ``dropout`` (default 0.5) is
        applied to each representation until ``.eval()`` is called.  Other keyword arguments
        are :class:`Elmo`'s (``do_layer_norm``, ``scalar_mix_parameters``, ``stateful``...).
        """
        from elmoc.pretrained.hub import model_directory

        return cls(None, None, num_output_representations, requires_grad=requires_grad, dropout=dropout,
                   module=load_bilm(model_directory(directory), device), **kwargs).to(resolve_device(device))

    def get_output_dim(self) -> int:
        return self.bilm.output_dim

    def train(self, mode: bool = True) -> "Elmo":
        super().train(mode)
        self.bilm.eval()  # the bi-LM never applies its training dropout here
        return self

    def reset_states(self) -> None:
        """Forget the carried states (``stateful=True``)."""
        self._states = None

    def forward(self, inputs: Sequence[Sequence[str]] | torch.Tensor,
                word_inputs: torch.Tensor | None = None) -> dict[str, Any]:
        shape = None  # the leading dimensions of inputs with more than one batch dimension
        if word_inputs is not None and self.vocab_to_cache is None:
            log.warning("word_inputs were passed to Elmo but it has no vocab_to_cache: using inputs")
            word_inputs = None
        if word_inputs is not None:
            shape, sentences, width = self._from_ids(word_inputs, self.vocab_to_cache, "word_inputs")
        elif isinstance(inputs, torch.Tensor) and inputs.dim() >= 3:
            shape, sentences, width = self._from_chars(inputs)
        elif isinstance(inputs, torch.Tensor):
            vocab = self.vocab_to_cache if self.vocab_to_cache is not None else self.bilm.vocab.tokens
            shape, sentences, width = self._from_ids(inputs, vocab, "word ids")
        else:
            sentences = token_lists(inputs, "Elmo")
            width = max((len(s) for s in sentences), default=0)
        reps, mask = self._represent(sentences, width)
        if shape is not None:
            reps = [r.reshape(*shape, *r.shape[1:]) for r in reps]
            mask = mask.reshape(*shape, mask.shape[-1])
        return {"elmo_representations": reps, "mask": mask}

    def _from_chars(self, chars: torch.Tensor) -> tuple[tuple[int, ...], list[list[str]], int]:
        if chars.dtype not in (torch.long, torch.int, torch.int16) or chars.shape[-1] < 3:
            raise ConfigError(f"character ids must be a (batch, time, characters) integer tensor "
                              f"(batch_to_ids), got {chars.dtype} {tuple(chars.shape)}")
        flat = chars.reshape(-1, *chars.shape[-2:]).tolist()
        sentences = []
        for b, row in enumerate(flat):
            try:
                tokens = [decode_char_ids(token) for token in row]
            except ValueError as e:
                raise ConfigError(f"row {b} of the character ids is not ELMo's ({e}); make them with "
                                  "batch_to_ids") from None
            sentences.append(_prefix(tokens, b, "character ids"))
        return tuple(chars.shape[:-2]), sentences, chars.shape[-2]

    @staticmethod
    def _from_ids(ids: torch.Tensor, vocab: Sequence[str], what: str) -> tuple[tuple[int, ...], list[list[str]], int]:
        if ids.dim() < 2 or ids.dtype != torch.long:
            raise ConfigError(f"{what} must be a (batch, time) long tensor, got {ids.dtype} {tuple(ids.shape)}")
        if ids.numel() and (int(ids.max()) >= len(vocab) or int(ids.min()) < 0):
            raise ConfigError(f"{what} must lie in [0, {len(vocab)}) (vocab_to_cache, or the model's vocab.txt)")
        flat = ids.reshape(-1, ids.shape[-1]).tolist()
        sentences = [_prefix([vocab[i] if i != 0 else None for i in row], b, what) for b, row in enumerate(flat)]
        return tuple(ids.shape[:-1]), sentences, ids.shape[-1]

    def _represent(self, sentences: list[list[str]], width: int) -> tuple[list[torch.Tensor], torch.Tensor]:
        """The mixed representations (dropout applied) and the mask of a batch, ``width``
        positions wide (+ 2 with the boundaries kept); empty sentences give zeros."""
        device = next(self.bilm.parameters()).device
        keep = self.keep_sentence_boundaries
        batch = len(sentences)
        full = width + 2 if keep else width
        rows = [b for b, s in enumerate(sentences) if s]
        dim = self.bilm.output_dim
        mask = torch.zeros(batch, full, dtype=torch.bool, device=device)
        layers = torch.zeros(self.bilm.num_layers, batch, full, dim, device=device)
        if rows:
            states = self._carried(len(rows)) if self.stateful else (None, None)
            ids, lengths, positions, strings = encode_batch(self.bilm.vocab, [sentences[b] for b in rows],
                                                            self.bilm.boundaries, self.bilm.subwords)
            with torch.set_grad_enabled(self.requires_grad and torch.is_grad_enabled()):
                acts, new_states = self.bilm(ids.to(device), lengths.to(device), strings, states)
            if self.stateful:
                self._keep(new_states)
            seen = (ids != PAD_ID).to(device)  # every position the LM read, boundaries included
            index = torch.tensor(rows, device=device)
            if keep:
                layers[:, index, : acts.shape[2]] = acts.transpose(0, 1)
                mask[index, : acts.shape[2]] = seen
            else:
                mixed_mask = torch.zeros(batch, acts.shape[2], dtype=torch.bool, device=device)
                mixed_mask[index] = seen
                return self._mix_then_pick(acts, mixed_mask, index, positions, batch, width)
        reps = [self.dropout(mix(layers, mask)) for mix in self.scalar_mixes]
        return reps, mask

    def _mix_then_pick(self, acts: torch.Tensor, seen: torch.Tensor, index: torch.Tensor,
                       positions: list[list[int]], batch: int, width: int) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Mix every position the LM read (layer norm over them all, as AllenNLP), then keep
        each word's (the boundaries dropped; a subword LM's first subword)."""
        device = acts.device
        layers = acts.new_zeros(acts.shape[1], batch, acts.shape[2], acts.shape[3])
        layers[:, index] = acts.transpose(0, 1)
        pick = torch.zeros(batch, width, dtype=torch.long, device=device)
        mask = torch.zeros(batch, width, dtype=torch.bool, device=device)
        for row, pos in zip(index.tolist(), positions):
            pick[row, : len(pos)] = torch.tensor(pos, dtype=torch.long, device=device)
            mask[row, : len(pos)] = True
        reps = []
        for mix in self.scalar_mixes:
            mixed = mix(layers, seen)  # (batch, time, dim)
            words = torch.gather(mixed, 1, pick[:, :, None].expand(-1, -1, mixed.shape[-1]))
            reps.append(self.dropout(words * mask[:, :, None]))
        return reps, mask

    def _carried(self, batch: int) -> tuple[Any, Any]:
        if self._states is None:
            return (None, None)
        return tuple(_resize(s, batch) for s in self._states)

    def _keep(self, new: tuple[Any, Any]) -> None:
        new = tuple(_detach(s) for s in new)
        if self._states is not None:
            new = tuple(_merge(n, o) for n, o in zip(new, self._states))
        self._states = new


def token_lists(sentences: Any, where: str) -> list[list[str]]:
    """``sentences`` as lists of token strings; a raw string where a token list is expected
    (``["The cat sat ."]``, which would be read as 13 one-character tokens) is refused."""
    if isinstance(sentences, str):
        raise ConfigError(f"{where}: got one string, expected a batch of token lists: pass "
                          f"[{sentences.split()!r}] (tokenize the text first, e.g. str.split)")
    out = []
    for i, sentence in enumerate(sentences):
        if isinstance(sentence, str):
            raise ConfigError(f"{where}: sentence {i} is a string ({sentence[:40]!r}), expected a list of tokens: "
                              f"pass {sentence.split()[:6]!r}... (tokenize the text first, e.g. str.split)")
        tokens = list(sentence)
        bad = [t for t in tokens if not isinstance(t, str)]
        if bad:
            raise ConfigError(f"{where}: sentence {i} holds {bad[0]!r} ({type(bad[0]).__name__}); tokens are strings")
        out.append(tokens)
    return out


def batch_to_ids(batch: Sequence[Sequence[str]]) -> torch.Tensor:
    """AllenNLP's ``batch_to_ids``: the ELMo character ids of a batch of token lists,
    (batch, longest sentence, 50) long, padded with zeros (``<S>`` / ``</S>`` are the
    sentence-boundary characters, every other token is spelled out in UTF-8 bytes)."""
    sentences = token_lists(batch, "batch_to_ids")
    width = max((len(s) for s in sentences), default=0)
    out = torch.zeros(len(sentences), width, 50, dtype=torch.long)
    for b, sentence in enumerate(sentences):
        if sentence:
            out[b, : len(sentence)] = torch.tensor([allennlp_char_ids(t) for t in sentence], dtype=torch.long)
    return out


def _prefix(tokens: list[str | None], row: int, what: str) -> list[str]:
    """The tokens of one padded row (None = padding), which must all come before the padding."""
    words = [t for t in tokens if t is not None]
    if any(t is None for t in tokens[: len(words)]):
        raise ConfigError(f"row {row} of the {what} has padding between its tokens; put every row's tokens first")
    return words


def _detach(state: Any) -> Any:
    if isinstance(state, torch.Tensor):
        return state.detach()
    return type(state)(_detach(s) for s in state)


def _resize(state: Any, batch: int) -> Any:
    """Rows ``[:batch]`` of a carried state, zeros for rows it never had."""
    if isinstance(state, torch.Tensor):
        if state.shape[0] >= batch:
            return state[:batch]
        return torch.cat([state, state.new_zeros(batch - state.shape[0], *state.shape[1:])])
    return type(state)(_resize(s, batch) for s in state)


def _merge(new: Any, old: Any) -> Any:
    """The new rows, and the old ones beyond the new batch (AllenNLP's stateful update)."""
    if isinstance(new, torch.Tensor):
        return torch.cat([new, old[new.shape[0]:]]) if old.shape[0] > new.shape[0] else new
    return type(new)(_merge(n, o) for n, o in zip(new, old))


def embed_sentences(model: str | Path | BiLM, sentences: Sequence[Sequence[str]], layers: str = "all",
                    batch_size: int = 64, device: str | torch.device = "cpu",
                    max_tokens: int | None = None) -> list[np.ndarray]:
    """Features of tokenized sentences, one float32 array per sentence, in input order.

    ``layers``: ``all`` -> (layers, words, dim); ``top`` / ``average`` -> (words, dim).
    ``model`` is a model directory or a loaded :class:`BiLM`.  Batched as ``elmoc embed``:
    sorted by length, at most ``batch_size`` sentences and ``max_tokens`` padded tokens
    per batch (:func:`~elmoc.features.embed.length_batches`).
    """
    select_layers(np.zeros((1, 1, 1), np.float32), layers)  # checks the name before loading
    check_batching(batch_size, max_tokens)
    bilm = load_bilm(model, device) if not isinstance(model, BiLM) else model.to(resolve_device(device))
    bilm.eval()
    out: list[np.ndarray] = [np.empty(0)] * len(sentences)
    for i, value in sentence_features(bilm, sentences, layers, batch_size, max_tokens=max_tokens):
        out[i] = value
    return out
