"""Subcommands of the `elmoc` CLI, one module each (see elmoc.cli)."""
