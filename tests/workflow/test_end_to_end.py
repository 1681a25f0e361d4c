"""One end-to-end workflow run of a tiny config in a temporary directory (slow), then the
Snakemake HTML report of that run, opened in a real headless Chromium where one is installed.

Real data from ../shared/data (skipped when absent): the 1B Word sample as corpus and
slices of SST-5; ELMo-C (two direction runs) and ELMo-A (one joint bi-LM run), two seeds,
the quick bench. Checks that the final tables
exist in every format, their numbers are finite, and the figures, summary and report
hold what a reader expects.
"""
import math
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pandas as pd
import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]


def _slice(src, dst, n):
    dst.write_text("\n".join(src.read_text(encoding="utf-8").splitlines()[:n]) + "\n", encoding="utf-8")
    return str(dst)


def tiny_config(shared: Path, data: Path) -> dict:
    sst = {split: _slice(shared / f"sst5/{split}.txt", data / f"sst_{split}.txt", n)
           for split, n in (("train", 150), ("dev", 40), ("test", 60))}
    return {
        "scale": "demo",
        "corpus": {"downloads": {}, "num_shards": 2, "heldout": 0.1, "seed": 1,
                   "sources": [{"format": "lines", "path": str(shared / "corpus_sample/1b_word_shards/shard*")}]},
        "vocab": {"max_size": 5000, "min_count": 1},
        "fasttext": {"models": {"cc": {"train": {"dim": 16, "epoch": 3, "minn": 3, "maxn": 6, "minCount": 1, "ws": 5,
                                                 "neg": 5, "lr": 0.025, "bucket": 20000, "thread": 1, "seed": 1}}},
                     "eval": {"wordsim353": str(shared / "wordsim/wordsim353.tsv")},
                     "random": {"dim": 16, "seed": 1}},
        "pretrain": {"variants": {"elmo-c": {}, "elmo-a": {"overrides": {"output": {"cutoffs": [500, 2000]}}}},
                     "overrides": {"encoder": {"cell_size": 32, "projection_size": 16},
                                   "optimizer": {"type": "scheduled_adam", "base_scale": 2.0e-3, "base_ratio": 16.0,
                                                 "warmup": 5},
                                   "train": {"batch_size": 8, "epochs": 1, "max_steps": 25, "log_every": 5,
                                             "eval_every": 10, "eval_batch_size": 8}}},
        "tasks": {"run": ["sst5"], "seeds": [1, 2],
                  "sst5": {"type": "sst", **sst,
                           "model": {"pre_encode_dim": 16, "encoder_hidden": 16, "integrator_hidden": 16,
                                     "output_dims": [16, 8]},
                           "trainer": {"batch_size": 16, "epochs": 2, "patience": 2}}},
        "bench": {"enabled": True, "quick": True},
    }


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The tiny config's workflow run and its report, once for the tests of this module:
    (work folder, the snakemake command line without targets or cores)."""
    # tests/conftest.py's shared_data, for a module-scoped fixture
    shared_data = Path(os.environ.get("ELMOC_SHARED_DATA", REPO_ROOT.parent / "shared" / "data")).resolve()
    if not shared_data.is_dir():
        pytest.skip(f"shared data not found at {shared_data} (set ELMOC_SHARED_DATA)")
    tmp_path = tmp_path_factory.mktemp("tiny-run")
    data = tmp_path / "data"
    data.mkdir()
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(tiny_config(shared_data, data)))
    work = tmp_path / "work"
    work.mkdir()
    base = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO_ROOT / "Snakefile"),
            "--configfile", str(cfg), "--directory", str(work)]
    r = subprocess.run(base + ["--cores", "2"], cwd=work, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    r = subprocess.run(base + ["--cores", "1", "--report", str(work / "results/tiny/report.html")], cwd=work,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return work, base


@pytest.mark.slow
def test_tiny_workflow_end_to_end_with_report(tiny_run):
    work, base = tiny_run

    pretrain = pd.read_csv(work / "results/tiny/tables/pretrain.csv")
    assert sorted(zip(pretrain.variant, pretrain.direction)) == [
        ("elmo-a", "joint"), ("elmo-c", "backward"), ("elmo-c", "forward")]
    for column in ("before", "after"):
        assert all(math.isfinite(v) for v in pretrain[column])
    assert not (work / "results/tiny/lm/elmo-a/forward").exists()  # one joint run, read as both directions
    runs = pd.read_csv(work / "results/tiny/tables/downstream_runs.csv")
    assert set(runs.variant) == {"elmo-c", "elmo-a", "fasttext"} and set(runs.seed) == {1, 2}
    assert (runs.status == "ok").all()
    assert all(0.0 <= v <= 1.0 for v in runs.test)
    table = (work / "results/tiny/tables/downstream.md").read_text()
    assert "elmo-c" in table and "paper 53.80±0.73" in table

    tables = work / "results/tiny/tables"
    for name in ("table2", "table3", "table4_speed", "table5_speed"):
        for suffix in ("md", "csv", "tex", "html"):
            assert (tables / f"{name}.{suffix}").stat().st_size > 0
    table2 = (tables / "table2.md").read_text()
    assert "| ELMo-C |" in table2 and "2.5 days × 4 GPUs" in table2 and "cell/projection 32/16" in table2
    assert "| majority class |" in table2
    for fig in ("heldout_curves", "speed_table4", "speed_table5", "memory_s2"):
        assert (work / f"results/tiny/figures/{fig}.png").stat().st_size > 0
        assert (work / f"results/tiny/figures/{fig}.pdf").read_bytes().startswith(b"%PDF")
    summary = (work / "results/tiny/summary.txt").read_text()
    assert "elmo-c" in summary and "1.00x" in summary and "majority class" in summary
    assert "(joint bi-LM)" in summary

    html = (work / "results/tiny/report.html").read_text(encoding="utf-8")
    for item in ("table2.html", "table5_speed.html", "heldout_curves.png", "memory_s2.png", "config.html"):
        assert item in html
    # the landing text is the results page: the summary and the tables, not only a job graph
    assert "id='elmoc-landing'" in html and "id='elmoc-summary'" in html and "id='elmoc-table2'" in html
    assert (work / "results/tiny/index.html").read_text(encoding="utf-8").count("<figcaption>") == 5


# What the first screen of a results page shows, measured in the browser (CSS pixels).
LANDING_PROBE = """(() => {
  const box = el => { const b = el.getBoundingClientRect(); return {top: b.top, bottom: b.bottom, left: b.left,
                                                                      right: b.right, width: b.width}; };
  const landing = document.querySelector('#elmoc-landing');
  return {
    width: innerWidth, height: innerHeight, landing: box(landing),
    summary: box(document.querySelector('#elmoc-summary')),
    ids: Array.from(document.querySelectorAll('[id]')).map(e => e.id),
    tables: Array.from(landing.querySelectorAll('section.elmoc-table')).map(s => ({id: s.id,
      header: Array.from(s.querySelectorAll('th')).map(t => [t.textContent, box(t).right])})),
    figures: Array.from(landing.querySelectorAll('figure')).map(f => ({id: f.id, image: box(f.querySelector('img')),
      loaded: f.querySelector('img').complete && f.querySelector('img').naturalWidth > 0,
      caption: box(f.querySelector('figcaption')), text: f.querySelector('figcaption').textContent.length})),
  };
})()"""


def check_results_page(view, page: Path) -> list[str]:
    """What is wrong with a results page as the browser showed it (``view``: a
    :class:`headless_browser.PageView` of ``page`` probed with :data:`LANDING_PROBE`)."""
    v, problems = view.value, []
    problems += [f"console/page error: {e}" for e in view.errors]
    if not 0 <= v["summary"]["top"] < v["height"] - 100:
        problems.append(f"the summary is not on the first screen (top {v['summary']['top']:.0f} px)")
    if v["landing"]["width"] < 0.6 * v["width"] or v["landing"]["right"] > v["width"]:
        problems.append(f"the results take {v['landing']['left']:.0f}-{v['landing']['right']:.0f} px of {v['width']}")
    tables = {t["id"]: t["header"] for t in v["tables"]}
    for name in ("elmoc-table2", "elmoc-table3", "elmoc-pretrain", "elmoc-downstream"):
        if name not in tables:
            problems.append(f"table {name} missing")
    header = tables.get("elmoc-table2", [])
    if len(header) < 2 or header[1][0] != "SST-5" or header[1][1] > v["width"]:
        problems.append(f"Table 2's first score column is not on screen: {header[:3]}")
    if "—" in [h for h, _ in header]:
        problems.append("an empty header")
    for f in v["figures"]:
        if not f["loaded"] or f["caption"]["top"] < f["image"]["bottom"] or f["text"] < 40:
            problems.append(f"figure {f['id']}: image loaded {f['loaded']}, caption under it and written: {f}")
    for link in view.links:
        if page.name == "index.html" or link["inside"].startswith("elmoc-"):  # Snakemake's own are not ours
            problems += _link_problems(link, set(v["ids"]), page)
    return problems


def _link_problems(link: dict, ids: set, page: Path) -> list[str]:
    """A link of ours that does not resolve: an in-page anchor without its element, a file
    that does not exist, anything pointing off the machine."""
    href, raw = link["href"], link["raw"]
    url = urlparse(href)
    if raw.startswith("#"):
        return [] if raw[1:] in ids else [f"anchor {raw} has no element"]
    if url.scheme == "file":
        path = Path(unquote(url.path))
        return [] if path.exists() else [f"link {raw} -> {path}: no such file"]
    if url.scheme in ("data", "blob"):
        return []
    return [f"link {raw} ({link['text']!r}) in {link['inside'] or page.name} leaves the report"]


@pytest.fixture(scope="module")
def chromium():
    """The installed Chromium; skips where there is none, before the workflow runs (a module
    fixture, and named before ``tiny_run``: pytest sets fixtures up by scope, then in order)."""
    from headless_browser import find_chromium

    path = find_chromium()
    if path is None:
        pytest.skip("no Chromium installed (apt-get install chromium, or set ELMOC_CHROMIUM; the CI's .ci/browser.sh)")
    return path


@pytest.mark.slow
def test_report_opens_on_the_results_in_a_headless_browser(chromium, tiny_run, tmp_path):
    """Issue 52.3's check: the report and the results page in a real headless Chromium at 1280 px,
    first-screen screenshots (to $ELMOC_REPORT_SCREENSHOTS when set), no console error, the
    summary and Table 2's scores on the first screen, captions under their figures, every link
    resolving.  Skips where no Chromium is installed (the CI installs Debian's: .ci/browser.sh)."""
    from headless_browser import Browser

    work, _ = tiny_run
    shots = Path(os.environ.get("ELMOC_REPORT_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    problems = []
    with Browser(chromium) as browser:
        for page in (work / "results/tiny/report.html", work / "results/tiny/index.html"):
            view = browser.open(page.as_uri(), width=1280, height=800, ready="document.querySelector('#elmoc-summary')",
                                probe=LANDING_PROBE)
            (shots / f"{page.stem}-1280.png").write_bytes(view.screenshot)
            problems += [f"{page.name}: {p}" for p in check_results_page(view, page)]
    assert not problems, "\n".join(problems)
