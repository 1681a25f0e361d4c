"""One registry that maps config names to classes.

Every configurable building block (input layers, encoders, output layers, tasks)
registers itself under a ``(kind, name)`` pair::

    @register("output", "cosine")
    class CosineOutput(OutputLayer): ...

and is built from a config dict whose ``type`` is that name::

    build("output", {"type": "cosine"}, input_dim=512, vocab=vocab)

Config keys become constructor keyword arguments; a key the constructor does not
accept is an error that lists the accepted keys.  A subclass adding an option names
only it and passes ``**kwargs`` to its parent: the accepted keys are read along the
class hierarchy (:func:`accepted_arguments`).  ``context`` keyword arguments
(dimensions and resources known only at build time) are passed only to
constructors that accept them, so each class asks for exactly what it needs.

Classes outside the package register the same way: the environment variable
``ELMOC_PLUGINS`` lists plug-ins (``.py`` files or importable module names, separated by
``os.pathsep``), imported once each, in order, before any kind is looked up or listed, so
a class in such a file is buildable by every ``elmoc`` command and the workflow.

Methods register the same way and are looked up by name (:func:`by_name`), their options
read from a typed ``Options`` dataclass by :func:`elmoc.config.typed_options` /
:func:`elmoc.config.check_section`: fine-tuning recipes (kind ``recipe``), compressed formats
(``compression``), prune methods (``prune_method``) and the training loop's hooks
(``train_hook``; asked by every run, :mod:`elmoc.train.hooks.base`).

Optimizers are not registered: the LM's ``optimizer`` section is read by
:func:`elmoc.train.optim.build_optimizer` (a fixed set of types, each with its
accepted options), and a task's trainer names ``adam`` or ``adadelta``
(:mod:`elmoc.tasks.runner`).
"""
from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import os
import re
import sys
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
    "train_hook": "elmoc.train.hooks",  # method state beside the training loop (train/hooks/base.py)
    "recipe": "elmoc.tasks.recipes",  # fine-tuning recipes (tasks/recipes/base.py)
    "compression": "elmoc.pretrained.compression",  # compressed formats (pretrained/formats.py)
    "prune_method": "elmoc.train.prune_methods",  # how a prune round shrinks a model (train/prune_methods/base.py)
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


PLUGINS = "ELMOC_PLUGINS"
_PLUGINS_IMPORTED: set[str] = set()  # entries of $ELMOC_PLUGINS imported (or being imported) here


def _load_kind(kind: str) -> None:
    package = _KIND_PACKAGES.get(kind)
    if package is not None:
        importlib.import_module(package)  # its __init__ imports every module
    _load_plugins()


def _load_plugins() -> None:
    """Import the entries of ``$ELMOC_PLUGINS`` not imported yet, in order, after every built-in
    kind (so a plug-in name that clashes with a built-in one is refused as the plug-in's)."""
    entries = [e.strip() for e in os.environ.get(PLUGINS, "").split(os.pathsep) if e.strip()]
    new = [e for e in entries if e not in _PLUGINS_IMPORTED]
    if not new:
        return
    _PLUGINS_IMPORTED.update(new)  # a lookup while they import does not import them again
    for package in _KIND_PACKAGES.values():
        importlib.import_module(package)
    for i, entry in enumerate(new):
        try:
            _import_plugin(entry)
        except BaseException:
            _PLUGINS_IMPORTED.difference_update(new[i:])  # the next lookup refuses it again
            raise


def _import_plugin(entry: str) -> None:
    """Import one plug-in: a ``.py`` file (an entry ending so or holding a path separator;
    relative to the working directory) or else a module name.  Registering nothing is fine.

    Raises:
        ConfigError: one line naming the entry and the fix: no such file or module, or the
            first line of the error its import raised.
    """
    where = f"{PLUGINS} entry {entry!r}"
    name, module = entry, None
    if not (entry.endswith(".py") or "/" in entry or os.sep in entry):
        try:
            found = importlib.util.find_spec(entry)
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise ConfigError(f"{where}: no module of that name; give the path of its .py file, or put its "
                              "folder on PYTHONPATH")
    elif not Path(entry).is_file():
        raise ConfigError(f"{where}: no such file (from {os.getcwd()}); give the path of a .py file, or remove "
                          f"the entry from {PLUGINS}")
    else:
        name = "elmoc_plugin_" + re.sub(r"\W", "_", Path(entry).stem)
        while name in sys.modules:
            name += "_"
        spec = importlib.util.spec_from_file_location(name, entry)
        sys.modules[name] = module = importlib.util.module_from_spec(spec)  # where dataclasses, pickle look
    try:
        if module is None:
            importlib.import_module(entry)
        else:
            spec.loader.exec_module(module)
    except Exception as err:
        sys.modules.pop(name, None)
        first = (str(err).strip().splitlines() or [""])[0]
        raise ConfigError(f"{where} could not be imported ({type(err).__name__}: {first}); fix it or remove "
                          f"the entry from {PLUGINS}") from None


def kind_sources(kind: str) -> list[Path]:
    """The source files of the package whose modules register ``kind``, found without importing
    them, with the ``.py`` plug-ins of ``$ELMOC_PLUGINS`` (:func:`elmoc.config.declared_ranges` reads options' ranges there at workflow parse time)."""
    package = _KIND_PACKAGES.get(kind)
    if package is None:
        return []
    built_in = sorted(Path(__file__).resolve().parent.joinpath(*package.split(".")[1:]).glob("*.py"))
    # the plug-in files of $ELMOC_PLUGINS too (a module name is not read here: its ranges are
    # checked when the block is built)
    plugins = [Path(e.strip()) for e in os.environ.get(PLUGINS, "").split(os.pathsep) if e.strip().endswith(".py")]
    return built_in + [p for p in plugins if p.is_file()]


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
    """Keyword names ``cls`` can be built with, read along its class hierarchy, and whether
    it takes any keyword at all.

    A constructor's ``**kwargs`` stands for its parent's options (it passes them to
    ``super().__init__``), so the walk goes on to the next constructor up the hierarchy
    and stops at the first one without ``**kwargs``.  Where ``**kwargs`` reaches a base
    that names no option (``object``, ``torch.nn.Module``), the class takes any keyword
    (the second value is True) and checks them itself.
    """
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue  # inherits its constructor: the next class up defines it
        params = inspect.signature(init).parameters
        own = {n for n, p in params.items() if n != "self"
               and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
        var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        if not own and var_kw and klass is not cls:  # a base that names nothing: anything goes
            return names, True
        names |= own
        if not var_kw:
            return names, False
    return names, True


def check_block(kind: str, config: Any, context: Any = ()) -> tuple[type, set[str], bool]:
    """The class of a block config and its accepted keyword names, after the checks :func:`build`
    makes before it instantiates: a mapping with a registered ``type``, no unknown key (named with
    the closest accepted one), no key the builder sets (``context``: its build-time names). The
    workflow calls it on every block when it is parsed, so ``snakemake -n`` refuses what the
    job's build would.

    Returns:
        (class, accepted keyword names, whether it takes any keyword) (:func:`accepted_arguments`).
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
    return cls, names, var_kw


def build(kind: str, config: dict[str, Any], **context: Any) -> Any:
    """Instantiate the class named by ``config["type"]`` with the rest as kwargs.

    Args:
        kind: "input", "encoder", "output", "task", ...
        config: a dict with a ``type`` key; other keys are constructor arguments.
        context: build-time arguments (e.g. ``input_dim``, ``vocab``) passed only if
            a constructor along the class hierarchy names them.  A config key shadows nothing: giving a
            context name in the config is an error, since the builder owns it (:func:`check_block`).
    """
    cls, names, var_kw = check_block(kind, config, context)
    kwargs = {k: v for k, v in config.items() if k != "type"}
    for key, value in context.items():
        if key in names or var_kw:
            kwargs[key] = value
    return cls(**kwargs)
