"""A pin cannot be bypassed by respelling (issue 30.6): pins are keyed by the normalised
source (elmoc.data.download.pins.pin_key), so a changed file fetched under another spelling
of the same source is refused, not trusted afresh; old pins files keep working."""
from __future__ import annotations

import hashlib

import pytest
import yaml

from elmoc.cli import main
from elmoc.data.download.pins import Pin, PinsFile, pin_key
from elmoc.errors import InputFileError


def test_local_respellings_of_a_changed_file_are_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.bin").write_bytes(b"trusted\n")
    pins = tmp_path / "pins.yaml"
    assert main(["fetch", "data.bin", "--sha256", "tofu", "--pins", str(pins), "--output-dir", "first"]) == 0
    assert list(yaml.safe_load(pins.read_text())) == [(tmp_path / "data.bin").as_uri()]
    before = pins.read_text()
    (tmp_path / "data.bin").write_bytes(b"changed\n")
    (tmp_path / "sub").mkdir()
    for i, spelling in enumerate(["data.bin", "./data.bin", str(tmp_path / "data.bin"), "sub/../data.bin",
                                  f"file://{tmp_path}/././data.bin", f"FILE://{tmp_path}/sub/../data.bin"]):
        rc = main(["fetch", spelling, "--sha256", "tofu", "--pins", str(pins), "--output-dir", f"again{i}"])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 1 and len(err) == 1 and hashlib.sha256(b"trusted\n").hexdigest() in err[0], (spelling, err)
        assert pins.read_text() == before and not (tmp_path / f"again{i}").exists()


@pytest.mark.parametrize("spelling", [
    "https://example.org/a/b.zip", "HTTPS://EXAMPLE.org/a/b.zip", "https://example.org:443/a/b.zip",
    "https://example.org/a/./b.zip", "https://example.org/a/c/../b.zip", "https://example.org//a//b.zip",
    "https://example.org/a/b.zip#part", "https://example.org/%61/b.zip",
])
def test_url_respellings_share_one_pin(tmp_path, spelling):
    pins = PinsFile(tmp_path / "pins.yaml")
    pins.record("https://example.org/a/b.zip", Pin("a" * 64, 3))
    assert pins.lookup(spelling) == Pin("a" * 64, 3)
    with pytest.raises(InputFileError, match="another fetch recorded sha256 a{64}"):
        pins.record(spelling, Pin("b" * 64, 3))  # a changed file under a new spelling is not trusted afresh


@pytest.mark.parametrize("other", [
    "http://example.org/a/b.zip", "https://example.org:8443/a/b.zip", "https://example.org/a/b.zip?v=2",
    "https://example.org/A/b.zip", "https://example.com/a/b.zip",
])
def test_different_sources_keep_different_pins(tmp_path, other):
    pins = PinsFile(tmp_path / "pins.yaml")
    pins.record("https://example.org/a/b.zip", Pin("a" * 64, 3))
    assert pins.lookup(other) is None


def test_an_old_pins_file_keeps_working_and_conflicts_are_one_line(tmp_path, monkeypatch):
    """Keys written before normalisation (a relative path, an upper-case host) are normalised on read."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "pins.yaml"
    path.write_text(yaml.safe_dump({"./data.bin": {"sha256": "a" * 64, "size": 1},
                                    "HTTPS://Example.org:443/x.zip": {"sha256": "b" * 64, "size": 2}}))
    pins = PinsFile(path)
    assert pins.lookup(str(tmp_path / "data.bin")) == Pin("a" * 64, 1)
    assert pins.lookup("https://example.org/x.zip") == Pin("b" * 64, 2)
    path.write_text(yaml.safe_dump({"data.bin": {"sha256": "a" * 64, "size": 1},
                                    f"file://{tmp_path}/data.bin": {"sha256": "c" * 64, "size": 1}}))
    with pytest.raises(InputFileError, match=r"entries 'data.bin' and 'file://.*' name the same source .* different pins"):
        pins.lookup("data.bin")


def test_pin_key_of_pypi_and_odd_sources():
    assert pin_key("pypi:Foo_Bar.baz==1.0") == pin_key("pypi:foo-bar-baz==1.0") == "pypi:foo-bar-baz==1.0"
    assert pin_key("https://example.org") == "https://example.org/"
    assert pin_key("https://example.org:x/a") == "https://example.org:x/a"  # not a port: left for fetch to refuse
