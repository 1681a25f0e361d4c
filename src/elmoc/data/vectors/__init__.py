"""Stages ``fasttext`` and ``vectors``: fastText models (trained or read), tables aligned with the vocabulary, word similarity."""
