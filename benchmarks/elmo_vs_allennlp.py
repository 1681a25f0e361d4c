"""`elmoc embed --all` against `allennlp elmo --all` on the same bilm-tf weights (issue 24).

Both tools run as subprocesses on the same sentences file, on the same ``--device`` (CPU by
default; ``cuda`` for the GPU check), with the same thread count
(``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` and ``torch.set_num_threads``):

* AllenNLP: ``benchmarks/allennlp_elmo.py`` under ``--allennlp-python`` (a separate
  venv with AllenNLP 2.10.1; a driver computing what the 0.9.0 ``allennlp elmo``
  command computed, with 2.10.1's modules, LSTM states reset per batch unless ``--stateful``; see that file);
* elmoc: ``elmoc export --bilm-tf-options O --bilm-tf-weights W`` once (not timed),
  then ``elmoc embed --model DIR --all --batch-size B --threads N``.

Per tool: wall seconds of the whole command, the same for a one-sentence file
("startup": imports, reading the weights, writing the file), tokens/s over the whole
wall time and over wall minus startup, and the child's peak RSS (``os.wait4``).
Then the two HDF5 files are compared dataset by dataset: equal keys, shapes and
``sentence_to_index``, and the max abs difference over every sentence and layer.

The weights: ``--options/--weights`` (e.g. AllenNLP's test model), or
``--random-original DIR``: options of the released "original" ELMo (char-CNN
2048 filters, 2 highway, 2 layers, cell 4096, projection 512) and random weights
written in bilm-tf's HDF5 layout (same dataset names and shapes as the release).
The sentences: ``--sentences FILE``, or ``--corpus DIR`` (one tokenized sentence per
line, e.g. the One Billion Word sample shards), of which ``--num-sentences`` are
drawn at random (``--seed``), so the length mix is the corpus's.

Usage:
    .venv/bin/python benchmarks/elmo_vs_allennlp.py --allennlp-python .bench-venv/bin/python \
        --random-original /tmp/elmo-original --corpus ../shared/data/corpus_sample/1b_word_shards \
        --num-sentences 300 --threads 2 --batch-size 64
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
INDEX_KEY = "sentence_to_index"

ORIGINAL_OPTIONS = {  # elmo_2x4096_512_2048cnn_2xhighway_options.json, the released "original" ELMo
    "lstm": {"use_skip_connections": True, "projection_dim": 512, "cell_clip": 3, "proj_clip": 3,
             "dim": 4096, "n_layers": 2},
    "char_cnn": {"activation": "relu", "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
                 "n_highway": 2, "embedding": {"dim": 16}, "n_characters": 262, "max_characters_per_token": 50},
}


# --------------------------------------------------------------------------- weights


def write_random_bilm_tf(directory: str | Path, options: dict | None = None, seed: int = 0) -> tuple[Path, Path]:
    """``options.json`` and random ``weights.hdf5`` in bilm-tf's layout (the released files' dataset
    names and shapes); weights ~ N(0, 1/fan_in), so activations stay O(1)."""
    import h5py

    options = options or ORIGINAL_OPTIONS
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)

    def normal(shape, fan_in):
        return (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(fan_in)).astype(np.float32)

    cnn, lstm = options["char_cnn"], options["lstm"]
    char_dim = cnn["embedding"]["dim"]
    filters = sum(count for _, count in cnn["filters"])
    proj, cell = lstm["projection_dim"], lstm["dim"]
    weights = directory / "weights.hdf5"
    with h5py.File(weights, "w") as h5:
        h5["char_embed"] = normal((cnn["n_characters"] - 1, char_dim), 1)
        for i, (width, count) in enumerate(cnn["filters"]):
            h5[f"CNN/W_cnn_{i}"] = normal((1, width, char_dim, count), width * char_dim)
            h5[f"CNN/b_cnn_{i}"] = normal((count,), 10)
        for k in range(cnn["n_highway"]):
            for part in ("carry", "transform"):
                h5[f"CNN_high_{k}/W_{part}"] = normal((filters, filters), filters)
                h5[f"CNN_high_{k}/b_{part}"] = normal((filters,), 10)
        h5["CNN_proj/W_proj"] = normal((filters, proj), filters)
        h5["CNN_proj/b_proj"] = normal((proj,), 10)
        for direction in (0, 1):
            for layer in range(lstm["n_layers"]):
                prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
                h5[f"{prefix}/W_0"] = normal((2 * proj, 4 * cell), 2 * proj)
                h5[f"{prefix}/B"] = normal((4 * cell,), 10)
                h5[f"{prefix}/W_P_0"] = normal((cell, proj), cell)
    path = directory / "options.json"
    path.write_text(json.dumps(options, indent=1) + "\n")
    return path, weights


# --------------------------------------------------------------------------- sentences


def sample_sentences(corpus: str | Path, count: int, seed: int = 0, max_tokens: int | None = None) -> list[str]:
    """``count`` distinct non-empty lines of the files under ``corpus`` (a file or a folder), drawn at
    random (``seed``), in the drawn order; whitespace normalised to single spaces."""
    root = Path(corpus)
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
    lines = []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            tokens = line.split()
            if tokens and (max_tokens is None or len(tokens) <= max_tokens):
                lines.append(" ".join(tokens))
    lines = sorted(set(lines))
    random.Random(seed).shuffle(lines)
    if count > len(lines):
        raise SystemExit(f"{corpus} has only {len(lines)} distinct sentences, asked for {count}")
    return lines[:count]


# --------------------------------------------------------------------------- comparison


def compare_features(path_a: str | Path, path_b: str | Path) -> dict:
    """Dataset-by-dataset comparison of two ``elmo --all`` HDF5 files.

    Raises ValueError when the keys, a shape or ``sentence_to_index`` differ; returns
    ``{"sentences", "max_abs_diff", "worst_key", "per_layer_max_abs_diff", "max_abs_value"}``.
    """
    import h5py

    with h5py.File(path_a, "r") as a, h5py.File(path_b, "r") as b:
        keys_a, keys_b = set(a) - {INDEX_KEY}, set(b) - {INDEX_KEY}
        if keys_a != keys_b:
            raise ValueError(f"different sentences: {len(keys_a ^ keys_b)} keys in only one file "
                             f"(e.g. {sorted(keys_a ^ keys_b)[:3]})")
        if (INDEX_KEY in a) != (INDEX_KEY in b):
            raise ValueError(f"{INDEX_KEY} in only one file")
        if INDEX_KEY in a:
            index_a, index_b = (json.loads(_text(f[INDEX_KEY][0])) for f in (a, b))
            if index_a != index_b:
                raise ValueError(f"{INDEX_KEY} differs")
        worst, worst_key, per_layer, biggest = 0.0, None, None, 0.0
        for key in sorted(keys_a, key=lambda k: (len(k), k)):
            x, y = a[key][()], b[key][()]
            if x.shape != y.shape:
                raise ValueError(f"dataset {key}: shape {x.shape} vs {y.shape}")
            diff = np.abs(x.astype(np.float64) - y.astype(np.float64))
            if diff.size == 0:
                continue
            layer_max = diff.reshape(diff.shape[0], -1).max(axis=1) if diff.ndim == 3 else diff.max(keepdims=True)
            per_layer = layer_max if per_layer is None else np.maximum(per_layer, layer_max)
            biggest = max(biggest, float(np.abs(x).max()))
            if float(diff.max()) > worst or worst_key is None:
                worst, worst_key = float(diff.max()), key
    return {"sentences": len(keys_a), "max_abs_diff": worst, "worst_key": worst_key,
            "per_layer_max_abs_diff": [float(v) for v in (per_layer if per_layer is not None else [])],
            "max_abs_value": biggest}


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


# --------------------------------------------------------------------------- running


def run_child(command: list[str], env: dict[str, str], log: Path) -> dict:
    """Run ``command``; wall seconds, peak RSS (MB, of the child itself, from ``wait4``) and stdout."""
    if Path(command[1]).name == "allennlp_elmo.py":  # elmoc's PYTHONPATH has no business in AllenNLP's venv
        env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    start = time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {shlex.join(command)}\n{log.read_text()[-3000:]}")
    return {"seconds": seconds, "peak_rss_mb": usage.ru_maxrss / 1024, "stdout": out}


def tool_commands(args, model_dir: Path, options: Path, weights: Path) -> dict[str, callable]:
    def allennlp(src: Path, dst: Path) -> list[str]:
        cmd = [args.allennlp_python, str(HERE / "allennlp_elmo.py"), "--all", "--options-file", str(options),
               "--weight-file", str(weights), "--batch-size", str(args.batch_size), "--threads", str(args.threads),
               "--device", args.device]
        return cmd + (["--stateful"] if args.stateful else []) + [str(src), str(dst)]

    def elmoc(src: Path, dst: Path) -> list[str]:
        return args.elmoc + ["embed", "--model", str(model_dir), "--all", "--batch-size", str(args.batch_size),
                             "--threads", str(args.threads), "--device", args.device, str(src), str(dst)]

    tools = {"allennlp": allennlp, "elmoc": elmoc}
    if args.elmoc_tuned:  # elmoc again, with its own batching flags appended (the last of a flag wins)
        tools["elmoc-tuned"] = lambda src, dst: elmoc(src, dst)[:-2] + shlex.split(args.elmoc_tuned) + [str(src), str(dst)]
    return tools


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--allennlp-python", required=True, help="python of the venv with AllenNLP 2.10.1")
    weights = parser.add_mutually_exclusive_group(required=True)
    weights.add_argument("--options", help="bilm-tf options.json (with --weights)")
    weights.add_argument("--random-original", metavar="DIR", help="write random 'original'-size weights "
                         "(bilm-tf layout) into DIR (reused when DIR already has them)")
    parser.add_argument("--weights", help="bilm-tf weights .hdf5 (with --options)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--sentences", help="sentences file, one tokenized sentence per line")
    source.add_argument("--corpus", help="file or folder of tokenized sentences to sample from")
    parser.add_argument("--num-sentences", type=int, default=300)
    parser.add_argument("--max-tokens", type=int, default=None, help="skip corpus sentences longer than this")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="torch device of both tools (default cpu; cuda on a GPU)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per tool, alternating (default 1)")
    parser.add_argument("--elmoc-tuned", metavar="FLAGS", default=None,
                        help="also time elmoc with these embed flags appended, e.g. '--batch-size 256 --max-tokens "
                        "8192' (reported as elmoc-tuned, its output compared too)")
    parser.add_argument("--stateful", action="store_true", help="AllenNLP carries LSTM states across batches "
                        "(its shipped behaviour; the outputs then differ from elmoc's)")
    parser.add_argument("--elmoc", default=f"{shlex.quote(sys.executable)} -m elmoc.cli",
                        help="command that runs elmoc (default: this python -m elmoc.cli)")
    parser.add_argument("--work-dir", default=None, help="where inputs/outputs go (default: a temp dir)")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)
    args.elmoc = shlex.split(args.elmoc)
    if args.options and not args.weights:
        parser.error("--options needs --weights")

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="elmo-vs-allennlp-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.random_original:
        folder = Path(args.random_original)
        options, weights_path = folder / "options.json", folder / "weights.hdf5"
        if not (options.is_file() and weights_path.is_file()):
            start = time.perf_counter()
            options, weights_path = write_random_bilm_tf(folder, seed=args.seed)
            print(f"wrote random original-size weights to {folder} in {time.perf_counter() - start:.1f} s")
    else:
        options, weights_path = Path(args.options), Path(args.weights)

    if args.sentences:
        lines = [" ".join(l.split()) for l in Path(args.sentences).read_text(encoding="utf-8").splitlines()]
        lines = [l for l in lines if l]
    else:
        lines = sample_sentences(args.corpus, args.num_sentences, args.seed, args.max_tokens)
    sentences = work / "sentences.txt"
    sentences.write_text("\n".join(lines) + "\n", encoding="utf-8")
    one = work / "one_sentence.txt"
    one.write_text(lines[0] + "\n", encoding="utf-8")
    lengths = np.array([len(l.split()) for l in lines])
    tokens = int(lengths.sum())

    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads),
               TOKENIZERS_PARALLELISM="false")
    model_dir = work / "elmoc-model"
    start = time.perf_counter()
    run_child(args.elmoc + ["export", "--bilm-tf-options", str(options), "--bilm-tf-weights", str(weights_path),
                            "--output-dir", str(model_dir)], env, work / "export.log")
    export_seconds = time.perf_counter() - start

    commands = tool_commands(args, model_dir, options, weights_path)
    results: dict[str, dict] = {name: {"runs": []} for name in commands}
    for name, make in commands.items():  # warm-up (elmoc's kernel build, page cache) and startup time
        run_child(make(one, work / f"{name}-warmup.hdf5"), env, work / f"{name}-warmup.log")
        results[name]["startup_seconds"] = run_child(make(one, work / f"{name}-one.hdf5"), env,
                                                     work / f"{name}-one.log")["seconds"]
    order = list(commands)
    for r in range(args.repeats):
        for name in (order if r % 2 == 0 else order[::-1]):
            run = run_child(commands[name](sentences, work / f"{name}.hdf5"), env, work / f"{name}.log")
            results[name]["runs"].append(run)
            print(f"  {name} run {r + 1}: {run['seconds']:.1f} s, peak RSS {run['peak_rss_mb']:.0f} MB", flush=True)
    comparison = compare_features(work / "allennlp.hdf5", work / "elmoc.hdf5")
    tuned_comparison = (compare_features(work / "allennlp.hdf5", work / "elmoc-tuned.hdf5")
                        if "elmoc-tuned" in commands else None)

    for name, res in results.items():
        best = min(res["runs"], key=lambda run: run["seconds"])
        res["seconds"] = best["seconds"]
        res["all_seconds"] = [run["seconds"] for run in res["runs"]]
        res["peak_rss_mb"] = max(run["peak_rss_mb"] for run in res["runs"])
        res["tokens_per_second"] = tokens / best["seconds"]
        res["tokens_per_second_after_startup"] = tokens / max(best["seconds"] - res["startup_seconds"], 1e-9)
        if name == "allennlp":
            res["driver"] = json.loads(best["stdout"].strip().splitlines()[-1])
        del res["runs"]

    a, e = results["allennlp"], results["elmoc"]
    summary = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": shlex.join([sys.executable] + sys.argv),
        "options": str(options), "weights": str(weights_path), "sentences": len(lines), "tokens": tokens,
        "length_mean": float(lengths.mean()), "length_min": int(lengths.min()), "length_max": int(lengths.max()),
        "length_p50": float(np.percentile(lengths, 50)), "length_p90": float(np.percentile(lengths, 90)),
        "threads": args.threads, "device": args.device, "batch_size": args.batch_size, "repeats": args.repeats,
        "stateful": args.stateful,
        "cpu_count": os.cpu_count(), "load_average": os.getloadavg(), "export_seconds": export_seconds,
        "results": results, "comparison": comparison,
        "speedup": e["tokens_per_second"] / a["tokens_per_second"],
        "speedup_after_startup": e["tokens_per_second_after_startup"] / a["tokens_per_second_after_startup"],
    }
    if tuned_comparison is not None:
        t = results["elmoc-tuned"]
        summary.update(elmoc_tuned=args.elmoc_tuned, tuned_comparison=tuned_comparison,
                       tuned_speedup=t["tokens_per_second"] / a["tokens_per_second"],
                       tuned_speedup_after_startup=t["tokens_per_second_after_startup"]
                       / a["tokens_per_second_after_startup"])
    print(f"\n{len(lines)} sentences, {tokens} tokens (length mean {lengths.mean():.1f}, "
          f"median {summary['length_p50']:.0f}, p90 {summary['length_p90']:.0f}, max {lengths.max()}), "
          f"{args.threads} threads, batch {args.batch_size}, best of {args.repeats}")
    print(f"{'tool':<11} {'wall s':>8} {'startup s':>9} {'tokens/s':>9} {'tok/s ex. startup':>17} {'peak RSS MB':>11}")
    for name, res in results.items():
        print(f"{name:<11} {res['seconds']:>8.1f} {res['startup_seconds']:>9.1f} {res['tokens_per_second']:>9.0f} "
              f"{res['tokens_per_second_after_startup']:>17.0f} {res['peak_rss_mb']:>11.0f}")
    print(f"elmoc / allennlp tokens/s: {summary['speedup']:.2f}x (wall), {summary['speedup_after_startup']:.2f}x "
          f"(excluding startup)")
    print(f"max abs difference: {comparison['max_abs_diff']:.3g} over {comparison['sentences']} sentences "
          f"(per layer {', '.join(f'{v:.2g}' for v in comparison['per_layer_max_abs_diff'])}; "
          f"largest |value| {comparison['max_abs_value']:.3g}; worst sentence {comparison['worst_key']})")
    if tuned_comparison is not None:
        print(f"elmoc-tuned ({args.elmoc_tuned}) / allennlp tokens/s: {summary['tuned_speedup']:.2f}x (wall), "
              f"{summary['tuned_speedup_after_startup']:.2f}x (excluding startup); max abs difference "
              f"{tuned_comparison['max_abs_diff']:.3g}")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
