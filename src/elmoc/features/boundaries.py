"""``boundaries`` of a features section or ``--boundaries``: wrap sentences in <s> ... </s> or not."""
from __future__ import annotations


def boundaries_option(value: "str | bool | None", where: str) -> "bool | None":
    """``auto`` (or None) -> None (by the model's kind), ``true``/``false`` (strings or
    booleans) -> True/False; anything else is a ConfigError naming ``where``."""
    from elmoc.errors import ConfigError

    if value is None or value == "auto":
        return None
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise ConfigError(f"{where} must be auto, true or false, got {value!r}")


def boundaries_flags(boundaries: "str | None", no_boundaries: bool) -> "bool | None":
    """``--boundaries {auto,true,false}`` and ``--no-boundaries`` of a command: what they ask for
    (None: by the model's kind); both given and contradicting is a ConfigError (one line)."""
    from elmoc.errors import ConfigError

    if no_boundaries and boundaries not in (None, "false"):
        raise ConfigError(f"--no-boundaries contradicts --boundaries {boundaries}; give one of them")
    return False if no_boundaries else boundaries_option(boundaries, "--boundaries")
