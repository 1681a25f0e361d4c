"""Tables 4 and 5 of the paper (speed), from the bench JSON of ``elmoc bench``, ours beside
the paper's; a missing bench file gives the paper's columns and gaps for ours."""
from __future__ import annotations

from elmoc.tables import paper
from elmoc.tables.cells import DAGGER, count
from elmoc.tables.render import Table


def _bench_caption(bench: dict | None) -> str:
    """The bench's setting in one sentence (device, threads, scales, budget, processes)."""
    if not bench:
        return "Ours: no bench results (run `elmoc bench`, or set bench.enabled); every cell of ours is a gap."
    s = bench.get("settings", {})
    return (f"Ours: device {s.get('device', '?')}, {s.get('threads', '?')} thread(s), widths ×{s.get('width_scale', 1):g}, "
            f"vocabularies ×{s.get('vocab_scale', 1):g}, memory budget {s.get('memory_budget_mb', 0):.0f} MB, "
            f"{s.get('world', '?')} data-parallel processes{' (quick run)' if s.get('quick') else ''}. "
            "Paper: GPUs at full size.")


def table5_protocol_info(result: dict) -> dict:
    """The protocol Table 5 was measured under: ``name``, ``label`` (a sentence), ``short``.
    Results of benches before the protocol was recorded were timed at the fixed batch."""
    if result.get("table5_protocol"):
        return result["table5_protocol"]
    s = result.get("settings", {})
    return {"name": "fixed", "processes": 1, "short": f"fixed batch {s.get('table5_batch')}, 1 process",
            "label": (f"fixed-batch protocol (CPU fallback, not the paper's S3): one process, batch "
                      f"{s.get('table5_batch')} x 20 tokens (GPT: the same tokens at length {s.get('gpt_length')})")}


def bench_differs(bench: dict | None) -> bool:
    """Whether the bench ran below the paper's setting (scaled widths/vocabularies or not on CUDA)."""
    s = (bench or {}).get("settings", {})
    return bool(bench) and (s.get("width_scale", 1) != 1 or s.get("vocab_scale", 1) != 1 or s.get("device") != "cuda")


def table4(bench: dict | None) -> Table:
    """Table 4: output layers on the ELMo encoder (params, max batch, S1/S2/S3)."""
    rows_by = {r["label"]: r for r in (bench or {}).get("table4", [])}
    mark = f" {DAGGER}" if bench_differs(bench) else ""
    columns = ["Layer", "Params (paper size)", "Params (paper)", "Max batch", "Max batch (paper)",
               "S1", "S1 (paper)", "S2", "S2 (paper)", "S3", "S3 (paper)"]
    rows = []
    for label, (p_params, p_batch, p1, p2, p3) in paper.TABLE4.items():
        r = rows_by.get(label)
        base = label == "CONT"
        pap = [f"{v}s" if base else f"{v}x" for v in (p1, p2, p3)]
        if r is None:
            ours = [None] * 5
        else:
            if base:
                s = [f"{r['s1_step_s']:.3f}s" if r.get("s1_step_s") else None,
                     f"{r['s2_s_per_mwords']:.1f}s" if r.get("s2_s_per_mwords") else None,
                     f"{r['s3_s_per_mwords']:.1f}s" if r.get("s3_s_per_mwords") else None]
            else:
                s = [f"{r[k]:.2f}x" if r.get(k) else None for k in ("s1_ratio", "s2_ratio", "s3_ratio")]
            s = [None if x is None else x + mark for x in s]
            ours = [count(r.get("params_paper_size")), (f"{r['max_batch']}{mark}" if r.get("max_batch") else None)] + s
        rows.append([label, ours[0], p_params, ours[1], str(p_batch), ours[2], pap[0], ours[3], pap[1], ours[4], pap[2]])
    notes = ["S1: batch 1, seconds per step; S2: the largest batch that fits the memory budget, seconds per 1M "
             "words; S3: data-parallel processes at that batch, per 1M words. CONT in seconds, other layers as "
             "ratios to CONT (higher = slower than CONT).",
             f"{DAGGER} measured at reduced widths/vocabularies and/or on CPU (caption); ratios, not absolute "
             "times, are what compares with the paper. A gap (—) was not measured."]
    return Table("table4_speed", "Table 4: output layers on the ELMo encoder, ours beside the paper's",
                 _bench_caption(bench), columns, rows, notes, paper_of=_paper_of(columns))


def table5_differs(bench: dict | None) -> bool:
    """Whether Table 5 ran below the paper's setting: scaled or not on CUDA (:func:`bench_differs`),
    or not under the paper's protocol (S3 on 4 GPUs at the maximal batch)."""
    proto = table5_protocol_info(bench or {})
    return bool(bench) and (bench_differs(bench) or proto["name"] != "s3" or proto.get("processes") != 4)


def _table5_caption(bench: dict | None) -> str:
    if not bench:
        return _bench_caption(bench)
    return _bench_caption(bench) + f" Table 5 protocol: {table5_protocol_info(bench)['label']}."


def table5(bench: dict | None) -> Table:
    """Table 5: seconds per 1M words of each encoder x output layer (ratios to CONT), with
    the protocol it was measured under in the caption and title."""
    by = {(r["encoder"], r["layer"]): r for r in (bench or {}).get("table5", [])}
    mark = f" {DAGGER}" if table5_differs(bench) else ""
    columns = ["Layer"]
    for e in paper.TABLE5_ENCODERS:
        columns += [e, f"{e} (paper)"]
    rows = []
    for layer, ref in paper.TABLE5.items():
        row: list[str | None] = [layer]
        for e in paper.TABLE5_ENCODERS:
            r = by.get((e, layer))
            p = ref[e]
            if r is not None and r.get("oom"):
                ours = f"OOM{mark}"
            elif layer == "CONT":
                ours = None if r is None or r.get("s_per_mwords") is None else f"{r['s_per_mwords']:.1f}s{mark}"
            else:
                ours = None if r is None or r.get("ratio") is None else f"{r['ratio']:.2f}x{mark}"
            pap = "OOM" if p is None else (f"{p}s" if layer == "CONT" else f"{p}x")
            row += [ours, pap]
        rows.append(row)
    notes = ["CONT: seconds per 1M words; other layers: ratio to CONT on the same encoder. ADAPTIVE and SAMPLED "
             "at the 800K vocabulary (scaled as in the caption). The paper's protocol (section 5.2.2): four GPUs, "
             "the maximal batch size (S3); OOM: out of memory even at the smallest batch (batch 1 here).",
             f"{DAGGER} measured at reduced widths/vocabularies, not on CUDA, or not under the paper's protocol "
             "(caption). A gap (—) was not measured."]
    title = "Table 5: encoders × output layers, ours beside the paper's"
    if bench:
        title += f" (ours: {table5_protocol_info(bench)['short']})"
    return Table("table5_speed", title, _table5_caption(bench), columns, rows, notes, paper_of=_paper_of(columns))


def _paper_of(columns: list[str]) -> dict[str, str]:
    """``{"X (paper)": "X"}`` for the paper columns whose column of ours is ``X`` (``Table.paper_of``)."""
    return {c: c[:-len(" (paper)")] for c in columns if c.endswith(" (paper)") and c[:-len(" (paper)")] in columns}
