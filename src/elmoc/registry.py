"""One registry that maps config names to classes.

Every configurable building block (input layers, encoders, output layers, tasks)
registers itself under a ``(kind, name)`` pair::

    @register("output", "cosine")
    class CosineOutput(OutputLayer): ...

and is built from a config dict whose ``type`` is that name::

    build("output", {"type": "cosine"}, input_dim=512, vocab=vocab)

Config keys become constructor keyword arguments; a key the constructor does not
accept is an error that lists the accepted keys.  ``context`` keyword arguments
(dimensions and resources known only at build time) are passed only to
constructors that accept them, so each class asks for exactly what it needs.

Optimizers are not registered: the LM's ``optimizer`` section is read by
:func:`elmoc.train.optim.build_optimizer` (a fixed set of types, each with its
accepted options), and a task's trainer names ``adam`` or ``adadelta``
(:mod:`elmoc.tasks.runner`).
"""
from __future__ import annotations

import difflib
import importlib
import inspect
from pathlib import Path
from typing import Any, Callable

from elmoc.config_section import check_keys
from elmoc.errors import ConfigError

_REGISTRY: dict[str, dict[str, type]] = {}

# Packages whose modules register classes of each kind; imported lazily so that
# ``elmoc --help`` does not pay for importing torch models.
_KIND_PACKAGES = {
    "input": "elmoc.inputs",
    "encoder": "elmoc.encoders",
    "output": "elmoc.outputs",
    "task": "elmoc.tasks",
}


def register(kind: str, name: str) -> Callable[[type], type]:
    """Class decorator: make ``cls`` buildable as ``{"type": name}`` of ``kind``."""

    def decorator(cls: type) -> type:
        table = _REGISTRY.setdefault(kind, {})
        if name in table and table[name] is not cls:
            raise ConfigError(
                f"{kind} name {name!r} is already registered to {table[name].__qualname__}; "
                f"choose another name for {cls.__qualname__}"
            )
        table[name] = cls
        cls.registered_name = name
        return cls

    return decorator


def _load_kind(kind: str) -> None:
    package = _KIND_PACKAGES.get(kind)
    if package is not None:
        importlib.import_module(package)  # its __init__ imports every module


def kind_sources(kind: str) -> list[Path]:
    """The source files of the package whose modules register ``kind``, found without importing
    them (:func:`elmoc.config.declared_ranges` reads options' ranges there at workflow parse time)."""
    package = _KIND_PACKAGES.get(kind)
    if package is None:
        return []
    return sorted(Path(__file__).resolve().parent.joinpath(*package.split(".")[1:]).glob("*.py"))


def list_available(kind: str) -> list[str]:
    """Sorted names registered for ``kind``."""
    _load_kind(kind)
    return sorted(_REGISTRY.get(kind, {}))


def by_name(kind: str, name: str) -> type:
    """The class registered as ``name`` of ``kind``; unknown names get suggestions."""
    _load_kind(kind)
    table = _REGISTRY.get(kind, {})
    if name not in table:
        close = difflib.get_close_matches(name, list(table), n=3)
        hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise ConfigError(
            f"unknown {kind} type {name!r}.{hint} Available: {', '.join(sorted(table)) or '(none)'}"
        )
    return table[name]


def accepted_arguments(cls: type) -> tuple[set[str], bool]:
    """Constructor keyword names of ``cls`` and whether it takes ``**kwargs``."""
    params = inspect.signature(cls.__init__).parameters
    names = {p for p in params if p != "self"}
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    names = {n for n in names if params[n].kind is not inspect.Parameter.VAR_KEYWORD}
    return names, var_kw


def build(kind: str, config: dict[str, Any], **context: Any) -> Any:
    """Instantiate the class named by ``config["type"]`` with the rest as kwargs.

    Args:
        kind: "input", "encoder", "output", "task", ...
        config: a dict with a ``type`` key; other keys are constructor arguments.
        context: build-time arguments (e.g. ``input_dim``, ``vocab``) passed only if
            the constructor names them.  A config key shadows nothing: giving a
            context name in the config is an error, since the builder owns it.
    """
    if not isinstance(config, dict) or "type" not in config:
        raise ConfigError(f"{kind} config must be a mapping with a 'type' key, got {config!r}")
    cls = by_name(kind, config["type"])
    kwargs = {k: v for k, v in config.items() if k != "type"}
    names, var_kw = accepted_arguments(cls)
    if not var_kw:
        own = {k: v for k, v in kwargs.items() if k not in context}  # a context name: the clash below
        check_keys(own, [n for n in names if n not in context], f"{kind} {config['type']!r}")
    clash = sorted(k for k in kwargs if k in context)
    if clash:
        raise ConfigError(
            f"{kind} {config['type']!r}: option(s) {clash} are set by the model builder; "
            "remove them from the config"
        )
    for key, value in context.items():
        if key in names or var_kw:
            kwargs[key] = value
    return cls(**kwargs)
