"""A workflow config section handed to a command as ``--section-json``.

The one way a rule passes configuration to ``elmoc <command>``: the JSON of the config
section (or entry) the command reads. The command parses it here and reads each key
through :meth:`Section.get`, which names the key in a one-line ``ConfigError`` when its
value has the wrong type. Every command declares the keys it reads (``keys=``): any other
key is refused in one line naming it and the closest known key (:func:`check_keys`), so a
misspelled ``max_sise`` is an error, never a silent default.
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
from typing import Any, Iterable

from elmoc.errors import ConfigError

FLAG = "--section-json"


class Deprecated(argparse.Action):
    """An option's value stored as usual; given by one of its deprecated spellings
    (``deprecated``, left out of ``--help`` by :class:`elmoc.commands._options.HelpFormatter`), it
    also prints one line on stderr naming the spelling to use."""

    def __init__(self, option_strings, dest, deprecated=(), **kwargs):
        self.deprecated = tuple(deprecated)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string in self.deprecated:
            print(f"{parser.prog}: warning: {option_string} is deprecated; use {self.option_strings[0]}",
                  file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_section_argument(parser, section: str, *aliases: str) -> None:
    """Add ``--section-json`` (and deprecated ``aliases``) for the config section `section`."""
    parser.add_argument(FLAG, *aliases, dest="section_json", default=None, metavar="JSON", action=Deprecated,
                        deprecated=aliases, help=f"the config's `{section}` as JSON (what the workflow passes)")


def refuse_with_section(args, flags: dict[str, Any]) -> None:
    """With ``--section-json``, the flags it replaces must not be given too.

    Args:
        flags: flag name -> its parsed value (None, False or [] when not given).
    """
    given = [flag for flag, value in flags.items() if value not in (None, False, [])]
    if args.section_json is not None and given:
        raise ConfigError(f"{FLAG} carries the whole config section; drop {', '.join(given)}")


def check_keys(data: dict[str, Any], keys: Iterable[str], name: str) -> None:
    """ConfigError naming every key of `data` not in `keys`, each with the closest known key.

    Args:
        data: a mapping read from a config.
        keys: the keys its reader knows.
        name: the mapping's dotted place in the config, for the message.
    """
    known = sorted(keys)
    unknown = sorted(k for k in data if k not in known)
    if not unknown:
        return
    named = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), known, n=1)
        named.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    what = "unknown key" if len(unknown) == 1 else "unknown keys"
    raise ConfigError(f"config {name}: {what} {', '.join(named)}; known keys: {', '.join(known) or '(none)'}")


class Section:
    """A config section: ``Section.parse(text, "corpus").get("seed", int, 1)``.

    Args:
        data: the section's keys and values.
        name: its dotted place in the config (``corpus``, ``fasttext.models.cc``), for errors.
        keys: the keys its reader knows; any other key is a ConfigError (:func:`check_keys`).
            None: not checked here (a reader that checks them itself, e.g. the registry).
    """

    def __init__(self, data: dict[str, Any], name: str, keys: Iterable[str] | None = None) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"config {name} must be a mapping, got {data!r}")
        if keys is not None:
            check_keys(data, keys, name)
        self.data = data
        self.name = name

    @classmethod
    def parse(cls, text: str, name: str, keys: Iterable[str] | None = None, flag: str = FLAG) -> Section:
        """The section from the JSON text of ``--section-json`` (or of another `flag` carrying a
        JSON object), its keys checked against `keys`."""
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ConfigError(f"{flag} ({name}) is not valid JSON ({e})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{flag} ({name}) must be a JSON object, got {type(data).__name__}")
        return cls(data, name, keys)

    def sub(self, key: str, keys: Iterable[str] | None = None) -> Section:
        """The mapping under `key` as a Section (required; its keys checked against `keys`)."""
        return Section(self.get(key, dict, required=True), f"{self.name}.{key}", keys)

    def entries(self, key: str, keys: Iterable[str] | None = None) -> list[Section]:
        """The list of mappings under `key` (empty when absent; their keys checked against `keys`)."""
        return [Section(item, f"{self.name}.{key}[{i}]", keys) for i, item in enumerate(self.get(key, list, []))]

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None, required: bool = False) -> Any:
        """The value of `key` (`default` when absent or null), checked to be a `kind`."""
        value = self.data.get(key)
        if value is None:
            if required:
                raise ConfigError(f"config {self.name}.{key} is required")
            return default
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds:
            kinds = (*kinds, int)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise ConfigError(f"config {self.name}.{key} must be {names}, got {value!r}")
        return value
