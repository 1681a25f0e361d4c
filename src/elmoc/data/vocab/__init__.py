"""Stages ``vocab`` and ``bpe``: the word vocabulary and BPE subwords."""
