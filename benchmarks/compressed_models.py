"""Compressed model directories against their source (issue 24.3): size on disk, `elmoc embed`
tokens/s and the fidelity of the features.

1. ``elmoc compress MODEL --format F --measure SENTENCES`` for each ``--formats`` (float16,
   bfloat16, int8; not timed here: the command measures the copy in-process and writes the
   figures on its card);
2. ``elmoc embed --model M --all --batch-size B --threads N SENTENCES out.hdf5`` as a
   subprocess for the source and every copy, ``--repeats`` rounds, the order of the models
   rotated each round so that a machine busy with other work slows all of them alike;
   a one-sentence run of each first (warm-up: the native LSTM kernel, the page cache) and
   a second one ("startup": imports, loading, writing);
3. the HDF5 files of each copy against the source's: per layer the mean over tokens of the
   cosine of the feature vectors, the lowest token cosine, the max abs difference.

Reported per model: size on disk (MB and the ratio to the source), best wall seconds and
tokens/s (words, no boundaries), tokens/s excluding startup, the speed ratio to the source
(the source's seconds over all rounds / the copy's), peak RSS.

The model: ``--model DIR`` (any model directory), or ``--random-original DIR``: the released
"original" size ELMo with random weights in bilm-tf's layout (``elmo_vs_allennlp.py``'s
writer; reused when DIR has them), converted with ``elmoc export --bilm-tf-options/--bilm-tf-weights``.
The sentences: ``--sentences FILE`` or ``--corpus DIR`` (``--num-sentences`` drawn at random, ``--seed``).

Usage (the docs/benchmarks.md run):
    PYTHONPATH=src .venv/bin/python benchmarks/compressed_models.py --random-original /tmp/elmo-original \
        --corpus ../shared/data/corpus_sample/1b_word_shards --num-sentences 300 --threads 2 --batch-size 64 \
        --repeats 2 --work-dir /tmp/compressed-bench --json /tmp/compressed-bench/results.json
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from elmo_vs_allennlp import INDEX_KEY, run_child, sample_sentences, write_random_bilm_tf  # noqa: E402

FORMATS = ("float16", "bfloat16", "int8")


def hdf5_fidelity(reference: Path, other: Path) -> dict:
    """Per-layer mean cosine, lowest cosine and max abs difference of two ``elmoc embed --all`` files."""
    import h5py

    from elmoc.pretrained.compare import feature_fidelity

    with h5py.File(reference, "r") as a, h5py.File(other, "r") as b:
        keys = sorted(set(a) - {INDEX_KEY}, key=lambda k: int(k))
        if keys != sorted(set(b) - {INDEX_KEY}, key=lambda k: int(k)):
            raise SystemExit(f"{reference} and {other} hold different sentences")
        return feature_fidelity([a[k][()] for k in keys], [b[k][()] for k in keys])


def interleaved_best(models: dict[str, Path], sentences: list[list[str]], rounds: int, batch_size: int,
                     threads: int) -> dict[str, float]:
    """Tokens/s of each model in this process (the first is the source), the fastest of ``rounds``
    passes over ``sentences``, the models interleaved pass by pass
    (:func:`elmoc.pretrained.side_by_side.measure_side_by_side`, as ``elmoc compression-table``
    times them): the least disturbed pass of each on a machine shared with other work, the load
    and file writing left out."""
    import torch

    from elmoc.pretrained.side_by_side import measure_side_by_side

    torch.set_num_threads(threads)
    source, *others = models
    records = measure_side_by_side(models[source], {name: models[name] for name in others}, sentences, rounds,
                                   batch_size)
    return {name: records["original" if name == source else name]["tokens_per_s"] for name in models}


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def directory_mb(path: Path) -> float:
    from elmoc.pretrained.compare import directory_size

    return directory_size(path) / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", help="the uncompressed model directory")
    model.add_argument("--random-original", metavar="DIR", help="random 'original'-size bilm-tf weights in DIR "
                       "(written when absent), exported as the source model")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--sentences", help="sentences file, one tokenized sentence per line")
    source.add_argument("--corpus", help="file or folder of tokenized sentences to sample from")
    parser.add_argument("--num-sentences", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2, help="timed rounds of every model (default 2)")
    parser.add_argument("--compress-rounds", type=int, default=1,
                        help="`elmoc compress --rounds` (its own in-process measurement, on the card)")
    parser.add_argument("--compress-sentences", type=int, default=None,
                        help="`elmoc compress --measure` on the first N sentences only (default all)")
    parser.add_argument("--reuse", action="store_true", help="keep copies already in the work dir")
    parser.add_argument("--interleaved", type=int, default=0, metavar="ROUNDS",
                        help="also time the models in one process, ROUNDS interleaved passes over the first "
                        "--batch-size sentences, fastest pass of each (default 0: not run)")
    parser.add_argument("--skip-embed", action="store_true", help="skip the elmoc embed subprocess runs "
                        "(with --reuse --interleaved: only the in-process timing)")
    parser.add_argument("--elmoc", default=f"{shlex.quote(sys.executable)} -m elmoc.cli",
                        help="command that runs elmoc (default: this python -m elmoc.cli)")
    parser.add_argument("--work-dir", default=None, help="where models and outputs go (default: a temp dir)")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)
    elmoc = shlex.split(args.elmoc)

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="compressed-models-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    if args.sentences:
        lines = [" ".join(l.split()) for l in Path(args.sentences).read_text(encoding="utf-8").splitlines()]
        lines = [l for l in lines if l]
    else:
        lines = sample_sentences(args.corpus, args.num_sentences, args.seed)
    sentences = work / "sentences.txt"
    sentences.write_text("\n".join(lines) + "\n", encoding="utf-8")
    one = work / "one_sentence.txt"
    one.write_text(lines[0] + "\n", encoding="utf-8")
    tokens = sum(len(l.split()) for l in lines)

    if args.model:
        source_dir = Path(args.model)
    else:
        folder = Path(args.random_original)
        options, weights = folder / "options.json", folder / "weights.hdf5"
        if not (options.is_file() and weights.is_file()):
            options, weights = write_random_bilm_tf(folder, seed=args.seed)
        source_dir = work / "float32"
        if not (source_dir / "elmoc-model.json").is_file():
            run_child(elmoc + ["export", "--bilm-tf-options", str(options), "--bilm-tf-weights", str(weights),
                               "--output-dir", str(source_dir)], env, work / "export.log")
    models = {"float32": source_dir}
    compress_seconds = {}
    measure = sentences
    if args.compress_sentences:
        measure = work / "measure.txt"
        measure.write_text("\n".join(lines[: args.compress_sentences]) + "\n", encoding="utf-8")
    for fmt in args.formats:
        models[fmt] = work / fmt
        if args.reuse and (models[fmt] / "elmoc-model.json").is_file():
            continue
        start = time.perf_counter()
        run_child(elmoc + ["compress", str(source_dir), "--output-dir", str(models[fmt]), "--format", fmt,
                           "--measure", str(measure), "--threads", str(args.threads),
                           "--batch-size", str(args.batch_size), "--rounds", str(args.compress_rounds)],
                  env, work / f"compress-{fmt}.log")
        compress_seconds[fmt] = time.perf_counter() - start
        print(f"compressed to {fmt} in {compress_seconds[fmt]:.0f} s (with its own measurement)", flush=True)

    def embed(name: str, src: Path, dst: Path) -> dict:
        return run_child(elmoc + ["embed", "--model", str(models[name]), "--all", "--batch-size", str(args.batch_size),
                                  "--threads", str(args.threads), str(src), str(dst)], env, work / f"embed-{name}.log")

    interleaved = None
    if args.interleaved:
        interleaved = interleaved_best(models, [l.split() for l in lines[: args.batch_size]], args.interleaved,
                                       args.batch_size, args.threads)
        print("in-process, fastest of {} interleaved passes over {} sentences: {}".format(
            args.interleaved, min(args.batch_size, len(lines)),
            ", ".join(f"{k} {v:.0f} tokens/s ({v / interleaved['float32']:.2f}x)" for k, v in interleaved.items())),
            flush=True)
    if args.skip_embed:
        if args.json:
            Path(args.json).write_text(json.dumps({"interleaved_tokens_per_s": interleaved,
                                                   "command": shlex.join([sys.executable] + sys.argv)}, indent=1) + "\n")
        return 0
    results = {name: {"seconds": [], "peak_rss_mb": 0.0} for name in models}
    for name in models:
        embed(name, one, work / f"{name}-warmup.hdf5")
        results[name]["startup_seconds"] = embed(name, one, work / f"{name}-one.hdf5")["seconds"]
    names = list(models)
    for r in range(args.repeats):
        order = names[r % len(names):] + names[: r % len(names)]  # rotated: each model leads in turn
        for name in order:
            run = embed(name, sentences, work / f"{name}.hdf5")
            results[name]["seconds"].append(run["seconds"])
            results[name]["peak_rss_mb"] = max(results[name]["peak_rss_mb"], run["peak_rss_mb"])
            print(f"  {name} round {r + 1}: {run['seconds']:.1f} s, peak RSS {run['peak_rss_mb']:.0f} MB", flush=True)

    source_mb = directory_mb(source_dir)
    for name, res in results.items():
        best = min(res["seconds"])
        res["size_mb"] = directory_mb(models[name])
        res["size_ratio"] = res["size_mb"] / source_mb
        res["tokens_per_second"] = tokens / best
        # None when a loaded machine made the one-sentence run as slow as the whole file
        res["tokens_per_second_after_startup"] = (tokens / (best - res["startup_seconds"])
                                                  if best > res["startup_seconds"] else None)
        # all rounds together: load that comes and goes slows every model of a round alike
        res["speed_ratio"] = sum(results["float32"]["seconds"]) / sum(res["seconds"])
        if name != "float32":
            res["fidelity"] = hdf5_fidelity(work / "float32.hdf5", work / f"{name}.hdf5")
            res["card_measurement"] = json.loads((models[name] / "elmoc-model.json").read_text())["compression"]["measured"]
    summary = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": shlex.join([sys.executable] + sys.argv),
               "source": str(source_dir), "sentences": len(lines), "tokens": tokens, "threads": args.threads,
               "batch_size": args.batch_size, "repeats": args.repeats, "cpu_count": os.cpu_count(),
               "load_average": os.getloadavg(), "compress_seconds": compress_seconds, "results": results,
               "interleaved_tokens_per_s": interleaved}

    print(f"\n{len(lines)} sentences, {tokens} tokens, {args.threads} threads, batch {args.batch_size}, "
          f"best of {args.repeats} rotated rounds")
    print(f"{'model':<9} {'MB':>8} {'size':>6} {'wall s':>8} {'startup':>8} {'tok/s':>7} {'ex.start':>8} "
          f"{'speed':>6} {'RSS MB':>7}  mean cosine per layer / min / max abs diff")
    for name, res in results.items():
        fid = res.get("fidelity")
        extra = (", ".join(f"{c:.6f}" for c in fid["mean_cosine"]) + f" / {fid['min_cosine']:.5f} / "
                 f"{fid['max_abs_diff']:.3g}") if fid else "(source)"
        print(f"{name:<9} {res['size_mb']:>8.1f} {res['size_ratio']:>5.2f}x {min(res['seconds']):>8.1f} "
              f"{res['startup_seconds']:>8.1f} {res['tokens_per_second']:>7.0f} "
              f"{_num(res['tokens_per_second_after_startup']):>8} {res['speed_ratio']:>5.2f}x {res['peak_rss_mb']:>7.0f}  {extra}")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
