"""The ``fme-ai-resilience`` command line: one module per command group.

Each module in :data:`COMMANDS` exposes ``add_parser(subparsers)``, which adds its sub-command
and sets ``func(args) -> int`` (the exit code) as the parser default.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .. import __version__
from ..errors import ConfigurationError
from ..settings import Settings

#: Command modules, in the order ``--help`` lists them.
COMMANDS = (
    "db",
    "status",
    "plan",
    "serve",
    "breaker",
    "degrade",
)


def settings_from_args(items: Sequence[str], explicit: Mapping[str, Any]) -> Settings:
    """Settings from ``FAIR_*`` variables, then ``--set NAME=VALUE`` items, then options.

    ``explicit`` maps setting names to option values; None means "not given".
    Raises :class:`ConfigurationError` for an item without ``=`` or a bad value.
    """
    values: Dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise ConfigurationError(item, item, "expected NAME=VALUE")
        values[name.strip()] = value
    values.update({k: v for k, v in explicit.items() if v is not None})
    return Settings.from_env(os.environ).with_values(values)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fme-ai-resilience",
        description="Keep a Survey123 -> FME Flow -> Vision AI pipeline whole.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").add_parser(subparsers)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    return int(args.func(args) or 0)
