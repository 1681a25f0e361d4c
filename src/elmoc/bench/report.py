"""Bench results -> Markdown and CSV tables, our figures beside the paper's."""
from __future__ import annotations

import csv
import io

from elmoc.bench.scenarios import ENCODERS, OUTPUT_LAYERS
from elmoc.tables import paper
from elmoc.tables.speed import table5_protocol_info


def _num(x, fmt="{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _ratio(x) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _params(n: int) -> str:
    return f"{n / 1e6:.0f}M" if n >= 1e6 else f"{n / 1e3:.0f}K"


def _s1_env(rows: list[dict]) -> str:
    env = rows[0].get("s1_environment") if rows else None
    if not env:
        return ""
    return " S1 in a process of its own with " + ", ".join(f"{k}={v}" for k, v in env.items()) + "."


def table4_markdown(rows: list[dict], settings: dict) -> str:
    head = ("| Layer | Params (paper size) | Params (run) | Max batch | S1 | S2 | S3 | paper S1 | paper S2 | paper S3 |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for i, r in enumerate(rows):
        p = paper.TABLE4.get(r["label"], ("?", None, None, None, None))
        if i == 0:
            s1 = _num(r["s1_step_s"] and r["s1_step_s"] * 1e3, "{:.1f} ms/step")
            s2 = _num(r["s2_s_per_mwords"], "{:.1f} s")
            s3 = _num(r["s3_s_per_mwords"], "{:.1f} s")
            ps = (f"{p[2]}s", f"{p[3]}s", f"{p[4]}s")
        else:
            s1, s2, s3 = _ratio(r["s1_ratio"]), _ratio(r["s2_ratio"]), _ratio(r["s3_ratio"])
            ps = tuple(f"{v}x" for v in p[2:])
        lines.append(f"| {r['label']} | {_params(r['params_paper_size'])} (paper {p[0]}) | "
                     f"{_params(r['params_scaled'])} | {_num(r['max_batch'], '{}')} (paper {p[1]}) | {s1} | {s2} | {s3} | "
                     f"{ps[0]} | {ps[1]} | {ps[2]} |")
    note = (f"\nS1: batch 1, time per step. S2: largest batch under {settings['memory_budget_mb']:.0f} MB "
            f"(measured peak), seconds per 1M words. S3: {settings['world']} data-parallel processes "
            f"({'gloo on CPU' if settings['device'] == 'cpu' else 'NCCL'}), per 1M words. Widths x"
            f"{settings['width_scale']:g}, vocabularies x{settings['vocab_scale']:g}; "
            f"device {settings['device']}, {settings['threads']} thread(s).{_s1_env(rows)}\n")
    return "## Table 4: output layers on the ELMo encoder\n\n" + head + "\n".join(lines) + "\n" + note


def table5_markdown(rows: list[dict], settings: dict, protocol: dict) -> str:
    by = {(r["encoder"], r["layer"]): r for r in rows}
    encoders = [e for e in ENCODERS if any(k[0] == e for k in by)]
    head = "| Layer | " + " | ".join(encoders) + " |\n|---|" + "---|" * len(encoders) + "\n"
    lines, batches = [], []
    for layer in OUTPUT_LAYERS:
        cells, batch_cells = [], []
        for e in encoders:
            r = by.get((e, layer))
            ref = paper.TABLE5[layer][e]
            theirs = "OOM" if ref is None else (f"{ref}s" if layer == "CONT" else f"{ref}x")
            if r is None:
                cells.append("-")
            elif r.get("oom"):
                cells.append(f"OOM (paper {theirs})")
            elif layer == "CONT":
                cells.append(f"{r['s_per_mwords']:.1f}s (paper {theirs})")
            else:
                cells.append(f"{_ratio(r['ratio'])} (paper {theirs})")
            batch_cells.append("-" if r is None else ("OOM" if r.get("oom") else str(r["batch"])))
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
        batches.append(f"| {layer} | " + " | ".join(batch_cells) + " |")
    note = (f"\nProtocol: {protocol['label']}. Seconds per 1M words for CONT, ratio to CONT otherwise; ADAPTIVE and "
            f"SAMPLED at the 800K vocabulary (scaled). Widths x{settings['width_scale']:g}, vocabularies "
            f"x{settings['vocab_scale']:g}.\n")
    text = f"## Table 5: encoders x output layers ({protocol['short']})\n\n" + head + "\n".join(lines) + "\n" + note
    if any(r.get("protocol") == "s3" for r in rows):
        text += "\nBatch per process (sequences; the largest that fits):\n\n" + head + "\n".join(batches) + "\n"
    return text


def lstm_markdown(rows: list[dict], cont_vocab: dict | None, time_loop: str | None = None) -> str:
    head = ("| batch x time, cell/proj | optimized fwd+bwd | per-step reference | speedup | CONT step | "
            "CONT layer+loss | share of step | MFU (CONT step) | matmul peak |\n|---|---|---|---|---|---|---|---|---|\n")
    lines = [f"| {r['batch']}x{r['time']}, {r['cell']}/{r['projection']} | {r['fast_ms']:.1f} ms | "
             f"{r['reference_ms']:.1f} ms | {r['speedup']:.2f}x | {r['cont_step_ms']:.1f} ms | "
             f"{r['cont_layer_ms']:.2f} ms | {100 * r['cont_share']:.1f}% | {100 * r['mfu']:.0f}% | "
             f"{r['matmul_peak_gflops']:.0f} GFLOP/s |"
             for r in rows]
    text = "## ELMo LSTM kernel\n\n" + head + "\n".join(lines) + "\n"
    if time_loop:
        text += f"\nOptimized encoder's time loop: {time_loop}.\n"
    if cont_vocab:
        text += (f"\nCONT step at the 2000K vocabulary ({cont_vocab['vocab_2000k']} rows) over 40K "
                 f"({cont_vocab['vocab_40k']} rows), batch {cont_vocab['batch']}: median of "
                 f"{cont_vocab['pairs']} paired ratios {cont_vocab['ratio']:.3f} (interquartile "
                 f"{cont_vocab['ratio_q1']:.3f}-{cont_vocab['ratio_q3']:.3f}); median steps "
                 f"{cont_vocab['step_2000k_ms']:.1f} / {cont_vocab['step_40k_ms']:.1f} ms\n")
    return text


def to_markdown(result: dict) -> str:
    parts = []
    if "table4" in result:
        parts.append(table4_markdown(result["table4"], result["settings"]))
    if "table5" in result:
        parts.append(table5_markdown(result["table5"], result["settings"], table5_protocol_info(result)))
    if "lstm" in result:
        parts.append(lstm_markdown(result["lstm"], result.get("cont_vocab"), result.get("lstm_time_loop")))
    return "\n".join(parts)


def rows_to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return buf.getvalue()
