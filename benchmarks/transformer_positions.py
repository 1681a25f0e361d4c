"""How a causal Transformer LM trained on short windows predicts past them (issue 25's open
question: a TRANS BASE / TRANS LARGE variant trains on 20-token windows, but extraction feeds it
whole sentences, so positions >= 20 use sinusoidal position vectors it never saw in training).

For a trained CONT Transformer run (``results/lm/<variant>/`` of a workflow run: ``spec.yaml``,
``forward/model.pt``, ``backward/model.pt``) the heldout file is cut into windows of each
``--lengths`` (as the trainer's heldout evaluation cuts it, no state carried: a Transformer
carries none), and the cosine of the predicted and the true next-word vector is averaged per
position bucket.  At length 20 every token sits where training put it; at longer lengths the
tokens at positions >= 20 have more context *and* unseen positions.  If the cosine at positions
20-39 is below that at 10-19, the positions cost more than the context gives.

Usage (the docs/beyond-paper.md run, in a workflow directory that trained trans-base-c):
    python benchmarks/transformer_positions.py --workflow-dir /tmp/sd25/repo --variant trans-base-c \\
        --lengths 20 40 80 --buckets 0 10 20 40 60 80 --json /tmp/positions.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import yaml

from elmoc.data.batches import iter_heldout
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.directions import DIRECTIONS, runs
from elmoc.lm import LanguageModel
from elmoc.model_file import load_checkpoint
from elmoc.nn.cosine import cosine_similarity
from elmoc.outputs.continuous import ContinuousOutput
from elmoc.registry import by_name


@torch.no_grad()
def position_cosines(model: LanguageModel, heldout: str, vocab: Vocabulary, length: int, direction: str,
                     batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per window position t (0 <= t < length): the summed cosine of prediction and target
    over every heldout window, and the number of tokens.  Shape: (length,), (length,)."""
    sums, counts = torch.zeros(length, dtype=torch.float64), torch.zeros(length, dtype=torch.float64)
    layer = model.output_layer
    for batch in iter_heldout(heldout, vocab, batch_size, bptt=length, direction=direction):
        hidden = model.encode(batch.inputs, batch.mask).output  # (B, T, d_model)
        prediction = layer.projection(hidden)  # (B, T, d_emb)
        target = layer.target_table[batch.targets]  # (B, T, d_emb)
        cos = cosine_similarity(prediction, target).double() * batch.mask  # (B, T)
        t = cos.shape[1]  # the last window may be shorter
        sums[:t] += cos.sum(0)
        counts[:t] += batch.mask.sum(0).double()
    return sums, counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workflow-dir", required=True, help="the workflow run's folder (spec paths are relative to it)")
    p.add_argument("--variant", required=True, help="a CONT Transformer variant trained there, e.g. trans-base-c")
    p.add_argument("--lengths", type=int, nargs="+", default=[20, 40, 80], help="window lengths to evaluate")
    p.add_argument("--buckets", type=int, nargs="+", default=[0, 10, 20, 40, 60, 80],
                   help="bucket edges of window positions (the last edge ends the last bucket)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="heldout rows per batch (default: the spec's, so the trained length's 'all' is the "
                        "run's heldout metric)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    os.chdir(args.workflow_dir)
    run = Path("results/lm") / args.variant
    spec = yaml.safe_load((run / "spec.yaml").read_text())
    if spec["encoder"]["type"] != "transformer" or not set(runs(spec)) <= set(DIRECTIONS) or not issubclass(by_name("output", spec["output"]["type"]), ContinuousOutput):
        print(f"{run}: needs a causal Transformer trained one direction at a time with a continuous output "
              f"(trans-*-c, gpt-c); this one trains {'/'.join(runs(spec))} with encoder {spec['encoder']['type']!r} and "
              f"output {spec['output']['type']!r}", file=sys.stderr)
        return 2
    vocab = Vocabulary.load(spec["vocab"])
    batch_size = args.batch_size or spec["train"].get("eval_batch_size") or spec["train"]["batch_size"]
    result = {"variant": args.variant, "trained_window": spec["train"]["bptt"], "heldout": spec["data"]["heldout"],
              "directions": {}}
    for direction in runs(spec):  # forward and backward, or a one-direction LM's forward alone (gpt-c)
        model = LanguageModel.from_spec(spec, vocab)
        model.load_state_dict(load_checkpoint(run / direction / "model.pt")["model"])
        model.eval()
        rows = {}
        for length in args.lengths:
            sums, counts = position_cosines(model, spec["data"]["heldout"], vocab, length, direction, batch_size)
            rows[length] = {}
            for lo, hi in zip(args.buckets, args.buckets[1:]):
                hi = min(hi, length)
                if lo < hi:
                    n = float(counts[lo:hi].sum())
                    rows[length][f"{lo}-{hi - 1}"] = {"cosine": float(sums[lo:hi].sum()) / n, "tokens": int(n)}
            rows[length]["all"] = {"cosine": float(sums.sum() / counts.sum()), "tokens": int(counts.sum())}
            print(f"{direction} window {length}: " + ", ".join(
                f"{k} {v['cosine']:.4f} ({v['tokens']})" for k, v in rows[length].items()), flush=True)
        result["directions"][direction] = rows
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
