"""Figures (matplotlib, PNG + PDF): learning curves, speed bars ours vs paper, S2 memory.

Every function takes already-read results (:class:`~elmoc.tables.runs.LMRun`
lists, the bench JSON dict) and an output *stem*; it writes ``stem.png`` and
``stem.pdf`` atomically.  Missing results give an empty panel saying so, never an
error, so a partial run still gets its figures.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from elmoc.outputs.heldout import metric_class
from elmoc.tables import paper
from elmoc.tables.runs import LMRun, read_lm_runs
from elmoc.tables.speed import table5_protocol_info


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, stem: str | Path) -> list[Path]:
    from elmoc.io.atomic import atomic_path

    plt = _pyplot()
    out = []
    for fmt in ("png", "pdf"):
        path = Path(f"{stem}.{fmt}")
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110, format=fmt)
        out.append(path)
    plt.close(fig)
    return out


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


def variant_colours(variants: Iterable[str]) -> dict:
    """One distinct colour per variant, the same in every figure of a run: tab10 for up to 10
    variants, tab20 for up to 20, evenly spaced hues beyond."""
    plt = _pyplot()
    variants = list(dict.fromkeys(variants))
    if len(variants) <= 10:
        return {v: plt.cm.tab10(i) for i, v in enumerate(variants)}
    if len(variants) <= 20:
        return {v: plt.cm.tab20(i) for i, v in enumerate(variants)}
    return {v: plt.cm.hsv(i / len(variants)) for i, v in enumerate(variants)}


def _readable_x(ax) -> None:
    """At most 6 x ticks, large numbers as 100k / 1.5M (never run together)."""
    from matplotlib.ticker import EngFormatter, MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))


def heldout_curves(runs: list[LMRun], stem: str | Path) -> list[Path]:
    """Heldout metric against training tokens (left) and wall time (right), one colour
    per variant (solid forward, dashed backward), one row per metric kind (cosine for
    CONT variants, perplexity for the softmax family: not comparable), each read as its
    metric class says (:func:`elmoc.outputs.heldout.metric_class`: axis label, log scale).  A run
    with a constant-prediction baseline (a cosine) has it as a dotted line of its colour."""
    plt = _pyplot()
    metrics = sorted({r.metric or "loss" for r in runs}) or ["(no runs)"]
    fig, axes = plt.subplots(len(metrics), 2, figsize=(11, 3.8 * len(metrics)), squeeze=False)
    colours = variant_colours(r.variant for r in runs)
    for row, metric in zip(axes, metrics):
        chosen = [r for r in runs if (r.metric or "loss") == metric]
        if not chosen:
            for ax in row:
                _empty(ax, "no pretraining results yet")
            continue
        for r in chosen:
            pts = r.curve()
            if not pts:
                continue
            tokens, secs, vals = zip(*pts)
            first = r.direction in ("forward", "joint")  # a joint bi-LM is one line, its combined metric
            style = "-" if first else "--"
            label = r.variant if first else None
            row[0].plot(tokens, vals, style, marker="o", ms=3, color=colours[r.variant], label=label)
            row[1].plot(secs, vals, style, marker="o", ms=3, color=colours[r.variant], label=label)
            if r.record.constant_baseline is not None and first:
                for ax in row:
                    ax.axhline(r.record.constant_baseline, ls=":", lw=1, color=colours[r.variant])
        kind = metric_class(metric)
        ylabel = kind.axis_label(metric)
        if kind.log_scale:
            row[0].set_yscale("log")
            row[1].set_yscale("log")
        row[0].set_xlabel("training tokens")
        row[1].set_xlabel("training wall time (s)")
        for ax in row:
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            _readable_x(ax)
        dotted = any(r.record.constant_baseline is not None for r in chosen)
        row[0].legend(fontsize=7, title="solid: forward, dashed: backward"
                      + ("\ndotted: constant prediction" if dotted else ""), title_fontsize=7)
    fig.tight_layout()
    return _save(fig, stem)


def _paired_bars(ax, labels: list[str], ours: list[float | None], theirs: list[float | None], ylabel: str,
                 ours_oom: list[bool] | None = None, theirs_oom: list[bool] | None = None) -> None:
    """Bars of ours beside the paper's; a missing value is written "n/a", or "OOM" where flagged."""
    import numpy as np

    x = np.arange(len(labels))
    w = 0.38
    ax.bar(x - w / 2, [float("nan") if v is None else v for v in ours], w, label="ours")
    ax.bar(x + w / 2, [float("nan") if v is None else v for v in theirs], w, label="paper")
    for offset, values, oom in ((-w / 2, ours, ours_oom), (w / 2, theirs, theirs_oom)):
        for i, v in enumerate(values):
            if v is None and (oom or offset < 0):
                text = "OOM" if oom and oom[i] else "n/a"
                ax.text(x[i] + offset, 0, text, ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.grid(axis="y", alpha=0.3)


def speed_bars(bench: dict | None, stem4: str | Path, stem5: str | Path) -> list[Path]:
    """Ratios to CONT, ours beside the paper's: Table 4 (S1/S2/S3 panels) and Table 5
    (one panel per encoder)."""
    plt = _pyplot()
    rows4 = {r["label"]: r for r in (bench or {}).get("table4", [])}
    labels4 = [k for k in paper.TABLE4 if k != "CONT"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), squeeze=False)
    for i, (ax, key) in enumerate(zip(axes[0], ("s1_ratio", "s2_ratio", "s3_ratio"))):
        ours = [rows4.get(k, {}).get(key) for k in labels4]
        theirs = [paper.TABLE4[k][2 + i] for k in labels4]
        _paired_bars(ax, labels4, ours, theirs, "time / CONT time")
        ax.set_title(f"Table 4, S{i + 1}")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    out = _save(fig, stem4)

    rows5 = {(r["encoder"], r["layer"]): r for r in (bench or {}).get("table5", [])}
    layers = [k for k in paper.TABLE5 if k != "CONT"]
    fig, axes = plt.subplots(1, len(paper.TABLE5_ENCODERS), figsize=(16, 4.2), squeeze=False, sharey=True)
    for ax, enc in zip(axes[0], paper.TABLE5_ENCODERS):
        ours = [rows5.get((enc, layer), {}).get("ratio") for layer in layers]
        theirs = [paper.TABLE5[layer][enc] for layer in layers]
        ours_oom = [bool(rows5.get((enc, layer), {}).get("oom")) for layer in layers]
        _paired_bars(ax, layers, ours, theirs, "time / CONT time" if enc == paper.TABLE5_ENCODERS[0] else "",
                     ours_oom=ours_oom, theirs_oom=[v is None for v in theirs])
        ax.set_title(f"Table 5, {enc}", fontsize=9)
    axes[0][0].legend(fontsize=8)
    ours_how = table5_protocol_info(bench)["short"] if bench else "no bench results"
    fig.suptitle(f"Table 5: ours ({ours_how}) beside the paper's (S3: 4 GPUs, maximal batch)", fontsize=10)
    fig.tight_layout()
    return out + _save(fig, stem5)


def memory_vs_batch(bench: dict | None, stem: str | Path) -> list[Path]:
    """Peak training memory against batch size per output layer, from the S2 search of
    Table 4 (every probe when the bench recorded them in ``s2_probes``, else the
    chosen batch), with the memory budget as a line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    rows = (bench or {}).get("table4", [])
    if not rows:
        _empty(ax, "no bench results (elmoc bench / bench.enabled)")
    for r in rows:
        probes = sorted((int(b), float(mb)) for b, mb in (r.get("s2_probes") or []))
        if not probes and r.get("max_batch"):
            probes = [(int(r["max_batch"]), float(r["peak_mb"]))]
        if probes:
            xs, ys = zip(*probes)
            ax.plot(xs, ys, marker="o", label=r["label"])
    budget = (bench or {}).get("settings", {}).get("memory_budget_mb")
    if budget and rows:
        ax.axhline(budget, color="black", ls=":", label=f"budget {budget:.0f} MB")
    if rows:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size (sequences of 20 tokens)")
        ax.set_ylabel("peak memory of a training step (MB)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        s = bench.get("settings", {})
        ax.set_title(f"S2 search: device {s.get('device')}, widths ×{s.get('width_scale', 1):g}, "
                     f"vocabularies ×{s.get('vocab_scale', 1):g}", fontsize=9)
    fig.tight_layout()
    return _save(fig, stem)


def learning_curves(heldout_paths: Iterable[str | Path], output: str | Path) -> None:
    """Training loss against tokens seen (``train_log.jsonl`` beside each ``heldout.json``),
    one line per (variant, direction): one colour per variant (:func:`variant_colours`, as in
    the heldout curves), solid forward (or joint), dashed backward; one panel per metric kind;
    one PNG."""
    from elmoc.io.atomic import atomic_path

    plt = _pyplot()
    runs = read_lm_runs(heldout_paths)
    colours = variant_colours(r.variant for r in runs)
    curves: dict[str, list[tuple[LMRun, list[int], list[float]]]] = {}
    for run in runs:
        train = [r for r in run.log.train if r.tokens is not None and r.loss is not None]
        curves.setdefault(run.metric or "loss", []).append((run, [r.tokens for r in train], [r.loss for r in train]))
    panels = sorted(curves)
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(6 * max(1, len(panels)), 4), squeeze=False)
    for ax, metric in zip(axes[0], panels):
        for run, xs, ys in curves[metric]:
            backward = run.direction == "backward"
            ax.plot(xs, ys, "--" if backward else "-", color=colours[run.variant],
                    label=None if backward else run.variant)
        ax.set_xlabel("training tokens")
        ax.set_ylabel(metric_class(metric).training_loss_label)
        ax.set_title(f"LMs evaluated by {metric}")
        _readable_x(ax)
        ax.legend(fontsize=7, title="solid: forward, dashed: backward", title_fontsize=7)
    fig.tight_layout()
    with atomic_path(output) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def all_figures(heldout_paths: Iterable[str | Path], bench_path: str | Path | None, out_dir: str | Path) -> list[Path]:
    """Every figure into ``out_dir``: heldout_curves, speed_table4, speed_table5, memory_s2."""
    from elmoc.records import read_json

    out_dir = Path(out_dir)
    runs = read_lm_runs(heldout_paths)
    bench = read_json(bench_path) if bench_path and Path(bench_path).exists() else None
    out = heldout_curves(runs, out_dir / "heldout_curves")
    out += speed_bars(bench, out_dir / "speed_table4", out_dir / "speed_table5")
    out += memory_vs_batch(bench, out_dir / "memory_s2")
    return out

