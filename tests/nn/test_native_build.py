"""The native kernels' build cache (elmoc.nn.native_build): one build per environment, keyed by
the sources' bytes and the toolchain, shared by every checkout; builds are counted apart from
training and task times (tests/train/test_train_time_excludes_builds.py)."""
from __future__ import annotations

import logging
import shutil
import time

import pytest

from elmoc.encoders import native
from elmoc.nn import native_build


def _checkout(tmp_path, name):
    """A copy of the projected LSTM's source and the shared headers, as another checkout has them."""
    src = tmp_path / name / "csrc"
    src.mkdir(parents=True)
    shutil.copyfile(native.SOURCE, src / native.SOURCE.name)
    return src / native.SOURCE.name


def test_the_key_follows_the_bytes_and_the_toolchain_not_the_path(tmp_path, monkeypatch):
    name, flags = native._build_flavour()
    one, two = _checkout(tmp_path, "one"), _checkout(tmp_path, "two")
    assert native_build.build_key(name, one, flags) == native_build.build_key(name, two, flags) \
        == native_build.build_key(name, native.SOURCE, flags)
    two.write_text(two.read_text() + "\n// edited\n")
    assert native_build.build_key(name, two, flags) != native_build.build_key(name, one, flags)
    assert native_build.build_key(name, one, flags + ["-O0"]) != native_build.build_key(name, one, flags)
    before = native_build.build_key(name, one, flags)
    monkeypatch.setattr(native_build, "_compiler_version", lambda: "c++: another compiler 1.0")
    assert native_build.build_key(name, one, flags) != before


def test_cache_location_is_ours_and_overridable(tmp_path, monkeypatch):
    monkeypatch.delenv(native_build.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert native_build.cache_root() == tmp_path / "xdg" / "elmoc" / "native"
    monkeypatch.setenv(native_build.CACHE_ENV, str(tmp_path / "mine"))
    assert native_build.cache_root() == tmp_path / "mine"


def test_one_build_serves_every_checkout_and_is_logged_once(tmp_path, monkeypatch, caplog):
    """Two checkouts of the same sources: the first compiles (faked here, a copy of the real
    library), the second loads the cached library without compiling or logging a build."""
    if native.native_ops() is None:
        pytest.skip(f"no native kernel here: {native.native_status()}")
    name, flags = native._build_flavour()
    real = native_build._library(name, native.SOURCE, flags, "kernel", logging.getLogger("x"))  # the real cache
    monkeypatch.setenv(native_build.CACHE_ENV, str(tmp_path / "cache"))
    builds = []

    def fake_build(folder, name_, source, flags_):
        builds.append(source)
        (folder / "build").mkdir(exist_ok=True)
        library = folder / "build" / real.name
        shutil.copyfile(real, library)
        return library

    monkeypatch.setattr(native_build, "_build", fake_build)
    log = logging.getLogger("elmoc.test_native_build")
    with caplog.at_level(logging.INFO, logger=log.name):
        first = native_build._library(name, _checkout(tmp_path, "one"), flags, "native LSTM kernel", log)
        second = native_build._library(name, _checkout(tmp_path, "two"), flags, "native LSTM kernel", log)
    assert first == second and first.is_file() and len(builds) == 1
    lines = [r.getMessage() for r in caplog.records if "built the native LSTM kernel" in r.getMessage()]
    assert len(lines) == 1, lines
    (tmp_path / "two" / "csrc" / native.SOURCE.name).write_text("// changed sources: a build of their own\n")
    native_build._library(name, tmp_path / "two" / "csrc" / native.SOURCE.name, flags, "native LSTM kernel", log)
    assert len(builds) == 2


def test_build_seconds_are_counted_apart(monkeypatch):
    """A (faked, slow) build inside load_ops shows in build_seconds_since and is left out
    of a BuildFreeClock started before it."""
    if native.native_ops() is None:
        pytest.skip(f"no native kernel here: {native.native_status()}")
    real = native_build._library

    def slow(*args, **kwargs):
        time.sleep(1.0)
        return real(*args, **kwargs)

    monkeypatch.setattr(native_build, "_library", slow)
    monkeypatch.setattr(native, "_state", native_build.new_state())
    clock = native_build.BuildFreeClock()
    assert native.native_ops() is not None
    assert clock.build_seconds() >= 1.0
    assert clock.elapsed() < 0.5
    assert native_build.build_seconds_since(time.time() + 1) == 0.0
