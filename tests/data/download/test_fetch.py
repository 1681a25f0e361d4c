"""elmoc.data.download.fetch: checksummed, atomic fetching from URLs, wheels and paths."""
from __future__ import annotations

import hashlib
import json
import sys
import zipfile

import pytest
import yaml

from elmoc.cli import main
from elmoc.data.download import fetch as fetch_mod
from elmoc.data.download.fetch import FetchSpec, fetch, pip_download_command
from elmoc.data.download.pins import Pin, PinsFile
from elmoc.errors import ConfigError, InputFileError
from elmoc.io.output_paths import MANIFEST as OUTPUT_MANIFEST


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def remote(tmp_path):
    src = tmp_path / "remote" / "data.txt"
    src.parent.mkdir()
    src.write_bytes(b"hello world\n")
    return src


def test_url_download_with_right_hash(tmp_path, remote):
    out = tmp_path / "dl" / "hello"
    files = fetch(FetchSpec(remote.as_uri(), _sha(b"hello world\n")), out, cache=tmp_path / "cache")
    assert [f.name for f in files] == ["data.txt"]
    assert (out / "data.txt").read_bytes() == b"hello world\n"
    assert (out / fetch_mod.MANIFEST).is_file()


def test_url_download_wrong_hash_leaves_nothing(tmp_path, remote):
    out, cache = tmp_path / "dl" / "hello", tmp_path / "cache"
    wrong = "0" * 64
    with pytest.raises(InputFileError) as e:
        fetch(FetchSpec(remote.as_uri(), wrong), out, cache=cache)
    msg = str(e.value)
    assert remote.as_uri() in msg and wrong in msg and _sha(b"hello world\n") in msg
    assert not out.exists()
    assert list(cache.iterdir()) == []  # no partial download either
    assert not (tmp_path / "dl").exists() or list((tmp_path / "dl").iterdir()) == []


def test_second_fetch_is_a_noop(tmp_path, remote):
    out = tmp_path / "dl" / "hello"
    spec = FetchSpec(remote.as_uri(), _sha(b"hello world\n"))
    fetch(spec, out, cache=tmp_path / "cache")
    remote.unlink()  # a second download would now fail
    assert fetch(spec, out, cache=tmp_path / "cache")[0].read_bytes() == b"hello world\n"


def test_unpinned_url_is_refused_unless_allowed(tmp_path, remote, caplog, capsys):
    with pytest.raises(ConfigError, match="not pinned: set its sha256 .*--allow-unpinned"):
        FetchSpec(remote.as_uri(), None)
    out = tmp_path / "dl" / "x"
    assert main(["fetch", remote.as_uri(), "--output-dir", str(out), "--sha256", "none"]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and remote.as_uri() in errors[0] and not out.exists()
    assert main(["fetch", remote.as_uri(), "--output-dir", str(out), "--sha256", "none", "--allow-unpinned"]) == 0
    assert _sha(b"hello world\n") in caplog.text  # logged, so that it can be pinned


def test_size_pin(tmp_path, remote):
    assert fetch(FetchSpec(remote.as_uri(), size=12), tmp_path / "ok", cache=tmp_path / "c")[0].read_bytes() == b"hello world\n"
    with pytest.raises(InputFileError, match="size mismatch: the server announces 12 bytes, the pinned size is 13"):
        fetch(FetchSpec(remote.as_uri(), size=13), tmp_path / "bad", cache=tmp_path / "c2")
    assert not (tmp_path / "bad").exists() and list((tmp_path / "c2").iterdir()) == []
    with pytest.raises(InputFileError, match="size mismatch"):
        fetch(FetchSpec(str(remote), size=3), tmp_path / "local")
    with pytest.raises(ConfigError, match="number of bytes"):
        FetchSpec(remote.as_uri(), size=-1)


@pytest.fixture
def short_server():
    """An HTTP server whose response announces 1000 bytes and sends 10 (a cut transfer)."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"0123456789")
            self.wfile.flush()
            self.close_connection = True

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/model.bin"
    server.shutdown()
    server.server_close()


def test_truncated_transfer_is_refused_even_when_allowed_unpinned(tmp_path, short_server):
    out, cache = tmp_path / "dl", tmp_path / "cache"
    with pytest.raises(InputFileError) as e:
        fetch(FetchSpec(short_server, allow_unpinned=True), out, cache=cache)
    message = str(e.value)
    assert message.startswith(short_server) and "\n" not in message
    assert "10" in message and ("1000" in message or "IncompleteRead" in message)
    assert not out.exists() and list(cache.iterdir()) == []


def test_manifest_checks_file_checksums(tmp_path, remote):
    out = tmp_path / "dl" / "hello"
    spec = FetchSpec(remote.as_uri(), _sha(b"hello world\n"))
    fetch(spec, out, cache=tmp_path / "cache")
    (out / "data.txt").write_bytes(b"hello worl")  # damaged after the fetch
    assert fetch(spec, out, cache=tmp_path / "cache")[0].read_bytes() == b"hello world\n"  # fetched again
    (out / "data.txt").write_bytes(b"damaged")
    remote.unlink()
    with pytest.raises(InputFileError, match="download failed"):
        fetch(spec, out, cache=tmp_path / "cache")  # not taken as up to date


def test_local_path_checked(tmp_path, remote):
    files = fetch(FetchSpec(str(remote), _sha(b"hello world\n")), tmp_path / "dl" / "local")
    assert files[0].read_bytes() == b"hello world\n"
    with pytest.raises(InputFileError, match="not found"):
        fetch(FetchSpec(str(tmp_path / "missing.txt")), tmp_path / "dl" / "missing")
    with pytest.raises(InputFileError, match="sha256 mismatch"):
        fetch(FetchSpec(str(remote), "f" * 64), tmp_path / "dl" / "bad")
    assert not (tmp_path / "dl" / "bad").exists()


def _make_wheel(path, members: dict[str, bytes]) -> str:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return fetch_mod.sha256_of(path)


def test_pypi_source_uses_cached_wheel_and_extracts_members(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    wheel = cache / "tinypkg-1.0-py3-none-any.whl"
    sha = _make_wheel(wheel, {"tinypkg/data/a.txt": b"A\n", "tinypkg/data/b.txt": b"B\n", "tinypkg/x.py": b""})

    def no_pip(*a, **k):
        raise AssertionError("pip must not run when the pinned wheel is cached")

    monkeypatch.setattr(fetch_mod.subprocess, "run", no_pip)
    out = tmp_path / "dl" / "tiny"
    files = fetch(FetchSpec("pypi:tinypkg==1.0", sha, members=["tinypkg/data/*.txt"]), out, cache=cache)
    assert [f.name for f in files] == ["a.txt", "b.txt"]
    assert (out / "b.txt").read_bytes() == b"B\n"
    assert sorted(p.name for p in out.iterdir()) == [OUTPUT_MANIFEST, fetch_mod.MANIFEST, "a.txt", "b.txt"]


def test_pypi_member_glob_without_match_is_an_error(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    sha = _make_wheel(cache / "tinypkg-1.0-py3-none-any.whl", {"tinypkg/data/a.txt": b"A\n"})
    with pytest.raises(InputFileError, match="no member matches"):
        fetch(FetchSpec("pypi:tinypkg==1.0", sha, members=["tinypkg/nope/*"]), tmp_path / "dl" / "t", cache=cache)
    assert not (tmp_path / "dl" / "t").exists()


def test_pypi_wrong_hash_runs_pip_and_rejects(tmp_path, monkeypatch):
    """A cached wheel with the wrong hash is not used; pip's download is checked and removed."""
    cache = tmp_path / "cache"
    cache.mkdir()
    _make_wheel(cache / "tinypkg-1.0-py3-none-any.whl", {"tinypkg/a.txt": b"A"})
    calls = []

    def fake_pip(cmd, **kwargs):
        calls.append(cmd)
        dest = cmd[cmd.index("-d") + 1]
        _make_wheel(f"{dest}/tinypkg-1.0-py3-none-any.whl", {"tinypkg/a.txt": b"changed"})

        class Done:
            returncode, stdout, stderr = 0, "", ""
        return Done()

    monkeypatch.setattr(fetch_mod.subprocess, "run", fake_pip)
    with pytest.raises(InputFileError, match="sha256 mismatch"):
        fetch(FetchSpec("pypi:tinypkg==1.0", "a" * 64, members=["tinypkg/a.txt"]), tmp_path / "dl" / "t", cache=cache)
    assert len(calls) == 1 and calls[0][-1] == "tinypkg==1.0"
    assert sorted(p.name for p in cache.iterdir()) == ["tinypkg-1.0-py3-none-any.whl"]  # no new file kept
    assert not (tmp_path / "dl" / "t").exists()


def test_pip_command_construction():
    pure = pip_download_command("allennlp==0.9.0", "/d")
    assert pure[:4] == [sys.executable, "-m", "pip", "download"]
    assert "--no-deps" in pure and pure[-1] == "allennlp==0.9.0" and pure[pure.index("-d") + 1] == "/d"
    assert "--platform" not in pure
    binary = pip_download_command(
        "gensim==4.4.0", "/d", "gensim-4.4.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl"
    )
    plats = [binary[i + 1] for i, a in enumerate(binary) if a == "--platform"]
    assert plats == ["manylinux_2_24_x86_64", "manylinux_2_28_x86_64"]
    assert binary[binary.index("--python-version") + 1] == "3.11"
    assert binary[binary.index("--abi") + 1] == "cp311"
    assert binary[binary.index("--implementation") + 1] == "cp"


def test_spec_validation():
    with pytest.raises(ConfigError, match="64 hex"):
        FetchSpec("https://x/y", "abc")
    with pytest.raises(ConfigError, match="members"):
        FetchSpec("pypi:pkg==1.0", None)
    with pytest.raises(ConfigError, match="pypi:package==version"):
        FetchSpec("pypi:pkg", None, members=["*"])
    assert FetchSpec("a/b.txt").kind == "path" and FetchSpec("file:///a", size=1).kind == "url"


def test_cli_fetch_error_exit_code(tmp_path, remote, capsys):
    rc = main(["fetch", remote.as_uri(), "--sha256", "0" * 64, "--output-dir", str(tmp_path / "o")])
    assert rc == 1 and "sha256 mismatch" in capsys.readouterr().err
    assert main(["fetch", remote.as_uri(), "--sha256", _sha(b"hello world\n"), "--output-dir", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "data.txt").is_file()


def test_tar_members_are_extracted(tmp_path):
    import io
    import tarfile

    archive = tmp_path / "corpus.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        for name, data in {"top/train/news.en-00001": b"a b\n", "top/train/news.en-00002": b"c\n", "top/README": b"r"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    files = fetch(FetchSpec(archive.as_uri(), fetch_mod.sha256_of(archive), members=["top/train/news.en-*"]),
                  tmp_path / "dl" / "oneb", cache=tmp_path / "cache")
    assert [f.name for f in files] == ["news.en-00001", "news.en-00002"]
    assert files[1].read_bytes() == b"c\n"


def _zip(path, members: dict[str, bytes]):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


@pytest.mark.parametrize("member", ["data/..", "..", "."])
def test_member_named_dot_or_dotdot_is_refused_with_one_line(tmp_path, capsys, member):
    """A member whose base name is '..' or '.' (a directory, not a file name) is refused,
    naming the archive and the member, and nothing is written (was IsADirectoryError)."""
    archive = _zip(tmp_path / "bad.zip", {"data/a.txt": b"A\n", member: b"evil"})
    out = tmp_path / "dl" / "bad"
    rc = main(["fetch", str(archive), "--sha256", fetch_mod.sha256_of(archive), "--output-dir", str(out),
               "--member", "*"])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 1 and len(errors) == 1, errors
    assert str(archive) in errors[0] and repr(member) in errors[0] and "Traceback" not in errors[0]
    assert not out.exists()


def test_member_named_like_the_manifest_is_refused(tmp_path):
    """A member whose base name is the fetch manifest's would be overwritten by it (or overwrite
    it), so every later run fetched again: it is refused, naming the member and the fix."""
    archive = _zip(tmp_path / "m.zip", {"data/a.txt": b"A\n", f"data/{fetch_mod.MANIFEST}": b"{}"})
    spec = FetchSpec(str(archive), fetch_mod.sha256_of(archive), members=["data/*"])
    with pytest.raises(InputFileError, match=rf"'data/{fetch_mod.MANIFEST}'.*manifest"):
        fetch(spec, tmp_path / "dl" / "m")
    assert not (tmp_path / "dl" / "m").exists()
    # the fix the message gives: a glob that leaves the member out; then a second fetch is a no-op
    spec = FetchSpec(str(archive), fetch_mod.sha256_of(archive), members=["data/[!.]*"])
    assert [f.name for f in fetch(spec, tmp_path / "dl" / "m")] == ["a.txt"]
    archive.unlink()
    assert [f.name for f in fetch(spec, tmp_path / "dl" / "m")] == ["a.txt"]


def test_tofu_records_the_pin_on_first_fetch_and_checks_it_later(tmp_path, remote, caplog, capsys):
    """sha256: tofu: the first fetch records sha256 and size in the pins file (one log line saying
    so); a fetch on another machine with the same pins file verifies against it; a changed file
    is refused with one line naming URL, expected and actual, the pins file and the fix."""
    pins = tmp_path / "config" / "pins.yaml"
    url, good = remote.as_uri(), b"hello world\n"
    files = fetch(FetchSpec(url, "tofu"), tmp_path / "m1" / "dl", cache=tmp_path / "m1" / "cache", pins=pins)
    assert files[0].read_bytes() == good
    recorded = yaml.safe_load(pins.read_text())
    assert recorded == {url: {"sha256": _sha(good), "size": len(good)}}
    trusted = [r.getMessage() for r in caplog.records if "trusted on first use" in r.getMessage()]
    assert len(trusted) == 1 and url in trusted[0] and str(pins) in trusted[0] and _sha(good) in trusted[0]
    # the same request again is a no-op; on a second machine (fresh folders) it is checked and passes
    assert fetch(FetchSpec(url, "tofu"), tmp_path / "m1" / "dl", cache=tmp_path / "m1" / "cache", pins=pins)
    assert main(["fetch", url, "--sha256", "tofu", "--pins", str(pins), "--output-dir", str(tmp_path / "m2" / "dl")]) == 0
    # upstream changes (same length): refused everywhere, nothing kept, the pin unchanged
    remote.write_bytes(b"hello WORLD\n")
    before = pins.read_text()
    rc = main(["fetch", url, "--sha256", "tofu", "--pins", str(pins), "--output-dir", str(tmp_path / "m3" / "dl"),
               "--cache", str(tmp_path / "m3" / "cache")])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 1 and len(errors) == 1, errors
    assert url in errors[0] and f"expected {_sha(good)}" in errors[0] and _sha(b"hello WORLD\n") in errors[0]
    assert f"delete its entry from {pins}" in errors[0]
    assert not (tmp_path / "m3" / "dl").exists() and list((tmp_path / "m3" / "cache").iterdir()) == []
    assert pins.read_text() == before
    # a changed length is caught by the recorded size before any byte is kept
    remote.write_bytes(b"hello world, again\n")
    with pytest.raises(InputFileError, match=rf"size mismatch.*pinned size is 12.*{pins}"):
        fetch(FetchSpec(url, "tofu"), tmp_path / "m4" / "dl", cache=tmp_path / "m4" / "cache", pins=pins)


def test_tofu_pin_appends_and_keeps_what_the_user_wrote(tmp_path, remote):
    pins = tmp_path / "pins.yaml"
    other = {"https://example.org/x.zip": {"sha256": "a" * 64, "size": 5}}
    pins.write_text("# my pins, reviewed 2026-11-01\n" + yaml.safe_dump(other))
    fetch(FetchSpec(remote.as_uri(), "tofu"), tmp_path / "dl", cache=tmp_path / "cache", pins=pins)
    text = pins.read_text()
    assert text.startswith("# my pins, reviewed 2026-11-01\n")
    assert yaml.safe_load(text) == {**other, remote.as_uri(): {"sha256": _sha(b"hello world\n"), "size": 12}}


def _record_many(pins, worker, count, barrier):
    barrier.wait()
    store = PinsFile(pins)
    for i in range(count):
        store.record(f"https://example.org/{worker}/{i}", Pin(f"{worker:02d}{i:02d}".ljust(64, "0"), i))


def test_concurrent_first_fetches_keep_every_pin(tmp_path):
    """Fetch jobs recording at the same time (snakemake --cores all) do not lose each other's pins."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    pins, workers, count = tmp_path / "pins.yaml", 6, 8
    barrier = ctx.Barrier(workers)
    procs = [ctx.Process(target=_record_many, args=(pins, w, count, barrier)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * workers
    assert len(yaml.safe_load(pins.read_text())) == workers * count


@pytest.mark.parametrize("content, named", [
    ("https://x/a.zip: {sha256: abc, size: 3}\n", "entry 'https://x/a.zip' must be"),
    ("https://x/a.zip: {sha256: " + "a" * 64 + ", size: 3}\nhttps://x/a.zip: {sha256: " + "b" * 64 + ", size: 3}\n",
     "given twice"),
    ("- just a list\n", "found a list"),
    ("https://x/a.zip: {sha256: [\n", "invalid YAML"),
])
def test_bad_pins_file_is_one_line(tmp_path, remote, capsys, content, named):
    pins = tmp_path / "pins.yaml"
    pins.write_text(content)
    rc = main(["fetch", remote.as_uri(), "--sha256", "tofu", "--pins", str(pins), "--output-dir", str(tmp_path / "o")])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 1 and len(errors) == 1 and str(pins) in errors[0] and named in errors[0], errors
    assert pins.read_text() == content and not (tmp_path / "o").exists()


def test_tofu_config_size_must_agree_with_the_recorded_one(tmp_path, remote):
    pins = tmp_path / "pins.yaml"
    fetch(FetchSpec(remote.as_uri(), "tofu", size=12), tmp_path / "a", cache=tmp_path / "c", pins=pins)
    with pytest.raises(InputFileError, match=f"config pins size 13 but {pins} recorded 12 bytes"):
        fetch(FetchSpec(remote.as_uri(), "tofu", size=13), tmp_path / "b", cache=tmp_path / "c", pins=pins)
    assert not (tmp_path / "b").exists()


def test_tofu_needs_a_pins_file(tmp_path, remote):
    with pytest.raises(ConfigError, match="sha256: tofu.*no pins file"):
        fetch(FetchSpec(remote.as_uri(), "tofu"), tmp_path / "o")


def test_download_json_entry(tmp_path, remote, capsys):
    """The workflow passes the config's download entry as --section-json (size and tofu included);
    --download-json, its old name, still works."""
    entry = {"source": remote.as_uri(), "sha256": "tofu", "size": 12, "members": [], "wheel": None}
    pins = tmp_path / "pins.yaml"
    assert main(["fetch", "--download-json", json.dumps(entry), "--pins", str(pins), "--output-dir", str(tmp_path / "o")]) == 0
    assert yaml.safe_load(pins.read_text())[remote.as_uri()]["size"] == 12
    entry["size"] = 13
    assert main(["fetch", "--section-json", json.dumps(entry), "--pins", str(tmp_path / "p2.yaml"),
                 "--output-dir", str(tmp_path / "o2")]) == 1
    assert "size mismatch" in capsys.readouterr().err and not (tmp_path / "p2.yaml").exists()
    for bad, named in (({"source": remote.as_uri(), "sha256": None, "sizes": 3}, "unknown key 'sizes' (did you mean 'size'?)"),
                       ({"source": remote.as_uri(), "sha256": None}, "not pinned")):
        assert main(["fetch", "--section-json", json.dumps(bad), "--output-dir", str(tmp_path / "o3")]) == 1
        assert named in capsys.readouterr().err
    assert main(["fetch", "--section-json", "[1]", "--output-dir", str(tmp_path / "o4")]) == 1
    assert "--section-json (download entry) must be a JSON object" in capsys.readouterr().err
    assert main(["fetch", "--section-json", json.dumps(entry), "--sha256", "none", "--output-dir", str(tmp_path / "o5")]) == 1
    assert "drop --sha256" in capsys.readouterr().err


@pytest.fixture
def long_server():
    """An HTTP server sending 5000 bytes without a Content-Length (read until close)."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"x" * 5000)
            self.close_connection = True

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/big.bin"
    server.shutdown()
    server.server_close()


def test_size_pin_stops_a_longer_transfer(tmp_path, long_server, monkeypatch):
    monkeypatch.setattr(fetch_mod, "_CHUNK", 1000)
    with pytest.raises(InputFileError, match="more than the pinned 2000 bytes arrived \\(stopped after 3000\\)"):
        fetch(FetchSpec(long_server, size=2000), tmp_path / "o", cache=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []
