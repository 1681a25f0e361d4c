"""Knowledge distillation of a trained LM into a smaller student (``elmoc distill``, issue 36.1).

The student is an ordinary LM of one direction (any preset: fewer or narrower LSTM layers,
a smaller projection, a small Transformer) trained through the one loop
(:mod:`elmoc.train.loop`) on the teacher's corpus windows.  Its loss per window is

    lm_weight * (the student's own LM loss)
    + sum over the student's representations j of layer_weights[j] * d(P_j s_j, t_layers[j])

where ``s_j`` is the student's representation j as the features read it (``EncoderOutput.layers``:
j = 0 the input view, then one per layer), ``t_layers[j]`` the teacher's representation it
reproduces (:func:`default_layer_map`), ``P_j`` a learned linear map (no bias) where the two
widths differ and nothing where they agree, and ``d`` the squared error per dimension averaged
over the window's real tokens (:func:`layer_distance`).  The squared error, not one minus the
cosine: the features reach a task through a scalar mix whose weights see each layer's scale.

Which student layer reproduces which teacher layer (the default, :func:`default_layer_map`):
the input view reproduces the input view, the top layer the top layer, and the layers between
are spread evenly: student layer j of n reproduces teacher layer ceil(j * m / n) of m.  Top to
top because the top layer is what the student's own output layer reads, so the two losses pull
it the same way, and what a task reading "top" features uses; evenly below because each teacher
layer carries a different kind of information (ELMo's lower layer the syntactic, its upper the
semantic one), as TinyBERT's uniform map; with two layers of two it is the identity.  With
``init_from_teacher`` the student starts from the teacher's weights where names and shapes agree,
each student layer from the teacher layer it reproduces (DistilBERT initialises from every
other teacher layer), so a student of the teacher's own size starts at distillation loss zero.

The teacher is a ``model.pt`` (a direction file, or a joint file read as the direction's view):
frozen, in eval mode, never in the state dict, the optimizer or a checkpoint (its file's sha256
is, through the spec's ``distill`` section, so a checkpoint of another teacher is not resumed).
``checkpoint.pt`` holds the student and the projections; ``model.pt`` the student alone, with
the student's spec: it is extracted, exported, embedded and scored as any LM.
"""
from __future__ import annotations

import logging
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from elmoc.config_section import Section
from elmoc.data.batches import LMBatch
from elmoc.directions import DIRECTIONS
from elmoc.errors import ConfigError, InputFileError
from elmoc.inputs.base import input_class
from elmoc.lm import LanguageModel
from elmoc.model_file import direction_payload, load_checkpoint
from elmoc.outputs.base import OutputLoss
from elmoc.registry import build
from elmoc.train.checkpoint import config_hash, load_weights, model_payload, vocab_fingerprint
from elmoc.train.loop import Trainer
from elmoc.train.records import append_record

log = logging.getLogger(__name__)

DISTILL = "distill"  # the spec section a distillation run adds (its checkpoint's, not model.pt's)


@dataclass(frozen=True)
class DistillSettings:
    """How the student learns from the teacher: ``elmoc distill --section-json``, the workflow's
    ``distill.students.<name>`` less the keys only the workflow reads
    (:data:`elmoc.config.STUDENT_WORKFLOW_KEYS`: ``teacher``, ``preset``, ``overrides``).

    Attributes:
        lm_weight: weight of the student's own LM loss (0: reproduce the teacher only).
        layer_weights: weight of each representation's distance, one number for all or one
            per student representation (input view first).
        layers: the teacher representation each student representation reproduces (input view
            first; 0 is the teacher's input view); None: :func:`default_layer_map`.
        init_from_teacher: start the student from the teacher's weights where names and shapes
            agree (encoder layers from the teacher layers they reproduce).
    """

    lm_weight: float = 1.0
    layer_weights: float | tuple[float, ...] = 1.0
    layers: tuple[int, ...] | None = None
    init_from_teacher: bool = False

    KEYS = ("lm_weight", "layer_weights", "layers", "init_from_teacher")

    @classmethod
    def from_section(cls, section: Section) -> "DistillSettings":
        """Parse and check a ``distill`` section (its keys are checked against :attr:`KEYS`; one
        line naming the key on a bad value)."""
        section = Section(section.data, section.name, cls.KEYS)
        lm_weight = section.get("lm_weight", float, 1.0)
        weights = section.get("layer_weights", (float, list), 1.0)
        layers = section.get("layers", list)
        for name, values in (("lm_weight", [lm_weight]),
                             ("layer_weights", weights if isinstance(weights, list) else [weights])):
            if any(not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 0 for v in values):
                raise ConfigError(f"config {section.name}.{name} must be numbers >= 0, got {section.data[name]!r}")
        if layers is not None and any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in layers):
            raise ConfigError(f"config {section.name}.layers must be teacher layer indices >= 0 (0: the input "
                              f"view), got {layers!r}")
        return cls(lm_weight=float(lm_weight),
                   layer_weights=tuple(map(float, weights)) if isinstance(weights, list) else float(weights),
                   layers=None if layers is None else tuple(layers),
                   init_from_teacher=section.get("init_from_teacher", bool, False))

    def record(self) -> dict[str, Any]:
        """Plain values for the spec's ``distill`` section and ``model.pt``."""
        out = asdict(self)
        for key in ("layer_weights", "layers"):
            if isinstance(out[key], tuple):
                out[key] = list(out[key])
        return out


def default_layer_map(student_layers: int, teacher_layers: int) -> list[int]:
    """The teacher representation each student representation reproduces: input view to input
    view, then student layer j of n to teacher layer ceil(j * m / n) of m (top to top).

    Args:
        student_layers, teacher_layers: representations counted as the encoders count them
            (``num_layers``: the input view plus one per layer).
    """
    n, m = student_layers - 1, teacher_layers - 1
    return [0] + [math.ceil(j * m / n) for j in range(1, n + 1)]


def layer_distance(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Squared error per dimension, averaged over the real tokens (0 when there are none).

    Shape: student, teacher (batch, time, dim); mask (batch, time) bool.  Returns a 0-dim tensor.
    """
    weights = mask.unsqueeze(-1).to(student.dtype)
    squared = ((student - teacher.to(student.dtype)) ** 2 * weights).sum()
    return squared / (weights.sum() * student.shape[-1]).clamp(min=1.0)


class DistillationLM(nn.Module):
    """A student LM, the frozen teacher it reproduces and the projections between them.

    ``forward(batch, (student_state, teacher_state))`` returns the combined loss as an
    :class:`OutputLoss` (``loss_sum / num_tokens`` is the weighted sum of module docstring; logs:
    ``lm_loss``, ``distill_loss`` and ``distill_layer<j>`` per student representation, besides the
    output layer's own) and the pair of new states.  ``evaluate`` and ``output_layer`` are the
    student's, so the heldout metric of a distillation run is the student's own, comparable with
    any LM's.  Only the student and the projections are parameters: the teacher is held outside
    the module tree (not in ``state_dict``, ``parameters`` or ``.to``; :meth:`teacher_to` moves it).

    Args:
        student: the LM being trained.
        teacher: a LanguageModel whose ``encode`` gives the representations (no output layer needed).
        layer_map: teacher representation per student representation (:func:`default_layer_map`).
        layer_weights: one weight per student representation.
        lm_weight: the weight of the student's LM loss.
    """

    def __init__(self, student: LanguageModel, teacher: LanguageModel, layer_map: list[int],
                 layer_weights: list[float], lm_weight: float):
        super().__init__()
        self.student = student
        self._teacher = (teacher.eval().requires_grad_(False),)  # a tuple: not a submodule
        self.layer_map, self.layer_weights, self.lm_weight = list(layer_map), list(layer_weights), lm_weight
        widths = (student.encoder.output_dim, teacher.encoder.output_dim)
        # one map per representation where the widths differ (every representation of one encoder
        # is output_dim wide); keyed by the student representation's index
        self.projections = nn.ModuleDict(
            {str(j): nn.Linear(widths[0], widths[1], bias=False) for j in range(len(layer_map))}
            if widths[0] != widths[1] else {})

    @property
    def teacher(self) -> LanguageModel:
        return self._teacher[0]

    @property
    def output_layer(self):
        return self.student.output_layer

    def teacher_to(self, device: torch.device) -> "DistillationLM":
        self.teacher.to(device)
        return self

    def train(self, mode: bool = True) -> "DistillationLM":
        super().train(mode)
        self.teacher.eval()  # no dropout in the targets, ever
        return self

    def distances(self, batch: LMBatch, state: Any = None) -> tuple[OutputLoss, list[torch.Tensor], Any]:
        """The student's LM loss, each representation's distance to its teacher representation and
        the new ``(student_state, teacher_state)``."""
        student_state, teacher_state = state if state is not None else (None, None)
        with torch.no_grad():
            target = self.teacher.encode(batch.inputs, batch.mask, teacher_state)
        own = self.student.encode(batch.inputs, batch.mask, student_state)
        lm = self.student.output_layer(own.output, batch.targets, batch.mask)
        terms = []
        for j, layer in enumerate(own.layers):
            projection = self.projections[str(j)] if str(j) in self.projections else None
            terms.append(layer_distance(layer if projection is None else projection(layer),
                                        target.layers[self.layer_map[j]], batch.mask))
        return lm, terms, (own.state, target.state)

    def forward(self, batch: LMBatch, state: Any = None) -> tuple[OutputLoss, Any]:
        lm, terms, new_state = self.distances(batch, state)
        lm_mean = lm.loss_sum.float() / lm.num_tokens.clamp(min=1.0)
        distill = sum(w * d for w, d in zip(self.layer_weights, terms))
        logs = {**lm.logs, "lm_loss": lm_mean.detach(), "distill_loss": distill.detach(),
                **{f"distill_layer{j}": d.detach() for j, d in enumerate(terms)}}
        total = self.lm_weight * lm_mean + distill
        return OutputLoss(loss_sum=total * lm.num_tokens, num_tokens=lm.num_tokens, logs=logs), new_state

    @torch.no_grad()
    def evaluate(self, batch: LMBatch, state: Any = None) -> tuple[OutputLoss, Any]:
        return self.student.evaluate(batch, state)

    def num_trainable_parameters(self) -> int:
        return self.student.num_trainable_parameters()


@torch.no_grad()
def heldout_distances(model: DistillationLM, batches, device: torch.device, reset_state: bool,
                      max_windows: int | None = None) -> list[float]:
    """Each student representation's :func:`layer_distance` to its teacher representation over
    heldout windows (token-weighted mean; the states carried as in training unless ``reset_state``),
    in eval mode: what the student reproduces on text it never trained on."""
    was_training = model.training
    model.eval()
    sums, tokens, state = None, 0.0, None
    for i, batch in enumerate(batches):
        if max_windows is not None and i >= max_windows:
            break
        batch = batch.to(device)
        _, terms, state = model.distances(batch, None if reset_state else state)
        n = float(batch.mask.sum())
        sums = [n * float(d) for d in terms] if sums is None else [a + n * float(d) for a, d in zip(sums, terms)]
        tokens += n
    model.train(was_training)
    return [a / max(tokens, 1.0) for a in sums or []]


def teacher_lm(payload: dict[str, Any], vocab, path: str | Path) -> LanguageModel:
    """The teacher's input layer and encoder (no output layer) with its weights.

    Args:
        payload: one direction's ``model.pt`` dict (:func:`elmoc.model_file.direction_payload`).
        vocab: the vocabulary its ids refer to (checked by :func:`check_teacher`).
        path: the teacher's file, for errors.
    """
    spec = payload["spec"]
    in_cfg = input_class(spec["input"]).state_config(spec["input"])
    input_layer = build("input", in_cfg, vocab=vocab)
    encoder = build("encoder", spec["encoder"], input_dim=input_layer.output_dim)
    lm = LanguageModel(input_layer, encoder, None)
    state = {k: v for k, v in payload["model"].items() if k.startswith(("input_layer.", "encoder."))}
    load_weights(lm, {"model": state}, path)
    return lm


def check_teacher(payload: dict[str, Any], path: str | Path, student_spec: dict[str, Any], vocab) -> None:
    """Refuse, in one line naming the teacher's file and the fix, a teacher whose token ids mean
    something else than the student's: another vocabulary or another subword tokenizer."""
    saved, current = payload.get("vocab"), vocab_fingerprint(vocab)
    if saved and current and saved != current:
        raise InputFileError(path, f"the teacher was trained with another vocabulary ({saved['size']} tokens, "
                             f"sha256 {saved['sha256']}) than the student's spec names ({student_spec.get('vocab')}: "
                             f"{current['size']} tokens, sha256 {current['sha256']}); give the student the teacher's "
                             f"vocab ({payload.get('vocab_path')})")
    tokenizers = [(spec.get("data") or {}).get("tokenizer") for spec in (payload["spec"], student_spec)]
    if tokenizers[0] != tokenizers[1]:
        raise InputFileError(path, f"the teacher reads data.tokenizer {tokenizers[0]!r} but the student "
                             f"{tokenizers[1]!r}; give the student the teacher's data section")
    if (payload["spec"].get("data") or {}).get("train") != (student_spec.get("data") or {}).get("train"):
        log.warning("the student trains on %s, the teacher trained on %s",
                    (student_spec.get("data") or {}).get("train"), (payload["spec"].get("data") or {}).get("train"))


def initialise_from_teacher(student: LanguageModel, teacher: LanguageModel, layer_map: list[int]) -> int:
    """Copy the teacher's weights into the student where the name and shape agree; an encoder
    block ``encoder.<list>.<i>.`` (student layer i + 1) comes from the teacher block of the layer
    it reproduces.  Returns the number of tensors copied."""
    source = teacher.state_dict()
    copied = 0
    with torch.no_grad():
        for name, tensor in student.state_dict().items():
            block = re.match(r"encoder\.(\w+)\.(\d+)\.(.*)", name)
            if block and layer_map[int(block.group(2)) + 1] > 0:
                name_there = f"encoder.{block.group(1)}.{layer_map[int(block.group(2)) + 1] - 1}.{block.group(3)}"
            else:
                name_there = name
            if name_there in source and source[name_there].shape == tensor.shape:
                tensor.copy_(source[name_there])
                copied += 1
    return copied


class DistillationTrainer(Trainer):
    """The loop's :class:`Trainer` for a student: the model is a :class:`DistillationLM`, the
    spec its checkpoints record has a ``distill`` section (the teacher's file, hashed with the
    other inputs, and :class:`DistillSettings`), and ``model.pt`` holds the student alone.

    Built by :func:`elmoc.train.loop.train` (``trainer=functools.partial(DistillationTrainer,
    teacher=..., distill=...)``) with the student's spec and the Trainer's other arguments.
    """

    def __init__(self, spec: dict[str, Any], vocab, *args: Any, teacher: str | Path, distill: DistillSettings,
                 direction: str, **kwargs: Any):
        if direction not in DIRECTIONS:
            raise ConfigError(f"a student is trained one direction at a time (--direction forward or backward), "
                              f"not {direction!r}; give it a spec with train.directions: separate")
        self.teacher_path, self.distill = Path(teacher), distill
        self.teacher_payload = direction_payload(load_checkpoint(teacher), direction, teacher)
        check_teacher(self.teacher_payload, teacher, spec, vocab)
        self.student_spec = spec
        section = {"teacher": str(teacher), "teacher_config_hash": self.teacher_payload.get("config_hash"),
                   **distill.record()}
        super().__init__({**spec, DISTILL: section}, vocab, *args, direction=direction, **kwargs)

    def build_model(self) -> DistillationLM:
        student = LanguageModel.from_spec(self.student_spec, self.vocab)
        teacher = teacher_lm(self.teacher_payload, self.vocab, self.teacher_path)
        s_layers, t_layers = student.encoder.num_layers, teacher.encoder.num_layers
        layer_map = list(self.distill.layers) if self.distill.layers is not None else default_layer_map(
            s_layers, t_layers)
        if len(layer_map) != s_layers or max(layer_map) >= t_layers:
            raise ConfigError(f"distill.layers {layer_map} must name, for each of the student's {s_layers} "
                              f"representations (input view first), one of the teacher's 0..{t_layers - 1}")
        weights = self.distill.layer_weights
        weights = list(weights) if isinstance(weights, tuple) else [weights] * s_layers
        if len(weights) != s_layers:
            raise ConfigError(f"distill.layer_weights has {len(weights)} weights; the student has {s_layers} "
                              "representations (input view first): give one number or that many")
        if self.distill.init_from_teacher:
            copied = initialise_from_teacher(student, teacher, layer_map)
            log.info("student initialised from the teacher: %d of %d tensors copied", copied,
                     len(student.state_dict()))
        log.info("distilling %s: student representation j reproduces teacher representation %s "
                 "(0: the input view); %d student parameters", self.teacher_path, layer_map,
                 student.num_trainable_parameters())
        return DistillationLM(student, teacher, layer_map, weights, self.distill.lm_weight).teacher_to(self.device)

    def heldout(self, tag: str) -> None:
        """The student's heldout metric (the loop's), then each representation's distance to the
        teacher's on the same windows, kept in the history entry (``distill``) and logged."""
        super().heldout(tag)
        if self.make_heldout is None:
            return
        distances = heldout_distances(self.core, self.make_heldout(), self.device, self.settings.reset_state,
                                      self.settings.eval_max_windows)
        self.history[-1]["distill"] = distances
        if self.ddp.is_main:
            log.info("heldout %s at step %d: distance to the teacher per representation %s", tag, self.step,
                     ", ".join(f"{d:.4g}" for d in distances))
            append_record(self.log_path, {"event": "heldout_distill", "step": self.step, "tag": tag,
                                          "distances": distances})

    def final_payload(self) -> dict[str, Any]:
        """``model.pt``: the student as an ordinary LM of its own spec, the distillation recorded
        under ``distilled``."""
        payload = model_payload(self.training_state())
        payload.update(model=self.core.student.state_dict(), spec=self.student_spec,
                       config_hash=config_hash(self.student_spec),
                       distilled={**self.spec[DISTILL], "layer_map": self.core.layer_map})
        return payload
