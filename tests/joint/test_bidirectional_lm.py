"""The joint bi-LM (bilm-tf's training setup for the softmax family): shared layers and
a loss equal to the mean of the two directions' losses computed separately."""
from collections import Counter

import pytest
import torch

from elmoc.data.batches import BiLMBatch, LMBatch
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.directions import is_joint
from elmoc.errors import ConfigError
from elmoc.lm import BidirectionalLM, LanguageModel

OPTIONS = {"lstm": {"projection_dim": 8}, "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 3], [2, 5]],
                                                       "n_highway": 1, "max_characters_per_token": 10,
                                                       "activation": "relu"}}
ENCODER = {"type": "elmo_lstm", "num_layers": 2, "cell_size": 12, "projection_size": 8, "layer_norm": False,
           "recurrent_dropout": 0.0}  # no random masks: the two computations below must agree


def _vocab() -> Vocabulary:
    return Vocabulary.from_counts(Counter("the cat sat on a mat and the dog ran off".split()))


def _window(vocab: Vocabulary, seed: int, rows: int = 3, time: int = 5, pad_tail: int = 0) -> LMBatch:
    g = torch.Generator().manual_seed(seed)
    inputs = torch.randint(4, len(vocab), (rows, time), generator=g)
    targets = torch.randint(4, len(vocab), (rows, time), generator=g)
    if pad_tail:
        inputs[-1, -pad_tail:] = 0
    return LMBatch(inputs, targets, inputs > 0)


@pytest.mark.parametrize("output", [{"type": "sampled", "num_samples": 4}, {"type": "adaptive", "cutoffs": [8], "div_value": 2.0}])
@pytest.mark.parametrize("pad_tail", [0, 2])  # unequal token counts: still the mean of the two means
def test_joint_loss_is_the_mean_of_the_directions(output, pad_tail):
    vocab = _vocab()
    spec = {"input": {"type": "char_cnn", "options": OPTIONS}, "encoder": ENCODER, "output": output}
    torch.manual_seed(0)
    model = BidirectionalLM.from_spec(spec, vocab).double()
    assert model.forward_encoder is not model.backward_encoder
    fwd_batch, bwd_batch = _window(vocab, 1), _window(vocab, 2, pad_tail=pad_tail)
    # the sampled softmax draws its negatives from a per-call counter: compare its
    # full-softmax evaluation; the adaptive softmax is compared in training
    sampled = output["type"] == "sampled"
    joint, _ = (model.evaluate if sampled else model)(BiLMBatch(fwd_batch, bwd_batch))
    # each direction computed on its own, through separately built LMs holding the shared layers
    fwd_lm = LanguageModel(model.input_layer, model.forward_encoder, model.output_layer)
    bwd_lm = LanguageModel(model.input_layer, model.backward_encoder, model.output_layer)
    f, _ = (fwd_lm.evaluate if sampled else fwd_lm)(fwd_batch)
    b, _ = (bwd_lm.evaluate if sampled else bwd_lm)(bwd_batch)
    expected = 0.5 * (f.loss_sum / f.num_tokens + b.loss_sum / b.num_tokens)
    got = joint.loss_sum / joint.num_tokens
    torch.testing.assert_close(got, expected)
    assert float(joint.num_tokens) == fwd_batch.num_tokens + bwd_batch.num_tokens
    if pad_tail:  # token-weighted pooling would give another number here
        pooled = (f.loss_sum + b.loss_sum) / (f.num_tokens + b.num_tokens)
        assert abs(float((got - pooled).detach())) > 1e-6
    if sampled:
        return
    # one gradient reaches the shared input and output layers from both directions
    got.backward()
    assert all(p.grad is not None for p in model.input_layer.parameters() if p.requires_grad)
    assert all(p.grad is not None for p in model.backward_encoder.parameters())


def test_one_input_and_one_output_layer():
    vocab = _vocab()
    spec = {"input": {"type": "char_cnn", "options": OPTIONS}, "encoder": ENCODER, "output": {"type": "sampled", "num_samples": 4}}
    joint = BidirectionalLM.from_spec(spec, vocab)
    single = LanguageModel.from_spec(spec, vocab)
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(joint) == n(single) + n(single.encoder)
    view = joint.direction("backward")
    assert view.input_layer is joint.input_layer and view.output_layer is joint.output_layer
    assert view.encoder is joint.backward_encoder
    with pytest.raises(ConfigError, match="direction must be"):
        joint.direction("both")


def test_is_joint_reads_train_directions():
    assert not is_joint({"train": {}}) and not is_joint({})
    assert is_joint({"train": {"directions": "joint"}})
    with pytest.raises(ConfigError, match="train.directions"):
        is_joint({"train": {"directions": "both"}})


def test_a_joint_file_gives_each_direction(tmp_path):
    from elmoc.model_file import load_directions, save_checkpoint

    vocab = _vocab()
    spec = {"input": {"type": "char_cnn", "options": OPTIONS}, "encoder": ENCODER,
            "output": {"type": "adaptive", "cutoffs": [8], "div_value": 2.0}, "train": {"directions": "joint"}}
    model = BidirectionalLM.from_spec(spec, vocab)
    save_checkpoint(tmp_path / "model.pt", {"spec": spec, "direction": "joint", "model": model.state_dict()})
    batch = _window(vocab, 3)
    for name in ("forward", "backward"):
        payload = load_directions(tmp_path / "model.pt", tmp_path / "model.pt")[name]
        assert payload["direction"] == name
        lm = LanguageModel.from_spec(spec, vocab)
        lm.load_state_dict(payload["model"])  # strict: exactly one direction's keys
        torch.testing.assert_close(lm.encode(batch.inputs).output, model.direction(name).encode(batch.inputs).output)
    save_checkpoint(tmp_path / "fwd.pt", {"spec": spec, "direction": "forward", "model": {}})
    from elmoc.errors import InputFileError

    with pytest.raises(InputFileError, match="expected a backward"):
        load_directions(tmp_path / "fwd.pt", tmp_path / "fwd.pt")
