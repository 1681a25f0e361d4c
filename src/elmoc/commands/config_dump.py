"""`elmoc config-dump`: the workflow's effective config as YAML, for the report."""
from __future__ import annotations

import argparse

from elmoc.commands._options import FILE, add_output

NAME = "config-dump"
GROUP = "internals"  # its heading in `elmoc --help` (cli.GROUPS)
EXAMPLE = 'elmoc config-dump --section-json \'{"scale": "demo"}\' --output results/config.yaml'
HELP = "write the effective workflow config (checked against the workflow schema) as YAML"
DESCRIPTION = (
    "The whole workflow config as --section-json (what the workflow's config_dump passes: the config "
    "files with --config overrides applied), checked against workflow/schemas/config.schema.yaml, "
    "written as YAML to --output for `snakemake --report`."
)


INPUTS = ()  # args naming files read; an output among them is refused (cli)
OUTPUTS = ('output',)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--section-json", required=True, metavar="JSON",
                        help="the whole effective workflow config as JSON (what the workflow passes)")
    add_output(parser, FILE, "YAML file to write")


def run(args: argparse.Namespace) -> int:
    import yaml

    from elmoc.config import check_workflow_config
    from elmoc.config_section import Section
    from elmoc.io.atomic import atomic_file

    config = Section.parse(args.section_json, "workflow config").data
    # the workflow's config_dump passes the config Snakemake validated with the same schema
    check_workflow_config(config, "--section-json (workflow config)", required=False)
    with atomic_file(args.output) as f:
        f.write("# The effective workflow config of this run (config files + --config overrides)\n")
        yaml.safe_dump(config, f, sort_keys=False, allow_unicode=True)
    return 0
