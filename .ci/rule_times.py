"""Where a Snakemake run's time went, by rule, from its log (what .ci/rehearsal.sh prints).

    python .ci/rule_times.py WORK_FOLDER_OR_LOG [--top N]

Reads the newest .snakemake/log/*.snakemake.log of a work folder (or the log file given): each job's
start is the timestamp above its `rule NAME:` / `localrule NAME:` block, its end the one above
`Finished jobid: N`. Prints one row per rule, the most time first: jobs, the sum of their wall
seconds (jobs overlap on --cores 2, so the sum is more than the run), the mean and the longest job,
and the run's own span. Snakemake stamps whole seconds, so a job under a second counts as 0-1 s.
"""
from __future__ import annotations

import re
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
START = re.compile(r"^(?:local)?rule (\w+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")


def job_times(lines: list[str]) -> list[tuple[str, float]]:
    """(rule, wall seconds) of every job that finished in this log."""
    stamp = None
    started: dict[str, tuple[str, datetime]] = {}
    pending: tuple[str, datetime] | None = None
    done = []
    for line in lines:
        line = line.rstrip("\n")
        if m := STAMP.match(line):
            stamp = datetime.strptime(" ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y")
        elif (m := START.match(line)) and stamp is not None:
            pending = (m.group(1), stamp)
        elif (m := JOBID.match(line)) and pending is not None:
            started[m.group(1)] = pending
            pending = None
        elif (m := FINISHED.match(line)) and stamp is not None and m.group(1) in started:
            rule, t0 = started.pop(m.group(1))
            done.append((rule, (stamp - t0).total_seconds()))
    return done


def newest_log(path: Path) -> Path:
    if path.is_file():
        return path
    logs = sorted((path / ".snakemake" / "log").glob("*.snakemake.log"), key=lambda p: p.stat().st_mtime)
    if not logs:
        raise SystemExit(f"rule_times: error: {path}: no .snakemake/log/*.snakemake.log; give a work folder after a run")
    return logs[-1]


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    top = int(argv[argv.index("--top") + 1]) if "--top" in argv else None
    log = newest_log(Path(argv[0]))
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    jobs = job_times(lines)
    stamps = [datetime.strptime(" ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y")
              for m in map(STAMP.match, lines) if m]
    by_rule: dict[str, list[float]] = defaultdict(list)
    for rule, seconds in jobs:
        by_rule[rule].append(seconds)
    rows = sorted(by_rule.items(), key=lambda kv: -sum(kv[1]))
    span = (stamps[-1] - stamps[0]).total_seconds() if stamps else 0.0
    print(f"rule times of {log} ({len(jobs)} jobs, {span:.0f} s from the first job to the last):")
    print(f"| rule | jobs | sum s | mean s | longest s |")
    print(f"|---|---:|---:|---:|---:|")
    for rule, times in rows[:top]:
        print(f"| {rule} | {len(times)} | {sum(times):.0f} | {sum(times) / len(times):.1f} | {max(times):.0f} |")
    print(f"| (all) | {len(jobs)} | {sum(t for _, t in jobs):.0f} | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
