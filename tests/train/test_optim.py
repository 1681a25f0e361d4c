import pytest
import torch
from torch import nn

from elmoc.errors import ConfigError
from elmoc.train.optim import build_optimizer, clip_global_norm, global_grad_norm


class WithSparse(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(4, 3)
        self.table = nn.Embedding(10, 3, sparse=True)

    def sparse_parameters(self):
        return [self.table.weight]


def test_global_norm_counts_sparse_and_dense():
    torch.manual_seed(0)
    m = WithSparse()
    ids = torch.tensor([1, 1, 7])  # duplicate id: sparse grad has repeated indices
    loss = (m.dense(torch.randn(3, 4)) * m.table(ids)).sum()
    loss.backward()
    dense_sq = m.dense.weight.grad.pow(2).sum() + m.dense.bias.grad.pow(2).sum()
    sparse_sq = m.table.weight.grad.to_dense().pow(2).sum()
    expected = (dense_sq + sparse_sq).sqrt()
    assert float(global_grad_norm(m.parameters())) == pytest.approx(float(expected), rel=1e-6)
    before = clip_global_norm(list(m.parameters()), max_norm=0.1)
    assert float(before) == pytest.approx(float(expected), rel=1e-6)
    assert float(global_grad_norm(m.parameters())) == pytest.approx(0.1, rel=1e-4)


def test_sparse_params_get_sparse_adam_and_schedule():
    m = WithSparse()
    bundle = build_optimizer({"type": "scheduled_adam", "warmup": 10}, m, batch_size=256)
    kinds = [type(o).__name__ for o in bundle.optimizers]
    assert kinds == ["Adam", "SparseAdam"]
    assert bundle.set_lr(10) == pytest.approx(2e-4)  # n = 2 reached at the end of warmup
    assert all(g["lr"] == pytest.approx(2e-4) for o in bundle.optimizers for g in o.param_groups)


def test_adagrad_handles_sparse_in_one_optimizer():
    m = WithSparse()
    bundle = build_optimizer({"type": "adagrad"}, m, batch_size=64)
    assert len(bundle.optimizers) == 1
    assert bundle.optimizers[0].defaults["initial_accumulator_value"] == 1.0
    loss = m.table(torch.tensor([2])).sum() + m.dense.weight.sum()
    loss.backward()
    bundle.step()  # must accept sparse gradients


def test_unknown_optimizer_and_option():
    with pytest.raises(ConfigError, match="optimizer.type"):
        build_optimizer({"type": "sgd"}, WithSparse(), 64)
    with pytest.raises(ConfigError, match="warmpu"):
        build_optimizer({"type": "scheduled_adam", "warmpu": 3}, WithSparse(), 64)


def test_a_number_out_of_its_declared_range_is_one_line():
    """The ranges of train/optim.py's OPTION_RANGES are checked where the optimizer is built too
    (a spec given to `elmoc train` directly), not only when the workflow resolves a variant."""
    model = nn.Linear(2, 2)
    with pytest.raises(ConfigError, match=r"^optimizer.lr: -0.1 must be a number > 0$"):
        build_optimizer({"type": "adam", "lr": -0.1}, model, batch_size=4)
    with pytest.raises(ConfigError, match=r"^optimizer.warmup: 0 must be a positive integer$"):
        build_optimizer({"type": "scheduled_adam", "warmup": 0}, model, batch_size=4)
