"""Bench measuring helpers: max-batch search, FLOP counting, fork peak memory."""
from __future__ import annotations

import torch

from elmoc.bench.measure import elmo_step_flops, max_batch_under_budget, peak_step_bytes


def test_max_batch_search_finds_the_budget_edge_of_an_affine_memory():
    calls = []

    def peak(batch):
        calls.append(batch)
        return 1000 + 37 * batch

    batch, mem = max_batch_under_budget(peak, budget_bytes=1000 + 37 * 500, start=8)
    assert 400 <= batch <= 500 and mem == peak(batch)
    assert len(calls) <= 9
    assert max_batch_under_budget(peak, budget_bytes=10, start=8) == (0, 1000 + 37 * 1)


def test_max_batch_search_goes_below_start_and_reports_oom_only_when_batch_1_fails():
    calls = []

    def peak(batch):
        calls.append(batch)
        return 100 * batch

    batch, mem = max_batch_under_budget(peak, budget_bytes=300, start=8)
    assert batch == 3 and mem == 300 and calls[:3] == [8, 4, 2]
    calls.clear()
    assert max_batch_under_budget(peak, budget_bytes=50, start=8) == (0, 100)
    assert calls == [8, 4, 2, 1]


def test_max_batch_search_treats_failures_as_too_big():
    def peak(batch):
        return -1 if batch > 50 else batch

    batch, _ = max_batch_under_budget(peak, budget_bytes=10**6, start=4)
    assert 25 <= batch <= 50


def test_elmo_flops_at_paper_size():
    # per token forward: 2*300*512 + 2 layers * 2*(2*512*16384 + 4096*512) + 2*512*300
    per_token = 2 * 300 * 512 + 2 * 2 * (2 * 512 * 16384 + 4096 * 512) + 2 * 512 * 300
    assert elmo_step_flops(10, 300, 4096, 512, 2, 300) == 3 * per_token * 10


def test_fork_peak_memory_grows_with_allocation():
    def make(n):
        def step():
            x = torch.ones(n, 1024, 256)  # n MiB
            return float(x.sum())
        return lambda: step

    small = peak_step_bytes(make(1), torch.device("cpu"))
    big = peak_step_bytes(make(64), torch.device("cpu"))
    assert big - small > 40 * 2**20


def test_peak_step_bytes_cuda_branch_runs(monkeypatch):
    """The CUDA branch of peak_step_bytes failed on its first GPU run (UnboundLocalError: a
    function-level ``import torch._dynamo`` made ``torch`` local).  Driven here with a fake
    CUDA memory counter: the step allocates 1000 bytes over a base of 500."""
    state = {"allocated": 500, "peak": 500}

    def step():
        state["peak"] = max(state["peak"], state["allocated"] + 1000)

    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: state.update(peak=500))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: state["allocated"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: state["peak"])
    assert peak_step_bytes(lambda: step, torch.device("cuda")) == 1000
