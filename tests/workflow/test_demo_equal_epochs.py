"""The demo trains every LM variant for the same number of epochs (issue 52), so that Table 2's
times and the summary's heldout values compare like with like."""
from __future__ import annotations

from elmoc.config import load_yaml, resolve_variant, variant_names


def test_every_demo_variant_trains_the_same_epochs(repo_root):
    config = load_yaml(repo_root / "config" / "config.yaml")
    epochs = {name: resolve_variant(config, name, repo_root / "config" / "lm")["train"]["epochs"]
              for name in variant_names(config)}
    assert len(epochs) >= 9 and len(set(epochs.values())) == 1, epochs
