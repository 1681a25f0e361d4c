"""Build and load the C++ time loops of the projected LSTM (``csrc/projected_lstm.cpp``).

The kernel is compiled on first use by :mod:`elmoc.nn.native_build` (needs a C++17
compiler and ``ninja``; about 30 s once per environment and source version, cached under
``$ELMOC_NATIVE_CACHE``, default ``~/.cache/elmoc/native``) and registers ``torch.ops.elmoc_native``.

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
from pathlib import Path
from typing import Any

from elmoc.nn import native_build

__all__ = ["native_ops", "native_status", "SOURCE"]

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("csrc") / "projected_lstm.cpp"
_state: dict[str, Any] = native_build.new_state()


def _build_flavour() -> tuple[str, list[str]]:
    """Extension name and compiler flags for this CPU (:func:`elmoc.nn.native_build.build_flavour`)."""
    return native_build.build_flavour("elmoc_native_lstm")


def native_ops() -> Any | None:
    """``torch.ops.elmoc_native`` (building it on first call), or None when unavailable."""
    return native_build.load_ops(_state, _build_flavour, SOURCE, "elmoc_native", "native LSTM kernel", log)


def native_status() -> str:
    """A one-line description for logs and benchmark reports."""
    return native_build.status_line(native_ops(), _state)
