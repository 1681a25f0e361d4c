"""`elmoc finetune-table` (issue 37): features and each fine-tuning recipe side by side, read from
hand-written metrics JSONs laid out as the workflow writes them."""
import csv
import json

import pytest

from elmoc.cli import main
from elmoc.errors import InputFileError
from elmoc.tables.finetune import finetune_view


def write_run(root, task, variant, seed, test, seconds, recipe=None, folder=None, **extra):
    """A metrics JSON: results/tasks/{task}/{variant}/seed{seed}.json, or with a recipe
    results/finetune/{task}/{variant}/{folder or recipe}/seed{seed}.json."""
    if recipe is None:
        path = root / "tasks" / task / variant / f"seed{seed}.json"
        mode = {"encoder": "features", "recipe": None}
    else:
        path = root / "finetune" / task / variant / (folder or recipe) / f"seed{seed}.json"
        mode = {"encoder": "fine_tune", "recipe": recipe}
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"task": task, "variant": variant, "seed": seed, "metric": "accuracy", "metric_label": "accuracy",
              "scale": "cpu", "status": "ok", "dev": test, "test": test, "seconds": seconds, **mode, **extra}
    path.write_text(json.dumps(record))
    return path


@pytest.fixture
def runs(tmp_path):
    paths = []
    for seed, (feat, ulm, full) in enumerate([(0.40, 0.44, 0.42), (0.42, 0.46, 0.40), (0.44, 0.48, 0.41)], 1):
        paths.append(write_run(tmp_path, "sst5", "elmo-c", seed, feat, 10.0 * seed))
        paths.append(write_run(tmp_path, "sst5", "elmo-c", seed, ulm, 100.0, recipe="ulmfit"))
        paths.append(write_run(tmp_path, "sst5", "elmo-c", seed, full, 60.0, recipe="full"))
    paths.append(write_run(tmp_path, "snli", "elmo-c", 1, 0.5, 30.0))
    paths.append(write_run(tmp_path, "snli", "elmo-c", 1, 0.55, 90.0, recipe="ulmfit"))
    return paths


def cells(table):
    return {(row[0], row[1]): dict(zip(table.columns[2:], row[2:])) for row in table.rows}


def test_rows_are_variant_by_mode_with_mean_sd_time_and_the_papers_features(runs):
    table = finetune_view(runs)
    got = cells(table)
    assert list(got) == [("elmo-c", "features"), ("elmo-c", "fine-tune: ulmfit"), ("elmo-c", "fine-tune: full")]
    assert table.columns[2:5] == ["snli accuracy", "snli accuracy time", "snli accuracy (paper, features)"]
    assert got["elmo-c", "features"]["sst5 accuracy"] == "42.00±2.00 (n=3) †"  # 40, 42, 44
    assert got["elmo-c", "features"]["sst5 accuracy time"] == "20 s"  # 10, 20, 30
    assert got["elmo-c", "features"]["sst5 accuracy (paper, features)"] == "53.80±0.73"  # Table 2, ELMo-C
    assert got["elmo-c", "fine-tune: ulmfit"]["sst5 accuracy"] == "46.00±2.00 (n=3) †"
    assert got["elmo-c", "fine-tune: ulmfit"]["sst5 accuracy (paper, features)"] is None
    assert got["elmo-c", "fine-tune: full"]["sst5 accuracy"] == "41.00±1.00 (n=3) †"
    assert got["elmo-c", "fine-tune: full"]["snli accuracy"] is None  # not run: a gap
    assert got["elmo-c", "fine-tune: ulmfit"]["snli accuracy"] == "55.00 (n=1) †"


def test_a_configured_recipe_name_other_than_its_kind_is_its_own_row(tmp_path):
    paths = [write_run(tmp_path, "sst5", "elmo", 1, 0.5, 5.0, recipe="ulmfit"),
             write_run(tmp_path, "sst5", "elmo", 1, 0.6, 5.0, recipe="ulmfit", folder="ulmfit-slow")]
    assert [row[1] for row in finetune_view(paths).rows] == ["fine-tune: ulmfit", "fine-tune: ulmfit [ulmfit-slow]"]


def test_a_result_without_encoder_is_feature_based(tmp_path):
    path = write_run(tmp_path, "sst5", "elmo", 1, 0.5, 5.0)
    data = json.loads(path.read_text())
    del data["encoder"], data["recipe"]
    path.write_text(json.dumps(data))
    assert finetune_view([path]).rows[0][1] == "features"


@pytest.mark.parametrize("change, message", [
    ({"encoder": "hdf5"}, "field 'encoder' must be 'features' or 'fine_tune'"),
    ({"encoder": "fine_tune", "recipe": None}, "field 'recipe' must name the fine-tuning recipe"),
])
def test_a_bad_mode_is_one_error_naming_the_file(tmp_path, change, message):
    path = write_run(tmp_path, "sst5", "elmo", 1, 0.5, 5.0, **change)
    with pytest.raises(InputFileError, match=message) as e:
        finetune_view([path])
    assert str(path) in str(e.value)


def test_the_same_run_twice_is_refused(tmp_path):
    path = write_run(tmp_path, "sst5", "elmo", 1, 0.5, 5.0, recipe="full")
    copy = tmp_path / "again" / "full" / "seed1.json"
    copy.parent.mkdir(parents=True)
    copy.write_text(path.read_text())
    with pytest.raises(InputFileError, match="a second result of task 'sst5'"):
        finetune_view([path, copy])


def test_the_command_writes_four_formats(runs, tmp_path, capsys):
    out = {s: tmp_path / f"finetune.{s}" for s in ("md", "csv", "tex", "html")}
    assert main(["finetune-table", "--inputs", *map(str, runs), "--output", str(out["md"]), "--csv", str(out["csv"]),
                 "--tex", str(out["tex"]), "--html", str(out["html"])]) == 0
    assert "| elmo-c | fine-tune: ulmfit |" in out["md"].read_text()
    rows = list(csv.reader(out["csv"].open()))
    assert rows[0][:2] == ["Variant", "Mode"] and len(rows) == 4
    assert r"\pm" in out["tex"].read_text() and "<table" in out["html"].read_text()
    assert main(["finetune-table", "--inputs", str(tmp_path / "absent.json"), "--output", str(out["md"])]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "absent.json" in err[0], err
