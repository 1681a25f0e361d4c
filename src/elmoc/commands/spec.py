"""`elmoc spec`: write a resolved LM spec (preset + overrides) to a YAML file."""
from __future__ import annotations

import argparse

from elmoc.commands._options import FILE, add_output

NAME = "spec"
GROUP = "train"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc spec --config config/config.yaml --variant elmo-c --output results/demo/lm/elmo-c/spec.yaml'
HELP = "resolve an LM variant (preset + overrides) into a spec YAML file"
DESCRIPTION = (
    "Write the complete LM spec of one variant. Either give --config and --variant "
    "(the workflow config and a name under pretrain.variants) or --section-json (the "
    "variant's resolved spec, as the workflow passes it)."
)


INPUTS = ('config',)  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output',)

def add_arguments(parser: argparse.ArgumentParser) -> None:
    from elmoc.config_section import add_section_argument

    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="workflow config YAML (e.g. config/config.yaml)")
    add_section_argument(src, "resolved variant spec (pretrain.variants.<variant> over its preset)", "--spec-json")
    parser.add_argument("--variant", help="variant name under pretrain.variants (with --config)")
    add_output(parser, FILE, "where to write the spec YAML")


def run(args: argparse.Namespace) -> int:
    from elmoc.config import check_spec_keys, check_spec_numbers, dump_yaml, load_yaml, resolve_variant
    from elmoc.errors import ConfigError

    if args.section_json is not None:
        from elmoc.config_section import Section

        spec = Section.parse(args.section_json, "resolved spec").data
        check_spec_keys(spec, "resolved spec")
        check_spec_numbers(spec, lambda section, key: "--section-json " + ".".join(filter(None, (section, key))))
    else:
        if not args.variant:
            raise ConfigError("--config needs --variant")
        spec = resolve_variant(load_yaml(args.config, mapping="a workflow config"), args.variant)
    dump_yaml(spec, args.output)
    return 0
