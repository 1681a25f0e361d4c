"""benchmarks/transformer_positions.py: the cosine per window position of a causal CONT
Transformer.  At the trained window length its mean over every position is the run's own
heldout metric (the trainer's evaluation, an independent path); the buckets count every token."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
import yaml
from benchmark_scripts import load_benchmark
from tiny_corpus import elmoc_train, sentences, tiny_spec, write_workdir

pytestmark = pytest.mark.slow  # trains two tiny LMs through `elmoc train`
TRANSFORMER = {"type": "transformer", "d_model": 8, "heads": 2, "d_ff": 16, "num_layers": 2}


@pytest.fixture(autouse=True)
def _same_threads_after():
    """The script sets torch's thread count (--threads): later tests get this process's back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_the_trained_length_gives_the_heldout_metric_and_buckets_count_every_token(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    spec = tiny_spec("trans", {"type": "cosine", "vectors": "vec.npy"}, batch_size=2, bptt=6, eval_batch_size=3)
    spec["encoder"] = {**TRANSFORMER, "dropout": 0.1}
    write_workdir(tmp_path, [sentences(rng, 30)], sentences(np.random.default_rng(4), 12), spec, rng)
    run = tmp_path / "results/lm/trans"
    for direction in ("forward", "backward"):
        r = elmoc_train(tmp_path, f"results/lm/trans/{direction}", direction=direction)
        assert r.returncode == 0, r.stderr[-2000:]
    shutil.copy(tmp_path / "spec.yaml", run / "spec.yaml")
    monkeypatch.chdir(tmp_path)  # the script works in the workflow folder; restored after the test
    out = tmp_path / "positions.json"
    assert load_benchmark("transformer_positions").main(["--workflow-dir", str(tmp_path), "--variant", "trans", "--lengths", "6", "12",
                           "--buckets", "0", "3", "6", "12", "--threads", "1", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["trained_window"] == yaml.safe_load((run / "spec.yaml").read_text())["train"]["bptt"] == 6
    for direction in ("forward", "backward"):
        rows = result["directions"][direction]
        heldout = json.loads((run / direction / "heldout.json").read_text())["history"][-1]
        assert rows["6"]["all"]["cosine"] == pytest.approx(heldout["value"], abs=1e-6)
        assert rows["6"]["all"]["tokens"] == heldout["eval_tokens"]
        assert set(rows["6"]) == {"0-2", "3-5", "all"} and set(rows["12"]) == {"0-2", "3-5", "6-11", "all"}
        for length in ("6", "12"):
            buckets = [v for k, v in rows[length].items() if k != "all"]
            assert sum(b["tokens"] for b in buckets) == rows[length]["all"]["tokens"]
            mean = sum(b["cosine"] * b["tokens"] for b in buckets) / rows[length]["all"]["tokens"]
            assert mean == pytest.approx(rows[length]["all"]["cosine"], abs=1e-9)


@pytest.mark.parametrize("encoder, output, train", [
    (None, {"type": "cosine", "vectors": "vec.npy"}, {}),  # an LSTM (no positions)
    (TRANSFORMER, {"type": "sampled", "num_samples": 5}, {"directions": "joint"}),  # trans-*-sampled
    ({**TRANSFORMER, "causal": False}, {"type": "cosine", "vectors": "vec.npy"}, {"objective": "masked_lm"}),  # mlm-c
])
def test_anything_but_a_cont_causal_transformer_is_refused_in_one_line(tmp_path, capsys, monkeypatch,
                                                                        encoder, output, train):
    run = tmp_path / "results/lm/other"
    run.mkdir(parents=True)
    spec = tiny_spec("other", output, **train)
    if encoder:
        spec["encoder"] = encoder
    (run / "spec.yaml").write_text(yaml.safe_dump(spec))
    monkeypatch.chdir(tmp_path)
    assert load_benchmark("transformer_positions").main(["--workflow-dir", str(tmp_path), "--variant", "other"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "causal Transformer" in err[0]
