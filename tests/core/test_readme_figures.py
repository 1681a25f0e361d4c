"""The README's figures are what a fresh clone gives, and its links resolve.

- the demo's job counts ("65 jobs, among them 15 pretraining runs ... and 10 downstream task
  runs") are those of `snakemake -n` with config/config.yaml in an empty working directory;
- "the 9 variants" is the demo config's pretrain.variants;
- the parameter table is what the README's `elmoc params` command prints, run as written in a
  directory with no results/ (a fresh clone);
- every budget figure of "The paper run" (GPU-h, days, GB, TB) is quoted from docs/full-run.md,
  and every run time (min, s) from docs/results.md;
- the test command is the one .ci/run runs;
- every relative link of the README and docs/reference.md names a file that exists, and every
  #anchor a heading of that file.
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
FIX = "make README.md say what a fresh clone gives"


def readme() -> str:
    return README.read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The body of the `## heading...` section (up to the next `## `)."""
    match = re.search(rf"^## {re.escape(heading)}[^\n]*\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, f"README.md has no section '## {heading}'"
    return match.group(1)


def code_lines(text: str) -> list[str]:
    """The lines of the fenced code blocks of a markdown text."""
    return [line for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S) for line in block.splitlines()]


def demo_claims(text: str) -> dict[str, int]:
    """{"total": N, "pretrain": N, "task_run": N} from the demo section's sentence
    "N jobs, among them N pretraining runs ... and N downstream task runs"."""
    body = " ".join(section(text, "Try it").split())
    claims = {}
    for key, pattern in {"total": r"(\d+) jobs", "pretrain": r"(\d+) pretraining runs",
                         "task_run": r"(\d+) downstream task runs"}.items():
        found = re.search(pattern, body)
        assert found, f"the README's demo section no longer says '{pattern}': update this test with it"
        claims[key] = int(found.group(1))
    return claims


def job_stats(dry_run_stdout: str) -> dict[str, int]:
    """Snakemake's "Job stats" table of a dry run: rule -> count, and "total"."""
    table = dry_run_stdout.split("Job stats:", 1)[1]
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)\s*$", table, flags=re.M)}


@pytest.mark.slow
def test_demo_job_counts_are_the_dry_runs(tmp_path):
    claims = demo_claims(readme())
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "2", "--snakefile", str(REPO / "Snakefile"),
                        "--configfile", str(REPO / "config/config.yaml"), "--directory", str(tmp_path)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    stats = job_stats(r.stdout)
    assert {key: stats.get(key) for key in claims} == claims, f"{FIX}: the demo's dry run plans {stats}"


def test_demo_variant_count_is_the_configs():
    config = yaml.safe_load((REPO / "config/config.yaml").read_text(encoding="utf-8"))
    found = re.search(r"the (\d+) variants", " ".join(section(readme(), "Try it").split()))
    assert found, "the README's demo section no longer says 'the N variants': update this test with it"
    assert int(found.group(1)) == len(config["pretrain"]["variants"]), FIX


def readme_params_command(text: str) -> list[str]:
    body = section(text, "The paper run")
    commands = [line for line in code_lines(body) if re.match(r"^(\S*/)?elmoc params\b", line)]
    assert len(commands) == 1, "the README's paper-run section should show one `elmoc params` command"
    return shlex.split(commands[0])[1:]  # without the program: `params ...`


def readme_params_table(text: str) -> dict[str, str]:
    """variant name as elmoc spells it (ELMo-C -> elmo-c) -> the README's "ours" figure."""
    body = section(text, "The paper run")
    rows = re.findall(r"^\| (ELMo[\w-]*) \| ([\d.]+M) \| ([\d.]+M) \|$", body, flags=re.M)
    assert rows, "the README's paper-run section has no `| variant | ours | paper |` rows"
    return {name.lower(): ours for name, ours, _ in rows}


def printed_paper_counts(stdout: str) -> dict[str, str]:
    """variant -> the `paper` column of `elmoc params`' table (found by its header)."""
    lines = [line.split() for line in stdout.strip().splitlines()]
    column = lines[0].index("paper")
    return {row[0]: row[column] for row in lines[1:]}


def test_parameter_counts_are_what_the_readmes_command_prints(tmp_path, monkeypatch):
    from elmoc.cli import main

    argv = readme_params_command(readme())
    (tmp_path / "config").symlink_to(REPO / "config")  # a fresh clone: the configs, no results/ or resources/
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    printed = printed_paper_counts(out.getvalue())
    claimed = readme_params_table(readme())
    assert {name: printed.get(name) for name in claimed} == claimed, f"{FIX}: `elmoc params` prints {printed}"


UNITS = r"(?:GPU-h|days|GB|TB)"


def budget_figures(text: str) -> list[str]:
    """Each `number unit` of the paper run's needs, e.g. '~3,250 GPU-h', '4-36 days', '0.75 TB'."""
    body = section(text, "The paper run").split("```bash\n.venv/bin/elmoc params", 1)[0]
    return re.findall(rf"(\d[\d,.]*(?:-[\d,.]+)? {UNITS})", " ".join(body.split()))


def test_paper_run_budget_is_quoted_from_full_run_md():
    figures = budget_figures(readme())
    assert len(figures) >= 8, f"the README's paper-run needs lost their figures: {figures}"
    source = " ".join((REPO / "docs/full-run.md").read_text(encoding="utf-8").split())
    missing = [f for f in figures if f not in source]
    assert not missing, f"README figures not in docs/full-run.md: {missing}; quote the estimate as it stands there"


def test_run_times_are_recorded_in_results_md():
    times = re.findall(r"\d[\d.]* min\b(?: \d+ s\b)?", " ".join(section(readme(), "Try it").split()))
    assert times, "the README's demo section states no run time"
    source = " ".join((REPO / "docs/results.md").read_text(encoding="utf-8").split())
    missing = [t for t in times if t not in source]
    assert not missing, f"README run times not in docs/results.md: {missing}; record the run there first"


def test_readmes_test_command_is_what_ci_runs():
    ci = (REPO / ".ci/run").read_text(encoding="utf-8")
    step = re.search(r'^step "make test" (.+)$', ci, flags=re.M)
    assert step, ".ci/run no longer runs `make test` as a step"
    commands = [line.split("#")[0].strip() for line in code_lines(section(readme(), "Tests"))]
    assert step.group(1).strip() in commands, "the README's test command is not the one .ci/run runs"


def slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def broken_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.exists() or (anchor and resolved.suffix == ".md" and anchor not in anchors(resolved)):
            broken.append(target)
    return broken


@pytest.mark.parametrize("doc", ["README.md", "docs/reference.md"])
def test_links_resolve(doc):
    assert not broken_links(REPO / doc), f"{doc} links to what does not exist: {broken_links(REPO / doc)}"
