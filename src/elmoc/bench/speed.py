"""Regenerate the paper's speed tables (Tables 4 and 5) and the LSTM kernel figures.

All figures of one table come from one run, so ratios compare models measured side
by side on the same (noisy, shared) machine.  Sizes are scaled by the recorded
factors of :class:`elmoc.bench.scenarios.Scale`; at scale 1.0 on a GPU the specs
are the paper's.
"""
from __future__ import annotations

import json
import logging
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from elmoc.bench.measure import (TrainStep, elmo_step_flops, matmul_peak_flops, max_batch_under_budget,
                                 peak_step_bytes, robust_seconds, synchronize, synthetic_batch, time_calls)
from elmoc.bench.scenarios import ENCODERS, OUTPUT_LAYERS, TABLE4_ROWS, BenchModel, Scale, build_spec
from elmoc.config import check_choice
from elmoc.errors import ConfigError
from elmoc.lm import LanguageModel
from elmoc.params import count_parameters

log = logging.getLogger(__name__)

SCENARIOS = ("s1", "s2", "s3")
TABLE5_PROTOCOLS = ("auto", "s3", "fixed")


@dataclass
class BenchSettings:
    """Everything a bench run depends on (recorded with the results).

    width_scale / vocab_scale: size factors (1.0 = paper).  memory_budget_mb: S2's
    per-process memory budget.  repeats: timed steps per figure (median reported).
    world: S3 processes.  table5_batch: Table 5 batch for length-20 encoders (GPT uses
    the same number of tokens at length ``gpt_length``).  threads: torch intra-op threads.
    s2_probes: peak-memory measurements of the S2 max-batch search.  warmup_seconds: how
    long batch-1 steps run before the first timed Table 4 figure (see ``_warm_up``).
    table4_rows: Table 4 labels to measure (None: all nine; CONT, the base of the ratios,
    is always measured).  scenarios: Table 4's scenarios, a subset of s1, s2, s3 (S3 also
    needs ``world > 1`` and not ``skip_s3``).  table5_protocol: ``s3`` (the paper's: ``world``
    data-parallel processes, each at the largest batch that fits ``memory_budget_mb``, OOM
    where batch 1 does not), ``fixed`` (one process at ``table5_batch``: the CPU fallback) or
    ``auto`` (``s3`` on CUDA, else ``fixed``).  table5_encoders: Table 5 columns (None: all six).
    s1_interleave: interleave S1's calls round-robin even above 50M parameters in all.
    """

    device: str = "cpu"
    width_scale: float = 0.125
    vocab_scale: float = 0.05
    memory_budget_mb: float = 768.0
    repeats: int = 3
    world: int = 2
    table5_batch: int = 64
    s2_start: int = 8
    threads: int = 1
    skip_s3: bool = False
    s2_probes: int = 8
    gpt_length: int = 512
    lstm_sizes: list = field(default_factory=lambda: [[32, 20, 256, 64], [64, 20, 1024, 256]])
    warmup_seconds: float = 3.0
    table4_rows: list | None = None
    scenarios: list = field(default_factory=lambda: list(SCENARIOS))
    table5_protocol: str = "auto"
    table5_encoders: list | None = None
    s1_interleave: bool = False

    def __post_init__(self):
        counts = ("repeats", "world", "table5_batch", "s2_start", "threads", "s2_probes", "gpt_length")
        if any(getattr(self, k) < 1 for k in counts):
            raise ConfigError(f"bench: {', '.join(counts)} must all be >= 1")
        if self.memory_budget_mb <= 0:
            raise ConfigError(f"bench: memory_budget_mb must be positive, got {self.memory_budget_mb}")
        Scale(self.width_scale, self.vocab_scale)
        labels = [f"{layer} {v}" if v else layer for layer, v in TABLE4_ROWS]
        if self.table4_rows is not None:
            unknown = [r for r in self.table4_rows if r not in labels]
            if unknown:
                raise ConfigError(f"bench: unknown Table 4 row(s) {', '.join(map(repr, unknown))}; choose from "
                                  f"{', '.join(labels)}")
        bad = [x for x in self.scenarios if x not in SCENARIOS]
        if bad or not self.scenarios:
            raise ConfigError(f"bench: scenarios take a non-empty subset of {', '.join(SCENARIOS)}; got {self.scenarios!r}")
        check_choice(self.table5_protocol, TABLE5_PROTOCOLS, "bench: table5_protocol")
        if self.table5_encoders is not None and (not self.table5_encoders
                                                 or any(e not in ENCODERS for e in self.table5_encoders)):
            raise ConfigError(f"bench: table5_encoders take a non-empty subset of {', '.join(ENCODERS)}; "
                              f"got {self.table5_encoders!r}")

    def resolved_table5_protocol(self) -> str:
        """``s3`` or ``fixed``: ``auto`` is ``s3`` on CUDA (the paper's GPUs) unless S3 is skipped
        (``--no-s3``, ``--quick``), ``fixed`` elsewhere."""
        if self.table5_protocol == "auto":
            return "s3" if self.device.startswith("cuda") and not self.skip_s3 else "fixed"
        return self.table5_protocol

    @classmethod
    def quick(cls, **overrides) -> "BenchSettings":
        """A tiny run (under a minute on 2 CPU cores) that exercises every code path."""
        base = dict(width_scale=1 / 32, vocab_scale=0.005, memory_budget_mb=160.0, repeats=2, table5_batch=8,
                    s2_start=4, lstm_sizes=[[8, 10, 32, 8]], skip_s3=True, s2_probes=2, gpt_length=64,
                    warmup_seconds=0.3)
        base.update(overrides)
        return cls(**base)


def build_model(model: BenchModel, device: torch.device, seed: int = 1) -> LanguageModel:
    torch.manual_seed(seed)
    return LanguageModel.from_spec(model.spec, range(model.vocab_size)).to(device)


def bilm_parameters(model: BenchModel) -> int:
    """Trainable parameters of the bi-LM as the paper counts them, at this model's size
    (the one convention of :func:`elmoc.params.count_parameters`, on the meta device).
    For the softmax rows that is the joint bi-LM the pipeline trains (one shared softmax);
    for CONT and FIXED two separate directions."""
    return count_parameters(model.spec, model.vocab_size, ignore_files=True)["paper"]


def per_million_words(seconds: float, batch: int, model: BenchModel, processes: int = 1) -> float:
    words = batch * model.seq_len * processes / model.tokens_per_word
    return seconds / words * 1e6


def _step_seconds(model: BenchModel, batch: int, settings: BenchSettings, device: torch.device,
                  calls_per_repeat: int = 1) -> float:
    """Median seconds of a training step (``repeats * calls_per_repeat`` timed calls)."""
    lm = build_model(model, device)
    step = TrainStep(lm, synthetic_batch(model.vocab_size, batch, model.seq_len, 1, device), device)
    calls = settings.repeats * calls_per_repeat
    return robust_seconds(time_calls(step, device, repeats=calls, warmup=min(calls, 3)))


def _warm_up(model: BenchModel, settings: BenchSettings, device: torch.device) -> None:
    """Run batch-1 steps for a few seconds before the first timed figure.

    The first seconds of a process (heap growth, first-touch page faults, lazy
    library initialization) made the first model's S1 up to 1.4x slower than the
    same step measured later in the same process, which skewed every S1 ratio.
    """
    lm = build_model(model, device)
    step = TrainStep(lm, synthetic_batch(model.vocab_size, 1, model.seq_len, 1, device), device)
    end = time.perf_counter() + settings.warmup_seconds
    while time.perf_counter() < end:
        step()
    synchronize(device)


INTERLEAVE_S1_MAX_PARAMS = 50_000_000


def _s1_seconds(models: list[BenchModel], settings: BenchSettings, device: torch.device) -> dict[str, float]:
    """Median batch-1 step time of each model (S1), by label.

    Batch-1 steps are short and dominated by per-op overhead, so each gets
    ``5 * repeats`` calls.  When all the models fit in memory together (scaled runs:
    under 50M trainable parameters in all) their calls are interleaved round-robin,
    so that the machine's load drift hits every row alike; measured one model after
    another, the first row came out up to 1.4x slower than the same step measured
    later (2026-11-22 runs).  Paper-sized models are measured one after another unless
    ``settings.s1_interleave`` (the caller knows they fit together).
    """
    if not settings.s1_interleave and sum(bilm_parameters(m) for m in models) > INTERLEAVE_S1_MAX_PARAMS:
        return {m.label: _step_seconds(m, 1, settings, device, calls_per_repeat=5) for m in models}
    steps = {m.label: TrainStep(build_model(m, device), synthetic_batch(m.vocab_size, 1, m.seq_len, 1, device),
                                device) for m in models}
    times: dict[str, list[float]] = {label: [] for label in steps}
    for round_ in range(5 * settings.repeats):
        for label, step in steps.items():
            times[label] += time_calls(step, device, 1, warmup=3 if round_ == 0 else 0)
    return {label: robust_seconds(t) for label, t in times.items()}


def s1_environment(device: torch.device) -> dict[str, str]:
    """Environment of the S1 process: the paper times S1 with the GPU's asynchronous
    execution disabled, so on CUDA ``CUDA_LAUNCH_BLOCKING=1`` (read when CUDA initialises,
    hence set in the environment of a fresh process).  Nothing on CPU."""
    return {"CUDA_LAUNCH_BLOCKING": "1"} if device.type == "cuda" else {}


def _s1_child(models: list[BenchModel], settings: BenchSettings, device: str, out_path: str) -> None:
    """Body of the S1 process (spawned): warm up, time S1, write the result JSON."""
    from elmoc.train.precision import retain_freed_host_memory

    torch.set_num_threads(settings.threads)
    retain_freed_host_memory()
    dev = torch.device(device)
    _warm_up(models[0], settings, dev)
    seconds = _s1_seconds(models, settings, dev)
    tmp = out_path + ".tmp"
    Path(tmp).write_text(json.dumps({"seconds": seconds, "environment": {
        k: os.environ.get(k) for k in s1_environment(torch.device("cuda"))}}))
    os.replace(tmp, out_path)


def run_s1(models: list[BenchModel], settings: BenchSettings, device: torch.device) -> tuple[dict[str, float], dict]:
    """S1 of every model (see :func:`_s1_seconds`), after a warm-up; returns (seconds by label,
    the environment S1 ran under).  Where :func:`s1_environment` asks for variables (CUDA),
    S1 runs in a spawned process started with them, since ``CUDA_LAUNCH_BLOCKING`` must be set
    before CUDA initialises (this process has usually initialised it already)."""
    env = s1_environment(device)
    if not env:
        _warm_up(models[0], settings, device)
        return _s1_seconds(models, settings, device), {}
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="elmoc-s1-") as tmp:
        out = str(Path(tmp) / "s1.json")
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # the child starts with these; this process's CUDA is unaffected
        try:
            child = mp.get_context("spawn").Process(target=_s1_child, args=(models, settings, str(device), out))
            child.start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        child.join()
        if child.exitcode != 0 or not Path(out).is_file():
            raise RuntimeError(f"bench: the S1 process exited with code {child.exitcode} (its error is above)")
        result = json.loads(Path(out).read_text())
    log.info("table 4: S1 ran with %s", ", ".join(f"{k}={v}" for k, v in result["environment"].items()))
    return result["seconds"], result["environment"]


def _peak_at(model: BenchModel, device: torch.device):
    def peak(batch: int) -> int:
        def make():
            lm = build_model(model, device)
            return TrainStep(lm, synthetic_batch(model.vocab_size, batch, model.seq_len, 1, device), device)
        return peak_step_bytes(make, device)
    return peak


def _max_batch(model: BenchModel, settings: BenchSettings, device: torch.device) -> tuple[int, float, list]:
    """S2's search: the largest batch whose measured peak fits the budget; (batch, peak MB,
    every probe as [batch, peak MB]).  Batch 0 when batch 1 does not fit (out of memory)."""
    peak_at = _peak_at(model, device)
    probes: list[list[float]] = []

    def probe(b: int) -> int:
        m = peak_at(b)
        probes.append([b, m / 2**20])
        return m

    batch, peak = max_batch_under_budget(probe, int(settings.memory_budget_mb * 2**20), start=settings.s2_start,
                                         max_probes=settings.s2_probes)
    return batch, peak / 2**20, probes


def _data_parallel_seconds(jobs: list[dict], settings: BenchSettings, device: torch.device) -> dict[str, float | None]:
    """Median step seconds per job label on ``settings.world`` processes (None: out of memory)."""
    from elmoc.bench.data_parallel import run_data_parallel

    if device.type == "cuda" and torch.cuda.device_count() < settings.world:
        raise ConfigError(f"bench: {settings.world} data-parallel processes need {settings.world} GPUs, "
                          f"{torch.cuda.device_count()} visible; lower --world (bench.world) or pass --no-s3 "
                          "(and --table5-protocol fixed)")
    log.info("data parallel: %d processes (%s), %d models", settings.world,
             "nccl" if device.type == "cuda" else "gloo", len(jobs))
    return run_data_parallel(jobs, settings.world, device.type, repeats=settings.repeats)


def table4_labels(settings: BenchSettings) -> list[tuple[str, str | None]]:
    """The Table 4 rows to measure, in the table's order; CONT (the base of the ratios) always."""
    if settings.table4_rows is None:
        return list(TABLE4_ROWS)
    wanted = set(settings.table4_rows) | {"CONT"}
    return [(layer, v) for layer, v in TABLE4_ROWS if (f"{layer} {v}" if v else layer) in wanted]


def run_table4(settings: BenchSettings, scratch: Path) -> list[dict]:
    """Rows of Table 4 on the ELMo encoder: params, max batch, S1/S2/S3 and ratios to CONT.

    S1 runs with ``CUDA_LAUNCH_BLOCKING=1`` on CUDA, in a process of its own (:func:`run_s1`).
    Scenarios not in ``settings.scenarios`` stay None (and the max-batch search is skipped
    when neither S2 nor S3 is wanted).
    """
    device = torch.device(settings.device)
    scale = Scale(settings.width_scale, settings.vocab_scale)
    wanted = set(settings.scenarios)
    do_s3 = "s3" in wanted and not settings.skip_s3 and settings.world > 1
    rows, models = [], {}
    row_keys = table4_labels(settings)
    for layer, vocab in row_keys:
        model = build_spec(layer, vocab, "ELMO", scale, scratch)
        models[model.label] = model
    s1_seconds, s1_env = (run_s1(list(models.values()), settings, device) if "s1" in wanted else ({}, {}))
    for layer, vocab in row_keys:
        paper = build_spec(layer, vocab, "ELMO", Scale(), None)
        model = models[paper.label]
        log.info("table 4: %s", model.label)
        batch, peak_mb, probes = (_max_batch(model, settings, device) if ("s2" in wanted or do_s3)
                                  else (None, None, []))
        s2 = None
        if "s2" in wanted and batch:
            s2 = per_million_words(_step_seconds(model, batch, settings, device), batch, model)
        rows.append({"label": model.label, "params_paper_size": bilm_parameters(paper),
                     "params_scaled": bilm_parameters(model), "max_batch": batch, "peak_mb": peak_mb,
                     "s1_step_s": s1_seconds.get(model.label), "s1_environment": s1_env,
                     "s2_s_per_mwords": s2, "s3_s_per_mwords": None, "s2_probes": probes})
    if do_s3:
        jobs = [{"label": r["label"], "spec": models[r["label"]].spec, "vocab_size": models[r["label"]].vocab_size,
                 "batch": r["max_batch"], "seq_len": models[r["label"]].seq_len} for r in rows if r["max_batch"]]
        s3 = _data_parallel_seconds(jobs, settings, device)
        for r in rows:
            if s3.get(r["label"]):
                r["s3_s_per_mwords"] = per_million_words(s3[r["label"]], r["max_batch"], models[r["label"]],
                                                         settings.world)
    base = rows[0]
    for r in rows:
        for key in ("s1_step_s", "s2_s_per_mwords", "s3_s_per_mwords"):
            r[key.split("_")[0] + "_ratio"] = (r[key] / base[key]) if (r[key] and base[key]) else None
    return rows


def table5_protocol(settings: BenchSettings) -> dict:
    """How Table 5 is measured, recorded in the results and named in every caption and figure."""
    name = settings.resolved_table5_protocol()
    cuda = settings.device.startswith("cuda")
    if name == "s3":
        processes = settings.world
        how = (f"{processes} data-parallel processes ({'NCCL, one GPU each' if cuda else 'gloo on CPU'})"
               if processes > 1 else "1 process")
        label = (f"S3 protocol (the paper's: 4 GPUs, maximal batch): {how}, each at the largest batch whose "
                 f"measured peak fits {settings.memory_budget_mb:.0f} MB; OOM where batch 1 does not fit")
        short = f"S3, {processes} x {'GPU' if cuda else 'CPU process'}, max batch"
    else:
        processes = 1
        label = (f"fixed-batch protocol (CPU fallback, not the paper's S3): one process, batch "
                 f"{settings.table5_batch} x 20 tokens (GPT: the same tokens at length {settings.gpt_length})")
        short = f"fixed batch {settings.table5_batch}, 1 process"
    return {"name": name, "processes": processes, "label": label, "short": short}


def run_table5(settings: BenchSettings, scratch: Path) -> list[dict]:
    """Seconds per 1M words of every encoder with every output layer (800K vocabulary).

    Protocol ``s3`` (the paper's, section 5.2.2): each model at the largest batch that fits
    the memory budget (S2's search), timed on ``world`` data-parallel processes (one model
    at a time, all in one process group); a model whose batch 1 does not fit, or whose
    data-parallel step runs out of memory, is recorded as OOM (no time, no ratio), as the
    paper's SAMPLED / TRANS LARGE cell.  Protocol ``fixed``: one process at ``table5_batch``.
    Every row records its protocol, processes and batch per process.
    """
    device = torch.device(settings.device)
    scale = Scale(settings.width_scale, settings.vocab_scale)
    protocol = table5_protocol(settings)
    rows, models = [], {}
    for encoder in settings.table5_encoders or ENCODERS:
        for layer in OUTPUT_LAYERS:
            vocab = "800K" if layer in ("ADAPTIVE", "SAMPLED") else None
            model = build_spec(layer, vocab, encoder, scale, scratch, gpt_length=settings.gpt_length)
            models[(encoder, layer)] = model
            row = {"encoder": encoder, "layer": layer, "protocol": protocol["name"],
                   "processes": protocol["processes"], "batch": None, "seq_len": model.seq_len,
                   "s_per_mwords": None, "ratio": None, "oom": False}
            if protocol["name"] == "fixed":
                row["batch"] = max(1, settings.table5_batch * 20 // model.seq_len)
                log.info("table 5: %s / %s (batch %d x %d)", encoder, layer, row["batch"], model.seq_len)
                row["s_per_mwords"] = per_million_words(_step_seconds(model, row["batch"], settings, device),
                                                        row["batch"], model)
            else:
                row["batch"], _, _ = _max_batch(model, settings, device)
                row["oom"] = not row["batch"]
                log.info("table 5: %s / %s max batch %s x %d", encoder, layer, row["batch"] or "OOM", model.seq_len)
            rows.append(row)
    if protocol["name"] == "s3":
        fitting = [r for r in rows if r["batch"]]
        if protocol["processes"] > 1:
            jobs = [{"label": f"{r['encoder']}/{r['layer']}", "spec": models[(r["encoder"], r["layer"])].spec,
                     "vocab_size": models[(r["encoder"], r["layer"])].vocab_size, "batch": r["batch"],
                     "seq_len": r["seq_len"]} for r in fitting]
            seconds = _data_parallel_seconds(jobs, settings, device)
        else:
            seconds = {f"{r['encoder']}/{r['layer']}": _step_seconds(models[(r["encoder"], r["layer"])], r["batch"],
                                                                    settings, device) for r in fitting}
        for r in fitting:
            sec = seconds.get(f"{r['encoder']}/{r['layer']}")
            if sec is None:  # the data-parallel step ran out of memory
                r["oom"] = True
            else:
                r["s_per_mwords"] = per_million_words(sec, r["batch"], models[(r["encoder"], r["layer"])],
                                                      protocol["processes"])
    for r in rows:
        cont = next(c for c in rows if c["encoder"] == r["encoder"] and c["layer"] == "CONT")
        if r["s_per_mwords"] is not None and cont["s_per_mwords"]:
            r["ratio"] = r["s_per_mwords"] / cont["s_per_mwords"]
    return rows


def run_lstm_kernels(settings: BenchSettings, scratch: Path) -> list[dict]:
    """ELMo LSTM training step: optimized vs per-step reference, CONT share and MFU.

    For each size ``[batch, time, cell, projection]``: forward+backward of the
    2-layer encoder alone (optimized and reference, same parameters and dropout
    masks), a full CONT training step (input layer, encoder, CONT layer and loss,
    backward, clipping, optimizer), the CONT layer + loss alone (forward and backward
    from a fixed encoder output: its share of the step), and the model FLOP
    utilization of the CONT step against the matmul peak measured now.  Each figure
    is the fastest of ``3 * repeats`` interleaved calls.
    """
    from elmoc.bench.reference_lstm import reference_forward

    device = torch.device(settings.device)
    peak = matmul_peak_flops(device)
    rows = []
    for batch, steps, cell, proj in settings.lstm_sizes:
        emb = 300 if proj >= 256 else max(8, proj // 2 * 2)
        model = BenchModel("CONT", {"input": {"type": "fasttext", "vectors": "", "dim": emb},
                                    "encoder": {"type": "elmo_lstm", "cell_size": cell, "projection_size": proj},
                                    "output": {"type": "cosine", "vectors": "", "dim": emb}}, 1000, steps)
        from elmoc.bench.scenarios import table_path

        vectors = table_path(scratch, model.vocab_size, emb)
        model.spec["input"]["vectors"] = model.spec["output"]["vectors"] = vectors
        lm = build_model(model, device)
        enc = lm.encoder
        x = torch.randn(batch, steps, emb, device=device)
        mask = torch.ones(batch, steps, dtype=torch.bool, device=device)
        step = TrainStep(lm, synthetic_batch(model.vocab_size, batch, steps, 1, device), device)
        hidden = torch.randn(batch, steps, proj, device=device, requires_grad=True)

        def fast():
            torch.manual_seed(3)
            enc(x, mask).output.sum().backward()

        def reference():
            torch.manual_seed(3)
            masks = [enc._dropout_mask(batch, x) for _ in enc.lstm_layers]
            reference_forward(enc, x, mask, None, masks).output.sum().backward()

        def output_layer_and_loss():
            out = lm.output_layer(hidden, step.batch.targets, step.batch.mask)
            (out.loss_sum / out.num_tokens.clamp(min=1.0)).backward()

        t_fast, t_ref, t_step, t_out = [], [], [], []
        for _ in range(3 * settings.repeats):  # interleaved, so drift hits all four alike
            t_fast += time_calls(fast, device, 1, warmup=0 if t_fast else 1)
            t_ref += time_calls(reference, device, 1, warmup=0 if t_ref else 1)
            t_step += time_calls(step, device, 1, warmup=0 if t_step else 1)
            t_out += time_calls(output_layer_and_loss, device, 1, warmup=0 if t_out else 1)
        # The fastest call: kernel comparisons want the intrinsic cost, and on a shared
        # machine every slower call is slower only because of other processes.
        fast_s, ref_s, step_s, out_s = map(min, (t_fast, t_ref, t_step, t_out))
        flops = elmo_step_flops(batch * steps, emb, cell, proj, 2, emb)
        rows.append({"batch": batch, "time": steps, "cell": cell, "projection": proj,
                     "fast_ms": fast_s * 1e3, "reference_ms": ref_s * 1e3, "speedup": ref_s / fast_s,
                     "cont_step_ms": step_s * 1e3, "cont_layer_ms": out_s * 1e3, "cont_share": out_s / step_s,
                     "mfu": flops / step_s / peak, "matmul_peak_gflops": peak / 1e9})
    return rows


def run_cont_vocab(settings: BenchSettings, scratch: Path) -> dict:
    """CONT step time at the 2000K vocabulary over that at 40K (same batch).

    The two steps alternate (which one goes first alternates too) and each pair gives
    one ratio; the median of ``10 * repeats`` paired ratios is reported with its
    interquartile range, so drift in the machine's load cancels within a pair.
    """
    device = torch.device(settings.device)
    scale = Scale(settings.width_scale, settings.vocab_scale)
    small = build_spec("CONT", "40K", "ELMO", scale, scratch)
    large = build_spec("CONT", "2000K", "ELMO", scale, scratch)
    batch = settings.table5_batch
    steps = {}
    for m in (small, large):
        lm = build_model(m, device)
        steps[m.vocab_size] = TrainStep(lm, synthetic_batch(m.vocab_size, batch, m.seq_len, 1, device), device)
        steps[m.vocab_size]()  # warm up
    run_small, run_large = steps[small.vocab_size], steps[large.vocab_size]
    t_small, t_large, ratios = [], [], []
    for i in range(10 * settings.repeats):
        if i % 2:
            a = time_calls(run_small, device, 1, warmup=0)[0]
            b = time_calls(run_large, device, 1, warmup=0)[0]
        else:
            b = time_calls(run_large, device, 1, warmup=0)[0]
            a = time_calls(run_small, device, 1, warmup=0)[0]
        t_small.append(a)
        t_large.append(b)
        ratios.append(b / a)
    q1, median, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    return {"batch": batch, "vocab_40k": small.vocab_size, "vocab_2000k": large.vocab_size,
            "step_40k_ms": robust_seconds(t_small) * 1e3, "step_2000k_ms": robust_seconds(t_large) * 1e3,
            "ratio": median, "ratio_q1": q1, "ratio_q3": q3, "pairs": len(ratios)}


def run_all(settings: BenchSettings, scratch: Path, tables: tuple[str, ...] = ("4", "5", "lstm")) -> dict:
    from elmoc.train.precision import retain_freed_host_memory

    torch.set_num_threads(settings.threads)
    retained = retain_freed_host_memory()  # as a training process should (see its docstring)
    from elmoc.encoders.native import native_status

    result: dict = {"settings": asdict(settings), "torch": torch.__version__, "retain_freed_host_memory": retained,
                    "lstm_time_loop": native_status() if settings.device == "cpu" else "Python time loop (CUDA)"}
    if "lstm" in tables:
        result["lstm"] = run_lstm_kernels(settings, scratch)
        result["cont_vocab"] = run_cont_vocab(settings, scratch)
    if "4" in tables:
        result["table4"] = run_table4(settings, scratch)
    if "5" in tables:
        result["table5_protocol"] = table5_protocol(settings)
        result["table5"] = run_table5(settings, scratch)
    return result
