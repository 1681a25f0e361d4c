import math

import pytest

from elmoc.errors import ConfigError
from elmoc.train.schedule import ScaledSchedule


def reference_lr(s, B, base_scale=1e-4, base_ratio=1.0, warmup=10000, decay_ratio=0.4, end_decay_ratio=2.0):
    """Spec 1.1 formula, written independently of the implementation."""
    n = base_ratio * B / 128
    start = int(4e8 / B * decay_ratio)
    end = int(4e8 / B * end_decay_ratio)
    if s >= end:
        return base_scale / 2
    return base_scale * min(1 + s * (n - 1) / warmup, n, n * (2 * n) ** ((start - s) / (end - start)))


@pytest.mark.parametrize("B", [128, 512, 1536])
@pytest.mark.parametrize("step", [1, 500, 10000, 50000, 104166, 104167, 270000, 520832, 520833, 600000])
def test_matches_formula(B, step):
    sched = ScaledSchedule(batch_size=B)
    assert sched(step) == pytest.approx(reference_lr(step, B), rel=1e-12)


def test_worked_example_from_spec():
    # B=1536: n=12, peak 1.2e-3, start_decay 104,166, end_decay 520,833, ~3.4e-4 after 270k steps
    sched = ScaledSchedule(batch_size=1536)
    assert sched.n == 12
    assert sched.start_decay == 104166 and sched.end_decay == 520833
    assert sched(10000) == pytest.approx(1.2e-3)
    assert sched(104166) == pytest.approx(1.2e-3)
    assert sched(270000) == pytest.approx(3.4e-4, rel=0.02)
    assert sched(520833) == pytest.approx(0.5e-4)
    # warmup starts near base_scale, not 0
    assert sched(1) == pytest.approx(1e-4 * (1 + 11 / 10000))


def test_continuous_at_end_of_decay():
    sched = ScaledSchedule(batch_size=512)
    assert math.isclose(sched(sched.end_decay - 1), sched(sched.end_decay), rel_tol=1e-4)


def test_bad_arguments():
    with pytest.raises(ConfigError, match="batch_size"):
        ScaledSchedule(batch_size=0)
    with pytest.raises(ConfigError, match="decay_ratio"):
        ScaledSchedule(batch_size=64, decay_ratio=3.0)
    with pytest.raises(ValueError, match="count from 1"):
        ScaledSchedule(batch_size=64)(0)


@pytest.mark.parametrize("B", [16, 32])
def test_small_plateau_factor_never_gives_a_negative_rate(B):
    """n = base_ratio * B / 128 < 1: the formula's warmup term would cross zero after
    warmup / (1 - n) steps; the schedule holds it at its end-of-warmup value instead."""
    sched = ScaledSchedule(batch_size=B, base_scale=2e-3, base_ratio=2.0, warmup=100, decay_ratio=0.0625,
                           end_decay_ratio=0.3125)
    assert sched.n < 1
    for step in range(1, sched.end_decay + 10, 7):
        assert sched(step) > 0
    for step in (1, 50, 100):  # during warmup, the formula itself
        assert sched(step) == pytest.approx(reference_lr(step, B, 2e-3, 2.0, 100, 0.0625, 0.3125), rel=1e-12)
    assert sched(1000) <= sched.n * 2e-3 + 1e-12
