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
