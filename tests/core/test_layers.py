"""Imports run only downhill: the layering of docs/architecture.md ("Layers"), checked on the source.

Every module of ``src/elmoc`` belongs to a *part* (``elmoc.data.vocab.vocabulary`` -> ``data``,
``elmoc.lm`` -> ``lm``), every part to a layer.  An import (at the top of a file or inside a
function) may name a module of its own part, of a part in its own layer, or of a lower layer;
never one of a higher layer, and the parts of one layer may not import each other in a circle.
The package root ``elmoc`` (``__version__`` and the lazy ``from elmoc import Elmo``) is no part.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# Lowest first.  Keep in step with docs/architecture.md ("Layers").
LAYERS = [
    ("errors",),
    ("io", "directions"),
    ("config", "config_section", "registry", "nn", "metrics", "process_tree", "multinode", "devices", "attempts",
     "records", "layouts", "model_file"),
    ("data",),
    ("inputs", "encoders", "outputs"),
    ("lm", "masked_lm"),
    ("train",),
    ("features",),
    ("pretrained", "tasks", "tables", "bench", "params"),
    ("commands",),
    ("cli",),
]
LAYER = {part: level for level, parts in enumerate(LAYERS) for part in parts}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def part(module: str) -> str | None:
    """``elmoc.X...`` -> ``X``; None for the package root and for other packages."""
    names = module.split(".")
    return names[1] if names[0] == "elmoc" and len(names) > 1 else None


def imported_modules(path: Path, module: str) -> set[str]:
    """Every module ``path`` imports, absolute (``from elmoc import errors`` -> ``elmoc.errors``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            if target == "elmoc":  # from elmoc import errors: a submodule, or a name of the root
                found.update(f"elmoc.{alias.name}" for alias in node.names
                             if (SRC / "elmoc" / alias.name).is_dir() or (SRC / "elmoc" / f"{alias.name}.py").is_file())
    return found


def part_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], set[str]]]:
    """Edges between parts, and for each edge the files that make it."""
    edges: dict[str, set[str]] = defaultdict(set)
    where: dict[tuple[str, str], set[str]] = defaultdict(set)
    for path in sorted((SRC / "elmoc").rglob("*.py")):
        module = module_name(path)
        source = part(module)
        if source is None:
            continue
        edges[source]
        for target in map(part, imported_modules(path, module)):
            if target is not None and target != source:
                edges[source].add(target)
                where[source, target].add(str(path.relative_to(SRC)))
    return edges, where


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one part (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_every_part_has_a_layer():
    edges, _ = part_graph()
    missing = sorted(p for p in set(edges) | {t for ts in edges.values() for t in ts} if p not in LAYER)
    assert not missing, f"parts without a layer: {missing}; add them to LAYERS here and in docs/architecture.md"


def test_no_import_runs_uphill():
    edges, where = part_graph()
    uphill = [f"{a} (layer {LAYER[a]}) -> {b} (layer {LAYER[b]}) in {sorted(where[a, b])}"
              for a in sorted(edges) for b in sorted(edges[a])
              if a in LAYER and b in LAYER and LAYER[b] > LAYER[a]]
    assert not uphill, "imports from a lower layer to a higher one:\n" + "\n".join(uphill)


def test_no_cycle_between_parts():
    edges, where = part_graph()
    found = cycles(edges)
    detail = [f"{a} -> {b} in {sorted(where[a, b])}" for c in found for a in c for b in sorted(edges[a]) if b in c]
    assert not found, f"parts importing each other in a circle: {found}\n" + "\n".join(detail)


def test_checker_sees_an_uphill_import(tmp_path, monkeypatch):
    """The checker itself: a lazy import of a higher part, and a circle, are found."""
    root = tmp_path / "elmoc"
    (root / "data").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "data" / "__init__.py").write_text("")
    (root / "data" / "batches.py").write_text("def f():\n    from elmoc.lm import LMBatch\n")
    (root / "lm.py").write_text("from elmoc.data import batches\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    edges, where = part_graph()
    assert edges == {"data": {"lm"}, "lm": {"data"}}
    assert where["lm", "data"] == {"elmoc/lm.py"}
    assert cycles(edges) == [["data", "lm"]]
    with pytest.raises(AssertionError, match=r"data \(layer 3\) -> lm \(layer 5\)"):
        test_no_import_runs_uphill()


@pytest.mark.parametrize("module", ["elmoc.config", "elmoc.directions"])
def test_workflow_modules_do_not_import_torch(module):
    """The Snakefile and workflow/rules/common.smk import these; they must not load torch."""
    code = f"import sys, {module}; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": str(SRC)})
