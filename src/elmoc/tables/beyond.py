"""The table beyond the paper (``beyond``): each encoder x output layer that the paper timed
(Table 5) or named (masked LMs) but never trained and scored, with the ELMo LSTM's rows for
reference.

One row per pretraining variant that :func:`elmoc.tables.families.classify` places: encoder
and its size, output layer, trainable parameters, training tokens/s of the runs and their
time relative to the CONT row of the same encoder and size, the ``elmoc bench`` Table 5
figure of that encoder x output beside the paper's, the heldout metric, and the downstream
scores.  Reads the runs of :mod:`elmoc.tables.runs` (whatever runs a variant has: forward +
backward, joint, or a masked LM's one run) and each variant's ``spec.yaml`` beside them;
returns a :class:`~elmoc.tables.render.Table` that :func:`elmoc.tables.render.write` writes
like Tables 2-5.  A cell with nothing measured is a gap (``—``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from elmoc.outputs.heldout import metric_class
from elmoc.tables import paper
from elmoc.tables.cells import DAGGER, count, score_cell, task_order
from elmoc.tables.families import CONT, Family, classify
from elmoc.tables.render import Table
from elmoc.tables.runs import (LMRun, by_variant, read_spec_file, variant_constant_baseline, variant_heldout,
                               variant_params, variant_tokens_per_second)
from elmoc.tables.speed import table5_differs, table5_protocol_info

NAME = "beyond"
TITLE = "Beyond the paper: encoders × output layers, trained and scored"
FIXED_COLUMNS = ["Encoder", "Size", "Output", "Variant", "Params", "Train tokens/s", "Run × CONT",
                 "Bench", "Bench (paper)", "Heldout metric", "Heldout"]


def read_spec(run: LMRun) -> dict[str, Any] | None:
    """The variant's ``spec.yaml`` beside its run folders (``elmoc spec``), or ``None`` if absent."""
    return read_spec_file(Path(run.record.path).parent.parent / "spec.yaml")


def heldout_cell(metric: str | None, value: float | None, constant: float | None = None) -> str | None:
    """A value as its metric's class prints it (:func:`elmoc.outputs.heldout.metric_class`: a
    cosine to 4 decimals, a perplexity to 1), with its constant-prediction baseline beside it
    when it has one (a cosine); ``None`` stays a gap."""
    if value is None:
        return None
    fmt = metric_class(metric).value_format
    return fmt.format(value) + ("" if constant is None else f" (constant {fmt.format(constant)})")


def bench_cells(bench: dict | None, family: Family) -> tuple[str | None, str | None]:
    """(ours, the paper's) Table 5 cell of the family's encoder x output: CONT in seconds per 1M
    words, the others as a ratio to CONT; a gap where the bench has no such row or the paper
    none (MLM, other sizes), ``OOM`` where the paper's ran out of memory."""
    row = next((r for r in (bench or {}).get("table5", [])
                if r.get("encoder") == family.encoder and r.get("layer") == family.output), None)
    mark = f" {DAGGER}" if table5_differs(bench) else ""
    ours = None
    if row is not None:
        if row.get("oom"):
            ours = f"OOM{mark}"
        elif family.output == "CONT" and row.get("s_per_mwords") is not None:
            ours = f"{row['s_per_mwords']:.1f}s{mark}"
        elif family.output != "CONT" and row.get("ratio") is not None:
            ours = f"{row['ratio']:.2f}x{mark}"
    ref = paper.TABLE5.get(family.output, {})
    if family.encoder not in ref:
        return ours, None
    value = ref[family.encoder]
    return ours, ("OOM" if value is None else f"{value}s" if family.output == "CONT" else f"{value}x")


def _bench_sentence(bench: dict | None) -> str:
    """The bench's own setting: its models are Table 5's sizes scaled, not this run's sizes."""
    if not bench:
        return " No bench results (bench.enabled: false or not run): the Bench column is a gap."
    s = bench.get("settings", {})
    return (f" Bench: Table 5's encoders at widths ×{s.get('width_scale', 1):g} and vocabularies "
            f"×{s.get('vocab_scale', 1):g} on {s.get('device', '?')} (its own sizes, not this run's), "
            f"{table5_protocol_info(bench)['short']}.")


def _caption(lm_runs: list[LMRun], rows: int, unplaced: list[str], bench: dict | None) -> str:
    if not rows:
        text = ("No beyond-paper variant among the runs given (no Transformer or masked-LM variant in "
                "pretrain.variants; docs/beyond-paper.md says how to enable them).")
    else:
        hw = sorted({f"{r.record.device} × {r.processes} process(es)" for r in lm_runs})
        text = ("Each Transformer, masked-LM and light pre-training (TUPE, TNF) variant of this run, by encoder "
                "and output layer, with the ELMo "
                "LSTM's rows of this run for reference. Runs trained on " + "; ".join(hw) + "."
                + _bench_sentence(bench))
    if unplaced:
        text += f" Not placed (no spec.yaml beside their runs): {', '.join(unplaced)}."
    return text


NOTES = [
    "Encoder: MLM = masked LM (train.objective: masked_lm), TRANS BASE / TRANS LARGE = causal Transformer "
    "bi-LMs (forward + backward), GPT = one forward causal Transformer LM (uni-directional, as the paper's GPT; "
    "train.directions: forward), named for Table 5's sizes (from the preset's name, else the sizes), ELMO = the paper's LSTM "
    "(reference rows: ELMo-C and this run's softmax variants); Size: layers × width, sequence length of training. "
    "\"+ TUPE\", \"+ TNF\": a light pre-training method on (issue 35; named by the class reading its option: "
    "untied positions of the Transformer, notes for rare words; docs/beyond-paper.md), any encoder's such row "
    "being a variant beyond the paper.",
    "Params: trainable parameters counted from the model (both directions added; a joint bi-LM, a masked LM or a "
    "one-direction LM: its one count). Train tokens/s: all runs' tokens over their training time (train_log.jsonl). Run × CONT: the CONT "
    "row's tokens/s over this row's, same encoder and size (time relative to CONT, Table 5's ratio measured on "
    "the training runs; > 1 = slower than CONT); a method's row is compared with the CONT row without the "
    "method where the run has one, so its ratio is the method's cost.",
    "Bench: `elmoc bench` Table 5 (CONT: seconds per 1M words; others: ratio to CONT; ADAPTIVE and SAMPLED at the "
    f"scaled 800K vocabulary; OOM: out of memory at batch 1), {DAGGER} when measured below paper size, not on CUDA "
    "or not under the paper's protocol (S3: 4 GPUs, maximal batch; the caption names ours); Bench (paper): "
    "Table 5's figure.",
    "Heldout: cosine (CONT outputs; higher is better) or perplexity (softmax; lower is better); a masked LM's "
    "over its masked positions; a cosine has the cosine of the best constant prediction on the same tokens "
    "beside it (\"constant\": the floor the model must beat).",
    f"Tasks: test score in %, mean±std over seeds (n runs); {DAGGER} demo/cpu scale. A gap (—) was not measured "
    "(no run record, no bench row, or no paper value: the paper trained none of these variants).",
]


def beyond_table(lm_runs: list[LMRun], task_runs: pd.DataFrame, bench: dict | None = None,
                 names: Mapping[str, str] | None = None) -> Table:
    """The table beyond the paper.

    Args:
        lm_runs: every pretraining run read (:func:`elmoc.tables.runs.read_lm_runs`).
        task_runs: the downstream long table (:func:`elmoc.tables.runs.read_task_runs`).
        bench: the ``elmoc bench`` JSON, or ``None`` (its columns are gaps).
        names: variant -> preset name (``pretrain.variants.<v>.preset``); a variant not in
            it is classified under its own name.
    """
    names = dict(names or {})
    placed: list[tuple[Family, str, list[LMRun]]] = []
    unplaced = []
    for variant, runs in by_variant(lm_runs).items():
        spec = read_spec(runs[0])
        if spec is None:
            unplaced.append(variant)
            continue
        family = classify(spec, names.get(variant, variant))
        if family is not None:
            placed.append((family, variant, runs))
    placed.sort(key=lambda p: (p[0].sort_key(), p[1]))
    if not any(not f.reference for f, _, _ in placed):
        placed = []  # reference rows alone answer nothing: the table says there is no variant
    variants = [v for _, v, _ in placed]
    tasks = task_order(task_runs[task_runs.variant.isin(variants)], only_seen=True) if not task_runs.empty else []
    speed = {v: variant_tokens_per_second(runs) for _, v, runs in placed}
    cont = {}
    for family, variant, _ in placed:
        if family.output == CONT and speed[variant]:  # the cosine layer, Table 5's CONT (not CONT-L2)
            cont.setdefault((family.encoder, family.size), speed[variant])
    rows = []
    for family, variant, runs in placed:
        tps, base = speed[variant], cont.get((family.encoder, family.size))
        ratio = None if not (tps and base) else f"{base / tps:.2f}x"
        metric, value = variant_heldout(runs)
        ours, ref = bench_cells(bench, family)
        rows.append([family.encoder_label, family.size, family.output, variant, count(variant_params(runs)),
                     None if not tps else f"{tps:,.0f}", ratio, ours, ref, metric,
                      heldout_cell(metric, value, variant_constant_baseline(runs))]
                    + [score_cell(task_runs, variant, t) for t in tasks])
    columns = FIXED_COLUMNS + [paper.TASK_LABELS.get(t, t) for t in tasks]
    return Table(NAME, TITLE, _caption([r for _, _, runs in placed for r in runs], len(rows), unplaced, bench),
                 columns, rows, NOTES)
