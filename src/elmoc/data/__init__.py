"""Corpus, vocabulary, word vectors and batches."""
