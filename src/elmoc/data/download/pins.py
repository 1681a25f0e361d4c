"""A pins file: the sha256 and size of each download, recorded on its first fetch.

Trust on first use (a download entry with ``sha256: tofu``) is for files whose
publisher gives no checksum.  The first fetch records the file's sha256 and size
in a YAML file the user keeps (the workflow's ``pins_file``, ``config/pins.yaml``
by default); every later fetch, on any machine that uses the same file, checks
against it.  Committing the file turns the first download into a pin for everyone.

The file maps each URL (or other fetch source) to its pin::

    # trusted on first use 2026-11-23T19:30:00Z by elmoc fetch
    https://example.org/data.zip:
      sha256: 5c613a4f...
      size: 789539

Entries are keyed by the *normalised* source (:func:`pin_key`), so respelling a source
cannot pin a changed file afresh: ``data.bin``, ``./data.bin``, ``/abs/data.bin`` and
``file:///abs/./data.bin`` are one local file (``file:///abs/data.bin``, its resolved path);
``HTTPS://Example.org:443/a/./b.zip#x`` is ``https://example.org/a/b.zip``.  Keys of an
existing file are normalised when it is read, so files written before keep working.

A new entry is appended to the existing text (comments and hand edits stay), under
a lock on ``.<name>.lock`` beside it, so that concurrent fetch jobs do not lose
each other's entries, and the file is replaced atomically.  To trust a changed
upstream file, delete its entry: the next fetch records it again.
"""
from __future__ import annotations

import contextlib
import fcntl
import logging
import posixpath
import re
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import yaml

from elmoc.errors import InputFileError
from elmoc.io.atomic import atomic_file

log = logging.getLogger(__name__)

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


_DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _normal_escapes(text: str) -> str:
    """RFC 3986 6.2.2: escapes of unreserved characters decoded, the other escapes in upper case."""
    def one(m: re.Match) -> str:
        char = chr(int(m.group(1), 16))
        return char if char in _UNRESERVED else m.group(0).upper()

    return re.sub(r"%([0-9A-Fa-f]{2})", one, text)


def pin_key(source: str) -> str:
    """The key of ``source`` in a pins file: one spelling per file.

    * a local path or ``file:`` URL: ``file://`` + the resolved absolute path (``.``, ``..``,
      symbolic links and the working directory resolved);
    * an ``http(s)`` URL: scheme and host in lower case, the default port dropped, the path's
      ``.``/``..`` segments and repeated slashes removed, escapes normalised, no fragment
      (the query is kept: it may select another file);
    * ``pypi:PKG==VER``: the package name normalised as pip does (PEP 503).
    """
    if source.startswith("pypi:"):
        name, sep, version = source[5:].partition("==")
        return f"pypi:{re.sub(r'[-_.]+', '-', name.strip()).lower()}{sep}{version.strip()}"
    parts = urllib.parse.urlsplit(source)
    scheme = parts.scheme.lower()
    if scheme == "file":
        return Path(urllib.request.url2pathname(parts.path)).resolve().as_uri()
    if scheme in _DEFAULT_PORTS:
        host = (parts.hostname or "").lower()
        if ":" in host:
            host = f"[{host}]"  # IPv6
        try:
            port = parts.port
        except ValueError:  # not a port number: the URL is refused where it is fetched
            return source
        netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
        if parts.username is not None:
            auth = parts.username + (f":{parts.password}" if parts.password is not None else "")
            netloc = f"{auth}@{netloc}"
        path = _normal_escapes(re.sub(r"/{2,}", "/", parts.path or "/"))
        normal = posixpath.normpath(path)
        normal = "/" if normal in (".", "//") else normal
        if path.endswith("/") and not normal.endswith("/"):
            normal += "/"
        return urllib.parse.urlunsplit((scheme, netloc, normal, parts.query, ""))
    return Path(source).expanduser().resolve().as_uri()


@dataclass(frozen=True)
class Pin:
    """The recorded identity of one download.

    Args:
        sha256: lowercase hex sha256 of the fetched file.
        size: its length in bytes.
    """

    sha256: str
    size: int


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses a key given twice (e.g. after a merge of two pins files)."""


def _mapping_without_duplicates(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"{key!r} is given twice (keep one entry)", key_node.start_mark
            )
        seen[key] = True
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


class PinsFile:
    """The pins file at ``path`` (created on the first recorded pin).

    Args:
        path: YAML file mapping a source URL to ``{sha256, size}``.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __str__(self) -> str:
        return str(self.path)

    @property
    def lock_path(self) -> Path:
        return self.path.parent / f".{self.path.name}.lock"

    def _read(self) -> tuple[str, dict[str, Pin]]:
        """The file's text and its pins (empty when the file does not exist yet)."""
        if not self.path.exists():
            return "", {}
        try:
            text = self.path.read_text(encoding="utf-8")
            data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
        except UnicodeDecodeError as e:
            raise InputFileError(self.path, f"not valid UTF-8 ({e.reason}); fix or delete the pins file") from None
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            raise InputFileError(
                self.path, f"invalid YAML: {getattr(e, 'problem', e)}; fix the pins file (or delete the entry)",
                None if mark is None else mark.line + 1,
            ) from None
        if data is None:
            return text, {}
        if not isinstance(data, dict):
            raise InputFileError(self.path, "a pins file maps each download URL to {sha256, size}; "
                                 f"found a {type(data).__name__}. Fix or delete it")
        pins: dict[str, Pin] = {}
        spelled: dict[str, str] = {}  # key -> the entry that gave it
        for source, entry in data.items():
            sha = entry.get("sha256") if isinstance(entry, dict) else None
            size = entry.get("size") if isinstance(entry, dict) else None
            if (not isinstance(entry, dict) or set(entry) != {"sha256", "size"} or not isinstance(sha, str)
                    or not _SHA256.match(sha) or isinstance(size, bool) or not isinstance(size, int) or size < 0):
                raise InputFileError(
                    self.path, f"entry {source!r} must be {{sha256: <64 lowercase hex digits>, size: <bytes>}}, "
                    f"got {entry!r}. Fix it, or delete the entry to record the file again on its next fetch"
                )
            key, pin = pin_key(str(source)), Pin(sha, size)
            if key in pins and pins[key] != pin:
                raise InputFileError(
                    self.path, f"entries {spelled[key]!r} and {source!r} name the same source ({key}) with different "
                    "pins; keep the one you trust and delete the other")
            pins[key], spelled[key] = pin, str(source)
        return text, pins

    def lookup(self, source: str) -> Pin | None:
        """The recorded pin of ``source`` (under any spelling: :func:`pin_key`), or None when it
        was never fetched with this file."""
        return self._read()[1].get(pin_key(source))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def record(self, source: str, pin: Pin) -> Pin:
        """Record ``pin`` for ``source`` (trust on first use) and return it.

        Under the lock the file is read again: an entry another fetch recorded in the
        meantime is kept, and an InputFileError is raised if it differs from ``pin``.
        """
        key = pin_key(source)
        with self._locked():
            text, pins = self._read()
            known = pins.get(key)
            if known is not None:
                if known != pin:
                    raise InputFileError(
                        source, f"another fetch recorded sha256 {known.sha256} ({known.size} bytes) in {self.path} "
                        f"while this one got sha256 {pin.sha256} ({pin.size} bytes): the file changed upstream. "
                        f"Fetch it again (the recorded pin is checked), or delete its entry from {self.path}"
                    )
                return known
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            entry = yaml.safe_dump({key: {"sha256": pin.sha256, "size": pin.size}}, sort_keys=False, width=1 << 16)
            if not text:
                text = ("# Pins recorded by `elmoc fetch` for downloads with `sha256: tofu` (trust on first use).\n"
                        "# Commit this file: every later fetch, on any machine using it, checks the file against\n"
                        "# its entry. To trust a changed upstream file, delete its entry.\n")
            elif not text.endswith("\n"):
                text += "\n"
            with atomic_file(self.path) as f:
                f.write(f"{text}# trusted on first use {stamp} by elmoc fetch\n{entry}")
        log.warning("%s trusted on first use: sha256 %s, %d bytes, recorded in %s as %s (commit it; later fetches "
                    "check against it)", source, pin.sha256, pin.size, self.path, key)
        return pin
