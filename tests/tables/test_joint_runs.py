"""Tables and the summary read a joint bi-LM's one results/lm/{variant}/joint/heldout.json:
its time is its one run's, its parameters its one count (shared layers once)."""
import json

import pandas as pd
import pytest

from elmoc.cli import main
from elmoc.errors import InputFileError
from elmoc.tables.flat import pretrain_table
from elmoc.tables.models import table2
from elmoc.tables.runs import read_lm_runs, read_task_runs
from elmoc.tables.summary import lm_summary


def _write_joint(root, variant, *, params, tokens, seconds, after):
    """results/lm/{variant}/joint/heldout.json as `elmoc train --direction joint` writes it."""
    d = root / "lm" / variant / "joint"
    d.mkdir(parents=True)
    sub = {"forward": after - 5.0, "backward": after + 5.0}
    history = [{"metric": "perplexity", "value": 900.0, "step": 0, "tokens": 0, "tag": "before",
                **{k: {"value": 900.0} for k in sub}},
               {"metric": "perplexity", "value": after, "step": 10, "tokens": tokens, "tag": "after",
                **{k: {"value": v} for k, v in sub.items()}}]
    path = d / "heldout.json"
    path.write_text(json.dumps({
        "direction": "joint", "steps": 10, "tokens": tokens, "seconds": seconds, "metric": "perplexity",
        "before": 900.0, "after": after, "constant_baseline": None, "history": history,
        "trainable_parameters": params, "threads": 1,
        **{k: {"metric": "perplexity", "before": 900.0, "after": v, "loss_after": 4.0, "constant_baseline": None}
           for k, v in sub.items()}}))
    (d / "train_log.jsonl").write_text(json.dumps(
        {"event": "train", "step": 10, "tokens": tokens, "tokens_per_s": tokens / seconds, "loss": 4.0}) + "\n")
    return path


@pytest.fixture
def mixed(tmp_path, write_lm):
    """ELMo trained jointly (one run), ELMo-C as two directions."""
    root = tmp_path / "results"
    heldout = [_write_joint(root, "elmo", params=5_000_000, tokens=4000, seconds=40.0, after=80.0)]
    for direction, seconds in (("forward", 10.0), ("backward", 12.0)):
        heldout.append(write_lm(root, "elmo-c", direction, params=1_000_000, tokens=2000, seconds=seconds))
    return root, heldout


def test_table2_time_and_params_of_a_joint_and_a_separate_variant(mixed):
    _, heldout = mixed
    table = table2(read_lm_runs(heldout), read_task_runs([]))
    rows = {row[0]: dict(zip(table.columns, row)) for row in table.rows}
    assert rows["ELMo"]["Time"].startswith("40 s") and rows["ELMo"]["Params"].startswith("5.0M")
    assert rows["ELMo-C"]["Time"].startswith("22 s") and rows["ELMo-C"]["Params"].startswith("2.0M")


def test_summary_counts_a_joint_run_once(mixed, capsys):
    root, heldout = mixed
    df = lm_summary(read_lm_runs(heldout)).set_index("variant")
    assert df.loc["elmo", "seconds"] == 40.0 and df.loc["elmo", "params"] == 5_000_000
    assert df.loc["elmo", "directions"] == "joint" and df.loc["elmo", "heldout"] == 80.0
    assert df.loc["elmo", "tokens_per_s"] == pytest.approx(100.0)
    assert df.loc["elmo-c", "seconds"] == 22.0 and df.loc["elmo-c", "params"] == 2_000_000
    assert df.loc["elmo", "params_ratio"] == pytest.approx(2.5)
    assert main(["summary", "--heldout", *map(str, heldout)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("elmo "))
    assert "5,000,000" in line and "40 s" in line and "(joint bi-LM)" in line


def test_pretrain_table_has_the_joint_row_and_its_directions(mixed):
    _, heldout = mixed
    df = pretrain_table(heldout).set_index(["variant", "direction"])
    joint = df.loc[("elmo", "joint")]
    assert joint["after"] == 80.0 and joint["after_forward"] == 75.0 and joint["after_backward"] == 85.0
    assert joint["seconds"] == 40.0 and joint["trainable_params"] == 5_000_000
    assert pd.isna(df.loc[("elmo-c", "forward"), "after_forward"])


def test_a_variant_with_joint_and_direction_runs_is_refused(mixed, write_lm):
    root, heldout = mixed
    stale = write_lm(root, "elmo", "forward", params=3_000_000, tokens=2000, seconds=30.0)
    with pytest.raises(InputFileError, match="both a joint run and separate-direction runs"):
        read_lm_runs([*heldout, stale])


def test_table2_batch_is_the_papers_global_batch_of_a_run(tmp_path, write_lm):
    """Our batch_size is a run's global batch: a joint ELMo-A on all 4 GPUs is 4 x 256, each
    direction of ELMo-C 2 x 768 (footnote 7's 2 + 2 split) -- no dagger; another batch gets one."""
    import yaml

    root = tmp_path / "results"
    heldout = [_write_joint(root, "elmo-a", params=10, tokens=10, seconds=1.0, after=9.0),
               _write_joint(root, "elmo-sub", params=10, tokens=10, seconds=1.0, after=9.0)]
    for variant, batch in (("elmo-a", 1024), ("elmo-sub", 320)):
        (root / "lm" / variant / "spec.yaml").write_text(yaml.safe_dump(
            {"encoder": {"cell_size": 4096, "projection_size": 512}, "train": {"batch_size": batch}}))
    for direction in ("forward", "backward"):
        heldout.append(write_lm(root, "elmo-c", direction, params=1, tokens=10, seconds=1.0, batch=1536,
                                cell=4096, projection=512))
    table = table2(read_lm_runs(heldout), read_task_runs([]))
    rows = {row[0]: dict(zip(table.columns, row)) for row in table.rows}
    assert rows["ELMo-A"]["Batch"] == "1024" and rows["ELMo-C"]["Batch"] == "1536"
    assert rows["ELMo-Sub"]["Batch"] == "320 †"  # one card's batch, not the run's


def test_table2_time_is_device_time_like_the_papers_days_x_gpus(tmp_path, write_lm):
    """A joint run on 4 processes for 100 s and a direction pair on 2 + 2 for 100 s each
    both used 400 device-seconds; a run written before the key counts 1 process."""
    root = tmp_path / "results"
    joint = _write_joint(root, "elmo-a", params=3_000_000, tokens=4000, seconds=100.0, after=70.0)
    data = json.loads(joint.read_text())
    joint.write_text(json.dumps({**data, "processes": 4}))
    heldout = [joint]
    for direction in ("forward", "backward"):
        path = write_lm(root, "elmo-c", direction, params=1_000_000, tokens=2000, seconds=100.0)
        heldout.append(path)
        path.write_text(json.dumps({**json.loads(path.read_text()), "processes": 2}))
    heldout.append(write_lm(root, "elmo-sub", "joint", params=1_000_000, tokens=2000, seconds=30.0))
    table = table2(read_lm_runs(heldout), read_task_runs([]))
    rows = {row[0]: dict(zip(table.columns, row)) for row in table.rows}
    assert rows["ELMo-A"]["Time"].startswith("6.7 min") and rows["ELMo-C"]["Time"].startswith("6.7 min")
    assert rows["ELMo-Sub"]["Time"].startswith("30 s")
