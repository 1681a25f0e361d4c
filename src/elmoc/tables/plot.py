"""Learning curves of the pretrained LMs (train_log.jsonl -> one PNG)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable


def learning_curves(heldout_paths: Iterable[str | Path], output: str | Path) -> None:
    """Training loss against tokens seen, one line per (variant, direction), one panel
    per heldout metric kind (cosine-family losses and softmax NLLs are not comparable).
    Reads the ``train_log.jsonl`` beside each ``heldout.json``; written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from elmoc.data.atomic import atomic_path

    curves: dict[str, list[tuple[str, list[int], list[float]]]] = {}
    for path in map(Path, heldout_paths):
        metric = json.loads(path.read_text(encoding="utf-8")).get("metric", "loss")
        log = path.with_name("train_log.jsonl")
        xs, ys = [], []
        if log.exists():
            for line in log.read_text(encoding="utf-8").splitlines():
                record = json.loads(line)
                if record.get("event") == "train":
                    xs.append(record["tokens"])
                    ys.append(record["loss"])
        label = f"{path.parent.parent.name} ({path.parent.name})"
        curves.setdefault(metric, []).append((label, xs, ys))
    panels = sorted(curves)
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(6 * max(1, len(panels)), 4), squeeze=False)
    for ax, metric in zip(axes[0], panels):
        for label, xs, ys in curves[metric]:
            ax.plot(xs, ys, label=label)
        ax.set_xlabel("training tokens")
        ax.set_ylabel("training loss (-cos)" if metric == "cosine" else "training loss (nats)")
        ax.set_title(f"LMs evaluated by {metric}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(output) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
