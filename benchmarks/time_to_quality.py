"""Time to quality: heldout metric against training tokens and wall time, per variant and seed,
and how many tokens a variant needs to reach its baseline's final heldout value (issue 35).

Each variant is resolved as the workflow resolves it (:func:`elmoc.config.resolve_variant` over
``--config``: preset, ``pretrain.overrides``, ``overrides_by_type``, its own entry), then the
benchmark's training budget is set (``train.max_steps``, ``eval_every``, ``log_every`` =
``eval_every``, ``eval_max_windows``: the same heldout prefix for every evaluation), then the
``--overrides`` (JSON: ``{"*": {...}, "<variant>": {...}}``, partial specs merged last), then
``train.seed``.  Each (variant, seed) is one ``elmoc train`` run, the same command the workflow
runs, in ``<out>/seed<S>/<variant>/<run>`` with the spec beside it (``<variant>/spec.yaml``):
``<run>`` is the spec's first run (:func:`elmoc.directions.runs`): the forward LM of a bi-LM
trained as two separate directions (the backward one repeats it on the reversed stream and
would double the cost), a joint bi-LM's or a masked LM's one run.  A finished run (its
``heldout.json`` there, the same spec) is reused; a stopped one resumes from its checkpoint.

A variant the config does not define (a new preset, or ``NAME=PRESET``: a preset under another
name, for the same preset with other ``--overrides``) takes its baseline's config entry (the
baseline's own overrides) over its own preset: the same footing by construction.  ``--baseline
VARIANT=BASE`` pairs them; a variant with no pair is its own baseline.

Writes ``<out>/time_to_quality.json`` (every curve, the settings, the command, the load average),
``time_to_quality.md`` (the table) and ``time_to_quality.png`` (metric against tokens and against
wall time, mean over seeds with the seeds' min-max shaded, one row per metric).  The metric's
direction and format come from its reduction class (:func:`elmoc.outputs.heldout.metric_class`).
Table columns: the final heldout value (mean ± sample standard deviation over seeds); its
difference from the baseline's (paired by seed: mean ± sd of the per-seed differences); the
tokens at which each seed's curve first reaches the baseline's mean final value (linear
interpolation between evaluations; mean over the seeds that reach it, and how many do) and that
as a fraction of the baseline's training tokens; the wall time to reach it and in all.  Wall time
is the trainer's (``train_log.jsonl``), heldout evaluations included, on a shared machine: the
load average is recorded; conclusions rest on tokens.

The artifacts a spec names (``results/corpus/train``, ``results/vectors/cc.npy``, ...) are read in
``--workflow-dir``; ``--prepare`` makes the missing ones with the workflow's own rules
(``snakemake <artifacts> --configfile <config>``: 50 s for config/shared-data.yaml's corpus on
this VM).  Without the shared data (``../shared/data``, which config/shared-data.yaml reads) the
script says so in one line and exits 0, writing nothing.

Usage (the baselines of docs/beyond-paper.md; a variant's pair: --baseline elmo-c-tnf=elmo-c):
    python benchmarks/time_to_quality.py --out results/ttq/baselines --prepare \\
        --variants elmo-c trans-base-c --seeds 1 2 3 --max-steps 300 --eval-every 25 --eval-windows 64
"""
from __future__ import annotations

import argparse
import copy
import glob
import json
import os
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from elmoc.config import artifact_paths, check_spec_keys, deep_merge, dump_yaml, load_yaml, resolve_variant, \
    variant_names
from elmoc.directions import runs
from elmoc.errors import ConfigError, ElmocError
from elmoc.outputs.heldout import metric_class
from elmoc.tables.runs import read_lm_runs

Point = tuple[int, float, float]  # (training tokens, wall seconds, heldout value)
ELMOC = [str(Path(sys.executable).parent / "elmoc")]
if not Path(ELMOC[0]).exists():
    ELMOC = [sys.executable, "-m", "elmoc.cli"]


# --- the arithmetic of the table (pure functions, tested on synthetic curves) ------------------


def first_reach(xs: Sequence[float], ys: Sequence[float], target: float, higher_is_better: bool) -> float | None:
    """The first ``x`` at which the piecewise-linear curve ``(xs, ys)`` reaches ``target`` (at or
    above it when higher is better, else at or below), or None if it never does.

    Shape: xs, ys (points,), xs increasing."""
    def reached(y: float) -> bool:
        return y >= target if higher_is_better else y <= target

    for i, (x, y) in enumerate(zip(xs, ys)):
        if reached(y):
            if i == 0:
                return float(x)
            x0, y0 = xs[i - 1], ys[i - 1]
            return float(x0 + (target - y0) / (y - y0) * (x - x0))
    return None


def mean_sd(values: Iterable[float]) -> tuple[float | None, float | None, int]:
    """(mean, sample standard deviation (ddof 1; None for one value), count); (None, None, 0) for none."""
    v = np.asarray(list(values), dtype=float)
    if not len(v):
        return None, None, 0
    return float(v.mean()), (float(v.std(ddof=1)) if len(v) > 1 else None), len(v)


def final(points: Sequence[Point]) -> Point:
    """The last evaluation of a curve (the trainer's "after" one)."""
    return points[-1]


def summarize(curves: dict[str, dict[int, list[Point]]], baselines: dict[str, str],
              higher_is_better: dict[str, bool]) -> list[dict[str, Any]]:
    """One row per variant (in ``curves``' order) of the time-to-quality table.

    ``curves[variant][seed]``: the points of one run, in training order; ``baselines[variant]``:
    its baseline (itself when absent); ``higher_is_better[variant]``: its metric's direction.
    The target is the baseline's mean final value; a variant's tokens (and seconds) to reach it
    are averaged over the seeds that reach it (``reached`` of ``seeds``); the final difference is
    paired by seed (seeds both ran), else the difference of the means with no spread.
    """
    rows = []
    for variant, by_seed in curves.items():
        base = baselines.get(variant, variant)
        if base not in curves:
            raise ConfigError(f"--baseline {variant}={base}: {base!r} is not among --variants; add it")
        higher = higher_is_better[variant]
        finals = {s: final(p)[2] for s, p in by_seed.items()}
        base_finals = {s: final(p)[2] for s, p in curves[base].items()}
        target = mean_sd(base_finals.values())[0]
        base_tokens = mean_sd(final(p)[0] for p in curves[base].values())[0]
        tokens = [first_reach([t for t, _, _ in p], [v for _, _, v in p], target, higher) for p in by_seed.values()]
        seconds = [first_reach([s for _, s, _ in p], [v for _, _, v in p], target, higher) for p in by_seed.values()]
        paired = sorted(set(finals) & set(base_finals))
        if paired:
            diff, diff_sd, _ = mean_sd(finals[s] - base_finals[s] for s in paired)
        else:
            diff, diff_sd = mean_sd(finals.values())[0] - target, None
        mean, sd, n = mean_sd(finals.values())
        reach_tokens = mean_sd(t for t in tokens if t is not None)[0]
        rows.append({
            "variant": variant, "baseline": base, "seeds": n, "final_mean": mean, "final_sd": sd,
            "final_min": min(finals.values()), "final_max": max(finals.values()),
            "diff_mean": diff, "diff_sd": diff_sd, "paired_seeds": len(paired), "target": target,
            "tokens_to_target": reach_tokens, "reached": sum(t is not None for t in tokens),
            "tokens_fraction": None if reach_tokens is None or not base_tokens else reach_tokens / base_tokens,
            "seconds_to_target": mean_sd(s for s in seconds if s is not None)[0],
            "tokens": mean_sd(final(p)[0] for p in by_seed.values())[0],
            "seconds": mean_sd(final(p)[1] for p in by_seed.values())[0],
        })
    return rows


# --- the report ---------------------------------------------------------------------------------


def _fmt(value: float | None, fmt: str, sd: float | None = None) -> str:
    if value is None:
        return "-"
    return fmt.format(value) + ("" if sd is None else " ± " + fmt.format(sd))


def markdown(rows: list[dict[str, Any]], metrics: dict[str, str], header: list[str]) -> str:
    """The table (one row per variant), after ``header`` lines."""
    lines = header + ["", "| variant | baseline | metric | seeds | final (mean ± sd) | Δ vs baseline (paired, ± sd) "
                      "| tokens to baseline's final (reached) | fraction of baseline tokens | s to baseline's final "
                      "| tokens | s |", "|" + "---|" * 11]
    for r in rows:
        kind = metric_class(metrics[r["variant"]])
        fmt = kind.value_format
        own = r["variant"] == r["baseline"]
        diff = "-" if own else ("+" if (r["diff_mean"] or 0) >= 0 else "") + _fmt(r["diff_mean"], fmt, r["diff_sd"])
        reach = (f"{_fmt(r['tokens_to_target'], '{:,.0f}')} ({r['reached']}/{r['seeds']})")
        lines.append(" | ".join([
            f"| {r['variant']}", "(itself)" if own else r["baseline"], metrics[r["variant"]] + (" ↑" if kind.higher_is_better else " ↓"),
            str(r["seeds"]), _fmt(r["final_mean"], fmt, r["final_sd"]), diff, reach,
            _fmt(r["tokens_fraction"], "{:.2f}"), _fmt(r["seconds_to_target"], "{:.0f}"),
            _fmt(r["tokens"], "{:,.0f}"), _fmt(r["seconds"], "{:.0f}") + " |"]))
    return "\n".join(lines) + "\n"


def _band(curves: list[list[tuple[float, float]]], num: int = 60) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean, min and max over seeds of piecewise-linear curves ``[(x, y), ...]`` on a common grid
    from 0 to the shortest curve's end.  Returns (grid, mean, low, high), each (num,)."""
    end = min(c[-1][0] for c in curves)
    grid = np.linspace(min(c[0][0] for c in curves), end, num)
    ys = np.stack([np.interp(grid, [x for x, _ in c], [y for _, y in c]) for c in curves])  # (seeds, num)
    return grid, ys.mean(0), ys.min(0), ys.max(0)


def figure(curves: dict[str, dict[int, list[Point]]], metrics: dict[str, str], baselines: dict[str, str],
           path: Path) -> None:
    """Two panels per metric (against tokens, against wall seconds): each variant's mean over seeds,
    the seeds' min-max shaded, its baseline's final mean dotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from elmoc.io.atomic import atomic_path

    kinds = list(dict.fromkeys(metrics.values()))
    fig, axes = plt.subplots(len(kinds), 2, figsize=(11, 3.8 * len(kinds)), squeeze=False)
    colours = {v: plt.cm.tab10(i % 10) for i, v in enumerate(curves)}
    for row, metric in zip(axes, kinds):
        kind = metric_class(metric)
        for variant, by_seed in curves.items():
            if metrics[variant] != metric:
                continue
            for ax, col in zip(row, (0, 1)):
                grid, mean, low, high = _band([[(p[col], p[2]) for p in pts] for pts in by_seed.values()])
                ax.plot(grid, mean, color=colours[variant], label=f"{variant} ({len(by_seed)} seeds)")
                ax.fill_between(grid, low, high, color=colours[variant], alpha=0.2, lw=0)
                if baselines.get(variant, variant) == variant and any(baselines.get(v) == variant for v in curves):
                    ax.axhline(mean_sd(final(p)[2] for p in by_seed.values())[0], color=colours[variant], ls=":", lw=1)
        for ax, xlabel in zip(row, ("training tokens", "training wall time (s, evaluations included)")):
            ax.set_xlabel(xlabel)
            ax.set_ylabel(kind.axis_label(metric))
            if kind.log_scale:
                ax.set_yscale("log")
            ax.grid(alpha=0.3)
        row[0].legend(fontsize=7, title="mean; shaded: seeds' min-max; dotted: a baseline's final", title_fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


# --- the runs -----------------------------------------------------------------------------------


def variant_specs(config: dict[str, Any], names: list[str], baselines: dict[str, str], overrides: dict[str, Any],
                  budget: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{variant: spec}`` (seed not set) for ``names`` (``NAME`` or ``NAME=PRESET``), resolved
    from ``config`` as the module docstring says; run in the workflow folder (presets relative)."""
    config = copy.deepcopy(config)
    pretrain = config.setdefault("pretrain", {})
    entries = pretrain.setdefault("variants", {}) or {}
    pretrain["variants"] = entries
    known = set(variant_names(config))
    specs = {}
    for arg in names:
        name, _, preset = arg.partition("=")
        if name not in known or preset:
            like = baselines.get(name)
            entry = copy.deepcopy(entries.get(like) or {}) if like and like != name else {}
            entries[name] = {**entry, "preset": preset or name}
            if name in (pretrain.get("extra_variants") or []):
                pretrain["extra_variants"] = [v for v in pretrain["extra_variants"] if v != name]
        spec = resolve_variant(config, name)
        spec["train"] = {**spec.get("train", {}), **budget}
        for key in ("*", name):
            layer = overrides.get(key) or {}
            check_spec_keys(layer, f"--overrides {key!r}")
            spec = deep_merge(spec, layer)
        specs[name] = spec
    unknown = set(overrides) - {"*"} - set(specs)
    if unknown:
        raise ConfigError(f"--overrides names {', '.join(sorted(unknown))}, not among --variants; fix the key")
    return specs


def missing_sources(config: dict[str, Any]) -> list[str]:
    """The config's corpus sources (local paths or globs) that match no file."""
    corpus = config.get("corpus") or {}
    paths = [s.get("path") for s in (corpus.get("sources") or []) + (corpus.get("heldout_sources") or [])]
    return [p for p in paths if isinstance(p, str) and not glob.glob(p)]


def prepare(artifacts: list[str], config_path: Path, cores: int) -> None:
    """Make the missing ``artifacts`` with the workflow's rules (Snakemake in the current folder)."""
    snakemake = Path(sys.executable).parent / "snakemake"
    cmd = [str(snakemake) if snakemake.exists() else "snakemake", *artifacts, "--cores", str(cores),
           "--configfile", str(config_path)]
    print("preparing: " + shlex.join(cmd), file=sys.stderr, flush=True)
    if subprocess.run(cmd).returncode != 0:
        raise ConfigError(f"preparing {', '.join(artifacts)} failed; see the Snakemake output above")


def train_one(spec: dict[str, Any], run_dir: Path, threads: int) -> Path:
    """Train (or reuse) one run; returns its ``heldout.json``."""
    spec_path = run_dir.parent / "spec.yaml"
    text = json.dumps(spec, sort_keys=True)
    if spec_path.exists() and json.dumps(load_yaml(spec_path), sort_keys=True) != text:
        raise ConfigError(f"{spec_path}: an earlier run of another spec is here; use another --out or delete "
                          f"{run_dir.parent}")
    heldout = run_dir / "heldout.json"
    if heldout.exists():
        return heldout
    run_dir.mkdir(parents=True, exist_ok=True)
    dump_yaml(spec, spec_path)
    cmd = ELMOC + ["train", "--spec", str(spec_path), "--direction", run_dir.name, "--output-dir", str(run_dir),
                   "--threads", str(threads)]
    with open(run_dir.parent / f"{run_dir.name}.stderr", "w") as err:
        status = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err,
                                env={**os.environ, "OMP_NUM_THREADS": str(threads)}).returncode
    if status != 0 or not heldout.exists():
        raise ElmocError(f"{shlex.join(cmd)} failed (exit {status}); see {err.name}")
    return heldout


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variants", nargs="+", required=True, help="variant names (NAME or NAME=PRESET)")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--baseline", action="append", default=[], metavar="VARIANT=BASE",
                   help="compare VARIANT with BASE (both among --variants); repeat per pair")
    p.add_argument("--overrides", default="{}", help='JSON {"*": partial spec, "<variant>": partial spec}, merged last')
    p.add_argument("--config", default="config/shared-data.yaml", help="workflow config (relative to --workflow-dir)")
    p.add_argument("--workflow-dir", default=".", help="where the config's artifacts (results/...) are")
    p.add_argument("--out", required=True, help="folder of the runs and the report (relative to the current folder)")
    p.add_argument("--max-steps", type=int, default=300, help="training steps per run (the token budget)")
    p.add_argument("--eval-every", type=int, default=25, help="steps between heldout evaluations")
    p.add_argument("--eval-windows", type=int, default=64,
                   help="heldout windows per evaluation (train.eval_max_windows; the same prefix every time)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run")
    p.add_argument("--jobs", type=int, default=1, help="runs at once")
    p.add_argument("--prepare", action="store_true", help="make missing artifacts with the workflow's rules")
    args = p.parse_args(argv)
    out = Path(args.out).resolve()
    command = shlex.join([Path(sys.argv[0]).name if argv is None else "time_to_quality.py", *(sys.argv[1:] if argv is None else argv)])
    os.chdir(args.workflow_dir)
    try:
        config = load_yaml(args.config, mapping="a workflow config")
        baselines = dict(pair.partition("=")[::2] for pair in args.baseline)
        names = [a.partition("=")[0] for a in args.variants]
        for variant, base in baselines.items():
            if variant not in names or base not in names:
                raise ConfigError(f"--baseline {variant}={base}: both must be among --variants")
        try:
            overrides = json.loads(args.overrides)
        except json.JSONDecodeError as e:
            raise ConfigError(f"--overrides is not JSON ({e.msg}); give e.g. '{{\"*\": {{\"train\": {{\"bptt\": 20}}}}}}'")
        if not isinstance(overrides, dict):
            raise ConfigError("--overrides must be a JSON object of variant names (or \"*\") to partial specs")
        budget = {"max_steps": args.max_steps, "eval_every": args.eval_every, "log_every": args.eval_every,
                  "eval_max_windows": args.eval_windows, "checkpoint_every": 0}
        specs = variant_specs(config, args.variants, baselines, overrides, budget)
        missing = [a for spec in specs.values() for a in artifact_paths(spec) if not Path(a).exists()]
        missing = sorted(set(missing))
        if missing:
            absent = missing_sources(config)
            if absent:
                print(f"time_to_quality: skipped: {args.config}'s corpus source {absent[0]} is absent (the shared "
                      "data); nothing written", file=sys.stderr)
                return 0
            if not args.prepare:
                raise ConfigError(f"{', '.join(missing)} missing in {os.getcwd()}; add --prepare to make them with "
                                  f"the workflow's rules for {args.config}")
            prepare(missing, Path(args.config), args.jobs)
        load_before = os.getloadavg()
        jobs = [(v, s, spec) for v, spec in specs.items() for s in args.seeds]

        def run(job):
            variant, seed, spec = job
            spec = deep_merge(spec, {"train": {"seed": seed}})
            return train_one(spec, out / f"seed{seed}" / variant / runs(spec)[0], args.threads)

        t0 = time.time()
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            heldouts = list(pool.map(run, jobs))
        load_after = os.getloadavg()
    except ElmocError as e:
        print(f"time_to_quality: {e}", file=sys.stderr)
        return 2
    curves: dict[str, dict[int, list[Point]]] = {v: {} for v in specs}
    metrics: dict[str, str] = {}
    for (variant, seed, _), run_ in zip(jobs, read_lm_runs(heldouts)):
        curves[variant][seed] = sorted({t: (t, s, v) for t, s, v in run_.curve()}.values())
        metrics[variant] = run_.metric
    higher = {v: metric_class(m).higher_is_better for v, m in metrics.items()}
    rows = summarize(curves, baselines, higher)
    out.mkdir(parents=True, exist_ok=True)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    header = [f"Time to quality ({when}): `python benchmarks/{command}`", "",
              f"Config {args.config}; {args.max_steps} steps per run, heldout every {args.eval_every} steps on its "
              f"first {args.eval_windows} windows; {args.threads} thread(s) per run, {args.jobs} run(s) at once; "
              f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after ({time.time() - t0:.0f} s). "
              "Wall time includes the heldout evaluations. ↑/↓: higher/lower is better."]
    report = {"command": command, "date": when, "config": args.config, "seeds": args.seeds,
              "budget": budget, "threads": args.threads, "jobs": args.jobs,
              "load_average": {"before": load_before, "after": load_after}, "baselines": baselines,
              "metrics": metrics, "rows": rows,
              "curves": {v: {str(s): [list(p) for p in pts] for s, pts in by_seed.items()} for v, by_seed in curves.items()}}
    (out / "time_to_quality.json").write_text(json.dumps(report, indent=1))
    table = markdown(rows, metrics, header)
    (out / "time_to_quality.md").write_text(table)
    figure(curves, metrics, baselines, out / "time_to_quality.png")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
