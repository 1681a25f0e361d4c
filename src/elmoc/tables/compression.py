"""The compression table (issue 36.4): an original model and its smaller versions (float16,
bfloat16 and int8 copies, distilled students, pruned models, the lottery ticket and its
control) on one table, each measured the same way: parameters, size on disk, embedding
tokens/s side by side (:mod:`elmoc.pretrained.side_by_side`), mean cosine to the original per
layer, the heldout metric and downstream scores (mean and spread over seeds), plus a figure
of size and speed against the downstream score.

Everything arrives as a JSON-ready ``summary`` (written by ``elmoc compression-table``):
``rows``, one record per role in :func:`role_order`; each with the side-by-side record, a
``heldout`` entry and ``downstream[task]`` = ``{"metric", "test": {seed: score}, "dev": ...}``.
"""
from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

from elmoc.config import declared_values
from elmoc.errors import ConfigError
from elmoc.tables.render import Table

# role name -> its group; the groups' rows follow each other in GROUP_ORDER.  A compressed copy's
# role is its format's name and its group the format's `table_group` (elmoc.pretrained.formats),
# read from the registered formats' sources (elmoc.config.declared_values); a group no built-in
# format has comes right after "quantized".
GROUP_ORDER = ("original", "cast", "quantized", "distilled", "pruned", "ticket")
ROLE_GROUPS = (
    ("original", re.compile(r"original")),
    ("distilled", re.compile(r"student(-[\w.-]+)?")),
    ("pruned", re.compile(r"pruned-[\w.-]+")),
    ("ticket", re.compile(r"ticket(-control)?")),
)


def format_groups() -> dict[str, str]:
    """Compressed format (a copy's role) -> its group of rows."""
    return {name: group or "compressed" for name, group in declared_values("compression", "table_group").items()}


def roles_help() -> str:
    """The role names a table accepts, for messages."""
    return ", ".join(["original", *format_groups(), "student[-NAME]", "pruned-LEVEL", "ticket", "ticket-control"])


def role_group(role: str) -> str:
    """The group of a role name (``pruned-0.8`` -> ``pruned``, ``int8`` -> ``quantized``); a name of
    no group is one :class:`ConfigError` line listing the accepted names."""
    copies = format_groups()
    if role in copies:
        return copies[role]
    for group, pattern in ROLE_GROUPS:
        if pattern.fullmatch(role):
            return group
    raise ConfigError(f"model role {role!r} is not one of: {roles_help()}; name the directory's role by one of them")


def is_copy(role: str) -> bool:
    """Whether ``role`` is a compressed copy of the original (its heldout metric is the original's)."""
    return role in format_groups()


def role_order(roles: list[str]) -> list[str]:
    """Roles grouped as :data:`GROUP_ORDER` (another format's group right after "quantized"),
    each group's roles in name order."""
    def rank(role: str) -> float:
        group = role_group(role)
        return GROUP_ORDER.index(group) if group in GROUP_ORDER else GROUP_ORDER.index("quantized") + 0.5

    return sorted(roles, key=lambda r: (rank(r), r))


def spread(scores: dict[Any, float]) -> dict[str, Any]:
    """``{"mean", "sd", "n", "min", "max"}`` of seed scores (``sd``: sample standard deviation,
    None for one seed)."""
    values = [float(v) for v in scores.values() if v is not None]
    if not values:
        return {"mean": None, "sd": None, "n": 0, "min": None, "max": None}
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else None,
            "n": len(values), "min": min(values), "max": max(values)}


def _pct(value: float | None) -> str | None:
    return None if value is None else f"{100 * value:.1f}"


def _downstream_cell(entry: dict | None, original: dict | None, seeds: list) -> str | None:
    if not entry or not entry.get("test"):
        return None
    s = spread(entry["test"])
    if s["mean"] is None:
        return None
    text = _pct(s["mean"]) + (f" ± {100 * s['sd']:.1f}" if s["sd"] is not None else "")
    if sorted(map(str, entry["test"])) != sorted(map(str, seeds)):
        text += " [seed " + ", ".join(sorted(map(str, entry["test"]))) + "]"
    if original and original is not entry and original.get("test"):
        base = spread(original["test"])["mean"]
        if base is not None:
            text += f" ({100 * (s['mean'] - base):+.1f})"
    return text


def _params(record: dict) -> str:
    text = f"{record['parameters'] / 1e6:.3g}M"
    if record["nonzero"] < record["parameters"]:
        text += f" ({record['nonzero'] / 1e6:.3g}M ≠ 0)"
    return text


def build_table(summary: dict[str, Any], name: str = "compression") -> Table:
    """The rendered table of a ``summary`` (module docstring): one row per role."""
    rows = {r["role"]: r for r in summary["rows"]}
    tasks = list(summary.get("tasks") or [])
    metric = next((r["heldout"]["metric"] for r in rows.values() if (r.get("heldout") or {}).get("metric")), None)
    original = rows.get("original") or {}
    columns = ["model", "parameters", "weights MB", "directory MB (×)", "tokens/s (×)",
               "mean cosine to the original, per layer", f"heldout {metric or 'metric'}"]
    columns += [f"{t} test, mean ± sd ({summary['task_metrics'].get(t, 'score')}, Δ)" for t in tasks]
    table_rows = []
    for role in role_order(list(rows)):
        r = rows[role]
        cosine = (", ".join(f"{c:.4f}" for c in r["mean_cosine"]) if r.get("mean_cosine") else None)
        if cosine and r.get("layer_pairs") and any(a != b for a, b in r["layer_pairs"]):
            cosine += " (layers " + ", ".join(f"{a}↔{b}" for a, b in r["layer_pairs"]) + ")"
        held = r.get("heldout") or {}
        held_text = None if held.get("value") is None else f"{held['value']:.4f}" + ("†" if held.get("inherited") else "")
        row = [role, _params(r), f"{r['weights_bytes'] / 1e6:.2f}",
               f"{r['size_bytes'] / 1e6:.1f} ({r['size_bytes'] / original.get('size_bytes', r['size_bytes']):.2f}×)",
               f"{r['tokens_per_s']:.0f} ({r['speed_ratio']:.2f}×)", cosine, held_text]
        row += [_downstream_cell((r.get("downstream") or {}).get(t), (original.get("downstream") or {}).get(t),
                                 summary.get("seeds", [])) for t in tasks]
        table_rows.append(row)
    m = summary["measured"]
    notes = [
        f"tokens/s: `elmoc embed`'s batching in one process, {m['sentences']} sentences ({m['tokens']} tokens) "
        f"of `{Path(m['sentences_file']).name}`, batch {m['batch_size']}, {m['threads']} torch thread(s); every model "
        f"timed in the same {m['rounds']} rounds (order rotated), fastest pass of each; load average "
        f"{', '.join(f'{x:.2f}' for x in m['load_average'])} on {m['machine']}.",
        "directory MB: every file of the model directory (frozen tables and OOV buckets included); "
        "weights MB: the stacks' weights files alone; parameters: their values (frozen tables not counted), "
        "≠ 0: those a pruned model keeps.",
        "mean cosine: per layer (input view first), over every token of those sentences; a model of other "
        "depth is paired layer to layer as shown, one of other width has none (—).",
        "heldout: " + summary.get("heldout_note", "the recorded value of each model's own training run(s)") + ".",
    ]
    if any((r.get("heldout") or {}).get("inherited") for r in rows.values()):
        notes.append("† the original's run: the copy was compressed after training and a model directory holds "
                     "no output layer to evaluate it again.")
    if tasks:
        notes.append(f"downstream: the task trained on each model's features (`elmoc task`, seeds "
                     f"{', '.join(map(str, summary.get('seeds', [])))}), test score in %, mean ± sample sd over "
                     "seeds, Δ: difference of the means to the original's.")
    return Table(name=name, title="Smaller models from one trained model, measured the same way",
                 caption=f"Original: `{summary['original']}`; {summary['date']}.", columns=columns,
                 rows=table_rows, notes=notes)


def draw_figure(summary: dict[str, Any], stem: str | Path) -> list[Path]:
    """Size on disk and tokens/s (x) against each task's mean test score (y, ± sd), one
    point per model; ``stem``.png and .pdf.  Without downstream scores the y axis is the
    mean cosine of the top layer."""
    from elmoc.tables.plot import _pyplot, _save

    plt = _pyplot()
    tasks = list(summary.get("tasks") or [])
    rows = summary["rows"]
    fig, axes = plt.subplots(max(1, len(tasks)), 2, figsize=(10, 3.6 * max(1, len(tasks))), squeeze=False)
    for i, task in enumerate(tasks or [None]):
        for ax, key, label in ((axes[i][0], "weights_bytes", "weights on disk (MB)"),
                               (axes[i][1], "tokens_per_s", "embedding tokens/s")):
            for r in rows:
                if task is None:
                    y, err = (r["mean_cosine"][-1] if r.get("mean_cosine") else None), None
                else:
                    s = spread(((r.get("downstream") or {}).get(task) or {}).get("test") or {})
                    y, err = (None if s["mean"] is None else 100 * s["mean"]), (100 * s["sd"] if s["sd"] else None)
                if y is None:
                    continue
                x = r[key] / 1e6 if key == "weights_bytes" else r[key]
                ax.errorbar([x], [y], yerr=None if err is None else [err], fmt="o", capsize=3)
                ax.annotate(r["role"], (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
            base = next((r for r in rows if r["role"] == "original"), None)
            if task and base:
                mean = spread(((base.get("downstream") or {}).get(task) or {}).get("test") or {})["mean"]
                if mean is not None:
                    ax.axhline(100 * mean, color="grey", linestyle="--", linewidth=0.8)
            ax.set_xlabel(label)
            ax.set_ylabel(f"{task} test (%)" if task else "top-layer mean cosine to the original")
            ax.grid(alpha=0.3)
    fig.suptitle("Smaller models: size and speed against the downstream score", fontsize=10)
    fig.tight_layout()
    return _save(fig, stem)
