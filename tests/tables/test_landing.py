"""The results page (issue 52.3): summary, tables, figures with captions under them, the config as
text; legible tables (empty columns dropped, scores first); distinct colours and readable axes."""
import re

import pytest

from elmoc.cli import main
from elmoc.tables.models import table2
from elmoc.tables.render import Table, html_columns, html_fragment, write
from elmoc.tables.runs import read_lm_runs, read_task_runs


def _png(path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [0, 1])
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


@pytest.fixture
def page_inputs(results, tmp_path):
    import json

    root = results["root"]
    for path in results["heldout"]:  # a cosine's constant-prediction baseline, as the trainer writes it
        data = json.loads(path.read_text())
        if data["metric"] == "cosine":
            path.write_text(json.dumps({**data, "constant_baseline": 0.45}))
    lm, tasks = read_lm_runs(results["heldout"]), read_task_runs(results["tasks"])
    write(table2(lm, tasks, read_task_runs(results["majority"])), root / "tables")
    (root / "figures").mkdir()
    captions = tmp_path / "captions"
    captions.mkdir()
    (captions / "heldout_curves.rst").write_text("Heldout metric against ``training tokens``.\n")
    (root / "summary.txt").write_text("elmoc demo summary <&>\nelmo-c  cosine 0.9080 (constant 0.9005)\n")
    (root / "report").mkdir()
    (root / "report/config.yaml").write_text("scale: demo\ntasks: {run: [sst5]}\n")
    return {"summary": root / "summary.txt", "table": root / "tables/table2.html", "captions": captions,
            "figure": _png(root / "figures/heldout_curves.png"), "config": root / "report/config.yaml"}


def test_results_page_holds_summary_tables_figures_and_config(results, page_inputs, tmp_path, capsys):
    root, p = results["root"], page_inputs
    argv = ["results-page", "--summary", str(p["summary"]), "--heldout", *map(str, results["heldout"]),
            "--tasks", *map(str, results["tasks"]), "--tables", str(p["table"]), "--figures", str(p["figure"]),
            "--captions", str(p["captions"]), "--config", str(p["config"]), "--output", str(root / "index.html"),
            "--fragment", str(root / "report/landing.html"), "--config-html", str(root / "report/config.html")]
    assert main(argv) == 0
    fragment = (root / "report/landing.html").read_text()
    # the summary first, escaped, then Table 2, the pretraining and downstream views, figures, config
    order = [fragment.index(x) for x in ("id='elmoc-summary'", "id='elmoc-table2'", "id='elmoc-pretrain'",
                                          "id='elmoc-downstream'", "id='elmoc-figures'", "id='elmoc-config'")]
    assert order == sorted(order)
    assert "elmoc demo summary &lt;&amp;&gt;" in fragment and "(constant 0.9005)" in fragment
    pretrain = fragment.split("id='elmoc-pretrain'")[1].split("</section>")[0]
    assert "<th>after</th><th>constant_baseline</th>" in pretrain and "<td>0.45</td>" in pretrain
    # the caption under its figure, from the rst (rendered), the image embedded
    figure = re.search(r"<figure id='elmoc-fig-heldout_curves'>(.*?)</figure>", fragment, re.S).group(1)
    assert figure.index("<img src='data:image/png;base64,") < figure.index("<figcaption>")
    assert "literal\">training tokens</span>" in figure.split("<figcaption>")[1]
    assert "scale: demo" in fragment.split("id='elmoc-config'")[1]  # the config as text
    # the report's copy links nowhere outside itself; the standalone page to the table files
    assert all(h.startswith("#") for h in re.findall(r"href='([^']*)'", fragment))
    page = (root / "index.html").read_text()
    for href in re.findall(r"href='([^']*)'", page):
        if not href.startswith("#") and href != "report.html":
            assert (root / href).is_file(), href
    assert "href='tables/table2.csv'" in page
    assert "scale: demo" in (root / "report/config.html").read_text()


def test_a_table_page_not_written_by_elmoc_is_one_line(page_inputs, tmp_path, capsys):
    p = page_inputs
    alien = tmp_path / "alien.html"
    alien.write_text("<html><body><table></table></body></html>")
    assert main(["results-page", "--summary", str(p["summary"]), "--tables", str(alien), "--config", str(p["config"]),
                 "--output", str(tmp_path / "index.html")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(alien) in err and "rebuild it with its table command" in err
    assert main(["results-page", "--summary", str(tmp_path / "none.txt"), "--config", str(p["config"]),
                 "--output", str(tmp_path / "index.html")]) == 1
    assert "none.txt: no such file" in capsys.readouterr().err


def test_html_drops_empty_columns_with_their_paper_columns_and_puts_scores_first():
    t = Table("t", "T", "", ["Model", "Time", "SST-5", "SST-5 (paper)", "NER", "NER (paper)"],
              [["ELMo-C", "4 s", "52.00 (n=1)", "53.80±0.73", None, "92.24±0.10"],
               ["ELMo", None, None, "52.96±2.26", None, "92.51±0.28"]],
              paper_of={"SST-5 (paper)": "SST-5", "NER (paper)": "NER"}, html_lead=["SST-5", "SST-5 (paper)"])
    assert [t.columns[i] for i in html_columns(t)] == ["Model", "SST-5", "SST-5 (paper)", "Time"]
    html = html_fragment(t)
    assert "<th class='paper'>SST-5 (paper)</th>" in html and "NER" not in html.split("<ul>")[0]
    assert "Not shown, no value of this run: NER, NER (paper)" in html


def test_table2_html_puts_our_scores_before_the_training_columns(results):
    t = table2(read_lm_runs(results["heldout"]), read_task_runs(results["tasks"]))
    shown = [t.columns[i] for i in html_columns(t)]
    assert shown[:3] == ["Model", "SST-5", "SST-5 (paper)"] and shown.index("Time") > shown.index("SST-5 (paper)")
    assert "Coref" not in shown  # no run of it


def test_figures_give_each_variant_its_own_colour_and_short_tick_labels():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from elmoc.tables.plot import _readable_x, variant_colours

    for n in (9, 12, 25):
        colours = variant_colours(f"v{i}" for i in range(n))
        assert len({tuple(c) for c in colours.values()}) == n
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0, 175000], [0, 1])
    _readable_x(ax)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    plt.close(fig)
    assert labels and all(len(x) <= 5 for x in labels) and "80k" in labels and len(labels) <= 7


def test_the_results_page_compares_the_other_runs_found_beside_it(results, page_inputs, tmp_path, write_lm):
    """Issue 52.6: results/<run>/index.html lists the other runs under results/ (folders with a
    summary.txt) with their numbers beside this run's; links relative and resolving; a folder that
    is no finished run (no summary.txt) is not listed."""
    import shutil

    root, p = results["root"], page_inputs
    runs = root.parent
    other = runs / "paper"
    shutil.copytree(root, other)
    write_lm(other, "elmo-c", "forward", params=100, tokens=1000, seconds=2, after=0.7123)
    shutil.rmtree(other / "tasks/sst5/elmo")  # a number only this run has: a gap there
    (other / "index.html").write_text("<html></html>")
    unfinished = runs / "half"
    (unfinished / "lm").mkdir(parents=True)
    argv = ["results-page", "--summary", str(p["summary"]), "--heldout", *map(str, results["heldout"]),
            "--tasks", *map(str, results["tasks"]), "--tables", str(p["table"]), "--config", str(p["config"]),
            "--run", root.name, "--runs-under", str(runs), "--output", str(root / "index.html"),
            "--fragment", str(root / "report/landing.html")]
    assert main(argv) == 0
    page = (root / "index.html").read_text()
    section = page.split("<section id='elmoc-runs'>")[1].split("</section>")[0]
    heads = re.findall(r"<thead>(.*?)</thead>", section)[0]
    assert "results (this run)" in heads and ">paper<" in heads and "half" not in heads
    rows = dict((label, re.findall(r"<td>(.*?)</td>", cells))
                for label, cells in re.findall(r"<tr><th scope='row'>(.*?)</th>(.*?)</tr>", section))
    assert rows["heldout cosine: elmo-c"] == ["0.5000 / 0.5000", "0.7123 / 0.5000"]  # forward / backward
    assert rows["sst5: elmo"] == ["52.00±2.00 (n=3)", "—"]
    assert page.index("id='elmoc-summary'") < page.index("id='elmoc-runs'") < page.index("id='elmoc-table2'")
    assert "href='../paper/index.html'" in section and (root / "../paper/index.html").is_file()
    assert "href=" not in (root / "report/landing.html").read_text().split("id='elmoc-runs'")[1].split("</section>")[0]
    # alone under results/: no section
    shutil.rmtree(other)
    assert main(argv) == 0
    assert "elmoc-runs" not in (root / "index.html").read_text()
