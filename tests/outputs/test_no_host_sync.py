"""The training step never makes the host wait for the device (issue #19 item 9).

Stand-in for a GPU: the model and the batch live on the ``meta`` device, which holds
shapes but no values, so every read of a device value (``.item()``, ``bool(t)``,
``int(t)``, ``.cpu()``, ``.tolist()``, boolean indexing / ``nonzero``, ``torch.equal``)
raises there, exactly where on a GPU the host would block until the queued kernels
finish.  The batch is moved by the trainer's ``to_device``, which keeps each tensor's
CPU original, so decisions the step needs on the host (padding, lengths, ids of a
host-resident table, token count) can still be made without a device read.  A
dispatch mode also flags blocking copies from the CPU to the device (on CUDA a
blocking copy from pageable memory synchronizes the stream).

Layers whose syncs stay, each justified at its site: ``adaptive`` with cutoffs (PyTorch's
adaptive softmax sizes each cluster with ``nonzero``), ``vmf`` (the Bessel function runs in
NumPy on the CPU), and the plain ``lstm`` encoder on a *padded* window
(``pack_padded_sequence``); an unpadded window of ``lstm`` is checked here.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils._pytree import tree_leaves
from torch.utils._python_dispatch import TorchDispatchMode

from elmoc.data.batches import BiLMBatch, LMBatch

from elmoc.lm import BidirectionalLM, LanguageModel
from elmoc.registry import build
from elmoc.train.loop import NonFiniteLossCheck
from elmoc.train.optim import clip_global_norm
from elmoc.train.precision import to_device

V, E = 40, 8
DEVICE = torch.device("meta")


class BlockingCopyGuard(TorchDispatchMode):
    """Records copies from the CPU to :data:`DEVICE` that are not ``non_blocking``."""

    def __init__(self):
        super().__init__()
        self.blocking: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if name == "_to_copy" and kwargs.get("device") == DEVICE and tensors[0].device.type == "cpu" \
                and not kwargs.get("non_blocking", False):
            self.blocking.append(f"{name} {tuple(tensors[0].shape)}")
        if name == "copy_" and tensors[0].device == DEVICE and tensors[1].device.type == "cpu" \
                and not (len(args) > 2 and args[2]) and not kwargs.get("non_blocking", False):
            self.blocking.append(f"{name} {tuple(tensors[1].shape)}")
        return func(*args, **kwargs)


@pytest.fixture(scope="module")
def vectors(tmp_path_factory):
    path = tmp_path_factory.mktemp("vectors") / "v.npy"
    np.save(path, np.random.default_rng(0).normal(size=(V, E)).astype(np.float32))
    return str(path)


ENCODERS = {
    "elmo_lstm": {"type": "elmo_lstm", "num_layers": 2, "cell_size": 16, "projection_size": E},
    "lstm": {"type": "lstm", "hidden_size": E, "num_layers": 2},
    "transformer": {"type": "transformer", "d_model": E, "heads": 2, "d_ff": 16, "num_layers": 2},
}


def output_spec(name: str, vectors: str) -> dict:
    return {
        "sampled": {"type": "sampled", "num_samples": 10},
        "fixed": {"type": "fixed", "vectors": vectors, "num_samples": 10},
        "fixed_host_resident": {"type": "fixed", "vectors": vectors, "num_samples": 10, "host_resident": True},
        "cosine": {"type": "cosine", "vectors": vectors},
        "cosine_host_resident": {"type": "cosine", "vectors": vectors, "host_resident": True},
        "l2": {"type": "l2", "vectors": vectors},
        "subword": {"type": "subword", "tie": False},
        "adaptive_no_cutoffs": {"type": "adaptive", "cutoffs": []},  # ADAPTIVE at 40K: a full softmax
    }[name]


def window(padded: bool, seed: int = 0) -> LMBatch:
    g = torch.Generator().manual_seed(seed)
    inputs = torch.randint(1, V, (3, 5), generator=g)
    targets = torch.randint(0, V, (3, 5), generator=g)
    mask = torch.ones(3, 5, dtype=torch.bool)
    if padded:
        mask[2, 3:] = False
    return LMBatch(inputs, targets, mask)


def run_step_on_device(model: torch.nn.Module, batch) -> list[str]:
    """Forward, token-mean loss, backward, the loop's loss check and the global-norm clip
    of the dense gradients (what ``train_step`` and the loop do each step; the sparse
    gradients of SAMPLED are coalesced before clipping, a sync justified in
    ``train/optim.py``) plus the trainer's token count, on :data:`DEVICE`; returns the
    blocking copies."""
    model = model.to(DEVICE).train()
    guard = BlockingCopyGuard()
    with guard:
        moved = to_device(batch, DEVICE)
        out, _ = model(moved)
        loss = out.loss_sum.float() / out.num_tokens.clamp(min=1.0)
        loss.backward()
        NonFiniteLossCheck().add(loss.detach())  # the loop's per-step loss check
        clip_global_norm([p for p in model.parameters() if p.requires_grad and p.grad is not None
                          and not p.grad.is_sparse], 1.0)
        assert moved.num_tokens == batch.num_tokens
    return guard.blocking


CASES = [(e, o) for e in ("elmo_lstm",) for o in ("sampled", "fixed", "fixed_host_resident", "cosine",
                                                   "cosine_host_resident", "l2", "subword",
                                                   "adaptive_no_cutoffs")]
CASES += [(e, o) for e in ("lstm", "transformer") for o in ("sampled", "cosine_host_resident")]


@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
@pytest.mark.parametrize("encoder,output", CASES)
def test_training_step_reads_nothing_back_from_the_device(encoder, output, padded, vectors):
    if encoder == "lstm" and padded:
        pytest.skip("pack_padded_sequence reads its sort order back (padded windows only, justified in lstm.py)")
    spec = {"input": {"type": "fasttext", "vectors": vectors}, "encoder": ENCODERS[encoder],
            "output": output_spec(output, vectors)}
    torch.manual_seed(0)
    model = LanguageModel.from_spec(spec, vocab=[f"w{i}" for i in range(V)])
    assert run_step_on_device(model, window(padded)) == []


CHAR_CNN = {"type": "char_cnn", "options": {
    "lstm": {"projection_dim": E},
    "char_cnn": {"activation": "relu", "embedding": {"dim": 4}, "filters": [[1, 4], [2, 8]], "n_highway": 1,
                 "n_characters": 262, "max_characters_per_token": 10}}}


@pytest.mark.parametrize("inputs,output", [
    (CHAR_CNN, {"type": "sampled", "num_samples": 10}),  # ELMo
    ({"type": "subword", "dim": E}, {"type": "subword", "tie": True}),  # ELMo-Sub
], ids=["char_cnn-sampled", "subword-tied"])
def test_paper_input_layers_read_nothing_back_from_the_device(inputs, output):
    spec = {"input": inputs, "encoder": ENCODERS["elmo_lstm"], "output": output}
    model = LanguageModel.from_spec(spec, vocab=[f"w{i}" for i in range(V)])
    assert run_step_on_device(model, window(True)) == []


def test_joint_bilm_step_reads_nothing_back_from_the_device(vectors):
    spec = {"input": {"type": "fasttext", "vectors": vectors}, "encoder": ENCODERS["elmo_lstm"],
            "output": output_spec("sampled", vectors)}
    model = BidirectionalLM.from_spec(spec, vocab=[f"w{i}" for i in range(V)])
    assert run_step_on_device(model, BiLMBatch(window(True, 0), window(True, 1))) == []


def test_fixed_host_resident_table_reaches_the_device_once_per_evaluation(vectors):
    layer = build("output", output_spec("fixed_host_resident", vectors), hidden_dim=E, vocab=range(V)).to(DEVICE)
    assert layer.target_table.device.type == "cpu"
    layer.eval()
    guard = BlockingCopyGuard()
    with guard:
        tables = [layer.full_table()[0] for _ in range(3)]  # three heldout batches
    assert all(t.device == DEVICE and t.shape == (V, E) for t in tables)
    assert len(guard.blocking) == 1, guard.blocking  # one whole-table copy, not one per batch
    layer.train()  # training gathers rows only: the device copy is let go
    assert layer._eval_table is None


def test_batch_moved_with_lmbatch_to_keeps_its_cpu_originals(vectors):
    """``LMBatch.to`` (the bench's synthetic windows) keeps the CPU originals as ``to_device`` does."""
    spec = {"input": {"type": "fasttext", "vectors": vectors}, "encoder": ENCODERS["elmo_lstm"],
            "output": output_spec("fixed_host_resident", vectors)}
    model = LanguageModel.from_spec(spec, vocab=[f"w{i}" for i in range(V)]).to(DEVICE).train()
    batch = window(True)
    moved = batch.to(DEVICE)
    out, _ = model(moved)
    out.loss_sum.backward()
    assert moved.num_tokens == batch.num_tokens


def test_sampled_padding_adds_no_row_to_the_sparse_gradient():
    """Padding is scored (against the first negative) and masked out: the sparse gradient
    holds exactly the rows of the valid targets and the negatives, as with row selection."""
    torch.manual_seed(0)
    layer = build("output", {"type": "sampled", "num_samples": 4}, hidden_dim=E, vocab=range(V)).double()
    negatives = torch.tensor([5, 6, 7, 8])
    layer.sampler.sample = lambda n: (negatives, 12)
    g = torch.Generator().manual_seed(3)
    hidden = torch.randn(3, 5, E, generator=g, dtype=torch.float64)
    targets = torch.randint(10, V, (3, 5), generator=g)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1, 2:] = False
    targets[1, 2:] = 1  # a row neither a valid target nor a negative
    layer(hidden, targets, mask).loss_sum.backward()
    touched = set(layer.weight.weight.grad.coalesce().indices()[0].tolist())
    assert touched == set(targets[mask].tolist()) | set(negatives.tolist())
