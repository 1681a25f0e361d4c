"""The demo's printed summary, and the majority-class baseline of a classification task.

:func:`summary_text` reads nothing but the run's own result files (``heldout.json``
+ ``train_log.jsonl`` of every LM direction, the downstream metrics JSONs, the
majority baselines): trainable parameters and training tokens/s of every variant
and their ratios to ELMo-C (the paper's claim in miniature), the heldout metric beside its
constant-prediction baseline (a cosine), each variant's one-line meaning, and each task's
scores beside the majority-class and FastText baselines, every difference with its seeds and
spread.
"""
from __future__ import annotations


import pandas as pd

from elmoc.outputs.heldout import metric_class
from elmoc.tables import paper
from elmoc.tables.runs import (LMRun, by_variant, variant_constant_baseline, variant_heldout, variant_params,
                               variant_seconds, variant_tokens_per_second)

REFERENCE = "elmo-c"
BASELINE = "fasttext"  # the static-vector baseline's variant name (the workflow's task runs)


def lm_summary(lm_runs: list[LMRun]) -> pd.DataFrame:
    """One row per variant: params, tokens/s, their ratios to ELMo-C, train time, heldout,
    its constant-prediction baseline (cosine) and the variant's one-line description."""
    rows = []
    for variant, runs in by_variant(lm_runs).items():
        metric, value = variant_heldout(runs)
        rows.append({"variant": variant, "params": variant_params(runs),
                     "tokens_per_s": variant_tokens_per_second(runs), "seconds": variant_seconds(runs),
                     "directions": "joint" if any(r.direction == "joint" for r in runs) else len(runs),
                     "metric": metric, "heldout": value, "constant": variant_constant_baseline(runs),
                     "description": next((r.setting.description for r in runs if r.setting.description), None)})
    df = pd.DataFrame(rows, columns=["variant", "params", "tokens_per_s", "seconds", "directions", "metric", "heldout",
                                     "constant", "description"])
    order = {v: i for i, v in enumerate(paper.PAPER_LABELS)}
    df = df.sort_values("variant", key=lambda s: s.map(lambda v: (order.get(v, len(order)), v))).reset_index(drop=True)
    ref = df[df.variant == REFERENCE]
    for col, ratio in (("params", "params_ratio"), ("tokens_per_s", "speed_ratio")):
        base = ref[col].iloc[0] if not ref.empty else None
        df[ratio] = [None if (base is None or pd.isna(base) or v is None or pd.isna(v)) else float(v) / float(base)
                     for v in df[col]]
    return df


def _num(v, fmt: str) -> str:
    return "—" if v is None or (isinstance(v, float) and pd.isna(v)) else fmt.format(v)


def summary_text(lm_runs: list[LMRun], task_runs: pd.DataFrame, majority: pd.DataFrame) -> str:
    lines = ["elmoc demo summary (every number measured in this run)", ""]
    df = lm_summary(lm_runs)
    if df.empty:
        lines.append("No pretrained LM yet.")
    else:
        lines.append(f"{'variant':<15} {'trainable params':>16} {'x ELMo-C':>9} {'train tok/s':>12} "
                     f"{'x ELMo-C':>9} {'train time':>10}  heldout")
        for r in df.itertuples():
            metric = r.metric or ""
            value_format = metric_class(r.metric).value_format
            held = _num(r.heldout, value_format)
            if r.constant is not None and not pd.isna(r.constant):
                beaten = r.heldout is not None and not pd.isna(r.heldout) and r.heldout > r.constant
                held += f" (constant {value_format.format(r.constant)}{'' if beaten else ', not beaten'})"
            lines.append(f"{r.variant:<15} {_num(r.params, '{:,.0f}'):>16} {_num(r.params_ratio, '{:.2f}x'):>9} "
                         f"{_num(r.tokens_per_s, '{:,.0f}'):>12} {_num(r.speed_ratio, '{:.2f}x'):>9} "
                         f"{_num(r.seconds, '{:.0f} s'):>10}  {metric} {held}"
                         + ("  (joint bi-LM)" if r.directions == "joint" else ""))
        lines += ["", "Params: trainable, both directions added; a joint bi-LM (one run) counts its "
                  "shared input and output layer once (ELMo-C's frozen FastText tables do not count). "
                  "tok/s: both directions' tokens over their training time, from train_log.jsonl. "
                  "Train time: both directions' runs added; a joint bi-LM's one run.",
                  f"Paper (Table 2): params ELMo {paper.TABLE2_TRAINING['elmo']['params'] / 1e6:.0f}M, "
                  f"ELMo-A {paper.TABLE2_TRAINING['elmo-a']['params'] / 1e6:.0f}M, ELMo-Sub "
                  f"{paper.TABLE2_TRAINING['elmo-sub']['params'] / 1e6:.0f}M, ELMo-C "
                  f"{paper.TABLE2_TRAINING['elmo-c']['params'] / 1e6:.0f}M; ELMo-C trains 4.2x faster than ELMo "
                  "(time x GPUs)."]
        if df.constant.notna().any():
            lines.append(CONSTANT_NOTE)
        described = [r for r in df.itertuples() if r.description]
        if described:
            lines += ["", "Variants:"] + [f"  {r.variant:<15} {r.description}" for r in described]
    lines.append("")
    tasks = list(dict.fromkeys(task_runs.task)) if not task_runs.empty else []
    if not tasks:
        lines.append("Downstream: no task in this config's tasks.run (the demo runs only tasks whose data lets the "
                     "FastText baseline clearly beat the majority class).")
    for task in tasks:
        sel = task_runs[(task_runs.task == task) & (task_runs.status == "ok")]
        if sel.empty:
            lines.append(f"Downstream {task}: {task_runs[task_runs.task == task].status.iloc[0]}")
            continue
        metric = sel.metric.iloc[0]
        named = ":" in task or any(t.startswith(f"{task}:") for t in tasks)  # a task scored two ways: say which
        title = f"{task} = {paper.TASK_LABELS.get(task, task)}" if named else task
        lines.append(f"Downstream {title} (test {metric}, %; mean ± std over n seeds; LM rows: points vs FastText "
                     "± the standard error of the difference):")
        maj = majority[majority.task == task] if not majority.empty else majority
        if not maj.empty and maj.test.notna().any():
            lines.append(f"  {'majority class':<15} {100 * float(maj.test.dropna().iloc[0]):6.2f}")
        for row in downstream_rows(sel).itertuples():
            std = f" ± {row.std:.2f}" if row.n > 1 else ""
            lines.append(f"  {row.variant:<15} {row.mean:6.2f}{std} (n={row.n}){_difference(row)}")
    return "\n".join(lines) + "\n"


CONSTANT_NOTE = (
    "constant: the heldout cosine of the best constant prediction (one vector for every token) on the same "
    "tokens, the floor a CONT model must beat (\"not beaten\": the model has learned no more than word "
    "frequencies yet). It depends on the target table: FastText vectors share a common direction (the constant "
    "reaches ~0.9 on a small corpus); the random N(0,1) vectors of ELMo-C-RND share none, so its constant and its "
    "cosine are low, set only by how often the most frequent words recur. Compare a cosine with its own "
    "constant, never across target tables.")


def _difference(row) -> str:
    """``  +1.33 ± 0.95 vs FastText (n=3 vs 3 seeds)``: the difference of means with the standard
    error of the difference (sqrt(s1²/n1 + s2²/n2)); with one seed on either side it says so."""
    if pd.isna(row.vs_fasttext):
        return ""
    if row.n < 2 or row.base_n < 2:
        return (f"  {row.vs_fasttext:+.2f} vs FastText (n={row.n} vs {row.base_n} seed(s): a single run has no "
                "spread; set tasks.seeds to several)")
    err = (row.std ** 2 / row.n + row.base_std ** 2 / row.base_n) ** 0.5
    return f"  {row.vs_fasttext:+.2f} ± {err:.2f} vs FastText (n={row.n} vs {row.base_n} seeds)"


def downstream_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """One task's ok runs -> per variant: mean and std (ddof 1) of the test score in %,
    n seeds, and ``vs_fasttext`` = mean - the FastText baseline's mean (NaN for the
    baseline itself or without it) with the baseline's ``base_std`` and ``base_n``.  The
    baseline comes first, then the paper's order."""
    scores = runs.assign(score=runs.test.astype(float) * 100).groupby("variant").score
    df = pd.DataFrame({"mean": scores.mean(), "std": scores.std(ddof=1), "n": scores.count()}).reset_index()
    base = df.loc[df.variant == BASELINE, "mean"]
    df["vs_fasttext"] = [float("nan") if (v == BASELINE or base.empty) else m - float(base.iloc[0])
                         for v, m in zip(df.variant, df["mean"])]
    df["base_std"] = float(df.loc[df.variant == BASELINE, "std"].iloc[0]) if not base.empty else float("nan")
    df["base_n"] = int(df.loc[df.variant == BASELINE, "n"].iloc[0]) if not base.empty else 0
    order = {v: i for i, v in enumerate(paper.PAPER_LABELS)}
    key = df.variant.map(lambda v: (v != BASELINE, order.get(v, len(order)), v))
    return df.assign(_key=key).sort_values("_key").drop(columns="_key").reset_index(drop=True)


def majority_baseline(task, task_name: str, scale: str = "demo") -> dict:
    """Test score of always predicting the most frequent training label.

    ``task`` is a built task (elmoc.tasks); its instances must carry a ``label``
    (classification tasks: sst, snli).  Other tasks get a ``status`` saying why not.
    """
    record = {"task": task_name, "variant": "majority", "seed": 0, "metric": task.metric_name, "scale": scale}
    missing = task.missing_data()
    if missing:
        return {**record, "test": None, "status": f"no data: set tasks.{task_name}.{missing}"}
    train, test = task.read("train"), task.read("test")
    if not train or not hasattr(train[0], "label"):
        return {**record, "test": None, "status": "n/a: not a single-label classification task"}
    counts = pd.Series([x.label for x in train]).value_counts()
    top = counts.index[0]
    correct = sum(1 for x in test if x.label == top)
    return {**record, "test": correct / len(test) if test else None, "label": str(top),
            "num_train": len(train), "num_test": len(test), "status": "ok"}

