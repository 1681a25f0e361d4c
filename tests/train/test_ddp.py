"""Data parallelism with the gloo backend: 2 processes == 1 process on the same global batch,
for every output layer (CONT, FIXED, SAMPLED, ADAPTIVE, SUBWORD).

One spawn of 2 gloo processes trains all five tiny LMs (one process group); the
module fixture then trains the 1-process references.  Deterministic layers are
compared with the trainer itself on the global batch; the sampled ones (SAMPLED,
FIXED) with a 1-process reference that gives each half of the batch the negatives
of the rank that trained it.  Inside the workers every Python collective is
wrapped to record sparse tensors and broadcast bytes, and the DDP object the
trainer builds is inspected.
"""
import json
import logging
import os
import shutil
import time
from collections import Counter

import numpy as np
import pytest
import torch
import torch.distributed as dist
from ddp_compare import finish_worker, join_gloo, max_abs_diff, reference_sampled, spawn_runs

from elmoc.data.batches import LMBatch
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.lm import LanguageModel
from elmoc.model_file import load_checkpoint
from elmoc.train.loop import train

B, T, V, DIM, WORLD, STEPS = 4, 5, 30, 8, 2, 6
LAYERS = ("cont", "fixed", "sampled", "adaptive", "subword")
SAMPLED = ("fixed", "sampled")  # negatives drawn per rank
TOL = 1e-5


def _vocab():
    return Vocabulary.from_counts(Counter({f"w{i}": 100 - i for i in range(V - 4)}))


def _rows(window):
    """The global batch of one window, (B, T + 1) ids: rows 0-1 (rank 0) use every id,
    rows 2-3 (rank 1) only ids < 20, so rank 1 never has a target in ADAPTIVE's last
    tail cluster [20, 30) while rank 0 does."""
    rows = []
    for r in range(B):
        start = window * T + 37 * r
        if r < B // 2:
            rows.append([4 + (i * 7) % (V - 4) for i in range(start, start + T + 1)])
        else:
            rows.append([4 + (i * 5) % 16 for i in range(start, start + T + 1)])
    return torch.tensor(rows)


def make_batches(position, rank, world):
    window = 0 if position is None else position["window"]
    per = B // world
    for w in range(window, STEPS):
        data = _rows(w)[rank * per:(rank + 1) * per]
        yield LMBatch(data[:, :-1], data[:, 1:], data[:, :-1] > 0), {"epoch": 0, "window": w + 1}


def make_heldout():
    """Two windows of 3 rows: uneven shards (2 + 1 rows) with carried state."""
    stream = torch.tensor([4 + (i * 11) % (V - 4) for i in range(3 * (2 * T + 1))]).view(3, 2 * T + 1)
    for w in range(2):
        data = stream[:, w * T:w * T + T + 1]
        yield LMBatch(data[:, :-1], data[:, 1:], data[:, :-1] > 0)


def _spec(tmp, layer, recurrent_dropout=0.0):
    vec = os.path.join(tmp, "vec.npy")
    outputs = {
        "cont": {"type": "cosine", "vectors": vec},
        "fixed": {"type": "fixed", "vectors": vec, "num_samples": 6},
        "sampled": {"type": "sampled", "num_samples": 6},
        "adaptive": {"type": "adaptive", "cutoffs": [10, 20], "div_value": 2.0},
        "subword": {"type": "subword"},
    }
    inputs = {"type": "subword", "dim": 6} if layer == "subword" else {"type": "fasttext", "vectors": vec}
    return {
        "input": inputs,
        "encoder": {"type": "elmo_lstm", "num_layers": 2, "cell_size": 12, "projection_size": 6,
                    "recurrent_dropout": recurrent_dropout},
        "output": outputs[layer],
        "optimizer": {"type": "adam", "lr": 0.01},
        "train": {"batch_size": B, "bptt": T, "log_every": 100, "checkpoint_every": 0, "seed": 5,
                  "reset_state": False},
    }


def _record_collectives(log):
    """Wrap torch.distributed's Python collectives: count sparse tensors and broadcast bytes."""
    def wrap(name):
        original = getattr(dist, name)

        def checked(*args, **kwargs):
            tensors = []
            for a in list(args) + list(kwargs.values()):
                if isinstance(a, torch.Tensor):
                    tensors.append(a)
                elif isinstance(a, (list, tuple)):
                    tensors += [t for t in a if isinstance(t, torch.Tensor)]
            log["sparse"] += sum(t.is_sparse for t in tensors)
            if "broadcast" in name:
                log["broadcast_bytes"] += sum(t.numel() * t.element_size() for t in tensors)
            if name == "all_gather" and log["exchanging"]:  # the sparse exchange: (touched rows, d)
                log["gathered_rows"] = max([log["gathered_rows"]] + [t.shape[0] for t in tensors if t.dim() == 2])
            return original(*args, **kwargs)
        setattr(dist, name, checked)

    for name in ("all_reduce", "all_gather", "all_gather_into_tensor", "broadcast", "_broadcast_coalesced",
                 "reduce", "reduce_scatter", "gather", "scatter", "all_to_all"):
        if hasattr(dist, name):
            wrap(name)


def _worker(rank, port, tmp):
    join_gloo(rank, port, WORLD)  # every train() below joins this group
    import elmoc.train.loop as loop

    log = {"sparse": 0, "broadcast_bytes": 0, "gathered_rows": 0, "exchanging": False}
    _record_collectives(log)
    wrapped = {}
    wrap_model = loop.wrap_model

    def recording_wrap(model, device):
        wrapped["ddp"] = wrap_model(model, device)
        return wrapped["ddp"]

    loop.wrap_model = recording_wrap
    exchange = loop.average_sparse_gradients

    def recording_exchange(*args):
        log["exchanging"] = True
        exchange(*args)
        log["exchanging"] = False

    loop.average_sparse_gradients = recording_exchange
    report = {}
    vocab = _vocab()
    for layer in LAYERS:
        log.update(sparse=0, broadcast_bytes=0, gathered_rows=0)
        train(_spec(tmp, layer), vocab, os.path.join(tmp, "ddp", layer), make_batches, make_heldout)
        ddp = wrapped.pop("ddp")
        core = ddp.module
        sparse = {id(p) for p in core.output_layer.sparse_parameters()}
        report[layer] = {
            **log,
            "param_bytes": sum(p.numel() * p.element_size() for p in core.parameters()),
            "buffers": [n for n, _ in core.named_buffers()],
            "ignored": sorted(ddp.parameters_to_ignore),
            "sparse_names": sorted(n for n, p in core.named_parameters() if id(p) in sparse),
            "ddp_sees_sparse": any(id(p) in sparse for p in ddp._module_parameters),
            "forward_sync_buffers": ddp.forward_sync_buffers,
            "find_unused_parameters": ddp.find_unused_parameters,
        }
    # SAMPLED stopped after 3 steps and resumed: carried state and negatives per rank
    first = _spec(tmp, "sampled")
    first["train"]["max_steps"] = 3
    train(first, vocab, os.path.join(tmp, "resumed"), make_batches, make_heldout)
    train(_spec(tmp, "sampled"), vocab, os.path.join(tmp, "resumed"), make_batches, make_heldout)
    # recurrent dropout on: every rank's masks continue (CPU generator states of both ranks)
    train(_spec(tmp, "cont", 0.1), vocab, os.path.join(tmp, "dropout", "straight"), make_batches, make_heldout)
    first = _spec(tmp, "cont", 0.1)
    first["train"]["max_steps"] = 3
    train(first, vocab, os.path.join(tmp, "dropout", "resumed"), make_batches, make_heldout)
    if rank == 0:  # resumed by 1 process in test_resume_under_another_process_count
        os.makedirs(os.path.join(tmp, "relayout"))
        shutil.copy(os.path.join(tmp, "dropout", "resumed", "checkpoint.pt"), os.path.join(tmp, "relayout"))
    train(_spec(tmp, "cont", 0.1), vocab, os.path.join(tmp, "dropout", "resumed"), make_batches, make_heldout)
    report["group_kept"] = dist.is_initialized()  # train() leaves a group it did not create alone
    # rank 0 alone sees the job's end time near / wants a checkpoint every step: all ranks follow
    timed = _spec(tmp, "cont")
    timed["train"].update(checkpoint_every=0, checkpoint_minutes=1e-9)
    train(timed, vocab, os.path.join(tmp, "timed"), make_batches, make_heldout)
    if rank == 0:
        os.environ["SLURM_JOB_END_TIME"] = str(int(time.time()) + 100)
    limited = train(_spec(tmp, "cont"), vocab, os.path.join(tmp, "limited"), make_batches, make_heldout)
    os.environ.pop("SLURM_JOB_END_TIME", None)
    report["limited"] = [limited.steps, limited.interrupted]
    finish_worker(tmp, rank, report)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("ddp"))
    return tmp, spawn_runs(tmp, _worker, WORLD, V, DIM)


@pytest.mark.slow
@pytest.mark.parametrize("layer", LAYERS)
def test_two_gloo_processes_match_one(runs, layer):
    tmp, reports = runs
    vocab, spec = _vocab(), _spec(tmp, layer)
    ddp = load_checkpoint(os.path.join(tmp, "ddp", layer, "checkpoint.pt"))
    ddp_heldout = json.load(open(os.path.join(tmp, "ddp", layer, "heldout.json")))
    if layer in SAMPLED:
        model, optimizers, heldout = reference_sampled(LanguageModel, spec, vocab, make_batches, make_heldout, WORLD)
    else:
        train(spec, vocab, os.path.join(tmp, "single", layer), make_batches, make_heldout)
        single = load_checkpoint(os.path.join(tmp, "single", layer, "checkpoint.pt"))
        assert ddp["tokens"] == single["tokens"]
        model, optimizers = single["model"], single["optimizers"]
        heldout = json.load(open(os.path.join(tmp, "single", layer, "heldout.json")))["history"][-1]
    assert ddp["step"] == STEPS
    param_diff = max_abs_diff(ddp["model"], model, "model")
    optim_diff = max_abs_diff(ddp["optimizers"], optimizers, "optimizers")
    print(f"\nDDP {layer}: max |param diff| {param_diff:.2e}, max |optimizer state diff| {optim_diff:.2e}")
    assert param_diff <= TOL and optim_diff <= TOL
    # the sharded heldout evaluation (2 + 1 rows, carried state) gives the 1-process sums
    after = ddp_heldout["history"][-1]
    assert after["eval_tokens"] == heldout["eval_tokens"] == 2 * 3 * T
    assert after["value"] == pytest.approx(heldout["value"], rel=1e-5)
    if layer == "cont":
        assert after["constant_baseline"] == pytest.approx(heldout["constant_baseline"], rel=1e-6)


@pytest.mark.slow
def test_resume_continues_every_ranks_rows_and_negatives(runs):
    """2 processes, SAMPLED with carried state: 3 steps + resume to 6 == 6 steps straight.
    The checkpoint holds the global batch's state (both ranks' rows)."""
    tmp, _ = runs
    resumed = load_checkpoint(os.path.join(tmp, "resumed", "checkpoint.pt"))
    straight = load_checkpoint(os.path.join(tmp, "ddp", "sampled", "checkpoint.pt"))
    assert resumed["step"] == straight["step"] == STEPS
    assert all(h.shape[0] == B and c.shape[0] == B for h, c in straight["state"])
    for key in ("model", "optimizers", "state"):
        assert max_abs_diff(resumed[key], straight[key], key) == 0.0, key


@pytest.mark.slow
def test_resume_with_dropout_restores_every_ranks_generators(runs):
    """2 processes, recurrent dropout 0.1 (masks from each rank's CPU generator): 3 steps +
    resume to 6 == 6 steps straight, bit for bit; the checkpoint holds both ranks' states."""
    tmp, reports = runs
    resumed = load_checkpoint(os.path.join(tmp, "dropout", "resumed", "checkpoint.pt"))
    straight = load_checkpoint(os.path.join(tmp, "dropout", "straight", "checkpoint.pt"))
    assert resumed["step"] == straight["step"] == STEPS
    assert resumed["rng"]["world_size"] == WORLD and len(resumed["rng"]["ranks"]) == WORLD
    assert not torch.equal(resumed["rng"]["ranks"][0]["torch"], resumed["rng"]["ranks"][1]["torch"])
    for key in ("model", "optimizers", "state"):
        assert max_abs_diff(resumed[key], straight[key], key) == 0.0, key
    assert all(r["group_kept"] for r in reports)


@pytest.mark.slow
def test_rank_0s_deadline_and_timed_checkpoints_are_agreed(runs):
    """Rank 0 alone decides (its job end time, its checkpoint clock); the per-step
    collective makes rank 1 stop, or join the save, after the same step."""
    tmp, reports = runs
    assert [r["limited"] for r in reports] == [[1, "time-limit"], [1, "time-limit"]]
    assert load_checkpoint(os.path.join(tmp, "limited", "checkpoint.pt"))["step"] == 1
    timed = load_checkpoint(os.path.join(tmp, "timed", "model.pt"))
    plain = load_checkpoint(os.path.join(tmp, "ddp", "cont", "checkpoint.pt"))
    assert timed["step"] == plain["step"] == STEPS
    assert max_abs_diff(timed["model"], plain["model"], "model") == 0.0


@pytest.mark.slow
def test_resume_under_another_process_count(runs, caplog):
    """A 2-process checkpoint (step 3) resumed by 1 process: allowed with a warning, the
    carried state of both ranks' rows continues in one, and the layouts are recorded."""
    tmp, _ = runs
    with caplog.at_level(logging.WARNING, logger="elmoc.train.loop"):
        result = train(_spec(tmp, "cont", 0.1), _vocab(), os.path.join(tmp, "relayout"), make_batches, make_heldout)
    assert result.steps == STEPS
    warning = [r.getMessage() for r in caplog.records if "bit for bit" in r.getMessage()]
    assert len(warning) == 1 and "processes 2 -> 1" in warning[0]
    segments = json.load(open(os.path.join(tmp, "relayout", "heldout.json")))["segments"]
    # the workers ran on 1 thread each; this process resumes on its own count
    assert segments == [{"step": 0, "threads": 1, "processes": WORLD},
                        {"step": 3, "threads": torch.get_num_threads(), "processes": 1}]


@pytest.mark.slow
def test_nothing_sparse_or_frozen_travels(runs):
    _, reports = runs
    for rank, report in enumerate(reports):
        for layer, r in report.items():
            if layer in ("group_kept", "limited"):
                continue
            where = f"rank {rank}, {layer}"
            assert r["sparse"] == 0, f"{where}: a sparse tensor reached a collective"
            assert not r["ddp_sees_sparse"], where
            assert r["sparse_names"] == (["output_layer.bias.weight", "output_layer.weight.weight"]
                                         if layer == "sampled" else []), where
            # buffers (the frozen tables) are ignored by DDP and never synced at a forward
            assert set(r["buffers"]) <= set(r["ignored"]), where
            assert r["forward_sync_buffers"] is False and r["find_unused_parameters"] is False, where
            # bytes broadcast: each parameter once at the start (DDP's init sync, plus our
            # broadcast of the sparse table), not one byte of a buffer
            assert r["broadcast_bytes"] == r["param_bytes"], where
        assert report["cont"]["buffers"] and report["fixed"]["buffers"]
        # SAMPLED exchanges the rows it touched (<= 10 targets + 6 negatives), never V x d
        assert 0 < report["sampled"]["gathered_rows"] <= 16 < V
        assert all(report[layer]["gathered_rows"] == 0 for layer in LAYERS if layer != "sampled")


def _negatives(layer, rank, draw):
    layer.set_process_rank(rank)
    layer.sampler.draws = draw
    return layer.sampler.sample(layer.num_samples)[0]


def test_ranks_draw_different_negatives_reproducibly(tmp_path):
    np.save(tmp_path / "vec.npy", np.zeros((V, DIM), dtype="float32"))
    spec = _spec(str(tmp_path), "sampled")
    vocab = _vocab()
    layer = LanguageModel.from_spec(spec, vocab).output_layer
    other = LanguageModel.from_spec(spec, vocab).output_layer
    assert not torch.equal(_negatives(layer, 0, 3), _negatives(layer, 1, 3))
    assert not torch.equal(_negatives(layer, 1, 3), _negatives(layer, 1, 4))
    assert torch.equal(_negatives(layer, 1, 3), _negatives(other, 1, 3))  # a function of (seed, rank, step)


@pytest.mark.slow
def test_bench_s3_runs_the_trainer_step_on_every_layer(tmp_path):
    """The bench's S3 (2 gloo processes) uses wrap_model and train_step: SAMPLED included."""
    from elmoc.bench.data_parallel import run_data_parallel

    np.save(tmp_path / "vec.npy", np.random.default_rng(0).standard_normal((V, DIM)).astype("float32"))
    jobs = [{"label": layer, "spec": _spec(str(tmp_path), layer), "vocab_size": V, "batch": 2, "seq_len": T}
            for layer in ("cont", "sampled", "adaptive")]
    seconds = run_data_parallel(jobs, world=WORLD, repeats=1)
    assert sorted(seconds) == ["adaptive", "cont", "sampled"]
    assert all(s > 0 for s in seconds.values())
