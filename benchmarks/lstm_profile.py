"""Operators and casts per training step of the LSTM LMs, counted with torch.profiler (issue 44).

For each model (ELMo-C, ELMo), precision (fp32, tf32, bf16), LSTM path (``--paths``: ``new``,
the default, and ``old``, the float32 recurrence under bf16 autocast of commit c97a351, selected
with ``ELMOC_LSTM_BF16_RECURRENCE=0``; and, with ``--paths fused``, the encoder option
``fused_cell: true``, the compiled time loops; with ``--paths layer``, ``fused_cell: layer``, each layer
compiled whole with its autograd-derived backward) and window length (``--bptt``), it profiles ``--steps`` training
steps (``elmoc.train.loop.train_step``: forward under the precision context, backward,
clipping, optimizer) after warm-up steps (below) and prints, per step:

* ``ops``: operators the step issues (profiler events named ``aten::*`` with no ``aten::``
  ancestor: on a GPU each is about one kernel launch);
* ``casts``: dtype casts of tensors (``aten::to`` / ``aten::_to_copy`` / ``aten::copy_`` whose
  input and output dtypes differ; not the 0-dim tensors an operator wraps a Python number in),
  including those autocast issues for a product;
* ``cpu_temps``: casts the CPU backend inserts *inside* a mixed-dtype operator (PyTorch's CPU
  TensorIterator converts a mixed operand into a temporary; CUDA kernels convert in registers
  and issue none), reported apart because a GPU does not execute them;
* ``mm_bf16`` / ``mm_fp32``: matrix products (mm, addmm, bmm) by input dtype;
* ``host``: host dispatches a CUDA run with CUDA graphs issues per step: the ``ops`` outside
  ``torch.compile``'s regions (profiler events ``Torch-Compiled Region: ...``, one per call of a
  compiled function, and ``## Call CompiledFxGraph ...`` outside them, one per call of a compiled
  backward graph) plus one per region call (on CUDA, with ``mode="reduce-overhead"``, one
  ``cudaGraphLaunch`` replays the region's kernels).  On the CPU, where the region's generated code
  runs its products as ``aten::mm`` (counted in ``ops``), it is the stand-in for "launches per step
  do not grow with bptt" (issue 44); without compiled regions it equals ``ops``;
* on CUDA, ``kernels`` and ``graphs``: the host's kernel launches (``cudaLaunchKernel`` and its
  variants) and CUDA-graph launches (``cudaGraphLaunch``) per step, and, per row, torch's CUDA-graph
  counters (``cudagraph_skips``, ``cudagraph_recorded_non_static_inputs`` from
  ``torch._dynamo.utils.counters["inductor"]``) and the graph trees' log (recordings, re-recordings
  and their reasons, skips) over the row's warm-up and profiled steps.

Warm-up: one step, and with the fused cell ``FUSED_WARMUP`` steps (see there: CUDA graph trees run a
function's first call eagerly and record one graph per set of static inputs, so the first steps
record; the counts must be the replays').

Sizes: the tiny models of ``gpu_check.py --tiny`` (the CPU rehearsal's), one thread.

Usage: python benchmarks/lstm_profile.py [--device cpu] [--bptt 10 20] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import warnings
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
PATHS = ("new", "old", "fused", "layer")
# the encoder option fused_cell of the compiled paths (the others run the Python loop: fused_cell false)
FUSED_CELL = {"fused": True, "layer": "layer"}
ENV = "ELMOC_LSTM_BF16_RECURRENCE"  # "0": the old float32 recurrence under bf16 autocast
CASTS = ("aten::to", "aten::_to_copy", "aten::copy_")
PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::addmm_", "aten::baddbmm")
# operators autocast casts the inputs of (CPU and CUDA lower-precision lists, the ones these models call)
AUTOCAST_OPS = ("aten::linear", "aten::matmul", "aten::conv1d", "aten::conv2d", "aten::_convolution")
# torch.compile's profiler range around each call of a compiled function ("Torch-Compiled Region: 0/3",
# read in a CPU profile of torch 2.13: the generated code's aten operators, its extern products, below it)
COMPILED_REGION = "Torch-Compiled Region"
# the profiler's range around a call of one compiled graph ("## Call CompiledFxGraph <hash> ##"): inside a
# region for a forward, and on its own (under autograd's "CompiledFunctionBackward") for the backward graph that
# AOTAutograd compiled for a differentiable compiled function (fused_cell: layer), which is one more region call
# (on CUDA one graph launch)
COMPILED_CALL = "## Call CompiledFxGraph"
# CUDA runtime / driver calls that launch work, as the profiler names them (a "_v<version>" suffix dropped)
KERNEL_LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                   "cudaLaunchCooperativeKernel")
GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch")
# Warm-up steps before profiling the fused cell.  CUDA graph trees (torch/_inductor/cudagraph_trees.py,
# CUDAGraphTreeManager._run) run a compiled function's first call eagerly (warmed_up_functions) and record
# a graph on a later call; a recorded node replays only for the same static inputs (check_invariants: an
# nn.Parameter passed in, e.g. each layer's LayerNorm weight to the forward loop, its state and projection
# weights to the reverse loop in float32, is a static input, and another layer's differs:
# StaticInputIdxMismatch, a new recording).  With fused_lstm.compiled's cudagraph_mark_step_begin before
# every call, each call is a root of the tree, so in step 1 each loop's first call (layer 1's forward, the
# last layer's reverse) warms it up and the other layers' record, in step 2 that first caller's records, and
# from step 3 on every call replays.
# The first GPU check profiled step 2 after one warm-up step: its counts were recordings (every kernel
# launched under stream capture), not replays.  3: the two steps that record, and one that replays all
# before the profile (the row's graph_records says whether the profiled steps still recorded).
# The whole-layer graph (fused_cell: layer) needs no more: in step 1 every call warms up (after a warm-up the
# trees keep warming up until the generation ends), in step 2 the forward and backward graphs record, one per
# layer (their parameters are static inputs), and from step 3 on they replay.
FUSED_WARMUP = 3
# the loggers of torch's CUDA graph trees (the "cudagraphs" logging artifact: recordings, re-recordings with
# their reasons at DEBUG, skips at WARNING)
CUDAGRAPH_LOGGERS = ("torch._inductor.cudagraph_trees.__cudagraphs", "torch._inductor.cudagraph_utils.__cudagraphs")


def _gpu_check():
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import gpu_check

    return gpu_check


def _aten_ancestor(event, names=None):
    """The nearest ``aten::`` ancestor of a profiler event (among ``names`` when given), or None."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::") and (names is None or parent.name in names):
            return parent
        parent = parent.cpu_parent
    return None


def _is_region(name: str) -> bool:
    """Whether a profiler event is a call of compiled code: a ``torch.compile``'d function's region or a
    compiled graph called on its own (a compiled backward)."""
    return name.startswith(COMPILED_REGION) or name.startswith(COMPILED_CALL)


def _in_compiled_region(event) -> bool:
    """Whether a profiler event runs inside a call of a ``torch.compile``'d function or compiled graph."""
    parent = event.cpu_parent
    while parent is not None:
        if _is_region(parent.name):
            return True
        parent = parent.cpu_parent
    return False


def launch_counts(names) -> dict[str, int]:
    """Kernel launches and CUDA-graph launches among profiler event names (CUDA runtime and driver calls;
    a version suffix such as ``_v11060`` is ignored)."""
    counts = {"kernels": 0, "graphs": 0}
    for name in names:
        base = re.sub(r"_v\d+$", "", name)
        if base in KERNEL_LAUNCHES:
            counts["kernels"] += 1
        elif base in GRAPH_LAUNCHES:
            counts["graphs"] += 1
    return counts


def _dtypes(event) -> list[str]:
    return [t for t in (getattr(event, "input_dtypes", None) or []) if t]


def _changes_dtype(event) -> bool:
    """Whether a cast event (or the ``copy_`` under it) converts a tensor between dtypes (a Python
    number that an operator wraps into a 0-dim tensor and converts is not a cast)."""
    shapes = getattr(event, "input_shapes", None) or []
    if shapes and shapes[0] == []:
        return False
    if event.name == "aten::copy_":
        dtypes = _dtypes(event)
        return len(dtypes) >= 2 and dtypes[0] != dtypes[1]
    return any(_changes_dtype(child) for child in event.cpu_children)


def _mixed(dtypes: list[str]) -> bool:
    return "float" in dtypes and "c10::BFloat16" in dtypes


def classify(events) -> Counter:
    """Counts of one profile's events (see the module docstring for the categories).

    A cast inside an operator whose own inputs mix float32 and bfloat16 is the CPU backend's
    temporary (``cpu_temps``), unless that operator is one autocast casts for (a product).
    """
    counts: Counter = Counter()
    recorded = False
    for e in events:
        name = e.name
        if _is_region(name):
            if not _in_compiled_region(e):
                counts["regions"] += 1  # one call of a compiled function: one graph launch under CUDA graphs
                counts["host"] += 1
            continue
        if not name.startswith("aten::"):
            continue
        recorded = recorded or bool(_dtypes(e))
        ancestor = _aten_ancestor(e)
        if ancestor is None:
            counts["ops"] += 1
            if not _in_compiled_region(e):
                counts["host"] += 1
        dtypes = _dtypes(e)
        if name in CASTS:
            if ancestor is not None and ancestor.name in CASTS:
                continue  # the inner half of aten::to -> _to_copy -> copy_: counted at the outer one
            if not _changes_dtype(e):
                continue  # a same-dtype copy (addmm's bias into its output, a state buffer), a no-op .to()
            temp = (ancestor is not None and _mixed(_dtypes(ancestor))
                    and ancestor.name not in PRODUCTS + AUTOCAST_OPS)
            counts["cpu_temps" if temp else "casts"] += 1
        elif name in PRODUCTS and _aten_ancestor(e, PRODUCTS) is None:
            kind = "bf16" if "c10::BFloat16" in dtypes[:3] else "fp32"
            counts[f"mm_{kind}"] += 1
    if not recorded:  # a profiler that records no input dtypes (torch 2.11's on the GPU machine): unmeasured
        counts["dtypes_unrecorded"] = 1
    return counts


class CudagraphLog:
    """Context manager: the records of torch's CUDA-graph trees loggers (``CUDAGRAPH_LOGGERS``, DEBUG and
    up: "Recording function", "Re-recording function ... reason=...", "skipping cudagraphs ...") and
    the warnings that mention CUDA graphs ("Unable to hit fast path of CUDAGraphs ...") inside it, and
    the change of ``counters["inductor"]``'s ``cudagraph*`` entries.  Other warnings are shown as usual;
    the captured records do not reach torch's own log handlers (the trees log every recording's inputs)."""

    def __enter__(self):
        from torch._dynamo.utils import counters

        self.messages: list[tuple[str, str]] = []  # (level name, message)
        self._counters = counters["inductor"]
        self._before = {k: v for k, v in self._counters.items() if k.startswith("cudagraph")}
        log = self

        class _Handler(logging.Handler):
            def emit(self, record):
                log.messages.append((record.levelname, record.getMessage()))

        self._handler = _Handler(logging.DEBUG)
        self._saved = []
        for name in CUDAGRAPH_LOGGERS:
            logger = logging.getLogger(name)
            self._saved.append((logger, logger.level, logger.propagate))
            logger.setLevel(logging.DEBUG)
            logger.propagate = False
            logger.addHandler(self._handler)
        self._warnings = warnings.catch_warnings(record=True)
        self._caught = self._warnings.__enter__()
        return self

    def __exit__(self, *exc):
        self._warnings.__exit__(*exc)
        for logger, level, propagate in self._saved:
            logger.removeHandler(self._handler)
            logger.setLevel(level)
            logger.propagate = propagate
        for w in self._caught:
            if "cudagraph" in str(w.message).lower():
                self.messages.append(("WARNING", str(w.message)))
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        after = {k: v for k, v in self._counters.items() if k.startswith("cudagraph")}
        self.counters = {k: after.get(k, 0) - self._before.get(k, 0) for k in sorted(set(after) | set(self._before))}
        return False

    def summary(self) -> dict:
        """Counts of recordings, re-recordings and skips in the captured log, the counters' change, and the
        messages other than plain recordings and warm-ups (each cut to 400 characters, at most 20)."""
        def n(pattern):
            return sum(1 for _, m in self.messages if re.search(pattern, m))

        notable = [f"{level}: {m[:400]}" for level, m in self.messages
                   if not re.search(r"(?<!-)Recording function|Running warmup function|Running eager function", m)]
        return {"recordings": n(r"(?<!-)Recording function"), "rerecordings": n(r"Re-recording function"),
                "skips": n(r"(?i)skipping cudagraph"), "counters": self.counters, "messages": notable[:20]}


def profile_steps(model_name: str, precision: str, bptt: int, steps: int = 2, device: str = "cpu",
                  seed: int = 0, scratch: Path | None = None, fused: bool | str = False) -> dict:
    """Per-step counts for ``steps`` profiled training steps of one tiny model (its random vector
    table is written under ``scratch``, default a folder of this process under $TMPDIR), after one
    warm-up step, or ``FUSED_WARMUP`` with the fused cell (``fused``: the encoder's ``fused_cell``, true
    or ``"layer"``)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    gc = _gpu_check()
    m = next(x for x in gc.throughput_models(tiny=True) if x["name"] == model_name)
    m["bptt"] = bptt
    if fused:  # (an encoder before issue 44 has no such option)
        m["spec"]["encoder"]["fused_cell"] = fused
    dev = torch.device(device)
    scratch = scratch or Path(os.environ.get("TMPDIR", "/tmp")) / f"elmoc-lstm-profile-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = gc.build_throughput_model(m, scratch, dev)
    batch = gc.throughput_batch(m, dev, seed)
    gc.set_fp32_mode(precision == "tf32")
    warmup = FUSED_WARMUP if fused else 1
    try:
        step = gc.Step(model, m, batch, dev, precision)
        with CudagraphLog() as warm_log:
            for _ in range(warmup):  # optimizer state, caches; compiling, CUDA graphs' warm-up and recordings
                step()
            gc.sync(dev)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
        with CudagraphLog() as graph_log, profile(activities=activities, record_shapes=True) as prof:
            for _ in range(steps):
                step()
            gc.sync(dev)
        events = prof.events()
        counts = classify(events)
        launches = launch_counts(e.name for e in events)
    finally:
        gc.set_fp32_mode(False)
    row = {k: counts.get(k, 0) / steps for k in ("ops", "host", "regions", "casts", "cpu_temps", "mm_bf16", "mm_fp32")}
    if counts.get("dtypes_unrecorded"):
        # without input dtypes no cast or product can be told apart: None, never a misleading 0
        row.update(casts=None, cpu_temps=None, mm_bf16=None, mm_fp32=None)
    cuda = dev.type == "cuda"
    warm, profiled = warm_log.summary(), graph_log.summary()
    row.update(model=model_name, precision=precision, bptt=bptt, batch=m["batch"], steps=steps, warmup=warmup,
               kernel_launches=launches["kernels"] / steps if cuda else None,
               graph_launches=launches["graphs"] / steps if cuda else None,
               cuda_launches=(launches["kernels"] + launches["graphs"]) / steps if cuda else None,
               # CUDA graphs' diagnostics: skips over the row's warm-up and profiled steps (0 unless graphs were
               # abandoned), graphs recorded during the profiled steps (0 in steady state)
               cudagraph_skips=sum(log["counters"].get("cudagraph_skips", 0) for log in (warm, profiled)),
               cudagraph_recorded_non_static_inputs=profiled["counters"].get("cudagraph_recorded_non_static_inputs", 0),
               graph_records=profiled["recordings"] + profiled["rerecordings"],
               cudagraph_log={"warmup": warm, "profiled": profiled})
    return row


class lstm_path:
    """Context manager: run the LSTM's ``new`` bf16 recurrence (the default; also under ``fused`` and
    ``layer``, the encoder option ``fused_cell`` that :func:`profile_steps` sets) or the ``old`` float32 one
    (``ELMOC_LSTM_BF16_RECURRENCE=0``) inside it; the variable is restored after."""

    def __init__(self, path: str):
        if path not in PATHS:
            raise ValueError(f"LSTM path must be one of {', '.join(PATHS)}, got {path!r}")
        self.path = path

    def __enter__(self):
        self.before = os.environ.get(ENV)
        if self.path == "old":
            os.environ[ENV] = "0"
        else:
            os.environ.pop(ENV, None)
        return self

    def __exit__(self, *exc):
        if self.before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = self.before


def runs(models, precisions, paths) -> list[tuple[str, str, str]]:
    """(model, precision, path) to measure: every precision on the new and compiled paths, the old path only
    under bf16 (the only precision it changes)."""
    return [(m, p, path) for m in models for p in precisions for path in paths if path != "old" or p == "bf16"]


def profile_table(models, precisions, paths, bptts, steps: int = 1, device: str = "cpu", log=None) -> list[dict]:
    """:func:`profile_steps` for every run of :func:`runs` and window length; each row printed to ``log``."""
    rows = []
    for model, precision, path in runs(models, precisions, paths):
        with lstm_path(path):
            for bptt in bptts:
                row = profile_steps(model, precision, bptt, steps, device, fused=FUSED_CELL.get(path, False))
                row["path"] = path
                rows.append(row)
                if log is not None:
                    print(format_row(row), file=log, flush=True)
    return rows


HEADER = (f"{'model':8} {'precision':9} {'path':5} {'bptt':>4} {'ops':>7} {'host':>6} {'casts':>6} {'cpu_temps':>9} "
          f"{'mm_bf16':>7} {'mm_fp32':>7} {'kernels':>7} {'graphs':>6} {'records':>7} {'skips':>5}")


def format_row(row: dict) -> str:
    def g(key, none="n/r"):  # None: the profiler recorded no dtypes (casts, products), or no CUDA (launches)
        value = row.get(key)
        return none if value is None else f"{value:g}"

    cuda = row.get("kernel_launches") is not None
    return (f"{row['model']:8} {row['precision']:9} {row['path']:5} {row['bptt']:>4} {row['ops']:>7g} "
            f"{g('host', '-'):>6} {g('casts'):>6} {g('cpu_temps'):>9} {g('mm_bf16'):>7} {g('mm_fp32'):>7} "
            f"{g('kernel_launches', '-'):>7} {g('graph_launches', '-'):>6} "
            f"{g('graph_records', '-') if cuda else '-':>7} {g('cudagraph_skips', '-') if cuda else '-':>5}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bptt", type=int, nargs="+", default=[10, 20])
    parser.add_argument("--models", nargs="+", default=["ELMo-C", "ELMo"])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "tf32", "bf16"])
    parser.add_argument("--paths", nargs="+", default=["new", "old"], choices=PATHS,
                        help="new: the default bf16 recurrence; old: ELMOC_LSTM_BF16_RECURRENCE=0 (bf16 only); "
                             "fused: the encoder's fused_cell: true (torch.compile of the time loops; compiles per "
                             "shape); layer: fused_cell: layer (each layer compiled whole, backward by autograd)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--native", action="store_true",
                        help="keep the C++ CPU time loop (default: ELMOC_NATIVE_LSTM=0, the Python loop a GPU runs)")
    parser.add_argument("--json", default=None, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    if not args.native:
        os.environ["ELMOC_NATIVE_LSTM"] = "0"
    print(HEADER, flush=True)
    rows = profile_table(args.models, args.precisions, args.paths, args.bptt, args.steps, args.device, sys.stdout)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
