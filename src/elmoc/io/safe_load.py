"""Read ``.pt`` files without running code from them: ``torch.load(weights_only=True)``.

A ``.pt`` file is a pickle; a full unpickler calls whatever function the file names
(``os.system`` included), so a crafted "model" given to ``elmoc extract``, ``export``
or a training resume could run a command.  Every elmoc reader of a ``.pt`` goes
through :func:`load_weights_only`: PyTorch's restricted unpickler, which builds only
tensors and plain Python containers (dict, list, tuple, str, bytes, int, float, bool,
None), and refuses anything else with one :class:`~elmoc.errors.InputFileError` line
naming the file and the object it asked for.

The one exception is ``allow``: an extra allow-list for a reader that needs it.
Checkpoints written before their RNG states were stored as plain lists hold numpy's
state as an ``ndarray`` (:data:`LEGACY_NUMPY_GLOBALS`); :mod:`elmoc.model_file`
allows exactly those, which rebuild an array of numbers and call nothing else.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from elmoc.errors import InputFileError

# numpy's array reconstruction: what a pickled ``ndarray`` (numpy's RNG state in an
# old checkpoint) names; enough for a uint32 array and nothing that calls code.
LEGACY_NUMPY_GLOBALS = (np._core.multiarray._reconstruct, np.ndarray, np.dtype, np.dtypes.UInt32DType)

# what torch's refusal names: "Unsupported global: GLOBAL numpy...", "unsupported GLOBAL posix.system
# whose module ...", "Unsupported operand 147"
_UNSUPPORTED = re.compile(r"unsupported global:?\s+(?:global\s+)?([\w.]+)|unsupported (operand \d+)", re.I)


def load_weights_only(path: str | Path, *, map_location: Any = "cpu", mmap: bool = False,
                      allow: Sequence[Any] = (), what: str = "an elmoc weights file",
                      fix: str = "write it again with elmoc") -> Any:
    """``torch.load(path, weights_only=True)``, refusing code in one line.

    Args:
        path: the ``.pt`` file.
        map_location, mmap: as for :func:`torch.load`.
        allow: extra globals the restricted unpickler may build (keep it minimal).
        what: what the file should be, for the error ("an elmoc checkpoint").
        fix: how to get a good file, for the error.

    Returns:
        The loaded object.

    Raises:
        InputFileError: the file is missing, corrupt, or names an object outside the
            allow-list (a pickle that would run code): one line with the path.
    """
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, f"not found; {fix}")
    try:
        with torch.serialization.safe_globals(list(allow)):
            return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except Exception as e:  # torch raises many types for corrupt or refused files
        text = str(e)
        if "Weights only load failed" in text:
            found = _UNSUPPORTED.search(text)
            asked = next((g for g in found.groups() if g), "an object") if found else "an object"
            raise InputFileError(path, f"is not {what} with weights only: it asks to build {asked}, which could "
                                 f"run code, so it was not loaded; use a file written by elmoc ({fix})") from None
        if _looks_cut(e):  # torch's reader says this in its internal (miniz, pickle) terms
            raise InputFileError(path, f"is truncated or corrupt ({path.stat().st_size} bytes), not {what} that "
                                 f"PyTorch can read: {fix}") from None
        first = text.strip().splitlines()[0] if text.strip() else ""
        raise InputFileError(path, f"cannot read it as {what} ({type(e).__name__}: {first}); {fix}") from None


# what torch.load raises for a file cut short or overwritten: the zip reader's (miniz) and the
# pickle reader's own words, an unexpected end, a seek past the end (EINVAL), a garbage opcode
_CUT = ("PytorchStreamReader failed", "zip archive", "central directory", "unexpected EOF", "corrupted",
        "pickle data was truncated", "invalid load key")


def _looks_cut(e: Exception) -> bool:
    """Whether ``torch.load``'s exception ``e`` means the file's bytes are cut short or damaged
    (not a refused global, a missing device or a permission)."""
    import errno
    import pickle

    if isinstance(e, (EOFError, pickle.UnpicklingError, KeyError)):
        return True
    if isinstance(e, OSError) and not isinstance(e, PermissionError):
        return e.errno == errno.EINVAL
    return isinstance(e, RuntimeError) and any(m in str(e) for m in _CUT)
