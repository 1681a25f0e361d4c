"""Pretraining: the LR schedule, optimizers, checkpoints and the one training loop."""
