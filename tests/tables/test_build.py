import json

import pytest

from elmoc.errors import InputFileError
from elmoc.tables import paper
from elmoc.tables.flat import downstream_table, frame_table, pretrain_table
from elmoc.tables.models import table2, table3
from elmoc.tables.render import write_files
from elmoc.tables.runs import read_lm_runs, read_task_runs
from elmoc.tables.speed import table4, table5


def _cells(table, label):
    row = next(r for r in table.rows if r[0] == label)
    return dict(zip(table.columns, row))


def test_table2_complete_ours_beside_paper(results):
    t = table2(read_lm_runs(results["heldout"]), read_task_runs(results["tasks"]), read_task_runs(results["majority"]))
    c = _cells(t, "ELMo-C")
    assert c["SST-5"] == "52.00±2.00 (n=3) †" and c["SST-5 (paper)"] == "53.80±0.73"
    assert c["NER"] == "no data: set tasks.ner.train"
    assert c["SNLI"] is None and c["SNLI (paper)"] == "88.80"          # not run: a gap, paper still shown
    assert c["Params"] == "200 †" and c["Params (paper)"] == "76M"       # both directions added
    assert c["Time (paper)"] == "2.5 days × 4 GPUs" and c["Time"].endswith("†")
    assert c["Batch"] == "32 †" and c["Batch/GPU (paper)"] == "768"
    assert _cells(t, "FastText_CC")["Params"] is None                     # no LM
    assert _cells(t, "ELMo-Sub")["SST-5"] is None                         # missing variant: gaps
    assert _cells(t, "majority class")["SST-5"] == "25.00 (n=1) †"
    assert "128/32" in t.caption and "seeds 1, 2, 3" in t.caption
    assert all(len(r) == len(t.columns) for r in t.rows)


def test_table3_partial_and_extra_task(results, write_task):
    extra = write_task(results["root"], "pos", "elmo-c-rnd", 1, 0.9, scale="full")
    t = table3(read_lm_runs(results["heldout"][:1]), read_task_runs(results["tasks"] + [extra]))
    assert [r[0] for r in t.rows] == [paper.PAPER_LABELS[v] for v in paper.TABLE3_ROWS]
    assert t.columns[-2:] == ["pos", "pos (paper)"]
    rnd = _cells(t, "-RND")
    assert rnd["pos"] == "90.00 (n=1)" and rnd["pos (paper)"] is None   # full scale: no mark
    assert rnd["SST-5"] is None and rnd["SST-5 (paper)"] == "53.01±1.67"


def test_table2_caption_gives_heldout_perplexities_beside_the_papers(tmp_path, write_lm, write_json):
    """Section 4.1's ELMo-A 35.8 and ELMo 39.7 (the benchmark's held-out data) beside ours: a joint
    ELMo-A's combined perplexity; the released ELMo has no softmax, so its cell is a gap."""
    root = tmp_path / "results"
    runs = [write_lm(root, "elmo-a", "joint", params=1, tokens=10, seconds=1.0, metric="perplexity", after=36.24,
                     cell=4096, projection=512)]
    for direction in ("forward", "backward"):  # the released weights: heldout.json without a metric
        runs.append(write_json(root / "lm/elmo" / direction / "heldout.json", {
            "direction": direction, "steps": 0, "tokens": None, "seconds": 0.0, "metric": None, "after": None}))
    t = table2(read_lm_runs(runs), read_task_runs([]))
    assert "Heldout perplexity" in t.caption and "news.en.heldout-00000-of-00050" in t.caption
    assert "ELMo-A 36.2 (paper 35.8); ELMo — (paper 39.7)." in t.caption
    small = write_lm(root, "elmo", "joint", params=1, tokens=10, seconds=1.0, metric="perplexity", after=80.0)
    t = table2(read_lm_runs(runs[:1] + [small]), read_task_runs([]))
    assert "ELMo 80.0 † (paper 39.7)" in t.caption  # a scaled-down LM: marked


def test_table3_random_input_row_only_with_its_results(results, write_task, write_lm):
    """Section 5.1's random input (opt-in elmo-c-rnd-input): a row after Table 3's own, with the
    paper's one number (SNLI 85.8), when the variant has results; no row otherwise."""
    lm, tasks = read_lm_runs(results["heldout"]), read_task_runs(results["tasks"])
    without = table3(lm, tasks)
    assert "-RND-INPUT" not in [r[0] for r in without.rows] and not any("RND-INPUT" in n for n in without.notes)
    snli = write_task(results["root"], "snli", "elmo-c-rnd-input", 1, 0.80, scale="full")
    t = table3(lm, read_task_runs(results["tasks"] + [snli]))
    assert [r[0] for r in t.rows] == [paper.PAPER_LABELS[v] for v in paper.TABLE3_ROWS] + ["-RND-INPUT"]
    row = _cells(t, "-RND-INPUT")
    assert row["SNLI"] == "80.00 (n=1)" and row["SNLI (paper)"] == "85.80"
    assert row["SST-5"] is None and row["SST-5 (paper)"] is None        # the paper gives SNLI only
    assert any("section 5.1" in n and "85.8" in n for n in t.notes)
    # a pretraining run alone (no task yet) shows the row too, with the paper's number beside the gap
    heldout = write_lm(results["root"], "elmo-c-rnd-input", "forward", params=100, tokens=1000, seconds=1.0)
    t = table3(read_lm_runs(results["heldout"] + [heldout]), tasks)
    row = _cells(t, "-RND-INPUT")
    assert row["SNLI"] is None and row["SNLI (paper)"] == "85.80"


def test_tables_with_no_results_are_all_gaps():
    lm, tasks = read_lm_runs([]), read_task_runs([])
    t2 = table2(lm, tasks)
    assert all(v is None for r in t2.rows for v in r[1:2])
    assert "no results" in t2.caption
    t4, t5 = table4(None), table5(None)
    assert [r[0] for r in t4.rows] == list(paper.TABLE4)
    assert all(r[3] is None and r[4] == str(paper.TABLE4[r[0]][1]) for r in t4.rows)
    assert _cells(t5, "SAMPLED")["TRANS LARGE (paper)"] == "OOM" and _cells(t5, "CONT")["GPT"] is None


def test_speed_tables_from_bench_json():
    bench = {"settings": {"device": "cpu", "threads": 1, "width_scale": 0.5, "vocab_scale": 0.1,
                          "memory_budget_mb": 100, "world": 2},
             "table4": [{"label": "CONT", "params_paper_size": 76185176, "max_batch": 16, "s1_step_s": 0.01,
                         "s2_s_per_mwords": 12.0, "s3_s_per_mwords": None},
                        {"label": "FIXED", "params_paper_size": 76185176, "max_batch": 8, "s1_ratio": 1.5,
                         "s2_ratio": 2.0, "s3_ratio": None}],
             "table5": [{"encoder": "LSTM", "layer": "CONT", "s_per_mwords": 3.0, "ratio": 1.0},
                        {"encoder": "LSTM", "layer": "FIXED", "s_per_mwords": 6.0, "ratio": 2.0}]}
    t4 = table4(bench)
    assert _cells(t4, "CONT")["S2"] == "12.0s †" and _cells(t4, "FIXED")["S1"] == "1.50x †"
    assert _cells(t4, "FIXED")["S3"] is None and _cells(t4, "SUBWORD")["S1"] is None
    assert "widths ×0.5" in t4.caption
    t5 = table5(bench)
    assert _cells(t5, "FIXED")["LSTM"] == "2.00x †" and _cells(t5, "FIXED")["LSTM (paper)"] == "1.93x"


def test_downstream_mean_std_paper_and_status(results, tmp_path):
    table, runs = downstream_table(results["tasks"])
    row = table.set_index("variant").loc["elmo-c"]
    assert row["sst5"].startswith("52.00±2.00 (n=3) [demo]") and "paper 53.80±0.73" in row["sst5"]
    assert row["ner"] == "no data: set tasks.ner.train"
    assert len(runs) == 12
    md = tmp_path / "t.md"
    write_files(frame_table(table, "t", "T"), md=md, csv=tmp_path / "t.csv")
    assert md.read_text().startswith("# T") and (tmp_path / "t.csv").read_text().startswith("variant,")


def test_pretrain_table_and_bad_json(results, tmp_path, write_json, write_lm):
    df = pretrain_table(results["heldout"])
    row = df[(df.variant == "elmo-c") & (df.direction == "forward")].iloc[0]
    assert row["after"] == 0.5 and row["tokens_per_s"] == 1000 and row["trainable_params"] == 100
    bad = tmp_path / "bad.json"
    bad.write_text("{\n  oops\n}")
    with pytest.raises(InputFileError, match=r"bad.json:2: invalid JSON"):
        pretrain_table([bad])
    log = write_lm(tmp_path / "r", "elmo-c", "forward", params=1, tokens=1, seconds=1, log=[])
    log.with_name("train_log.jsonl").write_text('{"event": "train"}\nnot json\n')
    with pytest.raises(InputFileError, match=r"train_log.jsonl:2"):
        read_lm_runs([log])
    with pytest.raises(InputFileError, match="lacks the required field 'task'"):
        read_task_runs([write_json(tmp_path / "x.json", {"variant": "v"})])


def test_curve_wall_times_from_the_log(tmp_path, write_lm):
    log = [{"event": "train", "step": 5, "tokens": 50, "tokens_per_s": 10.0},
           {"event": "train", "step": 10, "tokens": 100, "tokens_per_s": 10.0, "seconds": 12.0}]
    path = write_lm(tmp_path, "elmo-c", "forward", params=1, tokens=150, seconds=20.0, log=log)
    data = json.loads(path.read_text())
    data["history"].insert(1, {"metric": "cosine", "value": 0.3, "step": 7, "tokens": 70, "tag": "step7"})
    data["history"].insert(2, {"metric": "cosine", "value": 0.4, "step": 10, "tokens": 100, "tag": "step10"})
    path.write_text(json.dumps(data))
    (run,) = read_lm_runs([path])
    assert run.curve() == [(0, 0.0, 0.1), (70, 5.0, 0.3), (100, 12.0, 0.4), (150, 20.0, 0.5)]


def test_srl_both_scores_named_in_every_table(results, tmp_path, write_json):
    """Issue 22.2: the span F1 stays the SRL value (the paper's); the official CoNLL-2005 score
    is a second, labelled column in Table 2, the downstream table and the summary."""
    from elmoc.tables.render import write
    from elmoc.tables.summary import summary_text

    srl = [write_json(results["root"] / f"tasks/srl/elmo-c/seed{seed}.json", {
        "task": "srl", "variant": "elmo-c", "seed": seed, "metric": "f1", "metric_label": "span F1", "dev": 0.6,
        "test": test, "status": "ok", "scale": "full",
        "extra_scores": {"conll05-f1": {"label": "official CoNLL-2005 script F1", "dev": 0.61, "test": official}}})
        for seed, test, official in ((1, 0.60, 0.62), (2, 0.64, 0.66))]
    runs = read_task_runs(results["tasks"] + srl)
    t = table2(read_lm_runs(results["heldout"]), runs)
    i = t.columns.index("SRL (span F1)")
    assert t.columns[i:i + 4] == ["SRL (span F1)", "SRL (span F1) (paper)", "SRL (CoNLL-05 script)",
                                  "SRL (CoNLL-05 script) (paper)"]
    c = _cells(t, "ELMo-C")
    assert c["SRL (span F1)"] == "62.00±2.83 (n=2)" and c["SRL (span F1) (paper)"] == "82.40"
    assert c["SRL (CoNLL-05 script)"] == "64.00±2.83 (n=2)" and c["SRL (CoNLL-05 script) (paper)"] is None
    assert any("CoNLL-2005" in n for n in t.notes)
    written = {p.suffix: p.read_text() for p in write(t, tmp_path / "t2")}
    assert all("CoNLL-05 script" in text for text in written.values()), sorted(written)
    # without SRL runs the column is still there, a gap
    empty = table2(read_lm_runs([]), read_task_runs([]))
    assert "SRL (CoNLL-05 script)" in empty.columns
    df, _ = downstream_table(results["tasks"] + srl)
    row = df[df.variant == "elmo-c"].iloc[0]
    assert row["srl"] == "62.00±2.83 (n=2); paper 82.40" and row["srl:conll05-f1"] == "64.00±2.83 (n=2)"
    text = summary_text([], runs, read_task_runs([]))
    assert "Downstream srl = SRL (span F1) (test f1" in text
    assert "Downstream srl:conll05-f1 = SRL (CoNLL-05 script) (test conll05-f1" in text
