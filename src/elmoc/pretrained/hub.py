"""Models by name or URL, downloaded once into a cache with a pin, offline afterwards (issue 53.4).

``Elmo.from_pretrained(SOURCE)``, ``elmoc fetch-model SOURCE`` and ``Elmo(options_url,
weight_url, ...)`` read

- a released ELMo by name (:data:`RELEASED`: ``original``, ``medium``, ``small``): its bilm-tf
  ``options.json`` and weights HDF5 from AllenNLP's published URLs, converted once into a
  model directory (:func:`~elmoc.pretrained.bilm_tf.convert_bilm_tf`);
- a model directory published at an http(s)/file URL as an archive (``.tar.gz``, ``.tgz``,
  ``.tar``, ``.zip``...; its files flat or in one folder), extracted once;
- any single file at a URL (:func:`local_file`: the bilm-tf files AllenNLP code names);
- a local directory or file, used as it is.

Pins: AllenNLP publishes no checksum for its ELMo files, so every download without a given
sha256 is trusted on first use (:mod:`elmoc.data.download.pins`): its sha256 and size are
recorded in ``<cache>/pins.yaml`` on the first fetch and every later fetch is checked
against them (commit or copy that file to pin other machines).  Once fetched, nothing is
downloaded again: a converted or extracted directory is used as it is, a cached file after
its pinned hash is checked.

The cache is ``$ELMOC_CACHE``, else ``$XDG_CACHE_HOME/elmoc``, else ``~/.cache/elmoc``::

    pins.yaml            the trust-on-first-use pins
    files/KEY/NAME       a downloaded file (KEY: a hash of its URL)
    models/NAME/         a released model's directory, or models/KEY/ an archive's
"""
from __future__ import annotations

import hashlib
import logging
import os
import urllib.parse
import urllib.request
from pathlib import Path

from elmoc.data.download.fetch import FetchSpec, download_url, fetch, sha256_of
from elmoc.data.download.pins import Pin, PinsFile, pin_key
from elmoc.errors import ConfigError, InputFileError
from elmoc.pretrained.loader import MODEL_FILE, read_model_meta

log = logging.getLogger(__name__)

BASE = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/"  # as config/paper.yaml (same pins)
# name -> bilm-tf release folder (options: elmo_<folder>_options.json, weights: elmo_<folder>_weights.hdf5)
RELEASED = {"original": "2x4096_512_2048cnn_2xhighway", "medium": "2x2048_256_2048cnn_1xhighway",
            "small": "2x1024_128_2048cnn_1xhighway"}
ARCHIVES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz", ".zip")


def cache_dir() -> Path:
    """``$ELMOC_CACHE``, else ``$XDG_CACHE_HOME/elmoc``, else ``~/.cache/elmoc``."""
    if os.environ.get("ELMOC_CACHE"):
        return Path(os.environ["ELMOC_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "elmoc"


def released_urls(name: str) -> tuple[str, str]:
    """The published ``options.json`` and weights URLs of a released ELMo."""
    folder = RELEASED[name]
    return f"{BASE}{folder}/elmo_{folder}_options.json", f"{BASE}{folder}/elmo_{folder}_weights.hdf5"


def is_url(source: str | Path) -> bool:
    return isinstance(source, str) and urllib.parse.urlparse(source).scheme in ("http", "https", "file")


def _key(url: str) -> str:
    return hashlib.sha256(pin_key(url).encode("utf-8")).hexdigest()[:16]


def _name(url: str) -> str:
    return Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path)).name or "download"


def local_file(source: str | Path, sha256: str | None = None, cache: str | Path | None = None) -> Path:
    """A local path as it is (it must exist); a URL downloaded once into the cache, pinned by
    ``sha256`` or else trusted on first use (``<cache>/pins.yaml``), checked on every call."""
    if not is_url(source):
        path = Path(source)
        if not path.is_file():
            raise InputFileError(path, "not found; give an existing file or an http(s)/file URL")
        return path
    url = str(source)
    cache = Path(cache) if cache is not None else cache_dir()
    pins = PinsFile(cache / "pins.yaml")
    pin = pins.lookup(url)
    size = None
    if sha256 is None and pin is not None:
        sha256, size = pin.sha256, pin.size
    elif sha256 is not None and pin is not None and pin.sha256 != sha256.lower():
        raise InputFileError(url, f"the given sha256 {sha256} differs from {pin.sha256} recorded in {pins.path}; "
                             f"delete that entry if the new file is trusted")
    dest = cache / "files" / _key(url) / _name(url)
    origin = str(pins.path) if pin is not None else None
    download_url(url, dest, sha256.lower() if sha256 else None, size, origin, warn_unpinned=False)
    if pin is None:
        pins.record(url, Pin(sha256_of(dest), dest.stat().st_size))
    return dest


def fetch_model(source: str, sha256: str | None = None, cache: str | Path | None = None) -> Path:
    """The model directory of a released ELMo's name or of an archive's URL, fetched (and
    converted) into the cache on the first call; later calls read the cache only."""
    cache = Path(cache) if cache is not None else cache_dir()
    if source in RELEASED:
        target = cache / "models" / source
        if (target / MODEL_FILE).is_file():
            return target
        if sha256 is not None:
            raise ConfigError(f"--sha256 applies to a URL; a released model ({source}) has two files, pinned in "
                              f"{cache / 'pins.yaml'}")
        from elmoc.pretrained.bilm_tf import convert_bilm_tf

        options, weights = (local_file(u, cache=cache) for u in released_urls(source))
        log.info("converting the released ELMo %r into %s", source, target)
        convert_bilm_tf(options, weights, target, name=f"elmo-{source}",
                        command=f"elmoc fetch-model {source}  # {released_urls(source)[1]}")
        return target
    if not is_url(source):
        raise ConfigError(f"{source!r} is not a model directory, a released ELMo ({', '.join(RELEASED)}) nor an "
                          "http(s)/file URL of a model directory's archive")
    if not _name(source).endswith(ARCHIVES):
        raise ConfigError(f"{source}: a model directory at a URL is fetched as one archive ({', '.join(ARCHIVES)}); "
                          "pack the directory (tar czf model.tar.gz -C DIR .) and give the archive's URL")
    target = cache / "models" / _key(source)
    spec = FetchSpec(source=source, sha256=sha256 or "tofu", members=["*"])
    fetch(spec, target, cache / "files" / _key(source), pins=cache / "pins.yaml")
    read_model_meta(target)  # an archive of something else is refused here
    return target


def model_directory(source: str | Path, cache: str | Path | None = None) -> Path:
    """``source`` as a local model directory: a directory as it is, a released name or a URL
    fetched into the cache (:func:`fetch_model`)."""
    if isinstance(source, Path) or Path(source).is_dir() or not (source in RELEASED or is_url(source)):
        if not Path(source).exists():
            raise InputFileError(source, "not found: give a model directory (elmoc export), a released ELMo's "
                                 f"name ({', '.join(RELEASED)}) or the URL of a model directory's archive")
        return Path(source)  # the loader names what is wrong with the directory
    return fetch_model(str(source), cache=cache)
