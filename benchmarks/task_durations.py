"""How long each paper task run takes per seed on a GPU, from CPU timings of the real task models.

For each task of ``config/paper.yaml`` (SST-5 BCN, SNLI ESIM, CoNLL-2003 NER, OntoNotes SRL,
CoNLL-2012 coreference), with the task section as the workflow passes it (the config validated
against the workflow schema, its defaults filled, each task section completed by its task class:
the trainer's batch sizes, epochs and patience, ``with_fasttext``) and the task class's paper model sizes:

1. synthetic instances of each dataset's mean length (``DATASETS``, every number with its
   source), their LM features (3 layers x 1024, the paper's ELMo width) in an HDF5 file of the
   ``elmoc extract`` layout read lazily through :class:`~elmoc.features.store.FeatureStore`, as a
   paper-size feature file is, and random 300-d FastText rows where the section sets
   ``with_fasttext``;
2. ``task.build_model`` and the runner's optimizer; then, timed on the CPU, ``--steps`` training
   steps (``task.collate`` of one paper batch, then forward, loss + scalar-mix L2, backward,
   clipping, optimizer step: the runner's step) and ``--steps`` dev-evaluation batches
   (``collate`` of ``eval_batch_size`` instances, forward without gradients, metric update);
   the median of the steps after one warm-up step, in CPU seconds of the process
   (``time.process_time``: other jobs on a shared machine stretch the wall time, recorded
   beside it, but not the CPU time of a one-thread process; at ``--threads N`` it sums N
   threads). Batches are length-bucketed in the runner, so a batch holds instances of about
   one length and, with a step linear in the length, the step at the mean length is the mean step;
3. the aten operations of one step that launch a kernel (views excluded), counted with a
   dispatch mode: on a GPU each is at least one kernel launch, which bounds a step from below
   whatever the GPU's speed. The native time loops are counted by the aten operations they call
   (SRL's highway LSTM: per step a product and two sigmoids forward, a product backward, their
   pointwise work fused in C++), standing in for the CUDA path's product and one fused cell per
   step each way; ``--compare-python-loop`` measures each task a second time with
   ``ELMOC_NATIVE_LSTM=0`` (the Python reference loops, every op a kernel), side by side;
4. this CPU's float32 matmul rate at the same thread count (measured just before and just
   after each task's timings, as the shared machine's load changes), against an H100's published
   dense FP32 peak (51 TFLOP/s PCIe, 67 TFLOP/s SXM; NVIDIA H100 datasheet; the task runner
   leaves TF32 matmuls off) at an assumed 5-20% efficiency for these small LSTM batches: the
   CPU-to-GPU factor of the model's compute, ``GPU_EFFICIENCY`` x peak / CPU rate;
5. per step on a GPU: collate (stays on the CPU; timed here on the caller's thread, as if the
   runner's prefetch thread hid none of it) + model time / factor, plus 10-20 us of host
   and launch time per kernel (``LAUNCH_US``; eager PyTorch on CUDA, assumed). The low bound
   takes the larger of compute and launches (they overlap), the high bound their sum (the
   step syncs: packed-sequence lengths, ``loss.item()``);
6. per epoch = train steps x step + dev batches x eval batch; per seed = epochs x per epoch plus
   one test pass (test size taken as dev size), for the fewest epochs early stopping allows
   (patience + 1) and for the configured maximum; the maximum at the high bound sizes the jobs
   (``plan_jobs``): how many 24-hour jobs a seed needs, hence ``runtime`` and ``retries``.

``--features-layout`` / ``--features-dtype`` write the synthetic feature file as ``elmoc extract
--layout / --dtype`` would (default: the ``allennlp`` layout in float32, read lazily as a
paper-size file of that layout is; a ``contiguous`` file is mapped into memory as the tasks map
it); collate's share of the derived GPU step is printed per task, as timed (on the step's path)
and as the runner's prefetch thread leaves it (only what exceeds the rest of the step waits).

``--device cuda`` (or ``cuda:N``) measures on a GPU instead: the task model and every batch
(``to_device``, as the runner moves them) on it, the model part of each step in wall seconds
with ``torch.cuda.synchronize`` before and after (collate stays on the host and is timed as on
the CPU), the kernels of one step counted by ``torch.profiler`` as the CUDA kernel launches it
records (runtime and driver launch calls, a CUDA graph replay counted once; the kernels the device
ran are kept beside them as ``*_gpu_kernels``; not item 3's dispatch count, which Dynamo's compiled
cells would dodge), and the GPU-hour columns then MEASURED from those
step times (no factor, no assumed launch time): the low bound a step of max(collate, model) (the
runner's prefetch thread builds the next batch during the step) for the fewest epochs, the high
bound collate + model for the maximum. ``--compare-python-loop`` on CUDA compares what differs
there: SRL's highway LSTM with its ``torch.compile``'d cells (the CUDA path), the same loop with
the cells eager (``eager cells``), and the plain autograd loop (``Python loop``, the pre-issue-45
path). The first step of each measurement (compiling the cells, cuBLAS handles) is timed apart
(``*_warmup_s``).

``--tiny`` shrinks every size (models, features, batches, lengths) so that the tests run the
whole script in seconds; its figures mean nothing.

Usage: PYTHONPATH=src .venv/bin/python benchmarks/task_durations.py [--tasks sst5 snli ner srl coref]
    [--steps 3] [--threads 1] [--features-layout allennlp|contiguous] [--features-dtype float32|float16]
    [--json out.json] [--tiny] [--compare-python-loop] [--device cpu|cuda]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
PAPER_CONFIG = REPO / "config" / "paper.yaml"
TASKS = ("sst5", "snli", "ner", "srl", "coref")
FEATURE_LAYERS, FEATURE_DIM, FASTTEXT_DIM = 3, 1024, 300
H100_FP32_TFLOPS = (51.0, 67.0)  # dense FP32, H100 PCIe / SXM (NVIDIA H100 datasheet)
GPU_EFFICIENCY = (0.05, 0.20)  # assumed fraction of that peak reached by these small batches
LAUNCH_US = (10.0, 20.0)  # assumed host + launch time per kernel of eager PyTorch on CUDA
JOB_LIMIT_H, STOP_MARGIN_H = 24.0, 0.5  # a typical partition MaxTime; the stop before it


class Dataset(NamedTuple):
    """What one epoch and one dev pass hold.

    Attributes:
        train, dev: instances per training epoch / per dev pass.
        train_length, dev_length: mean tokens of an instance (SNLI: of the premise; coref: of a
            sentence, a document having ``sentences`` of them).
        second_length: SNLI's mean hypothesis length (0 elsewhere).
        sentences: coref's sentences per document (1 elsewhere).
        source: where each number comes from.
    """

    train: int
    dev: int
    train_length: int
    dev_length: int
    second_length: int = 0
    sentences: int = 1
    source: str = ""


DATASETS = {
    "sst5": Dataset(318_582, 1_101, 4, 19, source=(
        "8,544 train / 1,101 dev trees (Socher et al. 2013; ../shared/data/sst5); training on every subtree "
        "(use_subtrees: true, as AllenNLP's BCN config) gives 318,582 instances (docs/downstream.md); mean "
        "subtree length 4.1 tokens, mean dev sentence 19.3 (measured with SstTask on ../shared/data/sst5)")),
    "snli": Dataset(549_367, 9_842, 15, 15, second_length=8, source=(
        "550,152 train pairs, 549,367 with a gold label; 10,000 dev, 9,842 labelled (Bowman et al. 2015; "
        "../shared/data/snli); premise 15.2 / hypothesis 8.4 tokens (measured on the shared dev and test)")),
    "ner": Dataset(14_041, 3_250, 15, 16, source=(
        "CoNLL-2003 English 14,041 train / 3,250 dev (testa) sentences without -DOCSTART- (HF conll2003 card); "
        "203,621 / 51,362 tokens (Tjong Kim Sang & De Meulder 2003, Table 1): 14.5 / 15.8 per sentence")),
    "srl": Dataset(253_070, 35_297, 26, 26, source=(
        "OntoNotes 5.0 CoNLL-2012 split, one instance per predicate: ~253K train predicates (issue 29), "
        "~35K dev [recalled from the SRL literature, not checked here]; sentences without a predicate add a "
        "few more; mean length weighted by predicates ~26 tokens [inferred: ~17 tokens per sentence on "
        "average, longer sentences hold more predicates]")),
    "coref": Dataset(2_802, 343, 17, 17, sentences=27, source=(
        "CoNLL-2012 English 2,802 train / 343 dev documents (Pradhan et al. 2012); 463.7 tokens per document "
        "(Bamman et al. 2019, LitBank paper, OntoNotes average) as 27 sentences of 17 tokens; documents over "
        "50 sentences are cut into chunks for training, which keeps the token count of an epoch")),
}

# --tiny: every size shrunk so the script runs in seconds (tests); the numbers mean nothing
TINY_MODEL = {
    "sst5": {"pre_encode_dim": 8, "encoder_hidden": 8, "integrator_hidden": 8, "output_dims": [8, 4]},
    "snli": {"encoder_hidden": 8, "projection_dim": 8, "inference_hidden": 8, "output_hidden": 8},
    "ner": {"char_dim": 4, "char_filters": 8, "hidden": 8},
    "srl": {"hidden_dim": 8, "num_layers": 2, "predicate_dim": 4},
    "coref": {"contextualization_size": 8, "contextualization_layers": 1, "ffnn_size": 8, "feature_size": 4,
              "max_span_width": 4, "max_top_antecedents": 5},
}
TINY_SIZES = {"features": (2, 16), "fasttext": 8, "batch": 4, "eval_batch": 4, "length": 5, "sentences": 3}
NUM_SRL_ROLES = 64  # ~64 OntoNotes argument types with C-/R- variants -> 129 BIO tags [inferred]
NER_TYPES = ("LOC", "MISC", "ORG", "PER")


def task_sections(config: Path = PAPER_CONFIG) -> dict:
    """``tasks`` of ``config`` as the workflow passes each section: validated against the
    workflow schema with its defaults filled, each task section completed by its task class.
    Where Snakemake is not installed (the GPU machine) the schema step is left out: each section
    is still checked and completed by its task class, which for config/paper.yaml gives the
    same task sections (the schema's defaults fill keys outside them)."""
    import yaml

    from elmoc.tasks.config import complete_sections

    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    try:
        from snakemake.utils import validate
    except ImportError:
        pass
    else:
        validate(data, str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
    complete_sections(data["tasks"])
    return data["tasks"]


# -- synthetic data -------------------------------------------------------------------------
class Words:
    """Random lower-case words (2-10 letters) and sentences of them, every sentence new."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.vocab = ["".join(self.rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(self.rng.randint(2, 10)))
                      for _ in range(5000)]
        self.made: set[tuple[str, ...]] = set()

    def sentence(self, length: int) -> tuple[str, ...]:
        while True:
            s = tuple(self.rng.choice(self.vocab) for _ in range(length))
            if s not in self.made:
                self.made.add(s)
                return s


def instances(name: str, count: int, length: int, data: Dataset, words: Words, sentences: int) -> list:
    """``count`` instances of task ``name`` whose sentences have ``length`` tokens."""
    rng = words.rng
    if name == "sst5":
        from elmoc.tasks.sst import SentimentInstance
        return [SentimentInstance(words.sentence(length), rng.randrange(5)) for _ in range(count)]
    if name == "snli":
        from elmoc.tasks.snli import PairInstance
        second = max(1, round(length * data.second_length / data.train_length))
        return [PairInstance(words.sentence(length), words.sentence(second), rng.randrange(3)) for _ in range(count)]
    if name == "ner":
        from elmoc.tasks.ner import TaggedSentence
        out = []
        for _ in range(count):
            tags = ["O"] * length
            for i in range(0, length - 1, 4):  # an entity of one or two tokens every 4 tokens
                kind = rng.choice(NER_TYPES)
                tags[i : i + 2] = [f"B-{kind}", f"L-{kind}"] if rng.random() < 0.5 else [f"U-{kind}", "O"]
            out.append(TaggedSentence(words.sentence(length), tuple(tags)))
        return out
    if name == "srl":
        from elmoc.tasks.conll2012 import SrlInstance
        out = []
        for _ in range(count):
            predicate = rng.randrange(length)
            tags = ["O"] * length
            tags[predicate] = "B-V"
            if predicate > 0:
                tags[0 : predicate] = ["B-ARG0"] + ["I-ARG0"] * (predicate - 1)
            out.append(SrlInstance(list(words.sentence(length)), predicate, tags))
        return out
    if name == "coref":
        from elmoc.tasks.coref import CorefInstance
        out = []
        for d in range(count):
            doc = [list(words.sentence(length)) for _ in range(sentences)]
            n = sum(len(s) for s in doc)
            mentions = sorted({(s, s + rng.randrange(3)) for s in rng.sample(range(n - 3), min(n - 3, n // 8))})
            clusters = [mentions[i : i + 3] for i in range(0, len(mentions), 3)]
            out.append(CorefInstance(f"doc{d}", rng.choice(("bc", "bn", "nw", "tc")), doc,
                                     [f"spk{(i // 40) % 3}" for i in range(n)], clusters))
        return out
    raise ValueError(f"unknown task {name!r}")


def write_conll2003(path: Path) -> Path:
    """A CoNLL-2003 file with the four entity types (17 BIOUL tags) and every letter of ``Words``."""
    lines = []
    for kind in NER_TYPES:
        lines += [f"abcdefghijklm NNP I-NP I-{kind}", f"nopqrstuvwxyz NNP I-NP I-{kind}", "the DT I-NP O", ""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def sentences_of(task, pool: list) -> list[tuple[str, ...]]:
    return [tuple(s) for s in task.sentences(pool)]


def write_feature_file(path: Path, sentences: list[tuple[str, ...]], layers: int, dim: int, seed: int,
                       layout: str = "allennlp", dtype: str = "float32") -> None:
    """An HDF5 file as ``elmoc extract --layout LAYOUT --dtype DTYPE`` writes it (its own writer):
    random standard-normal features of each distinct sentence and the ``sentence_to_index`` JSON."""
    from elmoc.features.store import feature_writer

    rng = np.random.default_rng(seed)
    distinct = list(dict.fromkeys(sentences))
    with feature_writer(path, layout, dtype, [len(s) for s in distinct], layers, dim, {"num_layers": layers, "dim": dim}) as add:
        for i, s in enumerate(distinct):
            add(i, s, rng.standard_normal((layers, len(s), dim), dtype=np.float32))


# -- measurements ---------------------------------------------------------------------------
class KernelCounter(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts aten operations that write memory: on a GPU each launches at least one kernel.
    Views (outputs aliasing an input without writing it) launch none and are not counted."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        returns = func._schema.returns
        view = bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)
        if not view:
            self.count += 1
        return func(*args, **(kwargs or {}))


def matmul_gflops(size: int = 1024, calls: int = 5) -> float:
    """Fastest float32 ``size x size`` matmul on this CPU at torch's thread count, in GFLOP/s."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(calls))
    return 2 * size**3 / best / 1e9


def dispatch_us(calls: int = 20000) -> float:
    """Microseconds per tiny ``torch.add`` on this CPU: the framework's cost of one operation."""
    a, b = torch.ones(4), torch.ones(4)
    start = time.process_time()
    for _ in range(calls):
        torch.add(a, b)
    return (time.process_time() - start) / calls * 1e6


def clocks(device: torch.device | None = None) -> tuple[float, float]:
    """(CPU seconds of this process, wall seconds). The estimates use CPU seconds: the time-sharing
    of a loaded machine stretches the wall time, not the CPU time of a one-thread process. On a CUDA
    ``device`` its queued work is waited for first (``torch.cuda.synchronize``)."""
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.process_time(), time.perf_counter()


def cuda_launches(fn, device: torch.device) -> tuple[int, int]:
    """(kernel launch calls, kernels run on the GPU) of ``fn()`` as ``torch.profiler`` records them: the
    host's launch calls (a graph replay counts one) and the device's kernel records (copies and fills not
    counted; a graph's kernels each)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize(device)
    events = prof.events()
    # the launch calls as lstm_profile.py counts them (runtime and driver names, a version suffix ignored)
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from lstm_profile import launch_counts

    counts = launch_counts(e.name for e in events)
    launches = counts["kernels"] + counts["graphs"]
    kernels = sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA
                  and not e.name.startswith(("Memcpy", "Memset")))
    return launches, kernels


# -- the time loops a comparison measures beside the default one -----------------------------
@contextlib.contextmanager
def native_loops_off():
    """``ELMOC_NATIVE_LSTM=0`` inside: the CPU runs the Python reference loops (restored after)."""
    saved = os.environ.get("ELMOC_NATIVE_LSTM")
    os.environ["ELMOC_NATIVE_LSTM"] = "0"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("ELMOC_NATIVE_LSTM", None)
        else:
            os.environ["ELMOC_NATIVE_LSTM"] = saved


@contextlib.contextmanager
def highway_loops(choose):
    """SRL's highway LSTM takes the loops ``choose(tensor)`` returns inside (``None``: the reference
    autograd loop); ``elmoc.nn.alternating_lstm.time_loops`` is restored after."""
    from elmoc.nn import alternating_lstm

    saved = alternating_lstm.time_loops
    alternating_lstm.time_loops = choose
    try:
        yield
    finally:
        alternating_lstm.time_loops = saved


def _eager_cells(_tensor, loops={}):  # noqa: B006 (one set of loops per process)
    from elmoc.nn.alternating_lstm import PythonLoops

    return loops.setdefault("eager", PythonLoops(compiled=False))


# per device type: (row suffix, context manager) measured after the default loop by --compare-python-loop.
# On a CPU the default is the C++ loop; on CUDA both are Python loops, so what differs is the cells:
# compiled (the default), eager, or no hand-written backward at all (the reference autograd loop)
COMPARED_LOOPS = {
    "cpu": (("Python loop", native_loops_off),),
    "cuda": (("eager cells", lambda: highway_loops(_eager_cells)),
             ("Python loop", lambda: highway_loops(lambda _tensor: None))),
}


def _timed(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


class TaskSetup(NamedTuple):
    """A paper task model built as ``measure_task`` times it (:func:`build_task_model`)."""

    task: object
    trainer: object
    model: torch.nn.Module
    params: list
    optimizer: torch.optim.Optimizer
    decay: object
    inputs: object
    store: object
    features: Path
    train_pool: list
    dev_pool: list
    batch: int
    eval_batch: int
    train_length: int
    dev_length: int
    device: torch.device


def build_task_model(name: str, section: dict, tiny: bool, workdir: Path, seed: int = 1,
                     layout: str = "allennlp", dtype: str = "float32", device: str = "cpu") -> TaskSetup:
    """Task ``name``'s model from its ``section`` at paper size (``tiny``: ``TINY_MODEL``), the
    runner's optimizer, and a train and a dev pool of synthetic instances of the dataset's mean
    lengths whose features are in a feature file under ``workdir`` (close ``store``, remove ``features``)."""
    from elmoc.tasks.config import build_task
    from elmoc.tasks.embedder import TaskInputs
    from elmoc.tasks.runner import TrainerConfig, task_optimizer
    from elmoc.features.store import FeatureStore

    data = DATASETS[name]
    section = {**section, "train": None, "dev": None, "test": None}
    if name == "ner":  # its model reads the tag set and the characters from the files
        section.update(dict.fromkeys(("train", "dev", "test"), str(write_conll2003(workdir / "ner.txt"))))
    if tiny:
        section["model"] = {**(section.get("model") or {}), **TINY_MODEL[name]}
    task, trainer_values = build_task(section)
    trainer = TrainerConfig.from_dict(trainer_values, task.default_trainer)
    layers, dim = TINY_SIZES["features"] if tiny else (FEATURE_LAYERS, FEATURE_DIM)
    batch = min(TINY_SIZES["batch"], trainer.batch_size) if tiny else trainer.batch_size
    eval_batch = min(TINY_SIZES["eval_batch"], trainer.eval_batch_size) if tiny else trainer.eval_batch_size
    train_length = TINY_SIZES["length"] if tiny else data.train_length
    dev_length = TINY_SIZES["length"] if tiny else data.dev_length
    sentences = TINY_SIZES["sentences"] if tiny else data.sentences
    words = Words(seed)
    train_pool = instances(name, batch, train_length, data, words, sentences)
    dev_pool = instances(name, eval_batch, dev_length, data, words, sentences)
    if name == "srl":
        task.labels = ["O"] + [f"{p}-{r}" for r in ["V", "ARG0"] + [f"R{i}" for i in range(NUM_SRL_ROLES - 2)]
                               for p in "BI"]
    features = workdir / f"{name}.hdf5"
    write_feature_file(features, sentences_of(task, train_pool) + sentences_of(task, dev_pool), layers, dim, seed,
                       layout, dtype)
    # an allennlp-layout file is read lazily, as a paper-size one is; a contiguous one is mapped
    store = FeatureStore(features, max_memory_bytes=0)
    vectors, vocab = None, None
    if section.get("with_fasttext"):
        vocab = [w.lower() if task.lowercase_words else w for w in words.vocab]
        vocab = list(dict.fromkeys(vocab))
        vectors = np.random.default_rng(seed).standard_normal(
            (len(vocab), TINY_SIZES["fasttext"] if tiny else FASTTEXT_DIM), dtype=np.float32)
    inputs = TaskInputs(vectors, vocab, store, lowercase=task.lowercase_words)
    torch.manual_seed(seed)
    dev = torch.device(device)
    model = task.build_model(inputs).to(dev)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = task_optimizer(params, trainer)
    decay = (torch.optim.lr_scheduler.StepLR(optimizer, trainer.lr_decay_steps, trainer.lr_decay)
             if trainer.lr_decay else None)
    return TaskSetup(task, trainer, model, params, optimizer, decay, inputs, store, features, train_pool, dev_pool,
                     batch, eval_batch, train_length, dev_length, dev)


def training_step(s: TaskSetup):
    """The runner's training step of ``s``'s model on a collated batch ``b``: to the device, loss
    + scalar-mix L2, backward, clipping, optimizer step (and learning-rate decay)."""
    from elmoc.tasks.runner import to_device

    model, trainer, params, optimizer, decay = s.model, s.trainer, s.params, s.optimizer, s.decay
    cuda = s.device.type == "cuda"

    def update(b: dict) -> None:
        if cuda:
            b = to_device(b, s.device)
        loss = model(b).loss
        if trainer.mix_l2:
            loss = loss + trainer.mix_l2 * model.mix_penalty()
        optimizer.zero_grad()
        loss.backward()
        if trainer.grad_value:
            torch.nn.utils.clip_grad_value_(params, trainer.grad_value)
        if trainer.grad_norm:
            torch.nn.utils.clip_grad_norm_(params, trainer.grad_norm)
        optimizer.step()
        if decay is not None:
            decay.step()
        loss.item()

    return update


def measure_task(name: str, section: dict, steps: int, tiny: bool, workdir: Path, seed: int = 1,
                 layout: str = "allennlp", dtype: str = "float32", device: str = "cpu") -> dict:
    """CPU seconds of one training step and one dev-evaluation batch of task ``name`` (medians of
    ``steps`` after a warm-up), their collate parts, and the kernels of each. On a CUDA ``device``
    the model parts are synchronized wall seconds and the kernels the profiler's launches."""
    from elmoc.tasks.runner import to_device

    s = build_task_model(name, section, tiny, workdir, seed, layout, dtype, device)
    task, trainer, model, params, inputs, store, features = (s.task, s.trainer, s.model, s.params, s.inputs,
                                                             s.store, s.features)
    batch, eval_batch, train_length, dev_length = s.batch, s.eval_batch, s.train_length, s.dev_length
    train_pool, dev_pool, dev = s.train_pool, s.dev_pool, s.device
    cuda = dev.type == "cuda"
    update = training_step(s)

    def evaluate(b: dict) -> None:
        """One dev batch as the runner's ``evaluate`` scores it (decoding included)."""
        if cuda:
            b = to_device(b, dev)
        metric = task.new_metric()
        metric.reset()
        with torch.no_grad():
            metric.update(model(b).predictions, b)

    result = {"batch_size": batch, "eval_batch_size": eval_batch, "train_length": train_length,
              "dev_length": dev_length, "with_fasttext": bool(section.get("with_fasttext")),
              "input_dim": model.embedder.output_dim, "parameters": sum(p.numel() for p in params),
              "epochs": trainer.epochs, "patience": trainer.patience, "device": str(dev)}
    for key, pool, run in (("train", train_pool, update), ("eval", dev_pool, evaluate)):
        model.train(key == "train")
        timings = []
        for _ in range(1 + steps):  # a warm-up step, then the timed ones
            t0 = clocks(dev)
            b = task.collate(pool, inputs)
            t1 = clocks(dev)
            run(b)
            t2 = clocks(dev)
            timings.append([t1[0] - t0[0], t2[0] - t1[0], t1[1] - t0[1], t2[1] - t1[1]])
        for i, part in enumerate(("collate_s", "model_s", "collate_wall_s", "model_wall_s")):
            result[f"{key}_{part}"] = statistics.median(t[i] for t in timings[1:])
        b = task.collate(pool, inputs)
        if cuda:  # the GPU's step is its wall time; its kernels are the launches the profiler records
            result[f"{key}_model_cpu_s"] = result[f"{key}_model_s"]
            result[f"{key}_model_s"] = result[f"{key}_model_wall_s"]
            result[f"{key}_warmup_s"] = timings[0][3]
            result[f"{key}_kernels"], result[f"{key}_gpu_kernels"] = cuda_launches(lambda: run(b), dev)
        else:  # (not on CUDA: Dynamo steps aside under a dispatch mode, so compiled cells would count eagerly)
            counter = KernelCounter()
            with counter:
                run(b)
            result[f"{key}_kernels"] = counter.count
    store.close()
    features.unlink()
    return result


# -- arithmetic -----------------------------------------------------------------------------
def gpu_seconds(collate_s: float, model_s: float, kernels: int, factor: float, launch_us: float,
                overlap: bool) -> float:
    """One step on a GPU: collate on the CPU + the model's CPU time / ``factor`` and
    ``kernels`` x ``launch_us``, overlapped (the larger) or not (the sum)."""
    compute, launches = model_s / factor, kernels * launch_us * 1e-6
    return collate_s + (max(compute, launches) if overlap else compute + launches)


def estimate(m: dict, data: Dataset, factors: tuple[float, float] | None) -> dict:
    """Hours per seed on a GPU from the CPU measurements ``m``: the low bound (fast factor,
    short launches, overlapped, the fewest epochs: patience + 1) and the high bound (slow
    factor, long launches, summed, the maximum epochs); and the jobs that need.

    ``factors`` None: ``m`` was measured on the GPU (``--device cuda``), so its step times are
    used as they are: the low bound a step of max(collate, model) (collate built ahead on the
    runner's prefetch thread), the high bound collate + model."""
    steps = math.ceil(data.train / m["batch_size"])
    dev_batches = math.ceil(data.dev / m["eval_batch_size"])
    out = {"train_steps": steps, "dev_batches": dev_batches, "gpu_hours": "derived" if factors else "measured"}
    for bound, epochs in (("low", m["patience"] + 1), ("high", m["epochs"])):
        # the shares below are of a step that waits for its collate (built ahead: the *_exposed ones)
        whole = (m["train_collate_s"] + m["train_model_s"], m["eval_collate_s"] + m["eval_model_s"])
        if factors is None:
            step, evaluation = ((max(m["train_collate_s"], m["train_model_s"]), max(m["eval_collate_s"], m["eval_model_s"]))
                                if bound == "low" else whole)
        else:
            factor, launch, overlap = (factors[1], LAUNCH_US[0], True) if bound == "low" else (factors[0], LAUNCH_US[1], False)
            step = gpu_seconds(m["train_collate_s"], m["train_model_s"], m["train_kernels"], factor, launch, overlap)
            evaluation = gpu_seconds(m["eval_collate_s"], m["eval_model_s"], m["eval_kernels"], factor, launch,
                                     overlap)
            whole = (step, evaluation)
        epoch = steps * step + dev_batches * evaluation
        out[bound] = {"step_s": step, "eval_batch_s": evaluation, "epoch_h": epoch / 3600, "epochs": epochs,
                      "seed_h": (epochs * epoch + dev_batches * evaluation) / 3600,
                      "train_collate_share": m["train_collate_s"] / whole[0],
                      "eval_collate_share": m["eval_collate_s"] / whole[1],
                      # the runner builds batches on a background thread (elmoc.tasks.prefetch): a step waits
                      # only for the collate time beyond the rest of the previous step (GIL contention ignored)
                      "train_collate_exposed": exposed_share(m["train_collate_s"], whole[0]),
                      "eval_collate_exposed": exposed_share(m["eval_collate_s"], whole[1])}
    return {**out, **plan_jobs(out["high"]["seed_h"])}


def exposed_share(collate_s: float, step_s: float) -> float:
    """Collate's share of a step built ahead on another thread: a step of ``step_s`` (collate
    included) then takes max(collate, rest) and waits max(0, collate - rest) of it."""
    rest = step_s - collate_s
    return max(0.0, collate_s - rest) / max(collate_s, rest)


def plan_jobs(hours: float, limit_h: float = JOB_LIMIT_H, margin_h: float = STOP_MARGIN_H) -> dict:
    """``runtime`` (minutes) and ``retries`` for a run of ``hours``: one job with twice the time
    (rounded up to the hour) when that fits in ``limit_h``, else ``limit_h`` jobs, each
    stopping ``margin_h`` early, as many as the hours need; plus 2 spare retries either way
    (a node failure, a preemption)."""
    if 2 * hours <= limit_h:
        return {"jobs": 1, "runtime": int(60 * max(1, math.ceil(2 * hours))), "retries": 2}
    jobs = math.ceil(hours / (limit_h - margin_h))
    return {"jobs": jobs, "runtime": int(60 * limit_h), "retries": jobs - 1 + 2}


# -- report ---------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    p.add_argument("--steps", type=int, default=3, help="timed steps per measurement, after one warm-up")
    p.add_argument("--threads", type=int, default=1, help="torch threads; keep 1: the times are the process's CPU seconds, summed over threads "
                        "(the factor's matmul rate is measured at the same count)")
    p.add_argument("--config", type=Path, default=PAPER_CONFIG, help="workflow config with the task sections")
    p.add_argument("--tiny", action="store_true", help="every size shrunk: for the tests, the figures mean nothing")
    p.add_argument("--features-layout", choices=("allennlp", "contiguous"), default="allennlp",
                   help="layout of the synthetic feature file (elmoc extract --layout; default allennlp)")
    p.add_argument("--features-dtype", choices=("float32", "float16"), default="float32",
                   help="its stored precision (elmoc extract --dtype; default float32)")
    p.add_argument("--json", type=Path, help="write the figures here")
    p.add_argument("--compare-python-loop", action="store_true",
                   help="measure each task again with the other time loops: on a CPU with ELMOC_NATIVE_LSTM=0 (the "
                   "Python time loops); on CUDA with SRL's cells eager, then with the reference autograd loop")
    p.add_argument("--device", default="cpu",
                   help="cpu (default: CPU seconds, GPU hours derived) or cuda[:N] (the model and batches on the GPU, "
                   "synchronized wall seconds, the profiler's kernel launches, GPU hours measured)")
    args = p.parse_args(argv)
    if args.steps < 1:
        print("--steps must be at least 1", file=sys.stderr)
        return 2
    try:
        device = torch.device(args.device)
    except RuntimeError as e:
        print(f"--device {args.device}: {e}", file=sys.stderr)
        return 2
    cuda = device.type == "cuda"
    if device.type not in COMPARED_LOOPS:
        print(f"--device {args.device}: only cpu and cuda are measured", file=sys.stderr)
        return 2
    if cuda and not torch.cuda.is_available():
        print(f"--device {args.device}: no CUDA GPU is visible here (torch {torch.__version__}); run on the CPU "
              "with --device cpu", file=sys.stderr)
        return 2
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        try:
            sections = task_sections(args.config)
        except Exception as e:  # noqa: BLE001 (an unreadable or invalid config: one line)
            print(f"{args.config}: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
            return 2
        missing = [t for t in args.tasks if t not in sections]
        if missing:
            print(f"{args.config}: no task section tasks.{missing[0]}", file=sys.stderr)
            return 2
        size = 256 if args.tiny else 1024
        result = {"threads": args.threads, "steps": args.steps, "tiny": args.tiny, "device": str(device),
                  "cpu_dispatch_us": dispatch_us(2000 if args.tiny else 20000), "launch_us": LAUNCH_US,
                  "h100_fp32_tflops": H100_FP32_TFLOPS, "gpu_efficiency": GPU_EFFICIENCY, "tasks": {}}
        if cuda:
            result.update(device_name=torch.cuda.get_device_name(device), cuda=torch.version.cuda,
                          torch=torch.__version__,
                          timing="wall seconds, torch.cuda.synchronize before and after each part; collate on the host")
            print(f"device {result['device_name']} (torch {torch.__version__}, CUDA {torch.version.cuda}); threads "
                  f"{args.threads}; times: wall seconds with torch.cuda.synchronize before and after each part, the "
                  "batch's copy to the GPU in the model part (collate on the host, its CPU seconds); kernels/step: "
                  "CUDA launches recorded by torch.profiler; GPU hours measured from these step times")
            print("task | batch | GPU step ms (collate + model) | kernels/step | eval batch | GPU eval ms (collate + "
                  "model) | first step s | steps/epoch | dev batches | GPU h/epoch (measured) | epochs | GPU h per seed "
                  "(measured) | 24 h jobs | runtime | retries")
        else:
            print(f"threads {args.threads}; CPU cost of one op {result['cpu_dispatch_us']:.1f} us; H100 FP32 "
                  f"{H100_FP32_TFLOPS[0]:.0f}-{H100_FP32_TFLOPS[1]:.0f} TFLOP/s x {GPU_EFFICIENCY[0]:.0%}-{GPU_EFFICIENCY[1]:.0%}; "
                  f"{LAUNCH_US[0]:.0f}-{LAUNCH_US[1]:.0f} us per kernel")
            print("task | batch | CPU step ms (collate + model) | kernels/step | eval batch | CPU eval ms (collate + model) | "
                  "CPU GFLOP/s | factor | steps/epoch | dev batches | GPU h/epoch | epochs | GPU h per seed | 24 h jobs | "
                  "runtime | retries")
        shares = []
        result.update(features_layout=args.features_layout, features_dtype=args.features_dtype)
        runs = [(name, contextlib.nullcontext) for name in args.tasks]
        if args.compare_python_loop:
            runs = [run for name in args.tasks for run in
                    [(name, contextlib.nullcontext)]
                    + [(f"{name} ({suffix})", switch) for suffix, switch in COMPARED_LOOPS[device.type]]]
        with tempfile.TemporaryDirectory(prefix="task-durations-") as tmp:
            for label, switch in runs:
                name = label.split()[0]
                with switch():
                    # the CPU's matmul rate just before and after the task's timings (the machine's load
                    # changes): the factor and the timings it divides see the same machine
                    before = None if cuda else matmul_gflops(size)
                    m = measure_task(name, sections[name], args.steps, args.tiny, Path(tmp),
                                     layout=args.features_layout, dtype=args.features_dtype, device=str(device))
                    gflops = None if cuda else (before + matmul_gflops(size)) / 2
                factors = None if cuda else tuple(peak * 1e3 * eff / gflops
                                                  for peak, eff in zip(H100_FP32_TFLOPS, GPU_EFFICIENCY))
                e = estimate(m, DATASETS[name], factors)
                result["tasks"][label] = {**m, **e, "cpu_matmul_gflops": gflops, "factors": factors,
                                          "dataset": DATASETS[name]._asdict()}
                ms = {k: 1e3 * m[k] for k in ("train_collate_s", "train_model_s", "eval_collate_s", "eval_model_s")}
                rate = (f"{max(m['train_warmup_s'], m['eval_warmup_s']):.1f}" if cuda else
                        f"{gflops:.1f} | {factors[0]:.0f}-{factors[1]:.0f}")
                print(f"{label} | {m['batch_size']} | {ms['train_collate_s'] + ms['train_model_s']:.0f} "
                      f"({ms['train_collate_s']:.0f} + {ms['train_model_s']:.0f}) | {m['train_kernels']} | "
                      f"{m['eval_batch_size']} | {ms['eval_collate_s'] + ms['eval_model_s']:.0f} "
                      f"({ms['eval_collate_s']:.0f} + {ms['eval_model_s']:.0f}) | {rate} | "
                      f"{e['train_steps']} | {e['dev_batches']} | "
                      f"{e['low']['epoch_h']:.2f}-{e['high']['epoch_h']:.2f} | {e['low']['epochs']}-{e['high']['epochs']} | "
                      f"{e['low']['seed_h']:.1f}-{e['high']['seed_h']:.1f} | {e['jobs']} | {e['runtime']} | {e['retries']}",
                      flush=True)
                shares.append(" | ".join([label] + [f"{e['low'][k]:.0%}-{e['high'][k]:.0%}" for k in (
                    "train_collate_share", "eval_collate_share", "train_collate_exposed", "eval_collate_exposed")]))
            print(f"collate's share of a GPU step ({'measured' if cuda else 'derived'}), features "
                  f"{args.features_layout} {args.features_dtype}:\n"
                  "task | train step (low-high bound) | eval batch | train, built ahead | eval, built ahead\n"
                  + "\n".join(shares))
    finally:
        torch.set_num_threads(threads)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
