from types import SimpleNamespace

import pytest

from elmoc.tables.runs import read_lm_runs, read_task_runs
from elmoc.tables.summary import lm_summary, majority_baseline, summary_text


def test_ratios_come_from_the_logs(results):
    df = lm_summary(read_lm_runs(results["heldout"])).set_index("variant")
    # params: both directions added; ratio to ELMo-C
    assert df.loc["elmo-c", "params"] == 200 and df.loc["elmo", "params"] == 1200
    assert df.loc["elmo", "params_ratio"] == pytest.approx(6.0)
    assert df.loc["elmo-a", "params_ratio"] == pytest.approx(3.0)
    # tokens/s: the last train record of each direction (not heldout.json's seconds)
    assert df.loc["elmo-c", "tokens_per_s"] == pytest.approx(1000.0)
    assert df.loc["elmo", "speed_ratio"] == pytest.approx(0.25)
    assert df.loc["elmo-a", "speed_ratio"] == pytest.approx(0.5)
    assert list(df.index) == ["elmo", "elmo-a", "elmo-c"]  # the paper's order


def test_speed_of_directions_with_different_throughput(tmp_path, write_lm):
    paths = [write_lm(tmp_path, "elmo-c", d, params=1, tokens=600, seconds=99.0,
                      log=[{"event": "train", "step": 1, "tokens": 600, "tokens_per_s": s}])
             for d, s in (("forward", 100.0), ("backward", 300.0))]
    df = lm_summary(read_lm_runs(paths))
    # 1200 tokens in 6 s + 2 s
    assert df.iloc[0]["tokens_per_s"] == pytest.approx(150.0)


def test_without_logs_speed_is_tokens_over_seconds(tmp_path, write_lm):
    paths = [write_lm(tmp_path, "elmo-c", "forward", params=1, tokens=600, seconds=3.0)]
    assert lm_summary(read_lm_runs(paths)).iloc[0]["tokens_per_s"] == pytest.approx(200.0)


def test_summary_text(results):
    text = summary_text(read_lm_runs(results["heldout"]), read_task_runs(results["tasks"]),
                        read_task_runs(results["majority"]))
    lines = text.splitlines()
    elmo = next(line for line in lines if line.startswith("elmo "))
    assert "1,200" in elmo and "6.00x" in elmo and "0.25x" in elmo
    assert "majority class   25.00" in text and "fasttext         52.00 ± 2.00 (n=3)" in text
    assert "Downstream ner: no data: set tasks.ner.train" in text  # why it did not run
    empty = summary_text([], read_task_runs([]), read_task_runs([]))
    assert "No pretrained LM yet" in empty and "no task" in empty


def test_majority_baseline():
    class Task:
        metric_name = "accuracy"

        def missing_data(self):
            return None

        def read(self, split):
            labels = {"train": [1, 1, 0], "test": [1, 0, 0, 0]}[split]
            return [SimpleNamespace(label=x) for x in labels]

    rec = majority_baseline(Task(), "sst5")
    assert rec["test"] == pytest.approx(0.25) and rec["status"] == "ok" and rec["label"] == "1"
    task = Task()
    task.read = lambda split: [SimpleNamespace(tags=["O"])]
    assert majority_baseline(task, "ner")["status"].startswith("n/a")
    task.missing_data = lambda: "train"
    assert majority_baseline(task, "ner")["status"] == "no data: set tasks.ner.train"


def _with_constant_and_description(path, constant, description):
    """Add a constant-prediction baseline to a heldout.json and a description to its spec.yaml."""
    import json

    import yaml

    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "constant_baseline": constant}))
    spec_path = path.parent.parent / "spec.yaml"
    spec_path.write_text(yaml.safe_dump({**yaml.safe_load(spec_path.read_text()), "description": description}))


def test_heldout_cosine_has_its_constant_baseline_and_variants_their_meaning(tmp_path, write_lm):
    """Issue 52.2: the constant-prediction baseline beside each heldout cosine (the mean of the
    directions'), the note on why it differs by target table, each variant's one-line meaning."""
    paths = []
    for variant, after, constants in (("elmo-c", 0.908, (0.9, 0.901)), ("elmo-c-rnd", 0.18, (0.2, 0.22))):
        for direction, constant in zip(("forward", "backward"), constants):
            path = write_lm(tmp_path, variant, direction, params=1, tokens=600, seconds=3.0, after=after)
            _with_constant_and_description(path, constant, f"{variant.upper()}: what it is")
            paths.append(path)
    text = summary_text(read_lm_runs(paths), read_task_runs([]), read_task_runs([]))
    line = next(x for x in text.splitlines() if x.startswith("elmo-c-rnd "))
    assert line.endswith("cosine 0.1800 (constant 0.2100, not beaten)")
    assert "cosine 0.9080 (constant 0.9005)\n" in text
    assert "the random N(0,1) vectors of ELMo-C-RND share none" in text
    assert "Variants:" in text and "  elmo-c-rnd      ELMO-C-RND: what it is" in text


def test_downstream_difference_has_seeds_and_spread(tmp_path, write_task):
    paths = [write_task(tmp_path, "sst5", v, seed, score)
             for v, scores in (("fasttext", (0.50, 0.52, 0.54)), ("elmo-c", (0.53, 0.55, 0.57)))
             for seed, score in zip((1, 2, 3), scores)]
    text = summary_text([], read_task_runs(paths), read_task_runs([]))
    # std 2.00 on both sides, n=3: sqrt(4/3 + 4/3) = 1.63
    assert "elmo-c           55.00 ± 2.00 (n=3)  +3.00 ± 1.63 vs FastText (n=3 vs 3 seeds)" in text
    one = summary_text([], read_task_runs(paths[:1] + paths[3:4]), read_task_runs([]))
    assert "+3.00 vs FastText (n=1 vs 1 seed(s): a single run has no spread" in one
