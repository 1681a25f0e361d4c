"""Write the tables of docs/architecture.md from the code (never by hand).

Each table sits between the markers ``<!-- generated: NAME (tools/architecture_tables.py) -->``
and ``<!-- end generated: NAME -->`` in the document; this script rewrites what is between them:

* ``commands``: every ``elmoc`` command (src/elmoc/commands/*.py) with its group, its one-line help
  and the options naming what it writes (its ``OUTPUTS``);
* ``parts``: every part of ``src/elmoc`` with its layer (``LAYERS`` of tests/core/test_layers.py),
  files and lines;
* ``functions``: every function in ``src/`` longer than ``LONG`` lines, longest first.

Usage: ``python tools/architecture_tables.py`` rewrites the document; ``--check`` only says whether it
is current (exit 1 and the names of the stale tables when it is not).  tests/core/test_architecture_doc.py
runs the check.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "elmoc"
DOC = ROOT / "docs" / "architecture.md"
LONG = 50  # the functions table lists functions longer than this; the rule is none over 60 (LSTM backward aside)
BLOCK = re.compile(r"(<!-- generated: (\w+) \(tools/architecture_tables.py\) -->\n)(.*?)(<!-- end generated: \2 -->)",
                   re.DOTALL)


def _literal(tree: ast.Module, name: str):
    """The value of the module-level assignment ``name = <literal>`` (None when absent)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    return None


def _flags(path: Path, dests: tuple[str, ...]) -> list[str]:
    """The option strings (first spelling) of every ``add_output`` call of the module's source and
    of the ``add_argument`` calls whose ``dest`` is in ``dests``."""
    found = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if func == "add_output" and len(node.args) >= 2 and isinstance(node.args[1], ast.Name):
            flag = "--output-dir" if node.args[1].id == "DIR" else "--output"
            found[flag[2:].replace("-", "_")] = flag
        elif func == "add_argument" and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            name = node.args[0].value
            dest = next((k.value.value for k in node.keywords if k.arg == "dest"), name.lstrip("-").replace("-", "_"))
            found.setdefault(dest, name if name.startswith("-") else name.upper())
    named = [found[d] for d in ("output", "output_dir") if d in found and found[d].startswith("--output")]
    return named + [found.get(d, d) for d in dests if found.get(d, d) not in named]


def commands_table() -> str:
    rows = ["| command | group | what it does | writes |", "|---|---|---|---|"]
    training = SRC / "commands" / "_options.py"  # train's and distill's options (add_training_arguments)
    for path in sorted((SRC / "commands").glob("*.py")):
        if path.name.startswith("_"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        outputs = tuple(_literal(tree, "OUTPUTS") or ())
        flags = _flags(path, outputs)
        flags = [f if f.startswith("-") or f.isupper() else _flags(training, (f,))[0] for f in flags]
        help_text = str(_literal(tree, "HELP")).replace("|", "\\|")
        rows.append(f"| `{_literal(tree, 'NAME')}` | {_literal(tree, 'GROUP') or 'internals'} | {help_text} | "
                    f"{', '.join(f'`{f}`' for f in flags) or '(stdout)'} |")
    return "\n".join(rows)


def _layers() -> list[tuple[str, ...]]:
    tree = ast.parse((ROOT / "tests" / "core" / "test_layers.py").read_text(encoding="utf-8"))
    return [tuple(line) for line in _literal(tree, "LAYERS")]


def parts_table() -> str:
    rows = ["| layer | part | files | lines |", "|---|---|---|---|"]
    for level, parts in enumerate(_layers(), start=1):
        for part in parts:
            path = SRC / part
            files = sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
            lines = sum(len(f.read_text(encoding="utf-8").splitlines()) for f in files)
            rows.append(f"| {level} | `{part}` | {len(files)} | {lines} |")
    return "\n".join(rows)


def long_functions(minimum: int = LONG) -> list[tuple[int, str, str]]:
    """``(lines, qualified name, file)`` of every function in src/ over ``minimum`` lines, longest first."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for parent in ast.walk(tree):
            for node in ast.iter_child_nodes(parent):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > minimum:
                        owner = f"{parent.name}." if isinstance(parent, ast.ClassDef) else ""
                        found.append((length, f"{owner}{node.name}", str(path.relative_to(ROOT))))
    return sorted(found, key=lambda f: (-f[0], f[2], f[1]))


def functions_table() -> str:
    rows = ["| lines | function | file |", "|---|---|---|"]
    rows += [f"| {n} | `{name}` | {file} |" for n, name, file in long_functions()]
    return "\n".join(rows)


TABLES = {"commands": commands_table, "parts": parts_table, "functions": functions_table}


def render(text: str) -> str:
    """``text`` with every generated block rewritten from the code."""
    def block(match: re.Match) -> str:
        name = match.group(2)
        if name not in TABLES:
            raise SystemExit(f"{DOC}: unknown generated table {name!r}; known: {', '.join(TABLES)}")
        return f"{match.group(1)}{TABLES[name]()}\n{match.group(4)}"

    return BLOCK.sub(block, text)


def stale_tables(text: str) -> list[str]:
    current = {m.group(2): m.group(3) for m in BLOCK.finditer(text)}
    fresh = {m.group(2): m.group(3) for m in BLOCK.finditer(render(text))}
    missing = [name for name in TABLES if name not in current]
    return missing + [name for name in current if current[name] != fresh[name]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether the document is current")
    args = parser.parse_args(argv)
    text = DOC.read_text(encoding="utf-8")
    stale = stale_tables(text)
    if args.check:
        if stale:
            print(f"{DOC}: stale tables: {', '.join(stale)}; run python tools/architecture_tables.py",
                  file=sys.stderr)
            return 1
        return 0
    DOC.write_text(render(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
