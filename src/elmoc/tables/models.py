"""Tables 2 and 3 of the paper, one row per model, ours beside the paper's.

Table 2: FastText_CC, ELMo, ELMo-A, ELMo-Sub, ELMo-C with training time, batch and
parameters before the downstream scores; Table 3: the ELMo-C ablations' scores.  Both
take the typed runs of :mod:`elmoc.tables.runs` and return a
:class:`~elmoc.tables.render.Table`.  A cell ``†`` marks a number whose setting differs
from the paper's (scale, sizes, hardware); the notes under each table say how.
"""
from __future__ import annotations

import pandas as pd

from elmoc.tables import paper
from elmoc.tables.cells import (DAGGER, count, duration, paper_columns, score_cell, score_cells, task_columns,
                               task_order)
from elmoc.tables.render import Table
from elmoc.tables.runs import LMRun, by_variant, variant_heldout, variant_params, variant_seconds


def scale_caption(lm_runs: list[LMRun], task_runs: pd.DataFrame) -> str:
    """Our run's scale in one sentence: corpus tokens, model sizes, hardware, seeds."""
    parts = []
    tokens = {}
    for r in lm_runs:
        if r.tokens and r.setting.epochs:
            tokens[r.variant] = r.tokens / r.setting.epochs
    if tokens:
        lo, hi = min(tokens.values()), max(tokens.values())
        span = count(lo) if count(lo) == count(hi) else f"{count(lo)}-{count(hi)}"
        parts.append(f"pretraining corpus ≈{span} tokens per epoch")
    sizes = sorted({(r.setting.cell_size, r.setting.projection_size) for r in lm_runs if r.setting.cell_size})
    if sizes:
        parts.append("LSTM cell/projection " + ", ".join(f"{c}/{p}" for c, p in sizes))
    hw = sorted({f"{r.record.device}, {r.record.threads} thread(s)" if r.record.threads else r.record.device
                 for r in lm_runs})
    if hw:
        parts.append("trained on " + "; ".join(hw))
    if not task_runs.empty:
        seeds = sorted({int(s) for s in task_runs.seed.dropna()})
        scales = sorted(set(task_runs.scale.dropna()))
        if seeds:
            parts.append(f"downstream seeds {', '.join(map(str, seeds))} (scale: {', '.join(scales)})")
    if not parts:
        return "Ours: no results yet (every cell of ours is a gap)."
    return "Ours: " + "; ".join(parts) + f". Paper: {paper.PAPER_SCALE['corpus']}; {paper.PAPER_SCALE['model']}."


def heldout_caption(lm_runs: list[LMRun]) -> str:
    """Our heldout perplexities beside the paper's (section 4.1: ELMo-A 35.8, ELMo 39.7 on the
    benchmark's held-out data), for Table 2's caption; a gap where a variant has no perplexity
    (not trained, or the released ELMo, whose softmax is not part of the release)."""
    lms = by_variant(lm_runs)
    parts = []
    for v, value in paper.HELDOUT_PERPLEXITY.items():
        metric, ours = variant_heldout(lms.get(v, []))
        cell = f"{ours:.1f}" if metric == "perplexity" and ours is not None else "—"
        if cell != "—" and _setting_differs(lms[v]):
            cell += f" {DAGGER}"
        parts.append(f"{paper.PAPER_LABELS[v]} {cell} (paper {value:g})")
    return ("Heldout perplexity on the corpus's heldout set (the paper's, section 4.1: the benchmark's held-out "
            "data, which config/paper.yaml reads as corpus.heldout_sources, news.en.heldout-00000-of-00050): "
            + "; ".join(parts) + ".")


def _setting_differs(runs: list[LMRun]) -> bool:
    """Whether a variant's LM differs from the paper's size (cell 4096, projection 512)."""
    return any(r.setting.cell_size not in (None, 4096) or r.setting.projection_size not in (None, 512) for r in runs)



def paper_global_batch(p: dict, joint: bool) -> int:
    """The paper's global batch of one training run (our ``train.batch_size``): per-GPU batch
    x the GPUs of the run -- all of them for a joint bi-LM, half for each separate direction
    (footnote 7's 2 + 2 split)."""
    return int(p["batch_per_gpu"] * (p["gpus"] if joint else max(1, p["gpus"] // 2)))


def table2(lm_runs: list[LMRun], task_runs: pd.DataFrame, majority: pd.DataFrame | None = None) -> Table:
    """Table 2: FastText_CC, ELMo, ELMo-A, ELMo-Sub, ELMo-C; time, batch, parameters, scores."""
    lms = by_variant(lm_runs)
    tasks = task_order(task_runs)
    columns = ["Model", "Time", "Time (paper)", "Batch", "Batch/GPU (paper)", "Params", "Params (paper)"]
    columns += task_columns(tasks)
    rows = []
    for v in paper.TABLE2_ROWS:
        p = paper.TABLE2_TRAINING.get(v)
        runs = lms.get(v, [])
        differs = _setting_differs(runs)
        seconds = variant_seconds(runs)
        time = duration(seconds)
        if time is not None:
            time += f" {DAGGER}"  # never the paper's hardware: see the note
        batches = sorted({r.setting.batch_size for r in runs} - {None})
        batch = "/".join(map(str, batches)) or None
        if batch and p and batches != [paper_global_batch(p, any(r.direction == "joint" for r in runs))]:
            batch += f" {DAGGER}"
        params = count(variant_params(runs))
        if params and differs:
            params += f" {DAGGER}"
        rows.append([paper.PAPER_LABELS[v], time, f"{p['days']:g} days × {p['gpus']} GPUs" if p else None,
                     batch, str(p["batch_per_gpu"]) if p else None, params, f"{p['params'] / 1e6:.0f}M" if p else None]
                    + score_cells(task_runs, v, tasks))
    if majority is not None and not majority.empty:
        row = ["majority class"] + [None] * 6
        for t in tasks:
            row += [score_cell(majority, "majority", t), None]
        rows.append(row)
    notes = [
        "Scores: test metric in % (SNLI accuracy, Coref average F1, SST-5 accuracy, NER F1, SRL span F1), "
        "mean±std over seeds (n runs). A gap (—) is a run that has not happened; a text cell is why a run could not.",
        "SRL (span F1): AllenNLP's span F1 over BIO spans without V, the value the paper printed; SRL (CoNLL-05 "
        "script): the official CoNLL-2005 scorer's argument F1 of the same runs (C-X pieces merged into their X, "
        "an argument right only if every piece is), which the paper's footnote 6 says is higher and the rest "
        "of the SRL literature reports; the paper gives no value for it.",
        f"{DAGGER} our setting differs from the paper's: scores at demo/cpu scale (data or model size), "
        "times on our hardware (caption), our batch (the global batch of a run) differs from the paper's "
        "per-GPU batch x the GPUs of a run (all of them for a joint bi-LM, half for each direction of a "
        "separate pair), "
        "parameters of our scaled-down models.",
        "Time: training wall time x processes (GPUs), both directions' runs added (a joint bi-LM: its one "
        "run), from each run's heldout.json, to compare with the paper's days x GPUs; Params: trainable parameters of both directions added (a joint bi-LM: its shared "
        "input and output layer once), counted from the model.",
    ]
    paper_of = {"Time (paper)": "Time", "Batch/GPU (paper)": "Batch", "Params (paper)": "Params", **paper_columns(tasks)}
    return Table("table2", "Table 2: the main models, ours beside the paper's",
                 scale_caption(lm_runs, task_runs) + " " + heldout_caption(lm_runs), columns, rows, notes,
                 paper_of=paper_of, html_lead=task_columns(tasks))


def table3(lm_runs: list[LMRun], task_runs: pd.DataFrame) -> Table:
    """Table 3: the ELMo-C ablations (input/output vector choices), then each opt-in row
    (:data:`~elmoc.tables.paper.TABLE3_OPT_IN_ROWS`: section 5.1's random input) whose variant
    has results (a pretraining run or a task run)."""
    tasks = task_order(task_runs)
    columns = ["Model"] + task_columns(tasks)
    ran = {r.variant for r in lm_runs} | (set(task_runs.variant) if not task_runs.empty else set())
    variants = list(paper.TABLE3_ROWS) + [v for v in paper.TABLE3_OPT_IN_ROWS if v in ran]
    rows = [[paper.PAPER_LABELS.get(v, v)] + score_cells(task_runs, v, tasks) for v in variants]
    notes = ["Rows: ELMo-C with other input/output vectors (-ONEB: FastText on 1B Word; -RND: random output "
             "vectors; -CNN: ELMo's trained char-CNN vectors on both sides; -CNN-CC / -CC-CNN: CNN input with "
             "FastText output, and the reverse).",
             f"{DAGGER} our scores are at demo/cpu scale, not comparable with the paper's. A gap (—) is a run that "
             "has not happened.",
             "SRL (span F1): AllenNLP's span F1, the paper's value; SRL (CoNLL-05 script): the official CoNLL-2005 "
             "scorer's argument F1 of the same runs (no paper value)."]
    if "elmo-c-rnd-input" in variants:
        notes.append("-RND-INPUT (opt-in, pretrain.extra_variants: [elmo-c-rnd-input]): ELMo-C with a randomly "
                     "initialized (N(0, 1)) input embedding, trained with the LM unless the run set input.trainable: "
                     "false, instead of FastText-CC (output as ELMo-C's); not in the paper's Table 3: "
                     "section 5.1 calls it unstable and gives SNLI only (85.8), its other paper cells are gaps.")
    return Table("table3", "Table 3: ELMo-C variants, ours beside the paper's",
                 scale_caption(lm_runs, task_runs), columns, rows, notes, paper_of=paper_columns(tasks))
