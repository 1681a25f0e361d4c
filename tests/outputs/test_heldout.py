"""How heldout sums reduce to each output layer's metric (outputs/heldout.py, CosineSums)."""
import math

import numpy as np
import pytest
import torch

from elmoc.errors import ConfigError
from elmoc.outputs.base import OutputLoss
from elmoc.outputs.continuous import CosineSums
from elmoc.outputs.heldout import HeldoutSums, PerplexitySums, metric_class
from elmoc.registry import build, by_name, list_available

TARGETS = torch.tensor([[1, 5, 11], [0, 7, 3]])
MASK = torch.tensor([[True, True, True], [True, False, True]])


def window(loss_sum, tokens, **logs):
    return OutputLoss(torch.tensor(loss_sum), torch.tensor(float(tokens)), {k: torch.tensor(v) for k, v in logs.items()})


def test_loss_and_perplexity_are_token_weighted():
    for sums in (HeldoutSums(), PerplexitySums()):
        sums.add(window(6.0, 2), TARGETS, MASK)
        sums.add(window(3.0, 4), TARGETS, MASK)
        result = sums.result()
        assert result["loss"] == 1.5 and result["eval_tokens"] == 6
        assert result["value"] == (1.5 if sums.metric == "loss" else pytest.approx(math.exp(1.5)))
    assert PerplexitySums.value_of_loss(1e6) == math.exp(700.0)  # capped, not an OverflowError


def test_cosine_value_and_constant_baseline(target_table):
    path, table = target_table
    layer = build("output", {"type": "cosine", "vectors": str(path)}, hidden_dim=4, vocab=range(12))
    sums = layer.heldout_sums()
    assert isinstance(sums, CosineSums) and layer.heldout_metric == "cosine"
    sums.add(window(-2.5, 5, cosine=0.5), TARGETS, MASK)
    result = sums.result()
    unit = table[TARGETS[MASK].numpy()].astype(np.float64)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    assert result["value"] == pytest.approx(0.5) and result["loss"] == -0.5
    assert result["constant_baseline"] == pytest.approx(np.linalg.norm(unit.sum(0)) / 5)
    assert list(result) == ["metric", "value", "loss", "eval_tokens", "constant_baseline"]


def test_processes_add_their_sums_first(target_table):
    """Two processes with equal sums give the one-process metric over twice the tokens."""
    path, _ = target_table
    layer = build("output", {"type": "cosine", "vectors": str(path)}, hidden_dim=4, vocab=range(12))
    sums = layer.heldout_sums()
    sums.add(window(-2.5, 5, cosine=0.5), TARGETS, MASK)
    alone, both = sums.result(), sums.result(lambda flat: 2 * flat)
    assert both["eval_tokens"] == 2 * alone["eval_tokens"]
    for key in ("value", "loss", "constant_baseline"):
        assert both[key] == pytest.approx(alone[key])


def test_joint_combination():
    f = {"metric": "loss", "value": 2.0, "loss": 2.0, "eval_tokens": 3}
    b = {"metric": "loss", "value": 4.0, "loss": 4.0, "eval_tokens": 5}
    both = HeldoutSums.combine(f, b)
    assert (both["value"], both["loss"], both["eval_tokens"]) == (3.0, 3.0, 8)
    assert list(both) == ["metric", "value", "loss", "eval_tokens", "forward", "backward"]


def test_no_heldout_tokens_is_one_line():
    with pytest.raises(ConfigError, match="heldout set produced no tokens"):
        PerplexitySums().result()


def test_every_output_layer_names_its_reduction():
    assert "cosine" in list_available("output")
    for name in list_available("output"):
        cls = by_name("output", name)
        assert issubclass(cls.heldout_reduction, HeldoutSums), name
        assert cls.heldout_reduction.metric in ("loss", "perplexity", "cosine"), name


def test_the_metric_class_says_how_the_metric_reads():
    assert metric_class("cosine") is CosineSums and metric_class("perplexity") is PerplexitySums
    assert metric_class("loss") is HeldoutSums and metric_class(None) is HeldoutSums
    assert metric_class("bleu") is HeldoutSums  # a metric no registered layer has: the plain reading
    assert CosineSums.value_format.format(0.123456) == "0.1235" and PerplexitySums.value_format.format(36.24) == "36.2"
    assert CosineSums.axis_label() == "heldout mean cosine (higher is better)" and CosineSums.higher_is_better
    assert PerplexitySums.axis_label() == "heldout perplexity" and PerplexitySums.log_scale
    assert HeldoutSums.axis_label("bleu") == "heldout bleu" and not HeldoutSums.higher_is_better


def test_heldout_does_not_import_the_output_layers():
    """outputs/base.py imports outputs/heldout.py, never the other way round (not even for types)."""
    import ast
    import inspect

    import elmoc.outputs.heldout as heldout

    tree = ast.parse(inspect.getsource(heldout))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(m.startswith("elmoc.outputs.") for m in imported), imported
