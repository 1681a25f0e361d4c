"""Data parallelism: one code path for gloo (CPU, the tests) and NCCL (GPUs).

The trainer (:mod:`elmoc.train.loop`) and the bench's scenario S3
(:mod:`elmoc.bench.data_parallel`) both make a model data-parallel with
:func:`wrap_model` and exchange sparse gradients with
:func:`average_sparse_gradients`, so the tests' 2-process gloo runs execute the
same lines as a 4-GPU NCCL run.  What differs by backend:

* :meth:`Distributed.setup` picks NCCL when the device is CUDA (GPU only: it pins
  ``cuda:LOCAL_RANK`` with ``torch.cuda.set_device`` *before* joining, and passes it
  as ``device_id``, so NCCL binds each process to its own GPU), gloo otherwise.  Both
  get ``timeout`` (``train.collective_timeout_minutes``, default 60 min): the other
  ranks wait in a collective while rank 0 writes a checkpoint (several GB at paper
  size on a slow shared file system), and NCCL's 10-minute default would kill them;
  :meth:`Distributed.teardown` destroys the group at the end of training (normal,
  interrupted or failed) when ``setup`` created it;
* :func:`wrap_model` passes ``device_ids=[device.index]`` to DDP on CUDA (GPU only);
* collectives run on the tensors' device (CUDA tensors under NCCL, CPU under gloo).

What travels each step:

* dense gradients: DDP's bucketed all-reduce, averaged over processes;
* sparse gradients (SAMPLED's ``nn.Embedding(sparse=True)`` table and bias): DDP
  ignores those parameters (NCCL has no sparse all-reduce) and
  :func:`average_sparse_gradients` all-gathers the ids and rows each process
  touched, sums them and divides by the number of processes, the average DDP
  applies to dense gradients.  Only dense tensors of (touched rows x d) reach a
  collective, never a dense V x d one;
* buffers: nothing.  Every buffer of an LM is a frozen table (FastText, CNN,
  random vectors) that each process rebuilds from the same file or seed; DDP
  ignores them, so they are broadcast neither at construction nor at any forward
  (DDP's default would send ~0.95 GB per step at 793K x 300).  :func:`wrap_model`
  checks once that they agree across processes (one checksum each).

A carried encoder state (``reset_state: false``) is checkpointed for the whole global
batch (:func:`gather_state_rows`) and split again on resume (:func:`shard_state_rows`),
so every rank resumes its own rows.

A joint bi-LM (:class:`elmoc.lm.BidirectionalLM`) goes through the same functions
unchanged: they find the sparse parameters, buffers and output layers by walking the
modules (the shared input and output layer are one module each, so their parameters
and tables are listed, broadcast and checked once); the shared output layer collects
the gradients of both directions in the one backward before DDP's hooks and the sparse
exchange run (a SAMPLED table's rows touched by either direction travel together;
ADAPTIVE touches every tail cluster in each direction's call); its carried state is
the pair ``(forward state, backward state)``, a tuple that the state functions
gather and split element by element; :func:`shard_rows` splits both windows.

Notes for rare words (``train.notes``, :mod:`elmoc.nn.notes`): each step every process
all-gathers the occurrences it observed (rows and window means, :func:`gather_note_rows`),
concatenated in rank order, which is the global batch's row order; every process then
applies the same update to its own copy, so the dictionaries stay identical on every
rank without ever sending the dictionary itself.

Heldout evaluation is sharded by rows (:func:`shard_rows`): every process
evaluates rows ``rank::world`` of each heldout window, carrying its rows' state,
and the sums are all-reduced (:func:`all_reduce_sum`), so no rank idles in a
collective while another runs ELMo's full softmax.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from elmoc.data.batches import BiLMBatch, LMBatch
from elmoc.data.masking import MaskedLMBatch
from elmoc.encoders.base import map_state
from elmoc.errors import ConfigError
from elmoc.outputs.base import OutputLayer
from elmoc.train.optim import split_parameters


@dataclass
class Distributed:
    """This process's place in a data-parallel run (``torchrun``'s environment)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    owns_group: bool = False  # setup() created the process group, so teardown() destroys it

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls) -> "Distributed":
        return cls(
            rank=int(os.environ.get("RANK", 0)),
            world_size=int(os.environ.get("WORLD_SIZE", 1)),
            local_rank=int(os.environ.get("LOCAL_RANK", 0)),
        )

    def setup(self, device: str | torch.device, timeout_minutes: float = 60.0) -> torch.device:
        """Join the process group (NCCL on CUDA, gloo on CPU); returns this process's device.

        Args:
            device: "cpu" or "cuda" (each process then takes ``cuda:LOCAL_RANK``).
            timeout_minutes: how long a collective may wait for a peer (rank 0 writing
                the largest checkpoint while the others wait must fit in it).
        """
        device = torch.device(device)
        if not self.enabled:
            return device
        if device.type == "cuda":  # GPU only: one GPU per process, pinned before NCCL starts
            device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            # MASTER_ADDR / MASTER_PORT from the environment (torchrun sets them)
            nccl = device.type == "cuda"
            dist.init_process_group(backend="nccl" if nccl else "gloo", rank=self.rank, world_size=self.world_size,
                                    timeout=timedelta(minutes=timeout_minutes),
                                    **({"device_id": device} if nccl else {}))  # GPU only: device_id
            self.owns_group = True
        return device

    def teardown(self) -> None:
        """Destroy the process group if :meth:`setup` created it (a caller's own group stays)."""
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()
        self.owns_group = False

    def all_ranks(self, obj: Any) -> list[Any]:
        """``obj`` of every process, in rank order (a collective: call on every process).
        Objects are pickled by torch.distributed: use it for small plain data only."""
        if not self.enabled:
            return [obj]
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, obj)
        return gathered

    def from_main(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every process (a collective: call on every process)."""
        if not self.enabled:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]


def sparse_gradient_parameters(model: nn.Module) -> list[nn.Parameter]:
    """Trainable parameters with sparse gradients (declared by ``sparse_parameters()``)."""
    return split_parameters(model)[1]


def wrap_model(model: nn.Module, device: torch.device) -> DistributedDataParallel:
    """``model`` under DDP for the dense parameters only; call after the process group is up.

    Sparse-gradient parameters and all buffers are excluded from DDP: the former are
    broadcast from rank 0 once here (each rank may have initialised them with its own
    seed) and their gradients exchanged by :func:`average_sparse_gradients`; the
    latter never travel.  Output layers learn their rank (per-process negatives).
    """
    device = torch.device(device)
    sparse = {id(p) for p in sparse_gradient_parameters(model)}
    ignored = [name for name, p in model.named_parameters() if id(p) in sparse]
    buffers = list(model.named_buffers())
    ignored += [name for name, _ in buffers]
    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, ignored)
    _check_buffers_agree(buffers, device)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if id(p) in sparse:
                dist.broadcast(p.data, src=0)
    rank = dist.get_rank()
    for module in model.modules():
        if isinstance(module, OutputLayer):
            module.set_process_rank(rank)
    return DistributedDataParallel(
        model,
        device_ids=[device.index] if device.type == "cuda" else None,  # GPU only: device_ids
        forward_sync_buffers=False,
    )


def _check_buffers_agree(buffers: list[tuple[str, torch.Tensor]], device: torch.device) -> None:
    """Raise when a buffer (a frozen table) differs between processes: one float64 sum each."""
    if not buffers:
        return
    sums = torch.stack([b.detach().sum(dtype=torch.float64).to(device) for _, b in buffers])  # (num_buffers,)
    gathered = [torch.empty_like(sums) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, sums)
    for other in gathered:
        for (name, _), mine, theirs in zip(buffers, sums.tolist(), other.tolist()):
            if mine != theirs:
                raise ConfigError(
                    f"buffer {name!r} differs between data-parallel processes; every process must read "
                    "the same vectors file (check that all nodes see the same results/ directory)"
                )


def average_sparse_gradients(params: list[nn.Parameter], world_size: int) -> None:
    """Replace each sparse ``p.grad`` by its average over the ``world_size`` processes.

    Every process all-gathers the (row id, gradient row) pairs the others touched,
    as dense tensors padded to the largest count (padding is cut off before
    summing), and keeps ``sum / world_size`` as a coalesced sparse gradient: the
    same average DDP applies to dense gradients.  Call it on every process, after
    backward and before clipping.  Shapes: a parameter ``(V, *row)``; its sparse
    gradient has ids ``(n,)`` and rows ``(n, *row)``.

    Host syncs (issue 19.9), each needed: ``coalesce()`` (a sparse tensor's row count is
    a host-side shape) and the gathered row counts read back with ``tolist()`` (they
    size the padded buffers every process must agree on before the next all_gather).
    Only input/output layers with sparse gradients pay them (a trainable table under
    SAMPLED or the ELMo-C ablations' sparse inputs), once per step and parameter.
    """
    if not params or world_size == 1:
        return
    ids, rows = [], []
    for p in params:
        if p.grad is None:
            ids.append(torch.zeros(0, dtype=torch.long, device=p.device))
            rows.append(p.new_zeros((0, *p.shape[1:])))
        else:
            g = p.grad.coalesce()
            ids.append(g.indices()[0])
            rows.append(g.values())
    device = params[0].device
    counts = torch.tensor([i.numel() for i in ids], dtype=torch.long, device=device)  # (num_params,)
    all_counts = [torch.empty_like(counts) for _ in range(world_size)]
    dist.all_gather(all_counts, counts)
    all_counts = torch.stack(all_counts).tolist()  # [world][num_params]; host sync: sizes the buffers
    for j, p in enumerate(params):
        n = [c[j] for c in all_counts]
        most = max(n)
        padded_ids = ids[j].new_zeros(most)
        padded_ids[: ids[j].numel()] = ids[j]
        padded_rows = rows[j].new_zeros((most, *p.shape[1:]))
        padded_rows[: rows[j].shape[0]] = rows[j]
        got_ids = [torch.empty_like(padded_ids) for _ in range(world_size)]
        got_rows = [torch.empty_like(padded_rows) for _ in range(world_size)]
        dist.all_gather(got_ids, padded_ids)
        dist.all_gather(got_rows, padded_rows)
        index = torch.cat([g[:k] for g, k in zip(got_ids, n)])  # (sum n,)
        values = torch.cat([g[:k] for g, k in zip(got_rows, n)]) / world_size  # (sum n, *row)
        # ids came from valid sparse gradients: no invariant check (it would read back too)
        p.grad = torch.sparse_coo_tensor(index[None], values, p.shape, check_invariants=False).coalesce()


def shard_rows(batch: LMBatch | BiLMBatch | MaskedLMBatch, rank: int,
               world_size: int) -> LMBatch | BiLMBatch | MaskedLMBatch:
    """Rows ``rank::world_size`` of a window (this process's share of a heldout batch);
    of both windows of a joint bi-LM's BiLMBatch; of every tensor of a MaskedLMBatch."""
    if world_size == 1:
        return batch
    if isinstance(batch, BiLMBatch):
        return BiLMBatch(shard_rows(batch.forward, rank, world_size), shard_rows(batch.backward, rank, world_size))
    if isinstance(batch, MaskedLMBatch):
        return batch.rows(slice(rank, None, world_size))
    return LMBatch(batch.inputs[rank::world_size], batch.targets[rank::world_size], batch.mask[rank::world_size])


def all_reduce_sum(values: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Sum of ``values`` (1-d float64) over processes (a copy; unchanged without a group)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return values
    reduced = values.to(device, torch.float64).clone()
    dist.all_reduce(reduced)
    return reduced.cpu()


def gather_state_rows(state: Any, world_size: int) -> Any:
    """The carried encoder state of the whole global batch (call on every process).

    Every tensor of ``state`` holds this process's rows in dim 0 (the encoders' states
    are lists of ``(h (rows, dim), c (rows, cell))``; a joint bi-LM's is a pair of those); rank ``r`` has rows
    ``[r*B/W, (r+1)*B/W)`` (:mod:`elmoc.data.batches`), so concatenating in rank order
    gives the state one process would carry: a checkpoint stores that, and
    :func:`shard_state_rows` hands each rank its part on resume.
    """
    if world_size == 1:
        return state

    def gather(rows: torch.Tensor) -> torch.Tensor:
        parts = [torch.empty_like(rows) for _ in range(world_size)]
        dist.all_gather(parts, rows.contiguous())
        return torch.cat(parts)

    return map_state(gather, state)


def shard_state_rows(state: Any, rank: int, world_size: int) -> Any:
    """This process's rows of a global carried state (inverse of :func:`gather_state_rows`)."""
    if world_size == 1:
        return state

    def shard(rows: torch.Tensor) -> torch.Tensor:
        per = rows.shape[0] // world_size
        return rows[rank * per:(rank + 1) * per]

    return map_state(shard, state)


def gather_note_rows(rows: torch.Tensor, means: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every process's observed notes in rank order (call on every process): rows (N_r,)
    long and means (N_r, D) float of this process -> (sum N_r,) and (sum N_r, D).  One
    all-gather of the counts, then of the rows and means padded to the largest count."""
    world = dist.get_world_size()
    count = torch.tensor([rows.numel()], device=rows.device)
    counts = [torch.zeros_like(count) for _ in range(world)]
    dist.all_gather(counts, count)
    n = [int(c) for c in counts]
    most = max(n)
    padded_rows = torch.cat([rows, rows.new_zeros(most - rows.numel())])
    padded_means = torch.cat([means, means.new_zeros(most - means.shape[0], means.shape[1])])
    got_rows = [torch.empty_like(padded_rows) for _ in range(world)]
    got_means = [torch.empty_like(padded_means) for _ in range(world)]
    dist.all_gather(got_rows, padded_rows)
    dist.all_gather(got_means, padded_means)
    return (torch.cat([g[:k] for g, k in zip(got_rows, n)]), torch.cat([g[:k] for g, k in zip(got_means, n)]))
