"""Runs kept apart (issue 52.6): each config is a run (`run:`) whose outputs are results/<run>/ and
whose logs are logs/<run>/, so two configs in one working folder plan disjoint outputs, a run of one
never makes the other's outputs out of date, a bad run name is one line, and a results/ laid out
before run names is left as it is with a one-line note."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from elmoc.errors import ConfigError
from elmoc.layouts import check_run_name, default_run_name, flat_layout_note, relocate

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("ELMOC_SHARED_DATA", REPO_ROOT.parent / "shared" / "data")).resolve()


def snakemake(work, *args, configs=()):
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--snakefile", str(REPO_ROOT / "Snakefile"),
                           *(["--configfile", *map(str, configs)] if configs else []), "--directory", str(work), *args],
                          cwd=work, capture_output=True, text=True, timeout=600)


def planned_outputs(out: str) -> set[str]:
    """Every output, log and benchmark file of a dry run's jobs (`snakemake -n` with the verbose profile)."""
    files = set()
    for kind, listed in re.findall(r"^\s+(output|log|benchmark): (.*)$", out, flags=re.M):
        files |= {f.strip() for f in listed.split(",") if f.strip()}
    return files


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "corpus_sample").is_dir(), reason="../shared/data is absent")
def test_the_demo_and_shared_data_configs_plan_disjoint_outputs_in_one_folder(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "shared").symlink_to(SHARED.parent)  # shared-data.yaml reads ../shared/data
    verbose = ["-n", "--workflow-profile", str(REPO_ROOT / "profiles/verbose")]
    demo = snakemake(work, *verbose, configs=[REPO_ROOT / "config/config.yaml"])
    shared = snakemake(work, *verbose, configs=[REPO_ROOT / "config/shared-data.yaml"])
    assert demo.returncode == 0 and shared.returncode == 0, demo.stdout[-2000:] + shared.stdout[-2000:]
    a, b = planned_outputs(demo.stdout), planned_outputs(shared.stdout)
    assert len(a) > 100 and len(b) > 100
    own = lambda files, run: {f for f in files if not f.startswith((f"results/{run}/", f"logs/{run}/"))}  # noqa: E731
    # the demo's downloads (resources/) and their fetch logs are the only files outside its run's folders
    assert own(a, "demo") and all(f.startswith(("resources/", "logs/fetch/")) for f in own(a, "demo"))
    assert own(b, "shared-data") == set()  # shared-data reads ../shared/data: nothing to fetch
    assert a & b == set()
    assert "results/demo/report/landing.html" in a and "results/shared-data/report/landing.html" in b


def tiny(run: str, max_size: int) -> dict:
    """A config of a few seconds' data stages on ../shared/data's 1B Word sample shards."""
    return {
        "run": run, "scale": "demo",
        "corpus": {"downloads": {}, "sources": [{"format": "lines",
                                                 "path": str(SHARED / "corpus_sample/1b_word_shards/shard*")}],
                   "num_shards": 2, "heldout": 0.1, "seed": 1},
        "vocab": {"max_size": max_size, "min_count": 1},
        "fasttext": {"models": {}},
        "pretrain": {"variants": {"elmo-c": {}}},
        "tasks": {"run": []},
        "bench": {"enabled": False},
    }


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "corpus_sample").is_dir(), reason="../shared/data is absent")
def test_a_run_of_one_config_leaves_the_others_outputs_up_to_date(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    configs = {}
    for run, size in (("one", 3000), ("two", 2000)):  # different params: once the same files, each rerun the other
        configs[run] = tmp_path / f"{run}.yaml"
        configs[run].write_text(yaml.safe_dump(tiny(run, size)))
    # the rule `vocab` as target (with the corpus before it): each run writes results/<run>/vocab/vocab.txt
    r = snakemake(work, "vocab", configs=[configs["one"]])
    assert r.returncode == 0, r.stderr[-3000:]
    r = snakemake(work, "vocab", configs=[configs["two"]])
    assert r.returncode == 0, r.stderr[-3000:]
    r = snakemake(work, "-n", "vocab", configs=[configs["one"]])
    assert r.returncode == 0 and "Nothing to be done" in r.stdout + r.stderr, r.stdout[-3000:] + r.stderr[-2000:]
    vocab = {run: (work / f"results/{run}/vocab/vocab.txt").read_text().splitlines() for run in configs}
    assert len(vocab["one"]) != len(vocab["two"])
    assert (work / "logs/one/vocab/vocab.log").is_file() and (work / "logs/two/vocab/vocab.log").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["../escape", "my run", "tables"])
def test_a_bad_run_name_is_one_line(tmp_path, name):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"run": name}))
    r = snakemake(tmp_path, "-n", configs=[REPO_ROOT / "config/config.yaml", bad])
    out = r.stdout + r.stderr
    assert r.returncode == 1
    lines = [line for line in out.splitlines() if f"run: {name!r}" in line]
    assert len(lines) == 1 and "e.g. `run: " in lines[0], out
    assert "Traceback" not in out and len(out.splitlines()) < 8, out
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_a_results_folder_from_before_run_names_is_left_in_place_with_a_note(tmp_path):
    old = tmp_path / "results/tables/pretrain.md"
    old.parent.mkdir(parents=True)
    old.write_text("an earlier run's table\n")
    (tmp_path / "results/summary.txt").write_text("an earlier summary\n")
    r = snakemake(tmp_path, "-n", configs=[REPO_ROOT / "config/config.yaml"])
    assert r.returncode == 0, r.stderr[-3000:]
    notes = [line for line in r.stderr.splitlines() if line.startswith("note: results/ holds outputs from before")]
    assert len(notes) == 1 and "mv results/summary.txt results/tables results/old/" in notes[0], r.stderr[-3000:]
    assert "results/demo/tables/pretrain.md" in r.stdout and old.read_text() == "an earlier run's table\n"


def test_run_names_and_paths():
    assert check_run_name("paper-2", "c.yaml") == "paper-2"
    for bad in ("", ".hidden", "a/b", "x" * 65, 3, "lm", "fetch"):
        with pytest.raises(ConfigError, match=r"^config c\.yaml: run: "):
            check_run_name(bad, "c.yaml")
    assert default_run_name(["config/my corpus.yaml", "config/distill.yaml"]) == "my-corpus"
    assert default_run_name(["x/tables.yaml"]) == "default" and default_run_name([]) == "default"
    spec = {"vocab": "results/vocab/vocab.txt", "data": {"train": "results/corpus/train"},
            "input": {"vectors": "results/demo/vectors/cc.npy"}, "sources": ["resources/x", "../shared/y"], "n": 3}
    assert relocate(spec, "demo") == {"vocab": "results/demo/vocab/vocab.txt", "data": {"train": "results/demo/corpus/train"},
                                      "input": {"vectors": "results/demo/vectors/cc.npy"},
                                      "sources": ["resources/x", "../shared/y"], "n": 3}


def test_no_note_without_an_old_layout(tmp_path):
    assert flat_layout_note(tmp_path / "results") is None
    (tmp_path / "results/demo/tables").mkdir(parents=True)
    assert flat_layout_note(tmp_path / "results") is None


def test_elmoc_params_reads_the_files_of_the_configs_run(tmp_path):
    from elmoc.params import _table_dim, named_specs

    config = yaml.safe_load((REPO_ROOT / "config/config.yaml").read_text())
    config["run"] = "mine"
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(config))
    specs = dict(named_specs(str(tmp_path / "mine.yaml")))
    assert specs["elmo-c"]["vocab"] == "results/mine/vocab/vocab.txt"
    assert specs["elmo-c"]["data"]["train"] == "results/mine/corpus/train"
    assert _table_dim("results/mine/vectors/cnn.npy", {"vectors/cnn.npy": 512}, 300) == 512
    assert _table_dim("results/mine/vectors/cc.npy", {"results/vectors/cnn.npy": 512}, 300) == 300


def test_export_of_a_variant_not_in_the_results_folder_names_the_runs_that_have_it(tmp_path, monkeypatch, capsys):
    from elmoc.cli import main

    (tmp_path / "results/demo/lm/elmo-c/forward").mkdir(parents=True)
    (tmp_path / "results/paper/lm/elmo-c/joint").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert main(["export", "--variant", "elmo-c", "--output-dir", "model"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("give --results results/demo or results/paper "
                                             "(the workflow's runs that trained it)"), err
