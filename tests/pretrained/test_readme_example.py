"""The README's "Using a trained model" example runs as written on an exported model."""
from __future__ import annotations

import contextlib
import io
import re

from lm_tree_helpers import run_command


def readme_example(repo_root) -> str:
    text = (repo_root / "README.md").read_text(encoding="utf-8")
    section = text.split("## Using a trained model", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_example_runs(lm_tree, repo_root):
    code = readme_example(repo_root)
    assert len(code.strip().splitlines()) <= 11
    lm_tree("fasttext")
    assert run_command("export", ["--variant", "tiny", "--output-dir", "models/elmo-c"]) == 0
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    lines = out.getvalue().splitlines()
    assert lines == ["(2, 4, 12)", "(2, 4, 12)", "[[True, True, True, True], [True, True, False, False]]",
                     "[(4, 12), (2, 12)]"]
