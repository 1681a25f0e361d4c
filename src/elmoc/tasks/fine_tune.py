"""Fine-tuning the bi-LM inside a task model (issue 37; registers nothing).

A task section with ``encoder: fine_tune`` runs the variant's bi-LM (a model directory
written by ``elmoc export``) on each batch instead of reading its layers from an HDF5
file.  :class:`LMInputs` is the :class:`~elmoc.tasks.embedder.TaskInputs` of such a run;
its ``embedder(...)`` gives an :class:`LMTokenEmbedder`, the feature path's
:class:`~elmoc.tasks.embedder.TokenEmbedder` with the bi-LM as its submodule ``lm``, so
every task model builds and trains on it unchanged.  :class:`FineTuner` is what the
runner asks for the optimizer's parameter groups, the per-step schedule and the
per-epoch unfreezing.

Recipes (``fine_tune.recipe``) are registered kinds, one file each in :mod:`elmoc.tasks.recipes`
(``ulmfit``, ``full``, ``full_constant``, ``frozen``; the contract in
:mod:`elmoc.tasks.recipes.base`): a recipe's options are its typed section, and it says the LM
layers' rates, the per-step schedule and which layers train in each epoch.

A frozen table (ELMo-C's FastText input) is a buffer and stays frozen in every recipe.
"""
from __future__ import annotations

import copy
import contextlib
import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import torch
import torch.utils.checkpoint
from torch import nn

from elmoc.config import check_choice, registered, typed_options
from elmoc.config_section import check_keys
from elmoc.errors import ConfigError
from elmoc.features.bilm import BiLM
from elmoc.lm import parameter_layers
from elmoc.registry import by_name, list_available
from elmoc.tasks.embedder import TaskInputs, TextBatch, TokenEmbedder
from elmoc.tasks.recipes.base import Recipe, linear_warmup_decay, slanted_triangular  # noqa: F401 (re-exported)
from elmoc.tasks.recipes.full import BERT_LM_LR  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)

PRECISIONS = ("fp32", "bf16")
ENCODERS = ("features", "fine_tune")  # a task section's ``encoder``


@dataclass(frozen=True)
class FineTuneSettings:
    """A task section's ``fine_tune`` mapping: the keys every recipe shares, and the recipe's own
    options (its ``Options``, :mod:`elmoc.tasks.recipes.base`) in ``options``.

    Attributes:
        recipe: a registered recipe (``ulmfit``, ``full``, ``full_constant``, ``frozen``, ...).
        lm_lr: the LM's (top layer's) learning rate; None = the recipe's default (``trainer.lr``;
            ``full``: BERT_LM_LR).
        checkpointing: recompute the LM's forward in the backward pass (less memory, ~1.3x time).
        precision: ``fp32``, or ``bf16`` (autocast of the LM's forward on a device that has it).
        lm_dropout: the rate of every dropout inside the LM while it is fine-tuned (the LM is
            in train mode then; 0 keeps it deterministic).
        options: the recipe's typed options (e.g. ulmfit's ``decay``, ``slanted``, ``cut_frac``,
            ``ratio``, ``gradual_unfreeze``; full's ``warmup_frac``), given flat in the mapping.
    """

    recipe: str = "ulmfit"
    lm_lr: float | None = None
    checkpointing: bool = False
    precision: str = "fp32"
    lm_dropout: float = 0.0
    options: Any = None

    OPTION_RANGES = {"lm_lr": "> 0 or null", "lm_dropout": "[0, 1)"}
    CHOICES = {"precision": PRECISIONS}

    @classmethod
    def from_section(cls, mapping: dict[str, Any] | None, name: str = "fine_tune") -> "FineTuneSettings":
        """Checked settings from a ``fine_tune`` mapping (None or {}: the defaults); a bad key or
        value is one ConfigError naming it (another recipe's option: naming that recipe)."""
        mapping = mapping if mapping is not None else {}
        if not isinstance(mapping, dict):
            raise ConfigError(f"config {name} must be a mapping, got {mapping!r}")
        recipe = registered("recipe", mapping.get("recipe") or cls.recipe, f"{name}.recipe")
        own = {f.name for f in dataclasses.fields(recipe.Options)}
        shared = {f.name for f in dataclasses.fields(cls)} - {"options"}
        for key in mapping:
            owner = next((r for r in list_available("recipe") if key in _option_names(r)), None)
            if key not in own and key not in shared and owner is not None:
                raise ConfigError(f"config {name}.{key} is an option of recipe {owner!r}, not of "
                                  f"{mapping.get('recipe') or cls.recipe!r}; remove it or set recipe: {owner}")
        check_keys(mapping, own | shared, name)
        options = typed_options(recipe.Options, {k: v for k, v in mapping.items() if k in own}, name)
        common = typed_options(_Shared, {k: v for k, v in mapping.items() if k not in own}, name)
        return cls(**dataclasses.asdict(common), options=options)

    @property
    def method(self) -> Recipe:
        """The recipe's object (:mod:`elmoc.tasks.recipes.base`)."""
        return by_name("recipe", self.recipe)(self.options)

    @property
    def trainable(self) -> bool:
        return by_name("recipe", self.recipe).trainable

    def record(self) -> dict[str, Any]:
        """The settings as the metrics JSON records them: the shared keys and the recipe's options, flat."""
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "options"}
        return {**shared, **dataclasses.asdict(self.options)}


@dataclass(frozen=True)
class _Shared:
    """The keys of ``fine_tune`` every recipe shares, typed (:class:`FineTuneSettings`)."""

    recipe: str = FineTuneSettings.recipe
    lm_lr: float | None = None
    checkpointing: bool = False
    precision: str = "fp32"
    lm_dropout: float = 0.0

    OPTION_RANGES = FineTuneSettings.OPTION_RANGES
    CHOICES = FineTuneSettings.CHOICES


def _option_names(recipe: str) -> set[str]:
    return {f.name for f in dataclasses.fields(by_name("recipe", recipe).Options)}


def encoder_mode(section: dict[str, Any], name: str) -> str:
    """A task section's ``encoder`` (default ``features``), checked."""
    value = section.get("encoder") or "features"
    check_choice(value, ENCODERS, f"{name}.encoder")
    return value


def lm_layer_of(lm: BiLM) -> dict[str, int]:
    """Parameter name (within ``lm``) -> LM layer, both directions alike (:func:`elmoc.lm.parameter_layers`
    of each direction's LM, which has no output layer here): l for the parameters of the encoder's
    block l - 1 (an LSTM layer, a Transformer block), L (the top) for what the encoder registers
    after its blocks (a Transformer's final LayerNorm), 0 for the input layer and the rest of the
    encoder (an input projection).  An encoder's ``num_layers`` counts the layers it returns: its
    input view and one per block, so L = num_layers - 1."""
    layers: dict[str, int] = {}
    for direction in ("forward_lm", "backward_lm"):
        one = getattr(lm, direction)
        if one is not None:
            layers.update({f"{direction}.{name}": layer for name, layer in parameter_layers(one).items()})
    return layers


class LMTokenEmbedder(TokenEmbedder):
    """:class:`TokenEmbedder` whose LM layers come from its own bi-LM ``lm``, run on each batch
    (with gradients unless the recipe is ``frozen``).

    Args:
        lm: the bi-LM (this module's own copy: fine-tuning changes it).
        settings: the fine-tuning settings.
        num_layers: the layers ``lm`` returns (input view + encoder layers).
        word_table, layer_norm, feature_dropout, trainable_words: as :class:`TokenEmbedder`.

    Shape:
        forward(text: TextBatch) -> (batch, time, output_dim), zero at padding.
    """

    def __init__(self, lm: BiLM, settings: FineTuneSettings, num_layers: int, word_table: torch.Tensor | None,
                 layer_norm: bool = False, feature_dropout: float = 0.0, trainable_words: bool = False):
        super().__init__(word_table, num_layers, lm.output_dim, layer_norm=layer_norm,
                         feature_dropout=feature_dropout, trainable_words=trainable_words)
        self.settings = settings
        self.lm = lm
        self.layer_of = lm_layer_of(lm)
        self.top_layer = num_layers - 1
        for module in lm.modules() if settings.trainable else ():  # the LM's dropouts while fine-tuned
            if isinstance(module, nn.Dropout):
                module.p = settings.lm_dropout
            for attr in ("recurrent_dropout", "dropout"):
                if isinstance(getattr(module, attr, None), float):
                    setattr(module, attr, settings.lm_dropout)
        for p in lm.parameters():
            p.requires_grad_(settings.trainable)
        self.train(self.training)

    def train(self, mode: bool = True) -> "LMTokenEmbedder":
        super().train(mode)
        if not self.settings.trainable:
            self.lm.eval()  # frozen: the feature path's LM
        return self

    def lm_layers(self, tokens: Sequence[Sequence[str]]) -> torch.Tensor:
        """The bi-LM's layers of a batch of token lists.

        Shape: returns (layers, batch, words, dim) float32, zero after each sentence's words.
        """
        s = self.settings
        if not s.trainable or not torch.is_grad_enabled():
            with torch.no_grad():
                return self.lm.embed(tokens)[0].transpose(0, 1)
        device = next(self.lm.parameters()).device
        bf16 = s.precision == "bf16" and bf16_ok(device)
        if s.precision == "bf16" and not bf16 and not getattr(self, "_said_fp32", False):
            log.warning("fine_tune.precision bf16: %s has no bf16 autocast (a GPU before Ampere); the LM runs in "
                        "fp32", device)
            self._said_fp32 = True
        cast = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()

        def run(*_: torch.Tensor) -> torch.Tensor:
            with cast:
                return self.lm.embed(tokens)[0].float()

        if s.checkpointing:
            acts = torch.utils.checkpoint.checkpoint(run, use_reentrant=False)
        else:
            acts = run()
        return acts.transpose(0, 1)

    def forward(self, text: TextBatch) -> torch.Tensor:
        return super().forward(dataclasses.replace(text, features=self.lm_layers(text.tokens)))


def bf16_ok(device: torch.device) -> bool:
    """Whether bf16 autocast runs on ``device`` (the CPU's does; a GPU's from Ampere on)."""
    return device.type == "cpu" or (device.type == "cuda" and torch.cuda.is_bf16_supported())


class LMInputs(TaskInputs):
    """The inputs of a fine-tuning run: optional word vectors, and the bi-LM in-process.

    ``encode`` gives batches with ``features=None`` (the embedder computes them);
    ``embedder(...)`` gives an :class:`LMTokenEmbedder` over a copy of the bi-LM.
    """

    def __init__(self, lm: BiLM, settings: FineTuneSettings, word_vectors: np.ndarray | None = None,
                 words: Sequence[str] | None = None, lowercase: bool = False):
        self.lm, self.fine_tune = lm.eval(), settings
        with torch.no_grad():
            self.num_lm_layers = int(lm.embed([["."]])[0].shape[1])
        super().__init__(word_vectors, words, None, lowercase)

    @classmethod
    def create(cls, sentences: Iterable[Sequence[str]], lm_dir: str | Path, settings: FineTuneSettings,
               vectors: str | Path | None = None, vocab: str | Path | None = None,
               lowercase: bool = False) -> "LMInputs":
        """Load the bi-LM of the model directory ``lm_dir`` (written by ``elmoc export``) and the
        word table over ``sentences`` when ``vectors`` is given."""
        from elmoc.pretrained.loader import load_bilm

        table, words = cls.word_table_of(sentences, vectors, vocab, lowercase)
        return cls(load_bilm(lm_dir), settings, table, words, lowercase)

    @property
    def feature_dim(self) -> int:
        return int(self.lm.output_dim)

    def copy_lm(self) -> BiLM:
        """A copy of the bi-LM that a task model may change; its frozen tensors (buffers: a
        FastText table) and unseen-word composers are shared, not copied."""
        shared = [*self.lm.buffers(), self.lm.subwords, self.lm.forward_lm.subwords,
                  getattr(self.lm.backward_lm, "subwords", None)]
        return copy.deepcopy(self.lm, memo={id(x): x for x in shared if x is not None})

    def embedder(self, layer_norm: bool = False, feature_dropout: float = 0.0,
                 trainable_words: bool = False) -> LMTokenEmbedder:
        return LMTokenEmbedder(self.copy_lm(), self.fine_tune, self.num_lm_layers, self.word_table,
                               layer_norm=layer_norm, feature_dropout=feature_dropout,
                               trainable_words=trainable_words)


class FineTuner:
    """What the runner does differently when a task model holds a bi-LM: the optimizer's
    parameter groups, the slanted triangular schedule and the unfreezing per epoch.

    Build with :meth:`of` (None for a features run).
    """

    def __init__(self, embedder: LMTokenEmbedder):
        self.embedder, self.settings = embedder, embedder.settings
        self.recipe = embedder.settings.method

    @classmethod
    def of(cls, model: nn.Module) -> "FineTuner | None":
        found = [m for m in model.modules() if isinstance(m, LMTokenEmbedder)]
        if len(found) > 1:
            raise ConfigError("a task model holds more than one bi-LM; fine-tuning expects one embedder")
        return cls(found[0]) if found else None

    def lm_groups(self) -> list[list[nn.Parameter]]:
        """The LM's parameters by layer, 0 (input) to L (top)."""
        groups: list[list[nn.Parameter]] = [[] for _ in range(self.embedder.top_layer + 1)]
        for name, p in self.embedder.lm.named_parameters():
            groups[self.embedder.layer_of[name]].append(p)
        return groups

    def param_groups(self, model: nn.Module, lr: float) -> list[dict[str, Any]]:
        """The head (every trainable parameter outside the LM) at ``lr``, then each LM layer
        that has parameters at the recipe's rate (none when frozen)."""
        lm_ids = {id(p) for p in self.embedder.lm.parameters()}
        head = [p for p in model.parameters() if p.requires_grad and id(p) not in lm_ids]
        groups = [{"params": head, "lr": lr}]
        if not self.recipe.trainable:
            return groups
        lm_lr = self.recipe.lm_lr(self.settings.lm_lr, lr)
        top = self.embedder.top_layer
        for layer, params in enumerate(self.lm_groups()):
            if params:
                groups.append({"params": params, "lr": lm_lr / self.recipe.layer_divisor(layer, top)})
        return groups

    def schedule(self, optimizer: torch.optim.Optimizer,
                 total_steps: int) -> torch.optim.lr_scheduler.LambdaLR | None:
        """The per-step schedule of every rate over ``total_steps`` (the recipe's multiplier:
        ULMFiT's slanted triangular one, BERT's linear warmup and decay), or None."""
        multiplier = self.recipe.multiplier(total_steps)
        return None if multiplier is None else torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)

    def start_epoch(self, epoch: int) -> None:
        """Which LM layers train in ``epoch`` (1-based): the recipe's lowest layer .. L (none when
        frozen).  A function of the epoch alone, so a resumed run needs no extra state."""
        lowest = self.recipe.lowest_layer(epoch, self.embedder.top_layer)
        for layer, params in enumerate(self.lm_groups()):
            for p in params:
                p.requires_grad_(self.recipe.trainable and layer >= lowest)
