"""Build modules without initialising their weights, for weights about to be loaded.

A module's constructor initialises its parameters (the ELMo LSTM's block-orthogonal
init is 32 QR factorisations of 4096 x 1024 blocks at the released size: seconds of
``elmoc embed``'s startup) and the loader then overwrites every one of them.  Inside
:func:`skip_weight_init` the initialisers of ``torch.nn.init`` return their tensor
untouched, so the parameters hold whatever memory they were given until
``load_state_dict`` fills them; the caller must check that the state dict covers every
parameter (the feature loader refuses a missing key).  torch has no switch for this
across a whole module tree (``torch.nn.utils.skip_init`` builds one module), hence
this small context manager over the functions in ``torch.nn.init``.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch.nn.init as init

INITIALISERS = ("uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_",
                "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
                "sparse_")


def _untouched(tensor, *args, **kwargs):
    return tensor


@contextmanager
def skip_weight_init() -> Iterator[None]:
    """Within the block, every ``torch.nn.init`` initialiser leaves its tensor as it is."""
    saved = {name: getattr(init, name) for name in INITIALISERS if hasattr(init, name)}
    try:
        for name in saved:
            setattr(init, name, _untouched)
        yield
    finally:
        for name, function in saved.items():
            setattr(init, name, function)
