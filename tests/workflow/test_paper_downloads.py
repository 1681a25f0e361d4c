"""The paper run's downloads, with small local files standing in for the five URLs that no
published checksum pinned until issue #20 (bilm-tf vocabulary, ELMo options and weights, the
Common Crawl fastText zip, SST): the workflow's own fetch rules run on a copy of
config/paper.yaml whose URLs point at the stand-ins (same entry names). The four
`sha256: tofu` downloads are recorded in the pins file on the first run, checked against it on
a second machine that uses the same file, and a changed file is refused with one line."""
import hashlib
import io
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
TOFU = ["bilm_vocab", "elmo_options", "elmo_weights", "fasttext_cc"]
TARGETS = [f"resources/downloads/{name}/.fetch.json" for name in TOFU] + ["resources/tasks/sst/.fetch.json"]


def _zip(path, members):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def stand_ins(folder: Path) -> dict[str, Path]:
    """Small local files shaped like the real downloads (the members the config extracts)."""
    folder.mkdir(parents=True)
    files = {name: folder / Path(url).name for name, url in (
        ("bilm_vocab", "vocab-2016-09-10.txt"),
        ("elmo_options", "elmo_2x4096_512_2048cnn_2xhighway_options.json"),
        ("elmo_weights", "elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5"),
        ("fasttext_cc", "crawl-300d-2M-subword.zip"),
        ("sst", "trainDevTestTrees_PTB.zip"),
    )}
    files["bilm_vocab"].write_text("</S>\n<S>\n<UNK>\nthe\n,\n")
    files["elmo_options"].write_text('{"lstm": {"dim": 4096, "projection_dim": 512}}\n')
    files["elmo_weights"].write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(range(256)) * 4)
    _zip(files["fasttext_cc"], {"crawl-300d-2M-subword.bin": b"fasttext stand-in", "README": b"r"})
    _zip(files["sst"], {f"trees/{split}.txt": f"(3 (2 {split}) (4 good))\n".encode() for split in ("train", "dev", "test")})
    return files


def paper_copy(files: dict[str, Path], path: Path) -> Path:
    """config/paper.yaml with the five URLs replaced by file:// URLs of the stand-ins. The four
    tofu entries keep `sha256: tofu`; SST's published pin is that of the real zip, so the copy
    pins the stand-in's sha256 and size instead."""
    config = yaml.safe_load((REPO_ROOT / "config/paper.yaml").read_text())
    downloads = config["corpus"]["downloads"]
    assert [downloads[name]["sha256"] for name in TOFU] == ["tofu"] * 4
    assert config["tasks"]["downloads"]["sst"]["sha256"] == (
        "5c613a4f673fc74097d523a2c83f38e0cc462984d847b82c7aaf36b01cbbbfcc")
    for name in TOFU:
        downloads[name]["source"] = files[name].as_uri()
    sst = files["sst"]
    config["tasks"]["downloads"]["sst"].update(
        source=sst.as_uri(), sha256=hashlib.sha256(sst.read_bytes()).hexdigest(), size=sst.stat().st_size)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_fetch_rules(configfile: Path, work: Path, *options: str):
    work.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--snakefile", str(REPO_ROOT / "Snakefile"),
         "--configfile", str(configfile), "--directory", str(work), *TARGETS, *options],
        cwd=work, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_paper_downloads_pass_with_pins_recorded_then_a_changed_file_is_refused(tmp_path):
    files = stand_ins(tmp_path / "remote")
    configfile = paper_copy(files, tmp_path / "paper-local.yaml")

    # first machine: every download passes; the four tofu pins are recorded in config/pins.yaml
    first = tmp_path / "machine1"
    r = run_fetch_rules(configfile, first)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (first / "resources/downloads/bilm_vocab/vocab-2016-09-10.txt").read_text().startswith("</S>")
    assert (first / "resources/downloads/fasttext_cc/crawl-300d-2M-subword.bin").read_bytes() == b"fasttext stand-in"
    assert sorted(p.name for p in (first / "resources/tasks/sst").iterdir()) == [
        ".elmoc-output.json", ".fetch.json", "dev.txt", "test.txt", "train.txt"]
    pins_file = first / "config/pins.yaml"
    pins = yaml.safe_load(pins_file.read_text())
    assert pins == {files[name].as_uri(): {"sha256": hashlib.sha256(files[name].read_bytes()).hexdigest(),
                                           "size": files[name].stat().st_size} for name in TOFU}
    assert "trusted on first use" in (first / "logs/fetch/downloads/elmo_weights.log").read_text()

    # a rerun of every fetch job (as after a config change) replaces each folder: its own output
    fetched_at = (first / "resources/tasks/sst/.fetch.json").stat().st_mtime_ns
    r = run_fetch_rules(configfile, first, "--forcerun", "fetch")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (first / "resources/tasks/sst/.fetch.json").stat().st_mtime_ns != fetched_at  # it did run again
    assert sorted(p.name for p in (first / "resources/tasks/sst").iterdir()) == [
        ".elmoc-output.json", ".fetch.json", "dev.txt", "test.txt", "train.txt"]

    # second machine with the committed pins file: verified against it, nothing new recorded
    second = tmp_path / "machine2"
    (second / "config").mkdir(parents=True)
    (second / "config/pins.yaml").write_text(pins_file.read_text())
    r = run_fetch_rules(configfile, second)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (second / "config/pins.yaml").read_text() == pins_file.read_text()
    assert "trusted on first use" not in (second / "logs/fetch/downloads/elmo_weights.log").read_text()

    # the weights change upstream (same length): a third machine with the pins file refuses them
    weights = files["elmo_weights"]
    weights.write_bytes(weights.read_bytes()[::-1])
    third = tmp_path / "machine3"
    (third / "config").mkdir(parents=True)
    (third / "config/pins.yaml").write_text(pins_file.read_text())
    r = run_fetch_rules(configfile, third)
    assert r.returncode != 0
    log = (third / "logs/fetch/downloads/elmo_weights.log").read_text()
    errors = [line for line in log.splitlines() if "error:" in line]
    assert len(errors) == 1 and weights.as_uri() in errors[0] and "sha256 mismatch" in errors[0]
    assert f"expected {pins[weights.as_uri()]['sha256']}" in errors[0] and "config/pins.yaml" in errors[0]
    assert not (third / "resources/downloads/elmo_weights").exists()
    assert (third / "config/pins.yaml").read_text() == pins_file.read_text()
