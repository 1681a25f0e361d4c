"""`elmoc spec`: write a resolved LM spec (preset + overrides) to a YAML file."""
from __future__ import annotations

import argparse
import json

NAME = "spec"
HELP = "resolve an LM variant (preset + overrides) into a spec YAML file"
DESCRIPTION = (
    "Write the complete LM spec of one variant. Either give --config and --variant "
    "(the workflow config and a name under pretrain.variants) or --spec-json (an "
    "already resolved spec, as the workflow passes it)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="workflow config YAML (e.g. config/config.yaml)")
    src.add_argument("--spec-json", help="a resolved spec as a JSON string")
    parser.add_argument("--variant", help="variant name under pretrain.variants (with --config)")
    parser.add_argument("--output", required=True, help="where to write the spec YAML")


def run(args: argparse.Namespace) -> int:
    from elmoc.config import check_spec_numbers, dump_yaml, load_yaml, resolve_variant
    from elmoc.errors import ConfigError

    if args.spec_json is not None:
        try:
            spec = json.loads(args.spec_json)
        except json.JSONDecodeError as e:
            raise ConfigError(f"--spec-json is not valid JSON: {e}") from None
        if not isinstance(spec, dict):
            raise ConfigError(f"--spec-json must be a JSON object (a resolved spec), got {type(spec).__name__}")
        check_spec_numbers(spec, lambda section, key: "--spec-json " + ".".join(filter(None, (section, key))))
    else:
        if not args.variant:
            raise ConfigError("--config needs --variant")
        spec = resolve_variant(load_yaml(args.config), args.variant)
    dump_yaml(spec, args.output)
    return 0
