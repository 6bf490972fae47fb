"""Registering commands, for the `cmd_*` modules that add to a command group another
module created (`topics alter`, `groups reset-offsets`) as well as their own."""

from __future__ import annotations

import argparse
from typing import Any

Parsers = Any  # argparse's private _SubParsersAction


def subcommands_of(commands: Parsers, name: str) -> Parsers:
    """The sub-command action of command `name` (e.g. `topics`), or a new one."""
    parser = commands.choices.get(name)
    if parser is None:
        parser = commands.add_parser(name, help=f"{name} commands")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return parser.add_subparsers(dest="action", required=True)


def add_command(
    parsers: Parsers,
    common: argparse.ArgumentParser,
    name: str,
    run: Any,
    help_text: str,
    epilog: str,
) -> argparse.ArgumentParser:
    """A sub-command with the common options, its examples kept as written."""
    parser: argparse.ArgumentParser = parsers.add_parser(
        name,
        parents=[common],
        help=help_text,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(run=run)
    return parser
