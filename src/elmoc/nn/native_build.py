"""Build and load C++ time loops with ``torch.utils.cpp_extension``, once per environment.

Shared by the projected LSTM (``encoders/native.py``, ``encoders/csrc/projected_lstm.cpp``)
and the highway LSTM (``nn/alternating_lstm.py``, ``nn/csrc/highway_lstm.cpp``). Each
extension is compiled the first time any process of this environment needs it (a C++17
compiler and ``ninja``; about 30 s) into elmoc's own cache, one folder per *build key*: the
hash of the sources (the ``.cpp`` and the headers of ``csrc/``), the compiler flags, the
compiler's version line, torch's and Python's versions and the machine. The sources are
copied into that folder and compiled from there, so another checkout of the same sources
finds the same folder and loads the library without compiling (torch's own cache, which
keys on the source paths, rebuilt it for every checkout). Concurrent processes wait on the
folder's lock; the first builds, the others load its result.

The cache is ``$ELMOC_NATIVE_CACHE`` if set, else ``$XDG_CACHE_HOME/elmoc/native`` (default
``~/.cache/elmoc/native``). Each build is logged once, ``built the native LSTM kernel in
N s``; the seconds a process spends building or waiting for a build are kept
(:func:`build_seconds_since`) so that training, task and embedding times can leave them out
(:class:`BuildFreeClock`) and record them on their own (``native_build_s``).

If a build fails (no compiler) or ``ELMOC_NATIVE_LSTM=0`` is set, :func:`load_ops` returns
None and the caller runs its Python loop instead (same math, slower), after one warning.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

__all__ = ["BuildFreeClock", "Extension", "build_flavour", "build_key", "build_seconds_since", "cache_root",
           "disabled", "load_ops", "new_state", "status_line", "CACHE_ENV", "INCLUDE"]

INCLUDE = Path(__file__).with_name("csrc")  # time_loops.h, shared by every time loop's source
CACHE_ENV = "ELMOC_NATIVE_CACHE"
DONE = "built.json"  # written last into a build folder: its library is complete

_BUILDS: list[tuple[float, float]] = []  # (wall time it started, seconds) of each build/wait of this process


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


def cache_root() -> Path:
    """Where built kernels live: ``$ELMOC_NATIVE_CACHE``, else ``$XDG_CACHE_HOME/elmoc/native``
    (``~/.cache/elmoc/native``)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "elmoc" / "native"


def _compiler_version() -> str:
    """The first line of ``$CXX --version`` (torch's compiler, default ``c++``)."""
    cxx = os.environ.get("CXX", "c++")
    try:
        done = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        return f"{cxx}: {type(err).__name__}"
    return f"{cxx}: {(done.stdout.strip().splitlines() or [''])[0]}"


def _inputs(source: Path) -> list[Path]:
    """The files a build compiles: ``source`` and the shared headers."""
    return [source] + sorted(p for p in INCLUDE.glob("*.h") if p != source)


def build_key(name: str, source: Path, flags: list[str]) -> str:
    """The build's identity: the sources' bytes, the flags, the compiler, torch, Python, machine."""
    digest = hashlib.sha256()
    for path in _inputs(source):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(json.dumps([name, flags, _compiler_version(), torch.__version__, sys.version,
                              platform.machine(), torch.compiled_with_cxx11_abi()]).encode())
    return digest.hexdigest()[:16]


def build_seconds_since(start: float) -> float:
    """Seconds this process spent building (or waiting for) native kernels in builds that
    began at or after ``start`` (a ``time.time()``)."""
    return sum(seconds for began, seconds in _BUILDS if began >= start)


class BuildFreeClock:
    """Wall seconds since ``start`` (``time.time()``; None: now), less the native kernel builds
    of this process meanwhile: a training or task time that means what it says."""

    def __init__(self, start: float | None = None):
        self.start = time.time() if start is None else start

    def build_seconds(self) -> float:
        """Seconds of native kernel builds since the start."""
        return build_seconds_since(self.start)

    def elapsed(self) -> float:
        return time.time() - self.start - self.build_seconds()


class _FolderLock:
    """An exclusive ``flock`` on ``folder/.lock``: one process builds, the others wait."""

    def __init__(self, folder: Path):
        self.path = folder / ".lock"

    def __enter__(self) -> "_FolderLock":
        import fcntl

        self.file = open(self.path, "a")
        fcntl.flock(self.file, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.file.close()  # releases the lock


def _build(folder: Path, name: str, source: Path, flags: list[str]) -> Path:
    """Compile ``source`` (copied into ``folder/src`` with the headers) into ``folder/build``."""
    from torch.utils.cpp_extension import load

    src = folder / "src"
    src.mkdir(exist_ok=True)
    for path in _inputs(source):
        shutil.copyfile(path, src / path.name)
    build = folder / "build"
    build.mkdir(exist_ok=True)
    library = load(name=name, sources=[str(src / source.name)], extra_cflags=flags, extra_include_paths=[str(src)],
                   build_directory=str(build), is_python_module=False, verbose=False)
    return Path(library) if isinstance(library, (str, os.PathLike)) else build / f"{name}.so"


def _library(name: str, source: Path, flags: list[str], what: str, log: logging.Logger) -> Path:
    """The built library of this build key: from the cache, or built now (logged once)."""
    folder = cache_root() / f"{name}-{build_key(name, source, flags)}"
    done = folder / DONE
    if done.is_file():
        return folder / json.loads(done.read_text())["library"]
    folder.mkdir(parents=True, exist_ok=True)
    with _FolderLock(folder):
        if done.is_file():  # another process built it while this one waited
            return folder / json.loads(done.read_text())["library"]
        start = time.perf_counter()
        library = _build(folder, name, source, flags)
        seconds = time.perf_counter() - start
        tmp = folder / f".{DONE}.tmp"
        tmp.write_text(json.dumps({"library": str(library.relative_to(folder)), "seconds": round(seconds, 1), "flags": flags,
                                   "compiler": _compiler_version(), "torch": torch.__version__,
                                   "python": sys.version.split()[0]}, indent=1))
        os.replace(tmp, done)
    log.info("built the %s in %.0f s (cached in %s; builds are left out of training times)", what, seconds, folder)
    return library


def load_ops(state: dict[str, Any], flavour: Callable[[], tuple[str, list[str]]], source: Path, namespace: str,
             what: str, log: logging.Logger) -> Any | None:
    """``torch.ops.<namespace>`` from the cache, built from ``source`` on the first call of the
    environment (``state`` remembers the outcome), or None when disabled or the build failed
    (warned once on ``log``)."""
    if disabled():
        state["reason"] = "disabled by ELMOC_NATIVE_LSTM=0"
        return None
    if state["tried"]:
        return state["ops"]
    state["tried"] = True
    began, start = time.time(), time.perf_counter()
    try:
        name, flags = flavour()
        torch.ops.load_library(str(_library(name, source, flags, what, log)))
        state["ops"] = getattr(torch.ops, namespace)
        state["reason"] = "loaded"
    except Exception as err:  # no compiler, no ninja, read-only cache...: fall back, loudly
        last_line = (str(err).strip().splitlines() or [""])[-1]
        state["reason"] = f"build failed: {type(err).__name__}: {last_line}"
        log.warning("%s unavailable (%s); using the slower Python time loop. "
                    "Install a C++ compiler and `ninja`, or set ELMOC_NATIVE_LSTM=0 to silence this.",
                    what, state["reason"])
    finally:
        _BUILDS.append((began, time.perf_counter() - start))
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
