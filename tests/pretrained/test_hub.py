"""Issue 53.4: models by name or URL, downloaded once into a cache with a pin, offline afterwards
(file:// URLs: no network in tests)."""
from __future__ import annotations

import shutil
import tarfile

import pytest
import torch
import yaml
from lm_tree_helpers import run_command

from elmoc import Elmo
from elmoc.errors import ConfigError, InputFileError
from elmoc.pretrained import hub

SENTENCES = [["the", "cat", "sat", "."], ["a", "dog"]]


@pytest.fixture
def server(elmo_fixture_dir, tmp_path, monkeypatch):
    """The fixture ELMo's files behind file:// URLs, and an empty cache in $ELMOC_CACHE."""
    served = tmp_path / "server"
    served.mkdir()
    for name in ("options.json", "lm_weights.hdf5"):
        shutil.copy(elmo_fixture_dir / name, served / name)
    monkeypatch.setenv("ELMOC_CACHE", str(tmp_path / "cache"))
    urls = ((served / "options.json").as_uri(), (served / "lm_weights.hdf5").as_uri())
    monkeypatch.setattr(hub, "released_urls", lambda name: urls)
    return served, urls


def _features(elmo: Elmo) -> torch.Tensor:
    with torch.no_grad():
        return elmo.eval()(SENTENCES)["elmo_representations"][0]


def test_released_name_is_fetched_once_pinned_then_offline(server, tmp_path, capsys):
    served, urls = server
    assert hub.released_urls("small") == urls and "small" in hub.RELEASED
    first = Elmo.from_pretrained("small", 1, dropout=0.0)
    pins = yaml.safe_load((tmp_path / "cache/pins.yaml").read_text())
    assert set(pins) == set(urls) and all(len(p["sha256"]) == 64 for p in pins.values())  # trusted on first use
    assert (tmp_path / "cache/models/small/elmoc-model.json").is_file()
    shutil.rmtree(served)  # offline from now on
    again = Elmo.from_pretrained("small", 1, dropout=0.0)
    torch.testing.assert_close(_features(first), _features(again), rtol=0, atol=0)
    assert run_command("fetch_model", ["small"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "cache/models/small")
    direct = Elmo(*urls, 1, dropout=0.0)  # AllenNLP code naming the files' URLs: the cached copies
    torch.testing.assert_close(_features(direct), _features(first))


def test_a_changed_file_is_refused_against_its_pin(server, tmp_path):
    served, urls = server
    Elmo(*urls, 1)
    shutil.rmtree(tmp_path / "cache/files")  # the copy is gone, and the file changed upstream
    (served / "options.json").write_text((served / "options.json").read_text() + " ")
    with pytest.raises(InputFileError, match="options.json: size mismatch: the server announces|sha256 mismatch"):
        Elmo(*urls, 1)


def test_model_directory_archive_at_a_url(server, tmp_path, monkeypatch):
    served, urls = server
    source = hub.fetch_model("small")
    archive = served / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source, arcname="elmo-small")  # the files in one folder, as `tar czf` of a directory
    url = archive.as_uri()
    first = Elmo.from_pretrained(url, 1, dropout=0.0)
    torch.testing.assert_close(_features(first), _features(Elmo.from_pretrained(source, 1, dropout=0.0)))
    assert url in yaml.safe_load((tmp_path / "cache/pins.yaml").read_text())
    archive.unlink()  # offline
    torch.testing.assert_close(_features(Elmo.from_pretrained(url, 1, dropout=0.0)), _features(first))


def test_unknown_names_and_bare_files_are_one_line(server, tmp_path, capsys):
    served, urls = server
    assert run_command("fetch_model", ["gigantic"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is not a model directory, a released ELMo (original, medium, small)" in err
    with pytest.raises(ConfigError, match="fetched as one archive"):
        hub.fetch_model(urls[1])
    (served / "junk.tar.gz").write_bytes(b"")
    with tarfile.open(served / "junk.tar.gz", "w:gz") as tar:
        tar.add(served / "options.json", arcname="options.json")
    with pytest.raises(InputFileError, match="elmoc-model.json: missing: not an elmoc model directory"):
        hub.fetch_model((served / "junk.tar.gz").as_uri())
    with pytest.raises(InputFileError, match=r"nowhere: not found: give a model directory \(elmoc export\), a "
                       r"released ELMo's name \(original, medium, small\)"):
        Elmo.from_pretrained(str(tmp_path / "nowhere"))
