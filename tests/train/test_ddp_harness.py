"""The data-parallel tests' own harness (tests/ddp_compare.py): a worker killed by a signal
after every rank wrote its report (in the teardown) is a warning with its Python stacks; one
killed during the work fails the test with them, whatever the other rank did."""
from __future__ import annotations

import os

import pytest
import torch.distributed as dist
from ddp_compare import finish_worker, spawn_runs

pytestmark = pytest.mark.slow  # spawns gloo processes


def _join(rank, port):
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)


def _dies_in_teardown(rank, port, tmp):
    _join(rank, port)
    finish_worker(tmp, rank, {"rank": rank})
    if rank == 1:
        os.abort()  # as the C++ std::terminate at exit: SIGABRT, no Python exception


def _dies_in_the_work(rank, port, tmp):
    _join(rank, port)
    if rank == 1:
        os.abort()
    finish_worker(tmp, rank, {"rank": rank})  # rank 0 waits in the barrier until spawn stops it


def test_a_death_after_every_report_is_a_warning_with_the_stacks(tmp_path):
    with pytest.warns(UserWarning, match="after every rank wrote its report") as warned:
        reports = spawn_runs(str(tmp_path), _dies_in_teardown, 2, 5, 3)
    assert reports == [{"rank": 0}, {"rank": 1}]
    message = str(warned[0].message)
    assert "SIGABRT" in message and "_dies_in_teardown" in message  # rank 1's Python stack


def test_a_death_during_the_work_fails_with_the_stacks(tmp_path):
    with pytest.raises(AssertionError, match="died during the work") as failed:
        spawn_runs(str(tmp_path), _dies_in_the_work, 2, 5, 3)
    assert "SIGABRT" in str(failed.value) and "_dies_in_the_work" in str(failed.value)
