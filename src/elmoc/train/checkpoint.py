"""What `elmoc train` leaves in its output directory, and the rules for resuming.

``model.pt`` (written once, at the very end; what extraction and the CNN table read) is
the trained LM's file, format, writer and readers in :mod:`elmoc.model_file`.
``checkpoint.pt`` (periodic, resumable; kept after the run, never a workflow output) is
the same format (:func:`elmoc.model_file.save_checkpoint`, read by
:func:`elmoc.model_file.load_checkpoint`) with ``final`` False and the training-only keys
(:data:`TRAINING_ONLY`) added, which :func:`model_payload` drops again for ``model.pt``:

``optimizers``    list of optimizer state dicts
``data``          the batch iterator's position (see ``elmoc.data.batches``)
``rng``           every rank's RNG states: ``{"world_size": W, "ranks": [...]}``, each a
                  :func:`rng_state` dict (torch CPU, CUDA, numpy, python; plain types);
                  a file of an older elmoc holds rank 0's dict alone (numpy's as an array)
``state``         the carried encoder state (None when states are reset every window)
``log_bytes``     length of ``train_log.jsonl`` when the checkpoint was taken
``notes``         the note dictionary of a run with ``train.notes`` (TNF,
                  :meth:`elmoc.nn.notes.NoteDictionary.state_dict`); absent otherwise

Of the keys both files have, these are decided here: ``config_hash`` (:func:`config_hash`
of ``spec``: what must not change on resume), ``vocab`` (:func:`vocab_fingerprint`),
``inputs`` (:meth:`InputFingerprints.of_spec`), ``seconds`` (summed over every resumed
run) and ``segments`` (``[{"step", "threads", "processes"}, ...]``: the step from which
each process layout trained, one entry per change of layout on resume).

Resume rules (:func:`check_resumable`): the direction, the vocabulary's tokens and the
spec must match, except the keys in :data:`RESUME_MUTABLE` (how long to train and how
often to log, evaluate and save), which may change between runs.  Anything else is
refused with one line that names the checkpoint, both values and the fix; so is a
checkpoint whose recorded ``inputs`` differ from the files the spec names now (a
retrained vectors table, another corpus or tokenizer).  The workflow instead sets such
a checkpoint aside (:func:`set_aside_if_stale`): a changed config or input reruns the
job, which then starts afresh and keeps the old checkpoint under
``checkpoint.<its config hash>.pt`` (``.1.pt``, ``.2.pt`` ... if that name is taken).
Another thread or process count is allowed (a long run must survive a move to
another allocation) with a warning, and recorded in ``segments``.

Writes go to a temp file that is renamed into place, so an interrupted save never
leaves a truncated file behind; temp files a SIGKILL left over are removed by
:func:`remove_stale_temps` when the next run starts.
"""
from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from elmoc.errors import InputFileError
from elmoc.model_file import load_checkpoint

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pt"
MODEL = "model.pt"
HELDOUT = "heldout.json"
TRAIN_LOG = "train_log.jsonl"
# Keys of ``spec["train"]`` that may differ between a checkpoint and the run resuming it:
# they decide when to stop and how often to log/evaluate/save, not what a step computes
# (the batches of pass e depend on the seed and e only, and the LR on the step only).
RESUME_MUTABLE = ("max_steps", "epochs", "log_every", "eval_every", "checkpoint_every", "checkpoint_minutes",
                  "collective_timeout_minutes")
# Keys of a checkpoint that model.pt leaves out.
TRAINING_ONLY = ("optimizers", "data", "rng", "state", "log_bytes", "notes")
RESUME_FIX = "rerun with --no-resume to start over, or use another --output-dir"


def rng_state() -> dict[str, Any]:
    """This process's RNG states in plain types (a weights-only load reads them):
    ``torch`` (CPU generator, a uint8 tensor), ``cuda`` (one uint8 tensor per visible
    GPU, None without CUDA), ``numpy`` (``[name, keys, pos, has_gauss, cached]``) and
    ``python`` (``[version, internal state, gauss_next]``)."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,  # GPU only
        "numpy": [str(name), [int(k) for k in keys], int(pos), int(has_gauss), float(cached)],
        "python": random_state(random),
    }


def random_state(rng) -> list:
    """A ``random.Random``'s (or the ``random`` module's) state in plain types (a weights-only
    load reads them): ``[version, internal state, gauss_next]``."""
    version, internal, gauss_next = rng.getstate()
    return [int(version), [int(x) for x in internal], gauss_next]


def set_random_state(rng, state: list) -> None:
    """Restore :func:`random_state` into ``rng`` (a ``random.Random`` or the ``random`` module)."""
    version, internal, gauss_next = state
    rng.setstate((int(version), tuple(int(x) for x in internal), gauss_next))


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore :func:`rng_state` (also the numpy-array form of checkpoints written before).

    The torch states are restored from CPU copies (``torch.set_rng_state`` accepts only
    a CPU uint8 tensor), wherever the checkpoint was loaded to.  CUDA states are restored
    when the checkpoint has them and CUDA is available with as many devices.
    """
    torch.set_rng_state(_cpu_bytes(state["torch"]))
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available():  # GPU only
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all([_cpu_bytes(s) for s in cuda])
        else:
            log.warning("the checkpoint holds %d CUDA generator states but %d GPUs are visible; the CUDA "
                        "generators keep their seed (dropout masks differ from an uninterrupted run)",
                        len(cuda), torch.cuda.device_count())
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), int(pos), int(has_gauss), float(cached)))
    set_random_state(random, state["python"])


def _cpu_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU uint8 copy of a saved generator state, wherever it was loaded to."""
    return tensor.detach().to("cpu", torch.uint8)


def rank_rng_state(saved: dict[str, Any] | None, rank: int, world_size: int) -> dict[str, Any] | None:
    """The RNG state of ``rank`` in a checkpoint's ``rng`` entry, or None when it has none
    for this process layout.

    ``saved`` is ``{"world_size": W, "ranks": [state of rank 0, ...]}``; a checkpoint of
    an older elmoc holds rank 0's state alone (a :func:`rng_state` dict).  With another
    process count, rank 0 still restores rank 0's state and the other ranks keep their
    seed (the run then equals neither layout's run bit for bit; the trainer warns).
    """
    if not saved:
        return None
    if "ranks" not in saved:  # written before every rank's state was saved: rank 0's only
        return saved if rank == 0 else None
    if saved.get("world_size") == world_size and rank < len(saved["ranks"]):
        return saved["ranks"][rank]
    return saved["ranks"][0] if rank == 0 else None


def resume_view(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` without the keys that may change on resume (:data:`RESUME_MUTABLE`)."""
    view = copy.deepcopy(spec)
    train = view.get("train")
    if isinstance(train, dict):
        for key in RESUME_MUTABLE:
            train.pop(key, None)
    return view


def config_hash(spec: dict[str, Any]) -> str:
    """sha256 (hex, 16 chars) of :func:`resume_view` of ``spec`` as canonical JSON."""
    text = json.dumps(resume_view(spec), sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def vocab_fingerprint(vocab) -> dict[str, Any] | None:
    """``{"size", "sha256"}`` of a vocabulary's tokens in id order (None without one)."""
    if vocab is None:
        return None
    digest = hashlib.sha256("\n".join(vocab.tokens).encode("utf-8")).hexdigest()[:16]
    return {"size": len(vocab), "sha256": digest}


class InputFingerprints:
    """sha256 of every input file a spec names, so a checkpoint is not resumed on changed inputs.

    The spec's string values that name an existing file or folder (relative to the
    working directory, as the trainer reads them) are its inputs: the frozen tables
    (``input.vectors``, ``output.vectors``: FastText, char-CNN or random vectors), the
    corpus folder (``data.train``: every file in it), ``data.heldout``, the BPE
    tokenizer (``data.tokenizer``), the vocabulary; keys ``name``, ``description``
    and ``type`` are never paths.  A folder's digest covers each file's relative name
    and content (hidden files, such as a writer's temp files, are skipped); a named pipe
    or other non-regular file in it cannot be hashed without consuming it, so it is
    recorded as :data:`STREAM` and not compared.

    Cost: size and mtime could not tell a retrained table of the same shape from the
    old one, so the content is hashed, streamed in 8 MiB blocks.  At paper size that
    is ~0.95 GB of FastText table and ~4 GB of corpus shards: 3-7 s of one core (sha256
    streams 0.7-2 GB/s; 765 MB/s measured on a busy 2-core CI box) once per process
    start, on rank 0 only (the others receive its digests); digests
    are cached by (path, size, mtime_ns), so the same table named twice (input and
    output) or checked again (set-aside, then resume) is read once.
    """

    SKIP_KEYS = ("name", "description", "type")
    STREAM = "<not a regular file: not hashed>"
    _cache: dict[tuple[str, int, int], str] = {}

    @classmethod
    def of_spec(cls, spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """``{dotted key: {"path", "sha256", "bytes", "files"}}`` of the inputs ``spec`` names."""
        return {key: cls.of_path(path) for key, path in cls.input_paths(spec).items()}

    @classmethod
    def input_paths(cls, spec: Any, prefix: str = "") -> dict[str, str]:
        """The spec's values that name an existing file or folder, by dotted key."""
        found: dict[str, str] = {}
        items = spec.items() if isinstance(spec, dict) else enumerate(spec) if isinstance(spec, list) else ()
        for key, value in items:
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, (dict, list)):
                found.update(cls.input_paths(value, name))
            elif (isinstance(value, str) and key not in cls.SKIP_KEYS and Path(value).name not in ("", ".", "..")
                  and os.path.exists(value)):
                found[name] = value
        return found

    @classmethod
    def of_path(cls, path: str) -> dict[str, Any]:
        """``{"path", "sha256", "bytes"}`` of one file; a folder's (its files recursively,
        by relative name) also has ``"files"``: ``{relative name: sha256 or STREAM}``."""
        root = Path(path)
        if root.is_file():
            return {"path": path, "sha256": cls.file_digest(root), "bytes": root.stat().st_size}
        entries = sorted(f for f in root.rglob("*") if not f.is_dir()
                         and not any(part.startswith(".") for part in f.relative_to(root).parts))
        files = {f.relative_to(root).as_posix(): cls.file_digest(f) if f.is_file() else cls.STREAM for f in entries}
        lines = "".join(f"{name}\t{digest}\n" for name, digest in files.items())
        return {"path": path, "sha256": hashlib.sha256(lines.encode("utf-8")).hexdigest(),
                "bytes": sum(f.stat().st_size for f in entries if f.is_file()), "files": files}

    @classmethod
    def file_digest(cls, path: Path) -> str:
        """sha256 (hex) of a file's content, cached by (path, size, mtime_ns) in this process."""
        st = path.stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
        if key not in cls._cache:
            h = hashlib.sha256()
            with open(path, "rb") as f:
                while block := f.read(8 << 20):
                    h.update(block)
            cls._cache[key] = h.hexdigest()
        return cls._cache[key]

    @staticmethod
    def first_change(saved: dict[str, dict[str, Any]], current: dict[str, dict[str, Any]]) -> str | None:
        """What differs between two :meth:`of_spec` records, in words (None: nothing)."""
        for key in sorted(set(saved) | set(current)):
            old, new = saved.get(key), current.get(key)
            if new is None:
                return f"{old['path']} (the spec's {key}) was an input then but is missing now"
            if old is None:
                return f"{new['path']} (the spec's {key}) is an input now but was not then"
            if old["sha256"] == new["sha256"]:
                continue
            if isinstance(old.get("files"), dict) and isinstance(new.get("files"), dict):
                changed = [name for name in sorted(set(old["files"]) | set(new["files"]))
                           if old["files"].get(name) != new["files"].get(name)
                           and InputFingerprints.STREAM not in (old["files"].get(name), new["files"].get(name))]
                if not changed:
                    continue  # only named pipes differ: not comparable
                return (f"{new['path']} (the spec's {key}) changed since the checkpoint was written: "
                        f"{len(changed)} file(s) differ, first {changed[0]}")
            return (f"{new['path']} (the spec's {key}) changed since the checkpoint was written "
                    f"(sha256 {old['sha256'][:12]} then, {new['sha256'][:12]} now, "
                    f"{old['bytes']} -> {new['bytes']} bytes)")
        return None


def _first_difference(old: Any, new: Any, prefix: str = "") -> tuple[str, Any, Any] | None:
    """The first (dotted key, old value, new value) where two nested mappings differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            name = f"{prefix}.{key}" if prefix else str(key)
            if key not in old:
                return name, "<absent>", new[key]
            if key not in new:
                return name, old[key], "<absent>"
            found = _first_difference(old[key], new[key], name)
            if found:
                return found
        return None
    if json.dumps(old, sort_keys=True, default=str) != json.dumps(new, sort_keys=True, default=str):
        return prefix or "<spec>", old, new
    return None


def check_resumable(payload: dict[str, Any], path: str | Path, *, spec: dict[str, Any], direction: str,
                    vocab=None, spec_path: str | Path | None = None,
                    inputs: dict[str, dict[str, Any]] | None = None) -> None:
    """Refuse to resume ``payload`` (read from ``path``) into a run of ``spec``/``direction``.

    ``inputs`` is :meth:`InputFingerprints.of_spec` of ``spec`` now; a checkpoint whose
    recorded ``inputs`` differ (a retrained table, another corpus) is refused.  A
    checkpoint of an older elmoc that recorded none is not checked for it.

    Raises:
        InputFileError: one line naming the checkpoint, what differs (both values) and the fix.
    """
    where = str(spec_path) if spec_path else "this run's spec"
    if payload.get("final") and not payload.get("optimizers"):
        raise InputFileError(path, f"is a final model without optimizer state, not a resumable checkpoint; {RESUME_FIX}")
    if payload.get("direction") != direction:
        raise InputFileError(
            path, f"holds a {payload.get('direction')!r} LM but this run trains the {direction!r} one; {RESUME_FIX}"
        )
    change = spec_change(payload, spec, where)
    if change:
        raise InputFileError(path, f"{change}; {RESUME_FIX}")
    saved_vocab, current = payload.get("vocab"), vocab_fingerprint(vocab)
    if saved_vocab and current and saved_vocab != current:
        raise InputFileError(
            path,
            f"was trained with another vocabulary ({saved_vocab['size']} tokens, sha256 {saved_vocab['sha256']}) than "
            f"{payload.get('vocab_path') or 'the current one'} now holds ({current['size']} tokens, "
            f"sha256 {current['sha256']}); {RESUME_FIX}",
        )
    change = inputs_change(payload, inputs)
    if change:
        raise InputFileError(path, f"{change}; {RESUME_FIX}")


def spec_change(payload: dict[str, Any], spec: dict[str, Any], where: str = "this run's spec") -> str | None:
    """Why a checkpoint's recorded ``spec`` (and ``config_hash``) does not fit ``spec``, in
    words naming the first differing key and both values (None: it fits).  The keys of
    :data:`RESUME_MUTABLE` under ``train`` are not compared (:func:`resume_view`)."""
    saved_spec = payload.get("spec")
    if not isinstance(saved_spec, dict):
        return f"records no spec, so it cannot be checked against {where}"
    saved_hash = payload.get("config_hash") or config_hash(saved_spec)
    if saved_hash == config_hash(spec):
        return None
    diff = _first_difference(resume_view(saved_spec), resume_view(spec))
    detail = (f"{diff[0]} is {diff[1]!r} there but {diff[2]!r} in {where}" if diff
              else f"config hash {saved_hash} there but {config_hash(spec)} in {where}")
    return f"was trained with another spec: {detail}"


def inputs_change(payload: dict[str, Any], inputs: dict[str, dict[str, Any]] | None) -> str | None:
    """Why the input files a checkpoint recorded (``inputs``, :meth:`InputFingerprints.of_spec`)
    differ from ``inputs`` now, in words (None: the same, or nothing recorded to compare)."""
    saved_inputs = payload.get("inputs")
    if inputs is None or saved_inputs is None:
        return None
    change = InputFingerprints.first_change(saved_inputs, inputs)
    return f"was trained on other inputs: {change}" if change else None


def set_aside_if_stale(path: str | Path, *, spec: dict[str, Any], direction: str, vocab=None,
                       spec_path: str | Path | None = None,
                       inputs: dict[str, dict[str, Any]] | None = None) -> Path | None:
    """Move a checkpoint that :func:`check_resumable` (or :func:`load_checkpoint`) refuses
    out of the way, to ``checkpoint.<its config hash>.pt`` beside it (``.1.pt``,
    ``.2.pt`` ... when that name is taken: nothing set aside earlier is overwritten), so
    the run starts afresh without deleting anything.  The warning says why (which key,
    input file or vocabulary changed).  Returns the new path, or None when the checkpoint
    is resumable (or absent)."""
    path = Path(path)
    if not path.exists():
        return None
    payload = None
    try:
        payload = load_checkpoint(path, mmap=True)  # the metadata decides; the resume reads the tensors
        check_resumable(payload, path, spec=spec, direction=direction, vocab=vocab, spec_path=spec_path,
                        inputs=inputs)
        return None
    except InputFileError as err:
        return set_aside(path, (payload or {}).get("config_hash") or "unreadable", str(err))


def set_aside(path: Path, tag: str, reason: str) -> Path:
    """Rename ``path`` to ``<stem>.<tag><suffix>`` beside it (``.1``, ``.2`` ... when taken:
    nothing set aside earlier is overwritten) and warn with ``reason``; returns the new path."""
    target = _free_name(path, tag)
    os.replace(path, target)
    log.warning("%s; kept it as %s and starting afresh", reason, target)
    return target


def _free_name(path: Path, tag: str) -> Path:
    """``<stem>.<tag><suffix>`` beside ``path``, or the first free ``<stem>.<tag>.<n><suffix>``."""
    target, n = path.with_name(f"{path.stem}.{tag}{path.suffix}"), 0
    while target.exists():
        n += 1
        target = path.with_name(f"{path.stem}.{tag}.{n}{path.suffix}")
    return target


def model_payload(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The final ``model.pt`` dict made from a checkpoint dict (no training-only keys)."""
    payload = {k: v for k, v in checkpoint.items() if k not in TRAINING_ONLY}
    payload["final"] = True
    return payload


def remove_stale_temps(out_dir: str | Path) -> list[Path]:
    """Delete temp files of our own outputs that an interrupted (killed) write left in
    ``out_dir`` (:func:`elmoc.io.output_paths.remove_stale_temps`: only those no live writer
    holds); they are never read.  Returns the removed paths."""
    from elmoc.io.output_paths import remove_stale_temps as remove_temps_of

    return [tmp for name in (CHECKPOINT, MODEL, HELDOUT, TRAIN_LOG) for tmp in remove_temps_of(Path(out_dir) / name)]


def load_resume_state(path: str | Path, device: str | torch.device) -> dict[str, Any]:
    """A ``checkpoint.pt`` for resuming on ``device``: every tensor is read to the CPU
    (the RNG states must stay there: ``torch.set_rng_state`` takes only a CPU tensor;
    ``load_state_dict`` copies weights and optimizer moments to their parameters'
    device), then the carried encoder state, which the next step and the collectives
    use as is, is moved to ``device``."""
    payload = load_checkpoint(path, map_location="cpu")
    payload["state"] = _to_device(payload.get("state"), torch.device(device))
    return payload


def _to_device(state: Any, device: torch.device) -> Any:
    if isinstance(state, torch.Tensor):
        return state.to(device)
    if isinstance(state, (list, tuple)):
        return type(state)(_to_device(s, device) for s in state)
    return state


def load_weights(model: torch.nn.Module, payload: dict[str, Any], path: str | Path) -> None:
    """``model.load_state_dict(payload["model"])``; a shape or key mismatch is one line."""
    try:
        model.load_state_dict(payload["model"])
    except (RuntimeError, KeyError) as e:
        first = str(e).strip().splitlines()
        detail = next((line.strip() for line in first if "size mismatch" in line or "key" in line.lower()),
                      first[0] if first else type(e).__name__)
        raise InputFileError(path, f"weights do not fit the model its spec builds ({detail})") from None

