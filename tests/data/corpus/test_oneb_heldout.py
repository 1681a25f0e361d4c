"""config/paper.yaml's corpus trains on all 99 training shards of the 1B Word Benchmark and holds
out the benchmark's own held-out shard (news.en.heldout-00000-of-00050, the data of the paper's
heldout perplexities, section 4.1), both from the one tarball: its fetch entry and corpus section,
as they are, run through `elmoc fetch` and `elmoc corpus` on a tiny tarball of the same shape."""
from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import yaml

from elmoc.cli import main

REPO_ROOT = Path(__file__).resolve().parents[3]
TOP = "1-billion-word-language-modeling-benchmark-r13output"
TRAIN_DIR = f"{TOP}/training-monolingual.tokenized.shuffled"
HELDOUT_DIR = f"{TOP}/heldout-monolingual.tokenized.shuffled"


def _lines(tag: str, n: int = 3) -> list[str]:
    return [f"{tag} sentence {i} ." for i in range(n)]


def tiny_tarball(path: Path) -> dict[str, list[str]]:
    """The benchmark's layout: training shards 00001..00099 (three of them here: the first, one in
    the middle and the last, which paper.yaml once held out), held-out shards 00000 and 00001 of
    50, and the README; returns member -> its sentences."""
    members = {f"{TRAIN_DIR}/news.en-{i:05d}-of-00100": _lines(f"train{i}") for i in (1, 50, 99)}
    members |= {f"{HELDOUT_DIR}/news.en.heldout-{i:05d}-of-00050": _lines(f"heldout{i}", 4) for i in (0, 1)}
    members[f"{TOP}/README"] = ["the benchmark"]
    with tarfile.open(path, "w:gz") as tar:
        for name, lines in members.items():
            data = ("\n".join(lines) + "\n").encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return members


def test_paper_corpus_trains_on_99_shards_and_holds_out_the_benchmarks_heldout(tmp_path, monkeypatch):
    config = yaml.safe_load((REPO_ROOT / "config/paper.yaml").read_text())
    corpus = config["corpus"]
    members = tiny_tarball(tmp_path / "oneb.tar.gz")
    oneb = {**corpus["downloads"]["oneb"], "source": str(tmp_path / "oneb.tar.gz")}
    del oneb["sha256"], oneb["size"]  # pins of the real tarball; a local file is the user's own
    monkeypatch.chdir(tmp_path)  # the config's paths are relative to the working directory
    assert main(["fetch", "--section-json", json.dumps(oneb), "--output-dir", "resources/downloads/oneb"]) == 0
    section = {k: v for k, v in corpus.items() if k != "downloads"}
    assert main(["corpus", "--section-json", json.dumps(section), "--output-dir", "results/corpus"]) == 0

    train = sorted(line for p in Path("results/corpus/train").iterdir() for line in p.read_text().splitlines())
    want = sorted(s for name, lines in members.items() if name.startswith(TRAIN_DIR) for s in lines)
    assert train == want  # all 99 training shards, 00099 among them
    heldout = Path("results/corpus/heldout.txt").read_text().splitlines()
    assert heldout == members[f"{HELDOUT_DIR}/news.en.heldout-00000-of-00050"]  # the benchmark's, in its order
    stats = json.loads(Path("results/corpus/stats.json").read_text())
    assert [Path(s["file"]).name for s in stats["heldout_sources"]] == ["news.en.heldout-00000-of-00050"]
    assert sorted(Path(s["file"]).name for s in stats["sources"]) == [f"news.en-{i:05d}-of-00100" for i in (1, 50, 99)]
