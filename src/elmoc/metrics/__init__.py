"""Evaluation metrics of the downstream tasks (one module per metric family)."""
