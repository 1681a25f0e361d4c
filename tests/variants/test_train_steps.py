"""Every paper variant builds from its preset (with tiny overrides) and learns on CPU."""
import numpy as np
import pytest
import torch

from elmoc.config import resolve_variant
from elmoc.data.batches import LMBatch
from elmoc.data.vocab.subword import SubwordEncoder, train_bpe
from elmoc.data.vocab.vocabulary import Vocabulary
from elmoc.lm import LanguageModel
from elmoc.train.optim import build_optimizer, clip_global_norm

VARIANTS = ["elmo", "elmo-c", "elmo-a", "elmo-sub", "elmo-c-oneb", "elmo-c-rnd", "elmo-c-cnn",
            "elmo-c-cnn-cc", "elmo-c-cc-cnn", "elmo-fixed", "elmo-sampled", "elmo-c-open",
            "elmo-c-rnd-input"]  # section 5.1's random input (opt-in)
# beyond the paper (issue 25): the Table 5 Transformers with each output layer
VARIANTS += [f"{size}-{kind}" for size in ("trans-base", "trans-large", "gpt")
             for kind in ("c", "fixed", "sub", "a", "sampled")]
WORDS = ("the cat sat on a mat while the dog ran after the red ball and a bird sang "
         "over the old green tree near the river bank").split()
TINY_CNN = {"lstm": {"projection_dim": 16}, "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8]],
                                                          "n_highway": 1, "max_characters_per_token": 12}}
PER_VARIANT = {
    "elmo": {"input": {"options": TINY_CNN}},
    "elmo-a": {"output": {"cutoffs": [8, 20]}},
    "elmo-fixed": {"output": {"num_samples": 12}},
    "elmo-sampled": {"output": {"num_samples": 12}},
    "elmo-sub": {"input": {"dim": 16}},
}
# tiny sizes by block type (elmoc.config: pretrain.overrides_by_type), for every variant that has one
BY_TYPE = {
    "encoder": {"elmo_lstm": {"cell_size": 24, "projection_size": 16, "recurrent_dropout": 0.0},
                "transformer": {"d_model": 16, "heads": 2, "d_ff": 32, "num_layers": 2, "dropout": 0.0}},
    "input": {"subword": {"dim": 16}},
    "output": {"sampled": {"num_samples": 12}, "fixed": {"num_samples": 12}, "adaptive": {"cutoffs": [8, 20]}},
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("variants")
    rng = np.random.default_rng(0)
    text = [" ".join(rng.choice(WORDS, size=9)) for _ in range(60)]
    (root / "corpus.txt").write_text("\n".join(text) + "\n")
    vocab = Vocabulary.from_counts(__import__("collections").Counter(" ".join(text).split()))
    vocab.save(root / "results/vocab/vocab.txt")
    (root / "results/vectors").mkdir(parents=True)
    for name, dim in (("cc", 12), ("oneb", 10), ("random", 12), ("cnn", 16)):
        np.save(root / f"results/vectors/{name}.npy", rng.normal(size=(len(vocab), dim)).astype(np.float32))
    open_vocab = Vocabulary.from_counts(__import__("collections").Counter(" ".join(text).split() + ["zebra"]))
    open_vocab.save(root / "results/open_vocab/vocab.txt")
    (root / "results/open_vocab/vectors").mkdir(parents=True)
    np.save(root / "results/open_vocab/vectors/cc.npy", rng.normal(size=(len(open_vocab), 12)).astype(np.float32))
    tokenizer = train_bpe([root / "corpus.txt"], num_merges=40, min_frequency=1)
    (root / "results/bpe").mkdir(parents=True)
    (root / "results/bpe/tokenizer.json").write_text(tokenizer.to_str())
    SubwordEncoder(root / "results/bpe/tokenizer.json").vocabulary().save(root / "results/bpe/vocab.txt")
    return root, text


def stream_batch(ids, batch=4, time=10):
    ids = torch.tensor(ids[: batch * time + 1])
    return LMBatch(ids[:-1].view(batch, time), ids[1:].view(batch, time), torch.ones(batch, time, dtype=torch.bool))


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_trains_and_heldout_improves(variant, workdir, repo_root, monkeypatch):
    root, text = workdir
    monkeypatch.chdir(root)
    config = {"pretrain": {
        "presets_dir": str(repo_root / "config" / "lm"),
        "overrides_by_type": BY_TYPE,
        "variants": {variant: {"overrides": PER_VARIANT.get(variant, {})}},
    }}
    spec = resolve_variant(config, variant)
    vocab = Vocabulary.load(spec["vocab"])
    if spec["data"].get("tokenizer"):
        encoder = SubwordEncoder(spec["data"]["tokenizer"])
        ids = [i for line in text for i in [1] + encoder.encode_line(line) + [2]]
    else:
        ids = [i for line in text for i in [1] + vocab.encode(line.split()) + [2]]
    torch.manual_seed(0)
    model = LanguageModel.from_spec(spec, vocab)
    batch = stream_batch(ids)
    lr = {"type": "adagrad", "lr": 0.2} if spec["optimizer"]["type"] == "adagrad" else {"type": "adam", "lr": 0.01}
    bundle = build_optimizer(lr, model, batch_size=4)
    before, _ = model.evaluate(batch)
    for _ in range(25):
        bundle.zero_grad()
        out, _ = model(batch)
        (out.loss_sum / out.num_tokens).backward()
        clip_global_norm([p for p in model.parameters() if p.requires_grad], 5.0)
        bundle.step()
    after, _ = model.evaluate(batch)
    assert torch.isfinite(after.loss_sum)
    assert after.loss_sum < before.loss_sum - 0.05 * abs(before.loss_sum), (before.loss_sum, after.loss_sum)
    metric = model.output_layer.heldout_metric
    assert metric == ("cosine" if spec["output"]["type"] == "cosine" else "perplexity")


def test_unknown_names_are_named(repo_root):
    from elmoc.errors import ConfigError
    from elmoc.registry import build

    with pytest.raises(ConfigError, match="Did you mean 'cosine'"):
        build("output", {"type": "cosin", "vectors": "x.npy"}, hidden_dim=4)
    with pytest.raises(ConfigError, match="unknown input type 'fastext'"):
        build("input", {"type": "fastext", "vectors": "x.npy"})
    with pytest.raises(ConfigError, match="unknown variant 'elmo-z'"):
        resolve_variant({"pretrain": {"presets_dir": str(repo_root / "config/lm"), "variants": {"elmo-c": {}}}}, "elmo-z")
