"""Build and load the C++ time loops of the projected LSTM (``csrc/projected_lstm.cpp``).

The kernel is compiled on first use with ``torch.utils.cpp_extension.load`` (needs a
C++17 compiler and ``ninja``; about 30 s once per machine and source version, cached
under ``$TORCH_EXTENSIONS_DIR``, default ``~/.cache/torch_extensions``; concurrent
processes wait on torch's build lock) and registers ``torch.ops.elmoc_native``.

Why a C++ extension and not ``torch.compile``: the per-step work is a dozen tiny
element-wise ops around two small matrix products, so at ELMo-C sizes on a CPU the
time goes to dispatch overhead, which only moving the loop out of Python removes
(``torch.compile`` of one step measured within noise, see docs/benchmarks.md).

If the build fails (no compiler) or ``ELMOC_NATIVE_LSTM=0`` is set, :func:`native_ops`
returns None and the Python loop of :mod:`elmoc.encoders.projected_lstm` runs instead:
same math, slower; the two agree to float rounding (tests/encoders/test_native_lstm.py).
CUDA tensors, and the bf16 recurrence of bf16 autocast (issue 44), always use the Python loop.
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import torch

__all__ = ["native_ops", "native_status", "SOURCE"]

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("csrc") / "projected_lstm.cpp"
_state: dict[str, Any] = {"tried": False, "ops": None, "reason": "not loaded yet"}


def _disabled() -> bool:
    return os.environ.get("ELMOC_NATIVE_LSTM", "1").strip().lower() in ("0", "false", "no", "off")


def _build_flavour() -> tuple[str, list[str]]:
    """Extension name and compiler flags for this CPU.

    On x86 CPUs that torch itself runs with AVX2 (or AVX-512) the loops are compiled
    for AVX2+FMA (8 floats per instruction instead of SSE's 4); the name carries the
    flavour so that nodes of a cluster sharing one home directory never load a build
    their CPU cannot run.
    """
    flags = ["-O3", "-fno-math-errno", "-fno-trapping-math"]
    capability = torch.backends.cpu.get_cpu_capability()
    if capability in ("AVX2", "AVX512"):
        return "elmoc_native_lstm_avx2", flags + ["-mavx2", "-mfma"]
    return "elmoc_native_lstm", flags


def native_ops() -> Any | None:
    """``torch.ops.elmoc_native`` (building it on first call), or None when unavailable."""
    if _disabled():
        _state["reason"] = "disabled by ELMOC_NATIVE_LSTM=0"
        return None
    if _state["tried"]:
        return _state["ops"]
    _state["tried"] = True
    try:
        from torch.utils.cpp_extension import load

        name, flags = _build_flavour()
        start = time.perf_counter()
        load(name=name, sources=[str(SOURCE)], extra_cflags=flags, is_python_module=False, verbose=False)
        seconds = time.perf_counter() - start
        if seconds > 2.0:
            log.info("compiled the native LSTM kernel in %.0f s (cached for later runs)", seconds)
        _state["ops"] = torch.ops.elmoc_native
        _state["reason"] = "loaded"
    except Exception as err:  # no compiler, no ninja, read-only cache...: fall back, loudly
        last_line = (str(err).strip().splitlines() or [""])[-1]
        _state["reason"] = f"build failed: {type(err).__name__}: {last_line}"
        log.warning("native LSTM kernel unavailable (%s); using the slower Python time loop. "
                    "Install a C++ compiler and `ninja`, or set ELMOC_NATIVE_LSTM=0 to silence this.",
                    _state["reason"])
    return _state["ops"]


def native_status() -> str:
    """A one-line description for logs and benchmark reports."""
    ops = native_ops()
    return "native C++ time loop" if ops is not None else f"Python time loop ({_state['reason']})"

