"""``elmoc compress``: a smaller copy of a model directory (issue 24.3), offered only
with its measured figures.

The copy has the source's layout (:mod:`elmoc.pretrained`) with its weights in one of
the formats of :mod:`elmoc.pretrained.formats` (float16, bfloat16, int8), its frozen
``.npy`` tables in float16, ``compression`` in ``elmoc-model.json`` (format, source,
measured figures) and a "Compressed copy" section on the model card with the figures
of :func:`elmoc.pretrained.compare.compare_models` on a sentences file; downstream task
scores measured later are added with :func:`record_downstream`.
Any model directory can be compressed (``elmoc export`` of a variant or of the released
bilm-tf ELMo), but not a compressed one.
"""
from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from elmoc import __version__
from elmoc.directions import DIRECTIONS, MASKED
from elmoc.errors import InputFileError
from elmoc.io.atomic import atomic_file
from elmoc.io.output_paths import output_directory
from elmoc.io.tensor_files import SUFFIX, read_state, save_tensors, stored_file
from elmoc.pretrained import formats
from elmoc.pretrained.compare import compare_models
from elmoc.pretrained.loader import FORMAT, MODEL_FILE, load_bilm, read_model_meta, stacks_of

log = logging.getLogger(__name__)

CARD_MARK = "<!-- elmoc compress: everything below is written by elmoc compress -->"


def compress_model(source: str | Path, output: str | Path, fmt: str, sentences: Sequence[Sequence[str]],
                   sentences_file: str | Path, batch_size: int = 64, repeats: int = 3,
                   command: str | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write the ``fmt`` copy of the model directory ``source`` to ``output`` (replaced
    atomically, after the copy loads and has been measured on ``sentences``).

    Args:
        source: a model directory (not itself compressed).
        output: the directory to write.
        fmt: a registered compressed format (``float16``, ``bfloat16``, ``int8``, ...).
        sentences, sentences_file: tokenized sentences to measure on, and their file (for the card).
        batch_size, repeats: as :func:`~elmoc.pretrained.compare.compare_models`.
        command: recorded on the card (default: this process's command line).
        options: the format's options (its ``Options``; None: the defaults).

    Returns:
        The ``compression`` record written into ``elmoc-model.json``.
    """
    method = formats.format_of(fmt, options)
    source = Path(source)
    meta = read_model_meta(source)
    if formats.stored_format(meta, source / MODEL_FILE) != "float32":
        raise InputFileError(source, f"is already a compressed copy ({meta['compression']['format']}, of "
                             f"{meta['compression'].get('source')}); compress the uncompressed model directory")
    if Path(output).resolve() == source.resolve():
        raise InputFileError(output, "is the source directory; write the compressed copy elsewhere (--output)")
    for name in meta["files"]:
        if not (source / name).is_file():
            raise InputFileError(source / name, "missing from the model directory; export it again")
    with output_directory(output, "compress", {"MODEL_DIR": source, "--measure": sentences_file}) as tmp:
        tables, renamed = _copy_files(source, tmp, meta["files"], method)
        states = _compressed_states(source, method)
        for direction, state in states.items():
            save_tensors(state, tmp / f"{direction}{SUFFIX}")
            renamed[f"{direction}.pt"] = f"{direction}{SUFFIX}"  # a source written before has .pt weights
        record: dict[str, Any] = {
            "format": fmt, "compute": method.compute, "tables": tables,
            "source": {"name": meta.get("name"), "path": str(source.resolve()),
                       "elmoc_version": meta.get("elmoc_version")},
            "elmoc_version": __version__,
            "command": command or " ".join(["elmoc", *sys.argv[1:]]),
        }
        record.update(method.record(states))
        new_meta = {**meta, "format": FORMAT, "files": sorted({renamed.get(n, n) for n in meta["files"]}),
                    "compression": record}
        source_card = ((source / "README.md").read_text(encoding="utf-8") if (source / "README.md").is_file()
                       else f"# {meta.get('name', 'model')}\n")
        _write_meta(tmp, new_meta)
        _write_card(tmp, source_card, record)  # replaced by the measured one below
        load_bilm(tmp)  # proves the copy loads before it is measured
        log.info("measuring %s against %s on %d sentences", fmt, source, len(sentences))
        record["measured"] = {**compare_models(source, tmp, sentences, batch_size, repeats),
                              "sentences_file": str(sentences_file)}
        record["downstream"] = {}
        _write_meta(tmp, new_meta)
        _write_card(tmp, source_card, record)
    log.info("wrote the %s copy of %s to %s", fmt, source, output)
    return record


def record_downstream(directory: str | Path, key: str, entry: dict[str, Any]) -> None:
    """Add (or replace) a downstream result ``entry`` under ``key`` in a compressed copy's
    ``compression.downstream`` and rewrite its card section.

    ``entry``: ``{"task": ..., "metric": ..., "source": score with the uncompressed
    features, "compressed": score with this copy's, "seed": ..., "note": ...}``.
    """
    directory = Path(directory)
    meta = read_model_meta(directory)
    if formats.stored_format(meta, directory / MODEL_FILE) == "float32":
        raise InputFileError(directory, "is not a compressed copy (no compression entry in elmoc-model.json)")
    meta["compression"].setdefault("downstream", {})[key] = entry
    card = (directory / "README.md").read_text(encoding="utf-8").split(CARD_MARK)[0].rstrip("\n") + "\n"
    _write_meta(directory, meta)
    _write_card(directory, card, meta["compression"])


def _copy_files(source: Path, tmp: Path, names: Sequence[str],
                method: formats.CompressionFormat) -> tuple[str | None, dict[str, str]]:
    """Copy the source's files except the weights, meta and card; float ``.npy`` tables
    become float16, a char-CNN table composer (``char_cnn.safetensors``, or an older
    ``char_cnn.pt``, written as ``.safetensors``) as the format stores it.
    Returns the tables' stored dtype (None without tables) and the files renamed (old -> new)."""
    tables, renamed = None, {}
    skip = {f"{d}{suffix}" for d in (*DIRECTIONS, MASKED) for suffix in (".pt", SUFFIX)} | {MODEL_FILE, "README.md"}
    for name in names:
        if name in skip:
            continue
        src, dst = source / name, tmp / name
        if name.endswith(".npy"):
            array = np.load(src, mmap_mode="r")
            if array.dtype.kind == "f":
                with atomic_file(dst, "wb", encoding=None) as f:
                    np.save(f, np.asarray(array, dtype=np.float16))
                tables = "float16"
                continue
        if name in ("char_cnn.pt", f"char_cnn{SUFFIX}"):
            state = read_state(src, what="a char-CNN weights file", fix="export the model again")
            save_tensors(method.store_composer(state), tmp / f"char_cnn{SUFFIX}")
            renamed[name] = f"char_cnn{SUFFIX}"
            continue
        shutil.copyfile(src, dst)
    return tables, renamed


def _compressed_states(source: Path, method: formats.CompressionFormat) -> dict[str, dict[str, torch.Tensor]]:
    """Every weights file's stored state in the format: both directions', a masked LM's one
    stack's or a one-direction LM's forward LM's (:func:`~elmoc.pretrained.loader.stacks_of`)."""
    stacks = stacks_of(read_model_meta(source))
    where = {d: stored_file(source, d) for d in stacks}
    states = {d: read_state(where[d], what="a model directory's weights file", fix="export the model again")
              for d in stacks}
    return method.store(source, states)


def _write_meta(directory: Path, meta: dict[str, Any]) -> None:
    with atomic_file(directory / MODEL_FILE) as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def _write_card(directory: Path, source_card: str, record: dict[str, Any]) -> None:
    with atomic_file(directory / "README.md") as f:
        f.write(source_card.rstrip("\n") + "\n\n" + CARD_MARK + "\n\n" + card_section(record))


def card_section(record: dict[str, Any]) -> str:
    """The model card's "Compressed copy" section of a ``compression`` record."""
    fmt, m = record["format"], record.get("measured") or {}
    src = record["source"]
    lines = [f"## Compressed copy: {fmt}", "",
             f"{'An' if fmt[:1] in 'aeiou' else 'A'} {fmt} copy of `{src.get('name')}` (`{src.get('path')}`), written by elmoc "
             f"{record.get('elmoc_version')}: {record['compute']}."]
    if record.get("tables"):
        lines.append(f"Frozen tables (`.npy`) stored as {record['tables']}.")
    lines += formats.format_of(fmt).card_lines(record)
    lines += ["", "Figures measured against the source (not claimed: measured when the copy was written):", "",
              f"| | source (float32) | {fmt} |", "|---|---|---|"]
    if m:
        size, speed = m["size_bytes"], m["tokens_per_s"]
        lines += [
            f"| size on disk (MB) | {size['source'] / 1e6:.2f} | {size['compressed'] / 1e6:.2f} "
            f"({size['compressed'] / size['source']:.2f}x) |",
            f"| embed tokens/s (CPU) | {speed['source']:.0f} | {speed['compressed']:.0f} "
            f"({m['speed_ratio']:.2f}x; {m['rounds']} rounds, the two models alternated) |",
            "| mean cosine to the source, per layer | 1 | " + ", ".join(f"{c:.6f}" for c in m["mean_cosine"]) + " |",
            f"| lowest token cosine | 1 | {m['min_cosine']:.6f} |",
            f"| max abs difference of the features | 0 | {m['max_abs_diff']:.3g} |",
        ]
    for key, d in sorted((record.get("downstream") or {}).items()):
        lines.append(f"| {d.get('task', key)} {d.get('metric', 'score')} (seed {d.get('seed')}) | "
                     f"{_score(d.get('source'))} | {_score(d.get('compressed'))} |")
    if not record.get("downstream"):
        lines.append("| downstream task scores | not measured yet | not measured yet |")
    lines.append("")
    if m:
        lines += [f"Measured on `{Path(m['sentences_file']).name}` ({m['sentences']} sentences, {m['tokens']} tokens), "
                  f"batch size {m['batch_size']}, {m['threads']} torch threads, {m['machine']}, {m['date']}; "
                  "tokens/s depend on the machine and its load, the ratio of alternated runs less so.", ""]
    for key, d in sorted((record.get("downstream") or {}).items()):
        if d.get("note"):
            lines += [f"{d.get('task', key)}: {d['note']}", ""]
    lines += ["Written by:", "", "```", record.get("command", ""), "```", ""]
    return "\n".join(lines)


def _score(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)
