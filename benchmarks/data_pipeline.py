"""Throughput and memory of the data pipeline: shard files -> LM id windows.

Generates synthetic shards (Zipf-distributed words from a 50K-word vocabulary,
sentences of 5-40 tokens, ~250K tokens per shard) into a temp directory, then
runs one pass of ``elmoc.data.batches.ShardBatches`` (batch 128, bptt 20, forward)
and reports tokens/s (stream tokens, i.e. including <s>/</s>) and the peak RSS.
Each scale runs in its own process, so the peak RSS of one does not leak into
the other.  Memory should stay flat as the corpus grows (one shard in memory).

Usage: python benchmarks/data_pipeline.py [--shards 4] [--scales 1 10]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

VOCAB_WORDS = 50_000
TOKENS_PER_SHARD = 250_000


def make_corpus(directory: Path, num_shards: int, seed: int = 0) -> list[Path]:
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(VOCAB_WORDS + 10_000)])  # some OOV words too
    paths = []
    for s in range(num_shards):
        ids = np.minimum(rng.zipf(1.2, size=TOKENS_PER_SHARD) - 1, len(words) - 1)
        toks = words[ids]
        lengths = rng.integers(5, 41, size=TOKENS_PER_SHARD // 5)
        bounds = np.cumsum(lengths)
        bounds = bounds[bounds < TOKENS_PER_SHARD]
        lines = [" ".join(chunk) for chunk in np.split(toks, bounds)]
        p = directory / f"shard_{s:03d}.txt"
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(p)
    return paths


def measure(num_shards: int) -> dict:
    from elmoc.data.batches import ShardBatches
    from elmoc.data.vocab.vocabulary import SPECIALS, Vocabulary

    vocab = Vocabulary(list(SPECIALS) + [f"w{i}" for i in range(VOCAB_WORDS)])
    with tempfile.TemporaryDirectory() as tmp:
        shards = make_corpus(Path(tmp), num_shards)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        tokens = 0
        for batch in ShardBatches(shards, vocab, batch_size=128, bptt=20, epochs=1, seed=1):
            tokens += batch.inputs.numel()
        seconds = time.perf_counter() - start
    return {
        "shards": num_shards,
        "tokens": tokens,
        "seconds": round(seconds, 3),
        "tokens_per_second": round(tokens / seconds),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_before_mb": round(rss_before / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, default=4, help="shards at scale 1 (default 4, ~1M tokens)")
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(measure(args.child)))
        return
    print(f"{'scale':>5} {'shards':>6} {'tokens':>10} {'seconds':>8} {'tokens/s':>10} {'peak RSS MB':>11}")
    for scale in args.scales:
        out = subprocess.run([sys.executable, __file__, "--child", str(args.shards * scale)],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        print(f"{scale:>5} {r['shards']:>6} {r['tokens']:>10} {r['seconds']:>8} {r['tokens_per_second']:>10} "
              f"{r['peak_rss_mb']:>11}")


if __name__ == "__main__":
    main()
