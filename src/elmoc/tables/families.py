"""Which encoder and output layer a pretraining variant is: the rows of the table beyond the paper.

The paper scores only the ELMo LSTM downstream; its Table 5 times five other encoders.
:func:`classify` reads a variant's LM spec (and its preset's name) and says where it goes:

* encoder: ``MLM`` for a masked LM (``train.objective: masked_lm``); for a Transformer the
  family its preset is named for (``trans-base-*``, ``trans-large-*``, ``gpt-*``), else the one
  its sizes are (6 x 512 -> TRANS BASE, 12 x 768 -> TRANS LARGE, a context of 512 -> GPT; other
  sizes -> ``TRANSFORMER``); ``LSTM`` / ``LSTMX2`` for the plain LSTM of Table 5; ``ELMO`` for
  the paper's own LSTM, kept as reference rows (ELMo-C and the softmax variants of the run);
* output: what the registered output class says (:meth:`elmoc.outputs.base.OutputLayer.table_label`
  and ``table_family``), found through the registry from the spec's ``output.type``, so a new
  layer, a plug-in's too, gets its row without an edit here: ``CONT`` (cosine), ``CONT-L2``,
  ``CONT-VMF`` (family ``CONT``), ``FIXED``, ``SUBWORD``, ``ADAPTIVE``, ``SAMPLED`` (family
  ``SOFTMAX``), as Table 5 names them; an unregistered type in capitals;
* method: the light pre-training methods the spec turns on (issue 35: TUPE, TNF), as the classes
  that read the options name them (:func:`method_labels`); a method row is a variant beyond the
  paper whatever its encoder, printed "TRANS BASE + TUPE", "ELMO + TNF".

:func:`is_beyond` reads the spec dict alone (no torch, no pandas): the workflow
(``beyond_variants`` in workflow/rules/helpers/tables.smk) asks it whether a config has such
variants; for an ELMo LSTM it reads TNF's key (``train.notes``) rather than ask the classes.  :func:`classify` also asks the registry for the output class (imports torch).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from elmoc.errors import ConfigError
from elmoc.registry import by_name

# Row groups of the table, in this order (Table 5's encoders, then the masked LM, then
# any other Transformer, then the paper's own LSTM for reference).
ENCODER_ORDER = ("TRANS BASE", "TRANS LARGE", "GPT", "MLM", "TRANSFORMER", "LSTM", "LSTMX2", "ELMO")
# Table 5's order of output layers; a layer of a family (CONT-L2) goes with its family's first.
OUTPUT_ORDER = ("CONT", "FIXED", "SUBWORD", "ADAPTIVE", "SAMPLED")
CONT, SOFTMAX = "CONT", "SOFTMAX"  # the output families (OutputLayer.table_family) the table compares
MASKED_LM = "masked_lm"  # train.objective of a masked LM
REFERENCE_CONT = "elmo-c"
NOTES_KEY = "notes"  # train.notes: TNF's option (elmoc.train.settings), read by is_beyond without torch  # the paper's ELMo-C: the ELMo LSTM's CONT row (its ablations are Table 3's)
# Preset-name prefixes of the causal Transformer families (config/lm/<prefix>-<output>.yaml).
NAME_PREFIXES = (("trans-base", "TRANS BASE"), ("trans-large", "TRANS LARGE"), ("gpt", "GPT"))
# The paper's sizes of Table 5's Transformers (paper-spec section 4): (layers, d_model).
BASE_SIZE, LARGE_SIZE, GPT_CONTEXT = (6, 512), (12, 768), 512


@dataclass(frozen=True)
class Family:
    """Where a variant goes in the table.

    encoder: a label of :data:`ENCODER_ORDER`; size: the encoder's sizes in words
    (``6×512, ff 2048, 8 heads, len 20``); output: ``CONT``/``CONT-L2``/``FIXED``/...;
    family: the output's family (``CONT``, ``SOFTMAX``, else its label); reference: an ELMo
    LSTM row shown for comparison (not a variant beyond the paper); method: the light
    pre-training methods on (``"TUPE"``, ``"TUPE + TNF"``), None for none."""

    encoder: str
    size: str
    output: str
    family: str
    reference: bool = False
    method: str | None = None

    @property
    def encoder_label(self) -> str:
        """The encoder column: the encoder, then its methods (``TRANS BASE + TUPE``)."""
        return self.encoder if self.method is None else f"{self.encoder} + {self.method}"

    def sort_key(self) -> tuple[int, int, str, str, str]:
        """Encoder group, output layer, then the row without a method before those with one."""
        e = ENCODER_ORDER.index(self.encoder) if self.encoder in ENCODER_ORDER else len(ENCODER_ORDER)
        o = next((OUTPUT_ORDER.index(x) for x in (self.output, self.family) if x in OUTPUT_ORDER), len(OUTPUT_ORDER))
        return e, o, self.output, self.method or "", self.size


def output_row(spec: dict[str, Any]) -> tuple[str, str]:
    """(label, family) of the spec's output layer, from its registered class
    (:meth:`~elmoc.outputs.base.OutputLayer.table_label`, ``table_family``); a type no class
    is registered for: its name in capitals, a family of its own."""
    kind = str((spec.get("output") or {}).get("type", "?"))
    try:
        cls = by_name("output", kind)
    except ConfigError:
        return kind.upper(), kind.upper()
    label = cls.table_label()
    return label, cls.table_family or label


def method_labels(spec: dict[str, Any]) -> list[str]:
    """The labels of the methods a spec turns on, in spec order (input, encoder, output, train):
    each section's class may define ``table_option_label(options) -> str | None``, a classmethod
    reading that section's options (the registered input, encoder and output class of its
    ``type``; :class:`elmoc.train.settings.TrainSettings` for ``train``); a class without one
    adds nothing, as does a type no class is registered for."""
    from elmoc.train.settings import TrainSettings

    readers = []
    for kind in ("input", "encoder", "output"):
        options = spec.get(kind) or {}
        try:
            readers.append((by_name(kind, str(options.get("type"))), options))
        except ConfigError:
            continue
    readers.append((TrainSettings, spec.get("train") or {}))
    labels = []
    for cls, options in readers:
        hook = getattr(cls, "table_option_label", None)
        label = hook(options) if hook is not None else None
        if label:
            labels.append(label)
    return labels


def is_masked_lm(spec: dict[str, Any]) -> bool:
    return (spec.get("train") or {}).get("objective") == MASKED_LM


def _transformer_family(name: str, encoder: dict[str, Any], length: Any) -> str:
    for prefix, label in NAME_PREFIXES:
        if name == prefix or name.startswith(f"{prefix}-"):
            return label
    shape = (encoder.get("num_layers"), encoder.get("d_model"))
    if isinstance(length, int) and length >= GPT_CONTEXT and shape == LARGE_SIZE:
        return "GPT"
    if shape == LARGE_SIZE:
        return "TRANS LARGE"
    if shape == BASE_SIZE:
        return "TRANS BASE"
    return "TRANSFORMER"


def encoder_size(spec: dict[str, Any]) -> str:
    """The encoder's sizes as the table prints them, with the training sequence length."""
    enc, train = spec.get("encoder") or {}, spec.get("train") or {}
    kind = enc.get("type")
    if kind == "elmo_lstm":
        text = f"{enc.get('num_layers', '?')}×{enc.get('cell_size', '?')}/{enc.get('projection_size', '?')} LSTM"
    elif kind == "lstm":
        text = f"{enc.get('num_layers', '?')}×{enc.get('hidden_size', '?')} LSTM"
    elif kind == "transformer" or "d_model" in enc:
        text = (f"{enc.get('num_layers', '?')}×{enc.get('d_model', '?')}, ff {enc.get('d_ff', '?')}, "
                f"{enc.get('heads', '?')} heads")
    else:
        text = str(kind)
    return f"{text}, len {train['bptt']}" if train.get("bptt") else text


def encoder_family(spec: dict[str, Any], name: str) -> str | None:
    """The encoder label of :data:`ENCODER_ORDER` (another encoder type in capitals), or
    ``None`` for a spec without an encoder type.  Reads the spec dict alone."""
    enc = spec.get("encoder") or {}
    kind = enc.get("type")
    if is_masked_lm(spec):
        return "MLM"
    if kind == "elmo_lstm":
        return "ELMO"
    if kind == "lstm":
        return "LSTM" if enc.get("num_layers", 1) == 1 else "LSTMX2"
    if kind is None:
        return None
    if kind != "transformer" and "d_model" not in enc:
        return str(kind).upper()
    return _transformer_family(name, enc, (spec.get("train") or {}).get("bptt"))


def classify(spec: dict[str, Any], name: str | None = None) -> Family | None:
    """The row of a variant (``spec``: its LM spec; ``name``: its preset's name, else the
    variant's), or ``None`` when the table has no row for it (an ELMo LSTM variant other
    than ELMo-C and the softmax family, e.g. Table 3's ablations)."""
    name = str(name or spec.get("name") or "")
    encoder = encoder_family(spec, name)
    if encoder is None:
        return None
    output, family = output_row(spec)
    row = Family(encoder, encoder_size(spec), output, family, method=" + ".join(method_labels(spec)) or None)
    if encoder != "ELMO" or row.method is not None:
        return row
    if family == SOFTMAX or (family == CONT and name == REFERENCE_CONT):
        return Family(encoder, row.size, output, family, reference=True)
    return None


def is_beyond(spec: dict[str, Any], name: str | None = None) -> bool:
    """Whether a variant is one beyond the paper (a row that is not an ELMo reference row);
    reads the spec dict alone (no torch: the workflow asks it).  An ELMo LSTM with notes for
    rare words (TNF, ``train.notes``) is one; :func:`classify` labels it from its class."""
    encoder = encoder_family(spec, str(name or spec.get("name") or ""))
    return encoder not in (None, "ELMO") or (encoder == "ELMO" and bool((spec.get("train") or {}).get(NOTES_KEY)))
