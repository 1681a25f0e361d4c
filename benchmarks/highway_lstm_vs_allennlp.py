"""SRL's encoder beside AllenNLP's: elmoc's ``AlternatingHighwayLstm`` against AllenNLP 2.10.1's
``StackedAlternatingLstm`` (issue 45), forward and backward, same sizes, same threads.

AllenNLP's side is its SRL encoder as its SRL configuration builds it: the Seq2SeqEncoder
registered as ``alternating_lstm`` (``StackedAlternatingLstm`` behind ``PytorchSeq2SeqWrapper``,
which sorts, packs and unpacks), highway on, recurrent dropout 0.1, 8 layers of 300 over the
1,124-wide input (ELMo's 1,024 and the 100-wide predicate embedding), in training mode. elmoc's
side is ``elmoc.nn.alternating_lstm.AlternatingHighwayLstm`` at the same sizes, in training mode,
with whichever time loop it picks on this machine (printed; the C++ loop on a CPU with a compiler).

Each side is one long-lived worker process in its own environment (AllenNLP's venv is built as
``benchmarks/allennlp-venv.txt`` says), with ``torch.set_num_threads`` and ``OMP_NUM_THREADS`` /
``MKL_NUM_THREADS`` set to ``--threads``. Both build their model and one batch (``--batch``
sequences of ``--length`` tokens, or lengths drawn in ``length +- spread``; the same input values
from the same NumPy seed), run one warm-up step, then time one step per request: forward, a
weighted sum of the outputs, backward to the input and every parameter. The driver asks each
worker in turn, alternating which goes first, for ``--rounds`` rounds and reports the best
(least) wall and CPU seconds of each side and their ratios. Without ``--allennlp-python`` only
elmoc's side runs (its times, no ratio).

``--device cuda`` (or ``cuda:N``) puts both sides' encoders and batches on that GPU: elmoc's
CUDA path is the Python time loop with ``torch.compile``'d cells (compiled in the warm-up step),
AllenNLP's its own ``AugmentedLstm`` loop; each step is then timed in wall seconds between two
``torch.cuda.synchronize`` calls (the CPU seconds are the host's share). The two workers
alternate, so they never share the GPU within a step.

Usage:
    PYTHONPATH=src .venv/bin/python benchmarks/highway_lstm_vs_allennlp.py \
        [--allennlp-python /tmp/allennlp-venv/bin/python] [--threads 1] [--rounds 5] [--batch 80] [--length 26]
        [--device cpu|cuda]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import side_by_side

HERE = Path(__file__).resolve().parent


def _batch(args):
    """(inputs (B, T, D) float32, mask (B, T) bool, output weights (B, T, H)) from ``args.seed``,
    on the CPU (the worker moves them to its device)."""
    import numpy as np
    import torch

    rng = np.random.default_rng(args.seed)
    lengths = (np.full(args.batch, args.length) if not args.spread else
               rng.integers(args.length - args.spread, args.length + args.spread + 1, args.batch))
    steps = int(lengths.max())
    x = torch.from_numpy(rng.standard_normal((args.batch, steps, args.input_dim), dtype=np.float32))
    mask = torch.from_numpy(np.arange(steps)[None, :] < lengths[:, None])
    weights = torch.from_numpy(rng.standard_normal((args.batch, steps, args.hidden), dtype=np.float32))
    return x.requires_grad_(), mask, weights


def _encoder(args):
    """(the encoder, a description) of this worker's side."""
    if args.worker == "allennlp":
        sys.path.insert(0, str(HERE))
        from allennlp_elmo import _import_torchvision_or_placeholder

        _import_torchvision_or_placeholder()
        import allennlp
        from allennlp.modules.seq2seq_encoders import Seq2SeqEncoder

        encoder = Seq2SeqEncoder.by_name("alternating_lstm")(
            input_size=args.input_dim, hidden_size=args.hidden, num_layers=args.layers,
            recurrent_dropout_probability=args.dropout, use_highway=True)
        return encoder, f"AllenNLP {allennlp.__version__} alternating_lstm (StackedAlternatingLstm)"
    from elmoc.nn.alternating_lstm import AlternatingHighwayLstm, native_status

    encoder = AlternatingHighwayLstm(args.input_dim, args.hidden, args.layers, args.dropout)
    return encoder, f"elmoc AlternatingHighwayLstm ({native_status()})"


def worker(args) -> int:
    """Build, warm up, then time one step per line read from stdin ('step'); 'quit' ends."""
    device, sync, ready = side_by_side.worker_device(args, "")
    encoder, ready["ready"] = _encoder(args)
    encoder.to(device).train()
    x, mask, weights = (t.to(device) for t in _batch(args))
    x = x.detach().requires_grad_()

    def step():
        encoder.zero_grad(set_to_none=True)
        x.grad = None
        (encoder(x, mask) * weights).sum().backward()

    return side_by_side.serve(step, sync, ready)  # the warm-up step first: on CUDA elmoc's cells compile there


def _start(python: str, side: str, args) -> tuple[subprocess.Popen, dict]:
    sizes = ["--batch", str(args.batch), "--length", str(args.length), "--spread", str(args.spread),
             "--input-dim", str(args.input_dim), "--hidden", str(args.hidden), "--layers", str(args.layers),
             "--dropout", str(args.dropout), "--threads", str(args.threads), "--seed", str(args.seed),
             "--device", args.device]
    return side_by_side.start(__file__, python, side, sizes, args.threads,
                              HERE.parent / "src" if side == "elmoc" else None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--allennlp-python", help="python of the AllenNLP 2.10.1 venv (benchmarks/allennlp-venv.txt); "
                   "without it only elmoc's side runs")
    p.add_argument("--batch", type=int, default=80, help="sequences per batch (AllenNLP's SRL config: 80)")
    p.add_argument("--length", type=int, default=26, help="tokens per sequence (mean SRL length, default 26)")
    p.add_argument("--spread", type=int, default=0, help="lengths drawn in length +- spread (default 0: all equal)")
    p.add_argument("--input-dim", type=int, default=1124, help="ELMo 1024 + predicate embedding 100")
    p.add_argument("--hidden", type=int, default=300)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--dropout", type=float, default=0.1, help="recurrent dropout (AllenNLP's SRL config: 0.1)")
    side_by_side.add_arguments(p, seed=0)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    side_by_side.refuse_a_missing_gpu(p, args.device)
    pythons = {"elmoc": sys.executable}
    if args.allennlp_python:
        pythons["allennlp"] = args.allennlp_python
    sides = side_by_side.rounds({side: (lambda side=side, python=python: _start(python, side, args))
                                 for side, python in pythons.items()}, args.rounds)
    best = {side: sides[side]["best"] for side in sides}
    result = {"sizes": {k: getattr(args, k) for k in ("batch", "length", "spread", "input_dim", "hidden", "layers",
                                                      "dropout", "threads", "rounds", "seed", "device")},
              "sides": sides, "allennlp_over_elmoc": side_by_side.ratio(sides)}
    on = f" on {sides['elmoc'].get('device_name', args.device)}" if args.device != "cpu" else ""
    for side in sides:
        print(f"{side}: {sides[side]['ready']}{on}; best of {args.rounds}: {best[side]['wall_s']:.3f} s wall"
              f"{' (synchronized)' if on else ''}, {best[side]['cpu_s']:.3f} s CPU per forward + backward "
              f"(warm-up step {sides[side]['warmup_s']:.1f} s)")
    sizes = f"batch {args.batch}, length {args.length}, {args.layers} x {args.hidden}, threads {args.threads}{on}"
    ratio = result["allennlp_over_elmoc"]
    if ratio is None:
        print(f"AllenNLP: not run (no --allennlp-python); {sizes}")
    else:
        print(f"AllenNLP / elmoc: {ratio['wall_s']:.2f}x wall, {ratio['cpu_s']:.2f}x CPU ({sizes})")
    return side_by_side.finish(args, result)


if __name__ == "__main__":
    sys.exit(main())
