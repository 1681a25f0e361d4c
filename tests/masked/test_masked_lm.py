"""The masked LM (elmoc.masked_lm.MaskedLM, issue 25): its CONT loss equals a hand
computation at the masked positions only, the mask vector replaces the input layer's
vector (whatever the input layer), the encoder sees both sides (unlike a causal
Transformer), and a causal encoder is refused."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from elmoc.data.masking import MaskedLMBatch
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.errors import ConfigError
from elmoc.masked_lm import MaskedLM
from elmoc.registry import build
from elmoc.train.loop import seed_everything

V, DIM = 20, 6


def _vocab():
    return Vocabulary.from_counts(Counter({f"w{i}": 100 - i for i in range(V - 4)}))


def _spec(tmp_path, output=None, input_=None, causal=False):
    np.save(tmp_path / "vec.npy", np.random.default_rng(0).standard_normal((V, DIM)).astype("float32"))
    vec = str(tmp_path / "vec.npy")
    return {
        "input": input_ or {"type": "fasttext", "vectors": vec},
        "encoder": {"type": "transformer", "d_model": 8, "heads": 2, "d_ff": 16, "num_layers": 2, "dropout": 0.0,
                    "causal": causal},
        "output": output or {"type": "cosine", "vectors": vec},
        "train": {"objective": "masked_lm"},
    }


def _batch():
    inputs = torch.tensor([[4, 5, 6, 7, 8, 9], [10, 11, 12, 13, 14, 15]])
    targets = inputs.clone()
    inputs[0, 2] = 17  # a random word at (0, 2)
    mask = torch.zeros(2, 6, dtype=torch.bool)
    mask[0, 1] = mask[0, 2] = mask[1, 4] = mask[1, 5] = True  # chosen: (0,1) mask, (0,2) random, (1,4) mask, (1,5) kept
    replaced = torch.zeros_like(mask)
    replaced[0, 1] = replaced[1, 4] = True
    return MaskedLMBatch(inputs, targets, mask, replaced, torch.ones_like(mask))


def test_cont_loss_is_minus_mean_cosine_at_the_masked_positions(tmp_path):
    seed_everything(0)
    model = MaskedLM.from_spec(_spec(tmp_path), _vocab()).eval()
    batch = _batch()
    with torch.no_grad():
        out, state = model(batch)
    assert state is None

    # by hand: the table's rows of the read ids, the mask vector at the replaced positions,
    # the encoder, then -cos(W h + b, table[original word]) averaged over the 4 chosen positions
    table = torch.from_numpy(np.load(tmp_path / "vec.npy")).double()
    x = table[batch.inputs].clone()
    x[0, 1] = x[1, 4] = model.mask_vector.detach().double()
    h = model.encoder(x.float(), batch.padding).output.detach().double()
    w, b = model.output_layer.projection.weight.detach().double(), model.output_layer.projection.bias.detach().double()
    cosines = []
    for r, t in ((0, 1), (0, 2), (1, 4), (1, 5)):
        p, y = w @ h[r, t] + b, table[batch.targets[r, t]]
        cosines.append(float(p @ y / (p.norm() * y.norm())))
    expected = -sum(cosines) / 4
    assert float(out.num_tokens) == 4
    assert float(out.loss_sum / out.num_tokens) == pytest.approx(expected, abs=1e-6)
    assert float(out.logs["cosine"]) == pytest.approx(-expected, abs=1e-6)
    # the target at a position not chosen counts for nothing; the original word at (0, 2) does
    other = MaskedLMBatch(batch.inputs, batch.targets.clone(), batch.mask, batch.replaced, batch.padding)
    other.targets[0, 0] = 19
    assert float(model.evaluate(other)[0].loss_sum) == pytest.approx(float(out.loss_sum), abs=1e-7)
    other.targets[0, 2] = 19
    assert float(model.evaluate(other)[0].loss_sum) != pytest.approx(float(out.loss_sum), abs=1e-4)
    heldout, _ = model.evaluate(batch)  # the same at evaluation (CONT's evaluate: -sum(cos))
    assert float(heldout.loss_sum / heldout.num_tokens) == pytest.approx(expected, abs=1e-6)


def test_the_mask_vector_replaces_any_input_layers_vector(tmp_path):
    batch = _batch()
    for input_ in (None, {"type": "random", "dim": DIM, "trainable": True}, {"type": "subword", "dim": DIM}):
        seed_everything(0)
        spec = _spec(tmp_path, input_=input_, output={"type": "sampled", "num_samples": 5})
        model = MaskedLM.from_spec(spec, _vocab())
        got = model.masked_inputs(batch)
        plain = model.input_layer(batch.inputs)
        assert torch.equal(got[batch.replaced], model.mask_vector.expand(2, -1))
        assert torch.equal(got[~batch.replaced], plain[~batch.replaced])
        out, _ = model(batch)
        out.loss_sum.backward()
        assert model.mask_vector.grad is not None and model.mask_vector.grad.abs().sum() > 0


def test_the_encoder_reads_both_sides(tmp_path):
    """Bidirectional: the output at t changes when a later word changes; with causal: true it does not."""
    ids = torch.tensor([[4, 5, 6, 7, 8]])
    later = ids.clone()
    later[0, 4] = 12
    mask = torch.ones_like(ids, dtype=torch.bool)
    for causal in (False, True):
        seed_everything(0)
        spec = _spec(tmp_path, causal=causal)
        input_layer = build("input", spec["input"], vocab=_vocab())
        encoder = build("encoder", spec["encoder"], input_dim=DIM).eval()
        a = encoder(input_layer(ids), mask).layers
        b = encoder(input_layer(later), mask).layers
        changed = [bool((x[0, 0] - y[0, 0]).abs().max() > 1e-6) for x, y in zip(a[1:], b[1:])]
        assert changed == [not causal] * 2, causal
    # padding: an unpadded position ignores a padded one whatever the padded position holds
    seed_everything(0)
    encoder = build("encoder", _spec(tmp_path)["encoder"], input_dim=DIM).eval()
    x = torch.randn(1, 5, DIM)
    y = x.clone()
    y[0, 4] += 3.0
    pad = torch.tensor([[True, True, True, True, False]])
    assert torch.allclose(encoder(x, pad).output[0, :4], encoder(y, pad).output[0, :4], atol=1e-6)


def test_a_causal_encoder_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="causal: false"):
        MaskedLM.from_spec(_spec(tmp_path, causal=True), _vocab())
    spec = _spec(tmp_path)
    spec["encoder"] = {"type": "elmo_lstm", "num_layers": 1, "cell_size": 8, "projection_size": 4}
    with pytest.raises(ConfigError, match="bidirectional encoder"):
        MaskedLM.from_spec(spec, _vocab())
