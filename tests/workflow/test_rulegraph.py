"""The committed rule graph (docs/rulegraph.mmd and its copy in docs/reference.md) is the one Snakemake
draws for config/paper.yaml (`make dag`): every rule and every edge, by rule name (Snakemake
prints the edges in no fixed order)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIX = "run `make dag` and copy docs/rulegraph.mmd into the mermaid block of docs/reference.md"


def graph(text: str) -> tuple[set[str], set[tuple[str, str]]]:
    """(rule names, (from, to) edges) of a `snakemake --rulegraph mermaid-js` text."""
    names = dict(re.findall(r"^\s*(id\d+)\[([^\]]+)\]\s*$", text, flags=re.M))
    edges = {(names[a], names[b]) for a, b in re.findall(r"^\s*(id\d+) --> (id\d+)\s*$", text, flags=re.M)}
    return set(names.values()), edges


def reference_graph() -> str:
    reference = (REPO / "docs/reference.md").read_text(encoding="utf-8")
    block = re.search(r"```mermaid\n(.*?)```", reference, flags=re.S)
    assert block, "docs/reference.md has no mermaid block"
    return block.group(1)


@pytest.mark.slow
def test_committed_rulegraph_is_snakemakes(tmp_path):
    r = subprocess.run([sys.executable, "-m", "snakemake", "--rulegraph", "mermaid-js", "--cores", "1",
                        "--snakefile", str(REPO / "Snakefile"), "--configfile", str(REPO / "config/paper.yaml"),
                        "--directory", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    drawn = graph(r.stdout)
    assert len(drawn[0]) > 20 and {"paper_tables", "figures", "summary", "config_dump"} <= drawn[0]
    committed = (REPO / "docs/rulegraph.mmd").read_text(encoding="utf-8")
    assert graph(committed) == drawn, f"docs/rulegraph.mmd is out of date: {FIX}"
    assert graph(reference_graph()) == drawn, f"the rule graph in docs/reference.md is out of date: {FIX}"
    assert reference_graph().strip() == committed.strip(), f"the rule graph in docs/reference.md differs from docs/rulegraph.mmd: {FIX}"
