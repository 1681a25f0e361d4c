"""The process group's lifetime (#19.7) with a fake CUDA device: ``torch.cuda.set_device``
before ``init_process_group``, NCCL bound to the GPU (``device_id``), a timeout that fits
rank 0's checkpoint write, and ``destroy_process_group`` by whoever created the group.
The real NCCL lines run only on GPUs (docs/full-run.md); gloo runs the rest in
tests/train/test_stop_signal_ddp.py."""
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from elmoc.errors import ConfigError
from elmoc.train.distributed import Distributed
from elmoc.train.settings import TrainSettings


@pytest.fixture
def calls(monkeypatch):
    made = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: made.append(("set_device", torch.device(device))))
    monkeypatch.setattr(dist, "is_initialized", lambda: any(c[0] == "init" for c in made))
    monkeypatch.setattr(dist, "init_process_group", lambda *a, **kw: made.append(("init", kw)))
    monkeypatch.setattr(dist, "destroy_process_group", lambda *a: made.append(("destroy",)))
    return made


def test_nccl_pins_the_gpu_first_and_waits_long_enough(calls):
    ddp = Distributed(rank=3, world_size=4, local_rank=1)
    device = ddp.setup("cuda")
    assert device == torch.device("cuda", 1)
    assert [c[0] for c in calls] == ["set_device", "init"]
    assert calls[0][1] == torch.device("cuda", 1)
    init = calls[1][1]
    assert init["backend"] == "nccl" and init["device_id"] == torch.device("cuda", 1)
    assert init["rank"] == 3 and init["world_size"] == 4
    assert init["timeout"] == timedelta(minutes=60)  # NCCL's default (10 min) < a multi-GB save
    ddp.teardown()
    ddp.teardown()  # once only
    assert [c[0] for c in calls] == ["set_device", "init", "destroy"]


def test_gloo_timeout_is_configurable_and_a_callers_group_is_left_alone(calls):
    ddp = Distributed(rank=0, world_size=2)
    assert ddp.setup("cpu", timeout_minutes=90) == torch.device("cpu")
    assert calls == [("init", {"backend": "gloo", "rank": 0, "world_size": 2, "timeout": timedelta(minutes=90)})]
    other = Distributed(rank=0, world_size=2)
    other.setup("cpu")  # the group exists: joined, not created
    other.teardown()
    assert [c[0] for c in calls] == ["init"]
    ddp.teardown()
    assert [c[0] for c in calls] == ["init", "destroy"]


def test_collective_timeout_setting():
    assert TrainSettings.from_config({}).collective_timeout_minutes == 60
    assert TrainSettings.from_config({"collective_timeout_minutes": 120}).collective_timeout_minutes == 120
    with pytest.raises(ConfigError, match="collective_timeout_minutes"):
        TrainSettings.from_config({"collective_timeout_minutes": 0})
