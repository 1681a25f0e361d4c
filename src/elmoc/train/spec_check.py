"""An LM spec checked block by block as training reads it, without building anything.

:func:`check_spec` makes the checks the builders make before they allocate: each typed block
(``input``, ``encoder``, ``output``) through the registry (:func:`elmoc.registry.check_block`:
a registered ``type``, no unknown key, no key the builder sets), the ``optimizer`` as
:func:`elmoc.train.optim.build_optimizer` reads it and ``train`` as
:meth:`elmoc.train.settings.TrainSettings.from_config` does. The workflow calls it for every
variant and student when it is parsed, so ``snakemake -n`` refuses a misspelled key of a block
in one line instead of the job failing when it builds the layer.
"""
from __future__ import annotations

from typing import Any

from elmoc.errors import ConfigError
from elmoc.lm import BUILD_CONTEXT
from elmoc.registry import check_block, list_available
from elmoc.train.optim import check_optimizer
from elmoc.train.settings import TrainSettings

DEFAULT_OPTIMIZER = {"type": "scheduled_adam"}  # what the training loop builds without an optimizer section


def check_spec(spec: dict[str, Any], name: str) -> None:
    """ConfigError ``"<name>: <what is wrong>"`` in one line for the first block of ``spec`` its
    builder would refuse.

    Args:
        spec: a resolved LM spec (:func:`elmoc.config.resolve_variant`, ``resolve_student``).
        name: where it comes from (``config pretrain.variants.elmo-c``, a preset file), for the message.
    """
    for kind in BUILD_CONTEXT:
        list_available(kind)  # the kinds' modules and ELMOC_PLUGINS imported: a plug-in's error is its own line
    try:
        for kind, context in BUILD_CONTEXT.items():
            if kind not in spec:
                raise ConfigError(f"the spec has no {kind!r} section")
            check_block(kind, spec[kind], context)
        check_optimizer(spec.get("optimizer", DEFAULT_OPTIMIZER))
        TrainSettings.from_config(spec.get("train", {}))
    except ConfigError as e:
        raise ConfigError(f"{name}: {str(e).removeprefix('config ')}") from None
