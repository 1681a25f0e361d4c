"""Trainable parameter counts of LM specs, without allocating weights (``elmoc params``, the bench).

Models are built on PyTorch's meta device (shapes only), so a 2M-word softmax
costs nothing.  Frozen tables (FastText, random, CNN vectors) are buffers and never
count.  Two totals are reported:

* ``paper``: the paper's convention (spec 1.3, 3.1-3.3, P27): parameters the
  original models share between the forward and backward LM count once -- the input
  layer's trainable table/CNN (bilm-tf shares its char-CNN; ELMo-Sub ties one
  subword table) and every ``direction_shared_parameters()`` of the output layer
  (one softmax for both directions) -- everything else (encoder, CONT projection)
  twice.  This is what Tables 2 and 4 report.
* ``trained``: what this pipeline trains for the spec: a joint bi-LM
  (``train.directions: joint``, the softmax family) is one model with one input and
  one output layer and two encoders; separate directions are 2 x one LM.  For the
  softmax family it equals ``paper`` (bilm-tf's joint model is what the paper counts).

A one-direction LM (``train.directions: forward``, the GPT presets: the paper's GPT is
uni-directional) is one LM: ``paper`` and ``trained`` are both its one count.

Sizes come from the preset; the vocabulary size from ``--vocab-size``, else the
spec's vocabulary file if it exists, else the paper's 793,475 words (30,004
subwords for presets whose vocabulary is the BPE one).  Frozen tables that do not
exist yet are sized from ``--table-dim`` (default 300; ``results/vectors/cnn.npy``
512, the width of ELMo's char-CNN projection).  With ``--config``, the files are those of the
config's run, ``results/<run>/...`` (:func:`elmoc.layouts.relocate`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

PAPER_WORD_VOCAB = 793_475  # 4 specials + bilm-tf's 793,471-line vocabulary (spec 1.2)
PAPER_SUBWORD_VOCAB = 30_004  # 4 specials + ~30K BPE subwords (spec 3.3)
DEFAULT_TABLE_DIMS = {"vectors/cnn.npy": 512}  # inside any run's folder


class SizedVocab:
    """Stands in for a vocabulary when only its size matters (meta-device builds)."""

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size


def vocab_size_for(spec: dict[str, Any], word: int | None, subword: int | None) -> int:
    from elmoc.data.vocab.vocabulary import Vocabulary

    is_subword = spec.get("input", {}).get("type") == "subword" or "bpe" in str(spec.get("vocab", ""))
    explicit = subword if is_subword else word
    if explicit is not None:
        return explicit
    path = Path(str(spec.get("vocab", "")))
    if path.is_file():
        return len(Vocabulary.load(path))
    return PAPER_SUBWORD_VOCAB if is_subword else PAPER_WORD_VOCAB


def _with_table_dims(node: Any, dims: dict[str, int], default: int, ignore_files: bool = False) -> Any:
    """Copy of a spec section with ``dim`` set for frozen tables whose file is missing
    (or for every table with ``ignore_files``, when sizes are given explicitly)."""
    if isinstance(node, dict):
        out = {k: _with_table_dims(v, dims, default, ignore_files) for k, v in node.items()}
        vectors = node.get("vectors")
        if isinstance(vectors, str) and "dim" not in node and (ignore_files or not Path(vectors).is_file()):
            out["dim"] = _table_dim(vectors, dims, default)
        return out
    return node


def _table_dim(vectors: str, dims: dict[str, int], default: int) -> int:
    """The width ``dims`` gives table ``vectors``: its own entry, else one naming it inside a run's
    folder (``vectors/cnn.npy`` or ``results/vectors/cnn.npy`` for ``results/<run>/vectors/cnn.npy``)."""
    if vectors in dims:
        return dims[vectors]
    for key, dim in dims.items():
        inside = key.removeprefix("results/")
        if vectors.endswith("/" + inside):
            return dim
    return default


def count_parameters(spec: dict[str, Any], vocab_size: int, table_dims: dict[str, int] | None = None,
                     default_table_dim: int = 300, ignore_files: bool = False) -> dict[str, int]:
    """Trainable parameter counts of one LM spec (see the module docstring).

    Returns ``{"input", "encoder", "output", "per_direction", "paper", "trained", "joint", "masked",
    "one_direction", "vocab"}``.
    A masked LM (``train.objective: masked_lm``) is one model: ``paper`` and ``trained``
    are its input, encoder and output layer plus its mask vector (``input`` wide); a
    one-direction LM (``train.directions: forward``) one LM: both are ``per_direction``.
    """
    import torch

    from elmoc.directions import is_joint, is_masked, one_direction

    from elmoc.lm import LanguageModel

    dims = {**DEFAULT_TABLE_DIMS, **(table_dims or {})}
    joint, masked, single = is_joint(spec), is_masked(spec), one_direction(spec)
    spec = {k: v for k, v in spec.items() if k in ("input", "encoder", "output")}
    spec = _with_table_dims(spec, dims, default_table_dim, ignore_files)
    with torch.device("meta"):
        model = LanguageModel.from_spec(spec, SizedVocab(vocab_size))

    def unique(params) -> dict[int, torch.nn.Parameter]:
        return {id(p): p for p in params if p.requires_grad}

    inp = unique(model.input_layer.parameters())
    enc = unique(model.encoder.parameters())
    out = {k: p for k, p in unique(model.output_layer.parameters()).items() if k not in inp}
    shared = unique(model.output_layer.direction_shared_parameters())
    n = lambda d: sum(p.numel() for p in d.values())  # noqa: E731
    per_direction = n(inp) + n(enc) + n(out)
    out_shared = n({k: p for k, p in out.items() if k in shared})
    out_private = n(out) - out_shared
    if masked:  # elmoc.masked_lm.MaskedLM: one encoder, and the mask vector
        one_model = per_direction + model.input_layer.output_dim
        return {"vocab": vocab_size, "input": n(inp), "encoder": n(enc), "output": n(out),
                "per_direction": per_direction, "paper": one_model, "trained": one_model, "joint": False,
                "masked": True, "one_direction": False}
    if single:  # one forward LM: nothing counts twice
        return {"vocab": vocab_size, "input": n(inp), "encoder": n(enc), "output": n(out),
                "per_direction": per_direction, "paper": per_direction, "trained": per_direction, "joint": False,
                "masked": False, "one_direction": True}
    return {
        "vocab": vocab_size,
        "input": n(inp),
        "encoder": n(enc),
        "output": n(out),
        "per_direction": per_direction,
        "paper": n(inp) + 2 * n(enc) + 2 * out_private + out_shared,
        # a joint bi-LM (elmoc.lm.BidirectionalLM): one input and one output layer, two encoders
        "trained": n(inp) + 2 * n(enc) + n(out) if joint else 2 * per_direction,
        "joint": joint,
        "masked": False,
        "one_direction": False,
    }


def parse_table_dims(items: list[str]) -> dict[str, int]:
    """``["PATH=DIM", ...]`` -> ``{PATH: DIM}`` (the ``--table-dim`` option)."""
    from elmoc.errors import ConfigError

    dims: dict[str, int] = {}
    for item in items:
        path, sep, value = item.rpartition("=")
        if not sep or not value.isdigit():
            raise ConfigError(f"--table-dim expects PATH=DIM, got {item!r}")
        dims[path] = int(value)
    return dims


def named_specs(config: str | None = None, presets: list[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(name, spec) of every pretrain variant of a workflow ``config``, or of preset files."""
    from elmoc.config import check_spec_keys, check_workflow_config, load_yaml, resolve_variant, variant_names
    from elmoc.layouts import default_run_name, relocate
    from elmoc.train.spec_check import check_spec

    out = []
    if config:
        data = load_yaml(config, mapping="a workflow config")
        check_workflow_config(data, str(config))
        # the files the config names under results/ are its run's (results/<run>/...), as in the workflow
        run = data.get("run") or default_run_name([str(config)])
        for name in variant_names(data):
            out.append((name, relocate(resolve_variant(data, name), run)))
            check_spec(out[-1][1], f"{config}: pretrain.variants.{name} (preset + overrides)")  # every nested key, as training reads it
        return out
    for preset in presets or []:
        spec = load_yaml(preset, mapping="an LM preset")
        check_spec_keys(spec, str(preset))
        check_spec(spec, str(preset))
        out.append((spec.get("name", Path(preset).stem), spec))
    return out


def parameter_rows(config: str | None = None, presets: list[str] | None = None, vocab_size: int | None = None,
                   subword_vocab_size: int | None = None, table_dims: dict[str, int] | None = None,
                   default_table_dim: int = 300) -> list[dict[str, Any]]:
    """One row of :func:`count_parameters` per variant (``elmoc params``)."""
    # explicit sizes mean "at these sizes": tables under results/ (maybe from a demo run) are not read
    explicit = vocab_size is not None or subword_vocab_size is not None
    rows = []
    for name, spec in named_specs(config, presets):
        size = vocab_size_for(spec, vocab_size, subword_vocab_size)
        rows.append({"variant": name, **count_parameters(spec, size, table_dims, default_table_dim, explicit)})
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'variant':<16} {'vocab':>9} {'input':>12} {'encoder':>12} {'output':>13} {'paper':>14} {'trained':>14}  directions"]
    for r in rows:
        lines.append(f"{r['variant']:<16} {r['vocab']:>9,} {r['input']:>12,} {r['encoder']:>12,} {r['output']:>13,} "
                     f"{r['paper'] / 1e6:>13.1f}M {r['trained'] / 1e6:>13.1f}M  {'masked' if r['masked'] else 'joint' if r['joint'] else 'forward' if r['one_direction'] else 'separate'}")
    return "\n".join(lines)


def check_student(spec_path: str, teacher_path: str, direction: str, spec: dict, vocab) -> None:
    """Before the output folder exists: the teacher is an LM of ``direction`` (or a joint bi-LM) and
    the student is no larger than it.  Distillation here compresses: a student whose encoder is
    of the teacher's type with more parameters is refused (to train a larger LM, use `elmoc
    train`); one of another type (a Transformer student of an LSTM teacher) may need more, and is
    warned about (docs/safety.md)."""
    import logging
    from pathlib import Path

    import numpy as np

    from elmoc.errors import ConfigError
    from elmoc.model_file import direction_payload, load_checkpoint

    if direction not in ("forward", "backward"):
        return  # the trainer says a student is trained one direction at a time
    teacher = direction_payload(load_checkpoint(teacher_path, mmap=True), direction, teacher_path)
    teacher_size = sum(v.numel() for k, v in teacher["model"].items() if k.startswith("encoder."))
    tables = {}  # each frozen table's width, from its header (the table itself is read by the trainer)
    for table in _frozen_tables(spec):
        if str(table).endswith(".npy") and Path(table).is_file():
            tables[table] = int(np.load(table, mmap_mode="r").shape[-1])
    student_size = count_parameters(spec, len(vocab), table_dims=tables, ignore_files=True)["encoder"]
    kinds = (spec.get("encoder") or {}).get("type"), (teacher["spec"].get("encoder") or {}).get("type")
    if student_size > teacher_size and kinds[0] != kinds[1]:  # another architecture: it may have to be larger
        logging.getLogger(__name__).warning("%s: the student's %s encoder has %s parameters, more than the teacher's %s encoder (%s: %s): "
                    "the distilled LM will not be smaller", spec_path, kinds[0], f"{student_size:,}", kinds[1],
                    teacher_path, f"{teacher_size:,}")
    elif student_size > teacher_size:
        raise ConfigError(f"{spec_path}: the student's encoder has {student_size:,} parameters, more than the "
                          f"teacher's ({teacher_path}: {teacher_size:,}); distillation trains a smaller LM: give "
                          "the student fewer or narrower layers (to train a larger LM, use `elmoc train`)")


def _frozen_tables(node) -> list[str]:
    """Every ``vectors`` file a spec names (its frozen tables)."""
    if isinstance(node, dict):
        own = [node["vectors"]] if isinstance(node.get("vectors"), str) else []
        return own + [v for value in node.values() for v in _frozen_tables(value)]
    if isinstance(node, list):
        return [v for value in node for v in _frozen_tables(value)]
    return []
