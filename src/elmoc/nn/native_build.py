"""Build and load C++ time loops with ``torch.utils.cpp_extension`` at first use.

Shared by the projected LSTM (``encoders/native.py``, ``encoders/csrc/projected_lstm.cpp``)
and the highway LSTM (``nn/alternating_lstm.py``, ``nn/csrc/highway_lstm.cpp``). Each
extension is compiled on its first use (needs a C++17 compiler and ``ninja``; about 30 s once
per machine and source version, cached under ``$TORCH_EXTENSIONS_DIR``, default
``~/.cache/torch_extensions``; concurrent processes wait on torch's build lock) and registers
its ``torch.ops`` namespace.

If a build fails (no compiler) or ``ELMOC_NATIVE_LSTM=0`` is set, :func:`load_ops` returns
None and the caller runs its Python loop instead (same math, slower), after one warning.
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Callable

import torch

__all__ = ["Extension", "build_flavour", "disabled", "load_ops", "new_state", "status_line", "INCLUDE"]

INCLUDE = Path(__file__).with_name("csrc")  # time_loops.h, shared by every time loop's source


def new_state() -> dict[str, Any]:
    """The per-extension record :func:`load_ops` fills: tried once, the ops, why not."""
    return {"tried": False, "ops": None, "reason": "not loaded yet"}


def disabled() -> bool:
    """``ELMOC_NATIVE_LSTM=0`` (or false/no/off) turns every native time loop off."""
    return os.environ.get("ELMOC_NATIVE_LSTM", "1").strip().lower() in ("0", "false", "no", "off")


def build_flavour(base: str) -> tuple[str, list[str]]:
    """Extension name and compiler flags for this CPU.

    On x86 CPUs that torch itself runs with AVX2 (or AVX-512) the loops are compiled
    for AVX2+FMA (8 floats per instruction instead of SSE's 4); the name carries the
    flavour so that nodes of a cluster sharing one home directory never load a build
    their CPU cannot run.
    """
    flags = ["-O3", "-fno-math-errno", "-fno-trapping-math"]
    capability = torch.backends.cpu.get_cpu_capability()
    if capability in ("AVX2", "AVX512"):
        return f"{base}_avx2", flags + ["-mavx2", "-mfma"]
    return base, flags


def load_ops(state: dict[str, Any], flavour: Callable[[], tuple[str, list[str]]], source: Path, namespace: str,
             what: str, log: logging.Logger) -> Any | None:
    """``torch.ops.<namespace>`` built from ``source`` on the first call (``state`` remembers
    the outcome), or None when disabled or the build failed (warned once on ``log``)."""
    if disabled():
        state["reason"] = "disabled by ELMOC_NATIVE_LSTM=0"
        return None
    if state["tried"]:
        return state["ops"]
    state["tried"] = True
    try:
        from torch.utils.cpp_extension import load

        name, flags = flavour()
        start = time.perf_counter()
        load(name=name, sources=[str(source)], extra_cflags=flags, extra_include_paths=[str(INCLUDE)],
             is_python_module=False, verbose=False)
        seconds = time.perf_counter() - start
        if seconds > 2.0:
            log.info("compiled the %s in %.0f s (cached for later runs)", what, seconds)
        state["ops"] = getattr(torch.ops, namespace)
        state["reason"] = "loaded"
    except Exception as err:  # no compiler, no ninja, read-only cache...: fall back, loudly
        last_line = (str(err).strip().splitlines() or [""])[-1]
        state["reason"] = f"build failed: {type(err).__name__}: {last_line}"
        log.warning("%s unavailable (%s); using the slower Python time loop. "
                    "Install a C++ compiler and `ninja`, or set ELMOC_NATIVE_LSTM=0 to silence this.",
                    what, state["reason"])
    return state["ops"]


def status_line(ops: Any | None, state: dict[str, Any]) -> str:
    """A one-line description for logs and benchmark reports."""
    return "native C++ time loop" if ops is not None else f"Python time loop ({state['reason']})"


class Extension:
    """One C++ source built as extension ``base`` (plus the CPU flavour), registering
    ``torch.ops.<namespace>``; ``what`` names it in log lines."""

    def __init__(self, base: str, source: Path, namespace: str, what: str, log: logging.Logger):
        self.base, self.source, self.namespace, self.what, self.log = base, source, namespace, what, log
        self.state = new_state()

    def ops(self) -> Any | None:
        """The ops (built on the first call), or None when unavailable."""
        return load_ops(self.state, lambda: build_flavour(self.base), self.source, self.namespace, self.what, self.log)

    def status(self) -> str:
        """A one-line description for logs and benchmark reports."""
        return status_line(self.ops(), self.state)
