"""CI's timed steps and budget (.ci/steps.sh, sourced by .ci/run, issue 43.4): every step's time is
printed and tabled; a run over ELMOC_CI_BUDGET_S fails with one line naming the slowest steps; a
failing step stops the run with its status and the table so far; a step run beside others overlaps
them, keeps its output apart, and its failure fails the run (after the other steps beside have ended)."""
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def ci(script: str, budget: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ELMOC_CI_BUDGET_S"}
    if budget is not None:
        env["ELMOC_CI_BUDGET_S"] = budget
    return subprocess.run(["bash", "-c", f"set -euo pipefail; . .ci/steps.sh; {script}"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


STEPS = 'step "quick one" true; step "slow one" sleep 2; step "middle one" sleep 1; summary; check_budget'


@pytest.mark.slow
def test_a_run_over_the_budget_fails_naming_the_slowest_steps():
    r = ci(STEPS, "1")
    assert r.returncode == 3, r.stdout + r.stderr
    [line] = [x for x in r.stderr.splitlines() if x.startswith("ci: error:")]
    assert "over the budget of 1 s (ELMOC_CI_BUDGET_S)" in line, line
    assert line.index("slow one (2 s)") < line.index("middle one (1 s)") < line.index("quick one (0 s)"), line
    assert "=== ci: slow one passed in 2 s" in r.stdout
    table = r.stdout.split("=== ci: step times\n")[1].splitlines()
    assert [row.split("s  ", 1)[1] for row in table[:3]] == ["slow one", "middle one", "quick one"], table


@pytest.mark.slow
def test_a_run_within_the_budget_passes_and_the_default_is_45_minutes():
    r = ci(STEPS, None)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all steps passed in" in r.stdout and "(budget 2700 s)" in r.stdout, r.stdout


@pytest.mark.slow
def test_a_failing_step_stops_the_run_with_its_status_and_the_table():
    r = ci('step "first" true; step "broken" bash -c "exit 7"; step "never" true; check_budget', "100")
    assert r.returncode == 7, r.stdout + r.stderr
    assert "=== ci: broken FAILED (exit 7)" in r.stdout and "never" not in r.stdout, r.stdout
    assert "=== ci: step times" in r.stdout


@pytest.mark.slow
def test_a_budget_that_is_not_a_number_is_refused():
    r = ci('step "one" true; check_budget', "45m")
    assert r.returncode == 2 and "ELMOC_CI_BUDGET_S must be a whole number of seconds, got '45m'" in r.stderr, r.stderr


@pytest.mark.slow
def test_a_step_beside_overlaps_the_next_step_and_prints_its_output_apart():
    r = ci('step_beside "two-node" bash -c "echo from-beside; sleep 3"; step "rehearsal" bash -c "echo from-fg; sleep 3"; '
           'step_join "two-node"; summary; check_budget', "5")
    assert r.returncode == 0, r.stdout + r.stderr  # 3 s + 3 s side by side: within a 5 s budget (whole seconds)
    out = r.stdout
    assert out.index("from-fg") < out.index("=== ci: two-node (ran beside the steps above; its output)") \
        < out.index("from-beside") < out.index("=== ci: two-node passed in "), out
    table = out.split("=== ci: step times\n")[1].splitlines()
    assert {row.split("s  ", 1)[1] for row in table[:2]} == {"two-node (beside)", "rehearsal"}, table
    # a step beside that ends long before its join is timed to its own end: the clock counts whole
    # seconds, so a 1 s step reads 1 or 2 s (more on a loaded box), never the join's 5 s
    r = ci('step_beside "lint" bash -c "sleep 1"; step "make test" sleep 5; step_join "lint"', "100")
    took = re.search(r"=== ci: lint passed in (\d+) s", r.stdout)
    assert took and 1 <= int(took.group(1)) <= 3, r.stdout


@pytest.mark.slow
def test_a_failing_step_beside_fails_the_run_and_a_failing_step_waits_for_the_steps_beside():
    r = ci('step_beside "two-node" bash -c "exit 6"; step "rehearsal" true; step_join "two-node"; check_budget', "100")
    assert r.returncode == 6 and "=== ci: two-node FAILED (exit 6)" in r.stdout, r.stdout + r.stderr
    r = ci('step_beside "two-node" bash -c "sleep 1; echo cluster-stopped"; step "rehearsal" bash -c "exit 4"; '
           'step_join "two-node"', "100")
    assert r.returncode == 4, r.stdout + r.stderr
    assert r.stdout.index("=== ci: rehearsal FAILED (exit 4)") < r.stdout.index("cluster-stopped") \
        < r.stdout.index("=== ci: step times"), r.stdout


def test_the_longest_first_files_exist_and_come_first_in_collection():
    """tests/conftest.py's LONGEST_FIRST names real files (a renamed file would silently lose its place)
    and the collection starts with them, in that order."""
    import runpy

    longest_first = runpy.run_path(str(REPO_ROOT / "tests/conftest.py"))["LONGEST_FIRST"]
    assert all((REPO_ROOT / path).is_file() for path in longest_first), longest_first
    out = subprocess.run([os.sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/core/test_layers.py", "tests/features/test_streaming.py", "tests/bench/test_gpu_check.py"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=120).stdout
    files = list(dict.fromkeys(line.split("::")[0] for line in out.splitlines() if "::" in line))
    assert files == ["tests/bench/test_gpu_check.py", "tests/features/test_streaming.py", "tests/core/test_layers.py"], files
