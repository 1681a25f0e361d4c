import json

import pytest

from elmoc.errors import InputFileError
from elmoc.tables.build import downstream_table, pretrain_table, write_table


def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_downstream_mean_std_paper_and_status(tmp_path):
    paths = [
        _write(tmp_path / f"sst5/elmo-c/seed{s}.json",
               {"task": "sst5", "variant": "elmo-c", "seed": s, "metric": "accuracy", "test": t, "scale": "full"})
        for s, t in [(1, 0.50), (2, 0.52), (3, 0.54)]
    ]
    paths.append(_write(tmp_path / "ner/elmo-c/seed1.json",
                        {"task": "ner", "variant": "elmo-c", "seed": 1, "status": "no data: set tasks.ner.train"}))
    table, runs = downstream_table(paths)
    row = table.set_index("variant").loc["elmo-c"]
    assert row["sst5"].startswith("52.00±2.00 (n=3)")
    assert "paper 53.80±0.73" in row["sst5"]
    assert row["ner"] == "no data: set tasks.ner.train"
    assert len(runs) == 4
    md = tmp_path / "t.md"
    write_table(table, md, tmp_path / "t.csv", title="T")
    text = md.read_text()
    assert text.startswith("# T") and "| variant |" in text and "52.00±2.00" in text
    assert (tmp_path / "t.csv").read_text().startswith("variant,")


def test_pretrain_table_and_bad_json(tmp_path):
    p = _write(tmp_path / "elmo-c/forward/heldout.json",
               {"direction": "forward", "metric": "cosine", "before": 0.01, "after": 0.4, "steps": 10,
                "tokens": 100, "seconds": 1.23, "trainable_parameters": 5})
    df = pretrain_table([p])
    assert df.iloc[0]["variant"] == "elmo-c" and df.iloc[0]["after"] == 0.4
    bad = tmp_path / "bad.json"
    bad.write_text("{\n  oops\n}")
    with pytest.raises(InputFileError, match=r"bad.json:2: invalid JSON"):
        pretrain_table([bad])
