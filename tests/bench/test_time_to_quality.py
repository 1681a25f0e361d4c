"""benchmarks/time_to_quality.py: the table's arithmetic on synthetic curves (tokens to reach a
value with interpolation, both metric directions, the seed spread, paired differences), and the
whole script end to end on 2 tiny variants x 2 seeds trained by `elmoc train`."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import yaml
from benchmark_scripts import load_benchmark
from tiny_corpus import sentences, tiny_spec, write_workdir

ttq = load_benchmark("time_to_quality")


def test_first_reach_interpolates_between_evaluations_in_either_direction():
    assert ttq.first_reach([0, 10, 20], [0.1, 0.3, 0.5], 0.4, True) == pytest.approx(15.0)
    assert ttq.first_reach([0, 10, 20], [100.0, 50.0, 20.0], 35.0, False) == pytest.approx(15.0)
    assert ttq.first_reach([0, 10, 20], [0.1, 0.3, 0.5], 0.3, True) == pytest.approx(10.0)  # reached exactly
    assert ttq.first_reach([5, 10], [0.9, 0.95], 0.5, True) == 5.0  # reached at the first evaluation
    assert ttq.first_reach([0, 10, 20], [0.1, 0.3, 0.2], 0.4, True) is None  # never
    assert ttq.first_reach([0, 10, 20], [0.1, 0.5, 0.2], 0.4, True) == pytest.approx(7.5)  # the first crossing


def test_mean_and_sample_spread():
    assert ttq.mean_sd([1.0, 3.0]) == (2.0, pytest.approx(2 ** 0.5), 2)
    assert ttq.mean_sd([4.0]) == (4.0, None, 1)
    assert ttq.mean_sd([]) == (None, None, 0)


def curve(values, step=100):
    """Synthetic points (tokens, seconds, value): evaluations every `step` tokens, 1 s per 10 tokens."""
    return [(i * step, i * step / 10, v) for i, v in enumerate(values)]


def test_summary_targets_the_baselines_mean_final_and_pairs_seeds():
    curves = {"base": {1: curve([0.0, 0.4, 0.5]), 2: curve([0.0, 0.6, 0.7])},  # finals 0.5, 0.7: target 0.6
              "new": {1: curve([0.0, 0.8, 0.9]), 2: curve([0.0, 0.3, 0.55])}}  # seed 2 never reaches 0.6
    rows = {r["variant"]: r for r in ttq.summarize(curves, {"new": "base"}, {"base": True, "new": True})}
    new, base = rows["new"], rows["base"]
    assert new["target"] == base["target"] == pytest.approx(0.6)
    assert new["reached"] == 1 and new["seeds"] == 2
    assert new["tokens_to_target"] == pytest.approx(75.0)  # 0 -> 0.8 over 100 tokens: 0.6 at 75
    assert new["seconds_to_target"] == pytest.approx(7.5)
    assert new["tokens_fraction"] == pytest.approx(75.0 / 200)
    assert new["final_mean"] == pytest.approx(0.725) and new["final_sd"] == pytest.approx(np.std([0.9, 0.55], ddof=1))
    assert new["diff_mean"] == pytest.approx(0.125)  # per seed: +0.4, -0.15
    assert new["diff_sd"] == pytest.approx(np.std([0.4, -0.15], ddof=1)) and new["paired_seeds"] == 2
    # the baseline against itself: seed 2 reaches its mean final (0.6) at 100 tokens, seed 1 never
    assert base["baseline"] == "base" and base["reached"] == 1 and base["tokens_to_target"] == pytest.approx(100.0)
    assert base["diff_mean"] == pytest.approx(0.0)


def test_summary_reads_a_lower_is_better_metric_the_other_way():
    curves = {"base": {1: curve([500.0, 200.0, 100.0])}, "new": {1: curve([500.0, 100.0, 80.0])}}
    rows = {r["variant"]: r for r in ttq.summarize(curves, {"new": "base"}, {"base": False, "new": False})}
    assert rows["new"]["tokens_to_target"] == pytest.approx(100.0) and rows["new"]["diff_mean"] == pytest.approx(-20.0)
    assert rows["new"]["diff_sd"] is None  # one seed: no spread


def test_a_baseline_not_among_the_variants_is_refused():
    with pytest.raises(ttq.ConfigError, match="not among --variants"):
        ttq.summarize({"new": {1: curve([0.1, 0.2])}}, {"new": "base"}, {"new": True})


# --- end to end -----------------------------------------------------------------------------------


def workflow_dir(tmp_path):
    """A workflow folder: the tiny corpus, one LSTM preset, and a config defining variant "lstm"."""
    rng = np.random.default_rng(5)
    spec = tiny_spec("lstm", {"type": "cosine", "vectors": "vec.npy"}, batch_size=2, bptt=5, eval_batch_size=2)
    spec["description"] = "a tiny LSTM with a cosine output"
    write_workdir(tmp_path, [sentences(rng, 40)], sentences(np.random.default_rng(6), 12), spec, rng)
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets/lstm.yaml").write_text(yaml.safe_dump(spec))
    config = {"pretrain": {"presets_dir": "presets", "variants": {"lstm": {"overrides": {"optimizer": {"lr": 0.02}}}}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    return tmp_path


@pytest.mark.slow  # 4 tiny `elmoc train` runs (seconds)
def test_two_variants_two_seeds_end_to_end_and_reused(tmp_path, monkeypatch):
    root = workflow_dir(tmp_path)
    monkeypatch.setenv("ELMOC_NATIVE_LSTM", "0")
    monkeypatch.chdir(tmp_path)  # the script works in --workflow-dir; restored after the test
    out = tmp_path / "ttq"
    argv = ["--workflow-dir", str(root), "--config", "config.yaml", "--out", str(out), "--variants", "lstm",
            "wide=lstm", "--baseline", "wide=lstm", "--seeds", "1", "2", "--max-steps", "6", "--eval-every", "2",
            "--eval-windows", "3", "--overrides", '{"wide": {"encoder": {"cell_size": 12}}}']
    assert ttq.main(argv) == 0
    report = json.loads((out / "time_to_quality.json").read_text())
    assert (out / "time_to_quality.png").stat().st_size > 0
    assert "| wide | lstm | cosine ↑ | 2 |" in (out / "time_to_quality.md").read_text()
    for variant in ("lstm", "wide"):
        spec = yaml.safe_load((out / f"seed2/{variant}/spec.yaml").read_text())
        assert spec["train"]["seed"] == 2 and spec["train"]["max_steps"] == 6
        assert spec["optimizer"]["lr"] == 0.02  # "wide" takes its baseline's config entry
        assert spec["encoder"]["cell_size"] == (12 if variant == "wide" else 8)
        for seed in ("1", "2"):
            points = report["curves"][variant][seed]
            heldout = json.loads((out / f"seed{seed}/{variant}/forward/heldout.json").read_text())
            assert points[0][0] == 0 and points[-1][0] == heldout["tokens"]
            assert points[-1][2] == pytest.approx(heldout["history"][-1]["value"])
            assert [p[0] for p in points] == sorted({p[0] for p in points})  # one point per evaluation step
    recomputed = ttq.summarize({v: {int(s): [tuple(p) for p in pts] for s, pts in c.items()}
                                for v, c in report["curves"].items()}, {"wide": "lstm"}, {"lstm": True, "wide": True})
    assert recomputed == report["rows"]
    finished = (out / "seed1/lstm/forward/heldout.json").stat().st_mtime_ns
    assert ttq.main(argv) == 0  # every run is reused
    assert (out / "seed1/lstm/forward/heldout.json").stat().st_mtime_ns == finished


def test_bad_arguments_are_one_line(tmp_path, monkeypatch, capsys):
    root = workflow_dir(tmp_path)
    monkeypatch.chdir(tmp_path)
    common = ["--workflow-dir", str(root), "--config", "config.yaml", "--out", str(tmp_path / "o"), "--variants", "lstm"]
    for extra, words in ((["--overrides", '{"other": {}}'], "not among --variants"),
                         (["--overrides", "{bad"], "not JSON"),
                         (["--overrides", '{"lstm": {"trian": {}}}'], "trian"),
                         (["--baseline", "lstm=base"], "must be among --variants")):
        assert ttq.main(common + extra) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err
    assert not (tmp_path / "o").exists()


def test_without_the_shared_data_it_skips_and_writes_nothing(tmp_path, monkeypatch, capsys):
    root = workflow_dir(tmp_path)
    monkeypatch.chdir(tmp_path)
    config = yaml.safe_load((root / "config.yaml").read_text())
    config["corpus"] = {"sources": [{"format": "lines", "path": "absent/shard*"}]}
    config["pretrain"]["variants"]["lstm"]["overrides"]["data"] = {"train": "results/corpus/train"}
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    assert ttq.main(["--workflow-dir", str(root), "--config", "config.yaml", "--out", str(tmp_path / "o"),
                     "--variants", "lstm"]) == 0
    assert "skipped" in capsys.readouterr().err and not (tmp_path / "o").exists()
    assert os.path.isdir(root / "corpus")
