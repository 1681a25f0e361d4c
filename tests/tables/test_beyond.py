"""The table beyond the paper (elmoc.tables.beyond, elmoc.tables.families): a faked results tree
of Transformer, GPT and masked-LM variants beside the ELMo LSTM's, exact cells, gaps, the four
formats, and the grouping by encoder x output layer."""
import json

import pytest
import yaml

from elmoc.tables import families
from elmoc.tables.beyond import beyond_table
from elmoc.tables.render import to_csv, to_latex, to_markdown, write
from elmoc.tables.runs import read_lm_runs, read_task_runs


TRANSFORMER = {"type": "transformer", "d_model": 32, "heads": 4, "d_ff": 64, "num_layers": 2, "dropout": 0.1}


def spec(encoder, output, bptt=20, **train):
    return {"encoder": encoder, "output": {"type": output}, "train": {"bptt": bptt, **train}}


LSTM = {"type": "elmo_lstm", "num_layers": 2, "cell_size": 32, "projection_size": 16}
# variant -> (spec, runs, trainable params per run, tokens/s per run, metric, final value per run)
VARIANTS = {  # not in table order: the table sorts
    "elmo-a": (spec(LSTM, "adaptive", 20, directions="joint"), ("joint",), 4000, 250.0, "perplexity", 300.0),
    "mlm-sampled": (spec(TRANSFORMER, "sampled", 20, objective="masked_lm"), ("masked",), 2500, 150.0,
                    "perplexity", 100.0),
    "trans-base-sampled": (spec(TRANSFORMER, "sampled", 20, directions="joint"), ("joint",), 3000, 100.0,
                           "perplexity", 250.0),
    "elmo-c": (spec(LSTM, "cosine"), ("forward", "backward"), 500, 1000.0, "cosine", 0.6),
    "gpt-c": (spec(TRANSFORMER, "cosine", 64, directions="forward"), ("forward",), 1000, 200.0, "cosine", 0.25),
    "elmo-c-rnd": (spec(LSTM, "cosine"), ("forward", "backward"), 500, 1000.0, "cosine", 0.6),
    "mlm-c": (spec(TRANSFORMER, "cosine", 20, objective="masked_lm"), ("masked",), 1500, 300.0, "cosine", 0.75),
    "trans-base-c": (spec(TRANSFORMER, "cosine"), ("forward", "backward"), 1000, 400.0, "cosine", 0.5),
}
BENCH = {"settings": {"device": "cpu", "threads": 1, "width_scale": 0.25, "vocab_scale": 0.01, "world": 2},
         "table5": [{"encoder": "TRANS BASE", "layer": "CONT", "s_per_mwords": 12.34, "ratio": 1.0},
                    {"encoder": "TRANS BASE", "layer": "SAMPLED", "s_per_mwords": 30.0, "ratio": 2.4312},
                    {"encoder": "ELMO", "layer": "ADAPTIVE", "s_per_mwords": 20.0, "ratio": 1.5}]}


@pytest.fixture
def tree(tmp_path, write_lm, write_task):
    root = tmp_path / "results"
    heldout = []
    for variant, (sp, runs, params, speed, metric, after) in VARIANTS.items():
        for run in runs:
            log = [{"event": "train", "step": 10, "tokens": 1000, "tokens_per_s": speed, "loss": 1.0}]
            heldout.append(write_lm(root, variant, run, params=params, tokens=1000, seconds=1000 / speed, log=log,
                                    metric=metric, after=after))
        (root / "lm" / variant / "spec.yaml").write_text(yaml.safe_dump({"name": variant, **sp}))
    tasks = [write_task(root, "sst5", "trans-base-c", 1, 0.40), write_task(root, "sst5", "trans-base-c", 2, 0.44),
             write_task(root, "sst5", "elmo-c", 1, 0.5, scale="full"),
             write_task(root, "sst5", "fasttext", 1, 0.3), write_task(root, "snli", "fasttext", 1, 0.3),
             write_task(root, "ner", "mlm-c", 1, None, status="no data: set tasks.ner.train", metric="f1")]
    return {"root": root, "heldout": heldout, "tasks": tasks}


def _rows(table):
    return {row[3]: dict(zip(table.columns, row)) for row in table.rows}


def test_rows_grouped_by_encoder_then_output(tree):
    t = beyond_table(read_lm_runs(tree["heldout"]), read_task_runs(tree["tasks"]), BENCH)
    assert [(r[0], r[2], r[3]) for r in t.rows] == [
        ("TRANS BASE", "CONT", "trans-base-c"), ("TRANS BASE", "SAMPLED", "trans-base-sampled"),
        ("GPT", "CONT", "gpt-c"),
        ("MLM", "CONT", "mlm-c"), ("MLM", "SAMPLED", "mlm-sampled"),
        ("ELMO", "CONT", "elmo-c"), ("ELMO", "ADAPTIVE", "elmo-a")]          # elmo-c-rnd: Table 3's, no row
    assert t.columns[-3:] == ["Heldout", "SST-5", "NER"]                     # the tasks of these variants only


def test_exact_cells(tree):
    t = beyond_table(read_lm_runs(tree["heldout"]), read_task_runs(tree["tasks"]), BENCH)
    rows = _rows(t)
    c = rows["trans-base-c"]
    assert c["Size"] == "2×32, ff 64, 4 heads, len 20"
    assert c["Params"] == "2.0K" and c["Train tokens/s"] == "400" and c["Run × CONT"] == "1.00x"
    assert c["Bench"] == "12.3s †" and c["Bench (paper)"] == "15.87s"
    assert c["Heldout metric"] == "cosine" and c["Heldout"] == "0.5000"
    assert c["SST-5"] == "42.00±2.83 (n=2) †" and c["NER"] is None
    s = rows["trans-base-sampled"]
    assert s["Params"] == "3.0K" and s["Train tokens/s"] == "100" and s["Run × CONT"] == "4.00x"
    assert s["Bench"] == "2.43x †" and s["Bench (paper)"] == "2.91x"
    assert s["Heldout metric"] == "perplexity" and s["Heldout"] == "250.0"
    g = rows["gpt-c"]
    assert g["Size"].endswith("len 64") and g["Bench"] is None and g["Bench (paper)"] == "43.53s"
    assert g["Params"] == "1.0K" and g["Heldout"] == "0.2500"  # one forward LM (uni-directional): its one run
    m = rows["mlm-c"]
    assert m["Params"] == "1.5K" and m["Run × CONT"] == "1.00x" and m["Bench (paper)"] is None
    assert m["NER"] == "no data: set tasks.ner.train"
    assert rows["mlm-sampled"]["Run × CONT"] == "2.00x" and rows["mlm-sampled"]["Heldout"] == "100.0"
    e = rows["elmo-c"]
    assert e["Size"] == "2×32/16 LSTM, len 20" and e["SST-5"] == "50.00 (n=1)"   # full scale: no †
    assert rows["elmo-a"]["Run × CONT"] == "4.00x" and rows["elmo-a"]["Bench"] == "1.50x †"
    assert rows["elmo-a"]["Bench (paper)"] == "1.89x"
    assert "cpu × 1 process(es)" in t.caption and "widths ×0.25 and vocabularies ×0.01 on cpu" in t.caption


def test_missing_cells_are_gaps_never_a_crash(tree):
    # no bench, no tasks, the CONT run of TRANS BASE missing, a variant without its spec.yaml
    heldout = [p for p in tree["heldout"] if p.parent.parent.name != "trans-base-c"]
    (tree["root"] / "lm" / "gpt-c" / "spec.yaml").unlink()
    t = beyond_table(read_lm_runs(heldout), read_task_runs([]), None)
    rows = _rows(t)
    assert "gpt-c" not in rows and "Not placed (no spec.yaml beside their runs): gpt-c." in t.caption
    s = rows["trans-base-sampled"]
    assert s["Run × CONT"] is None and s["Bench"] is None and s["Bench (paper)"] == "2.91x"
    assert t.columns[-1] == "Heldout"                                          # no task columns
    assert "No bench results" in t.caption
    assert "| — |" in to_markdown(t)


def test_no_beyond_variant_is_one_explicit_line(tree):
    lstm_only = [p for p in tree["heldout"] if p.parent.parent.name.startswith("elmo")]
    t = beyond_table(read_lm_runs(lstm_only), read_task_runs(tree["tasks"]), BENCH)
    assert t.rows == [] and t.caption.startswith("No beyond-paper variant among the runs given")
    assert beyond_table(read_lm_runs([]), read_task_runs([])).rows == []


def test_four_formats_written(tree, tmp_path):
    t = beyond_table(read_lm_runs(tree["heldout"]), read_task_runs(tree["tasks"]), BENCH)
    paths = write(t, tmp_path / "tables")
    assert sorted(p.name for p in paths) == ["beyond.csv", "beyond.html", "beyond.md", "beyond.tex"]
    csv = (tmp_path / "tables/beyond.csv").read_text()
    assert csv == to_csv(t) and csv.splitlines()[1].startswith("TRANS BASE,\"2×32, ff 64, 4 heads, len 20\",CONT")
    assert r"\toprule" in (tmp_path / "tables/beyond.tex").read_text() == to_latex(t)
    assert "<td>mlm-sampled</td>" in (tmp_path / "tables/beyond.html").read_text()


def test_cli_writes_the_table_and_refuses_bad_names(tree, tmp_path, capsys):
    from elmoc.cli import main

    bench = tree["root"] / "bench.json"
    bench.write_text(json.dumps(BENCH))
    out = tmp_path / "out"
    inputs = ["--heldout", *map(str, tree["heldout"]), "--tasks", *map(str, tree["tasks"]), "--bench", str(bench)]
    # "trans-base-c" is named by its preset (gpt-c): GPT although its sizes are no paper size
    presets = json.dumps({"trans-base-c": "gpt-c"})
    assert main(["beyond-table", *inputs, "--presets-json", presets, "--output-dir", str(out)]) == 0
    table = (out / "beyond.md").read_text()
    assert "| GPT | 2×32, ff 64, 4 heads, len 20 | CONT | trans-base-c |" in table
    # the old spelling, with the old flag name, writes the same table
    assert main(["tables", "beyond", *inputs, "--section-json", presets, "--output-dir", str(tmp_path / "old")]) == 0
    assert (tmp_path / "old" / "beyond.md").read_text() == table
    capsys.readouterr()
    for bad, message in (('["gpt-c"]', "--presets-json (variant presets) must be a JSON object, got list"),
                         ('{"trans-base-c": 3}', "config variant presets.trans-base-c must be str, got 3")):
        assert main(["beyond-table", *inputs, "--presets-json", bad, "--output-dir", str(tmp_path / "bad")]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("name, enc, bptt, objective, expected", [
    ("trans-large-sampled", {"type": "transformer", "num_layers": 2, "d_model": 16}, 20, None, "TRANS LARGE"),
    ("gpt-fixed", {"type": "transformer", "num_layers": 2, "d_model": 16}, 20, None, "GPT"),
    ("mine", {"type": "transformer", "num_layers": 6, "d_model": 512}, 20, None, "TRANS BASE"),
    ("mine", {"type": "transformer", "num_layers": 12, "d_model": 768}, 20, None, "TRANS LARGE"),
    ("mine", {"type": "transformer", "num_layers": 12, "d_model": 768}, 512, None, "GPT"),
    ("mine", {"type": "transformer", "num_layers": 3, "d_model": 64}, 20, None, "TRANSFORMER"),
    ("trans-base-c", {"type": "transformer", "num_layers": 6, "d_model": 512}, 20, "masked_lm", "MLM"),
    ("mine", {"type": "lstm", "num_layers": 2, "hidden_size": 2048}, 20, None, "LSTMX2"),
])
def test_encoder_family(name, enc, bptt, objective, expected):
    sp = {"encoder": enc, "output": {"type": "cosine"}, "train": {"bptt": bptt, "objective": objective}}
    family = families.classify(sp, name)
    assert family.encoder == expected and family.output == "CONT" and not family.reference
    assert families.is_beyond(sp, name)


@pytest.mark.parametrize("output, name, expected", [
    ("cosine", "elmo-c", ("CONT", True)), ("subword", "elmo-sub", ("SUBWORD", True)),
    ("fixed", "x", ("FIXED", True)), ("sampled", "elmo", ("SAMPLED", True)), ("cosine", "elmo-c-oneb", None),
    ("l2", "elmo-c", ("CONT-L2", True)), ("vmf", "elmo-c-oneb", None),      # a CONT layer by its class
])
def test_elmo_lstm_reference_rows(output, name, expected):
    sp = {"encoder": LSTM, "output": {"type": output}, "train": {"bptt": 20}}
    family = families.classify(sp, name)
    assert (None if family is None else (family.output, family.reference)) == expected
    assert not families.is_beyond(sp, name)


@pytest.mark.parametrize("output, label", [("cosine", "CONT"), ("l2", "CONT-L2"), ("vmf", "CONT-VMF"),
                                           ("fixed", "FIXED"), ("sampled", "SAMPLED"), ("unregistered", "UNREGISTERED")])
def test_output_label_and_family_come_from_the_registered_class(output, label):
    family = families.classify({"encoder": TRANSFORMER, "output": {"type": output}, "train": {"bptt": 20}}, "mine")
    expected = {"CONT": "CONT", "CONT-L2": "CONT", "CONT-VMF": "CONT", "FIXED": "SOFTMAX", "SAMPLED": "SOFTMAX"}
    assert (family.output, family.family) == (label, expected.get(label, label))


@pytest.fixture
def new_continuous_layer():
    """A continuous output layer registered outside elmoc.outputs (as a plug-in file would),
    removed from the registry afterwards."""
    from elmoc import registry
    from elmoc.outputs.continuous import ContinuousOutput

    @registry.register("output", "huber_test")
    class HuberOutput(ContinuousOutput):
        def __init__(self, delta: float = 1.0, **kwargs):
            super().__init__(**kwargs)
            self.delta = delta

        def token_loss(self, prediction, target):
            return (prediction - target).abs().sum(-1)

    yield HuberOutput
    del registry._REGISTRY["output"]["huber_test"]


def test_a_new_continuous_layer_gets_its_cont_row_and_cosine_cells(tree, write_lm, new_continuous_layer):
    root = tree["root"]
    path = write_lm(root, "trans-base-huber", "forward", params=1000, tokens=1000, seconds=2.0, metric="cosine",
                    after=0.123456, log=[{"event": "train", "step": 10, "tokens": 1000, "tokens_per_s": 500.0}])
    (root / "lm" / "trans-base-huber" / "spec.yaml").write_text(
        yaml.safe_dump({"name": "trans-base-huber", **spec(TRANSFORMER, "huber_test")}))
    t = beyond_table(read_lm_runs([*tree["heldout"], path]), read_task_runs(tree["tasks"]), BENCH)
    assert [r[3] for r in t.rows][:3] == ["trans-base-c", "trans-base-huber", "trans-base-sampled"]
    row = _rows(t)["trans-base-huber"]
    assert row["Output"] == "CONT-HUBER_TEST" and row["Heldout"] == "0.1235" and row["Run × CONT"] == "0.80x"
    assert row["Bench"] is None and row["Bench (paper)"] is None  # Table 5 timed the cosine layer only


@pytest.fixture
def method_hooks(monkeypatch):
    """The label hooks of TUPE (the Transformer encoder's ``positions``) and TNF (``train.notes``)
    as their classes define them (classmethods reading the spec section), set for the test."""
    from elmoc.registry import by_name
    from elmoc.train.settings import TrainSettings

    def positions(cls, options):
        return {"tupe": "TUPE", "tupe_r": "TUPE-R"}.get(options.get("positions"))

    def notes(cls, options):
        return "TNF" if options.get("notes") else None

    monkeypatch.setattr(by_name("encoder", "transformer"), "table_option_label", classmethod(positions), raising=False)
    monkeypatch.setattr(TrainSettings, "table_option_label", classmethod(notes), raising=False)


def test_method_rows_are_labelled_by_their_classes_and_timed_against_the_plain_cont_row(tree, write_lm, method_hooks):
    root, paths = tree["root"], list(tree["heldout"])
    added = {"trans-base-c-tupe": (spec({**TRANSFORMER, "positions": "tupe"}, "cosine"), 200.0),
             "trans-base-both": (spec({**TRANSFORMER, "positions": "tupe"}, "cosine", notes={"lambda": 0.5}), 100.0),
             "tnf": (spec(LSTM, "cosine", notes={"lambda": 0.5}), 500.0)}  # the method is read from the spec
    for variant, (sp, speed) in added.items():
        paths.append(write_lm(root, variant, "forward", params=1000, tokens=1000, seconds=1000 / speed, metric="cosine",
                              after=0.5, log=[{"event": "train", "step": 10, "tokens": 1000, "tokens_per_s": speed}]))
        (root / "lm" / variant / "spec.yaml").write_text(yaml.safe_dump({"name": variant, **sp}))
    t = beyond_table(read_lm_runs(paths), read_task_runs(tree["tasks"]), BENCH)
    assert [(r[0], r[2], r[3]) for r in t.rows] == [
        ("TRANS BASE", "CONT", "trans-base-c"), ("TRANS BASE + TUPE", "CONT", "trans-base-c-tupe"),
        ("TRANS BASE + TUPE + TNF", "CONT", "trans-base-both"), ("TRANS BASE", "SAMPLED", "trans-base-sampled"),
        ("GPT", "CONT", "gpt-c"), ("MLM", "CONT", "mlm-c"), ("MLM", "SAMPLED", "mlm-sampled"),
        ("ELMO", "CONT", "elmo-c"), ("ELMO + TNF", "CONT", "tnf"), ("ELMO", "ADAPTIVE", "elmo-a")]
    rows = _rows(t)
    assert rows["trans-base-c-tupe"]["Run × CONT"] == "2.00x"  # 400 tokens/s without TUPE, 200 with it
    assert rows["trans-base-both"]["Run × CONT"] == "4.00x" and rows["tnf"]["Run × CONT"] == "2.00x"
    assert "+ TUPE" in " ".join(t.notes) and "light pre-training (TUPE, TNF)" in t.caption


def test_method_labels_need_the_hooks_and_the_workflow_sees_tnf_without_torch(method_hooks, monkeypatch):
    from elmoc.train.settings import TrainSettings

    tupe = spec({**TRANSFORMER, "positions": "tupe"}, "cosine", notes={"lambda": 0.5})
    assert families.method_labels(tupe) == ["TUPE", "TNF"]
    assert families.method_labels(spec(TRANSFORMER, "cosine")) == []
    assert families.method_labels({**tupe, "input": {"type": "unregistered"}}) == ["TUPE", "TNF"]
    elmo_tnf = spec(LSTM, "cosine", notes={"lambda": 0.5})
    assert families.is_beyond(elmo_tnf, "elmo-c-tnf") and not families.is_beyond(spec(LSTM, "cosine"), "elmo-c")
    assert families.classify(elmo_tnf, "anything") == families.Family(
        "ELMO", "2×32/16 LSTM, len 20", "CONT", "CONT", reference=False, method="TNF")
    monkeypatch.delattr(TrainSettings, "table_option_label")  # a class without the hook adds nothing
    assert families.method_labels(tupe) == ["TUPE"]


def test_a_heldout_cosine_has_its_constant_beside_it():
    from elmoc.tables.beyond import heldout_cell

    assert heldout_cell("cosine", 0.908, 0.90051) == "0.9080 (constant 0.9005)"
    assert heldout_cell("perplexity", 35.84) == "35.8"
    assert heldout_cell("cosine", None, 0.9) is None
