import re

from elmoc.tables.models import table2, table3
from elmoc.tables.render import Table, tex_escape, to_csv, to_latex, to_markdown, write
from elmoc.tables.runs import read_lm_runs, read_task_runs
from elmoc.tables.speed import table4, table5


def _all_tables(results):
    lm, tasks, maj = read_lm_runs(results["heldout"]), read_task_runs(results["tasks"]), read_task_runs(results["majority"])
    return [table2(lm, tasks, maj), table3(lm, tasks), table4(None), table5(None)]


def _unescaped_ampersands(line: str) -> int:
    return len(re.findall(r"(?<!\\)&", line))


def test_latex_is_balanced_and_rows_match_the_header(results):
    for table in _all_tables(results):
        tex = to_latex(table)
        assert tex.count("{") - tex.count(r"\{") == tex.count("}") - tex.count(r"\}")
        for env in ("table", "tabular"):
            assert tex.count(rf"\begin{{{env}}}") == tex.count(rf"\end{{{env}}}") == 1
        assert tex.index(r"\toprule") < tex.index(r"\midrule") < tex.index(r"\bottomrule")
        assert tex.count("$") % 2 == 0
        rows = [line for line in tex.splitlines() if _unescaped_ampersands(line)]
        assert len(rows) == len(table.rows) + 1  # header + body
        for line in rows:
            assert _unescaped_ampersands(line) == len(table.columns) - 1, line
            assert line.endswith(r"\\")


def test_escaping_and_gaps():
    t = Table("t", "A & B", "50% of x_1 ± 2", ["a", "b|c"], [["x & y", None]], ["note #1"])
    tex = to_latex(t)
    assert r"x \& y & --" in tex and r"50\% of x\_1 $\pm$ 2" in tex and r"note \#1" in tex
    assert tex_escape("{~}") == r"\{\textasciitilde{}\}"
    md = to_markdown(t)
    assert "| x & y | — |" in md and "b\\|c" in md
    assert to_csv(t) == "a,b|c\nx & y,\n"


def test_row_length_is_checked():
    import pytest

    with pytest.raises(ValueError, match="2 cells, header 1"):
        Table("t", "T", "", ["a"], [["1", "2"]])


def test_write_all_formats(results, tmp_path):
    paths = write(_all_tables(results)[0], tmp_path)
    assert sorted(p.name for p in paths) == ["table2.csv", "table2.html", "table2.md", "table2.tex"]
    assert (tmp_path / "table2.md").read_text().startswith("## Table 2")
    assert "<table>" in (tmp_path / "table2.html").read_text()


def test_flat_view_is_written_by_the_same_writer(tmp_path):
    """pretrain.md / downstream.md go through render.to_markdown / to_csv: a '#' heading, no
    caption, empty gaps, each cell as its column's type prints (as pandas writes CSV)."""
    import pandas as pd

    from elmoc.tables.flat import frame_table
    from elmoc.tables.render import write_files

    df = pd.DataFrame({"variant": ["a", "b|c"], "steps": [10, 20], "after": [0.5, None],
                       "threads": [1, None], "note": ["x, y", None]})
    t = frame_table(df, "flat", "Flat", ["n1"])
    assert to_markdown(t) == ("# Flat\n\n| variant | steps | after | threads | note |\n|---|---|---|---|---|\n"
                              "| a | 10 | 0.5 | 1.0 | x, y |\n| b\\|c | 20 |  |  |  |\n\n- n1\n")
    assert to_csv(t) == df.to_csv(index=False)
    paths = write_files(t, md=tmp_path / "f.md", csv=None)
    assert paths == [tmp_path / "f.md"] and not (tmp_path / "f.csv").exists()
