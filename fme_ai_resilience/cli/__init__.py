"""The ``fme-ai-resilience`` command line: one module per command group.

Each module in :data:`COMMANDS` exposes ``add_parser(subparsers)``, which adds its sub-command
and sets ``func(args) -> int`` (the exit code) as the parser default.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

from .. import __version__
from .common import EXIT_USAGE, exit_codes
from .logs import show_warnings

__all__ = ["main", "build_parser", "COMMANDS"]

#: Command modules, in the order ``--help`` lists them.
COMMANDS = (
    "drill",
    "db",
    "status",
    "plan",
    "serve",
    "breaker",
    "degrade",
    "process",
    "compensate",
    "dlq",
    "review",
    "check",
    "workspaces",
    "flow",
    "package",
)


def build_parser() -> argparse.ArgumentParser:
    """The ``fme-ai-resilience`` parser with every command group."""
    parser = argparse.ArgumentParser(
        prog="fme-ai-resilience",
        description="Keep a Survey123 -> FME Flow -> Vision AI pipeline whole: the ledger, the "
                    "intake gateway, the capacity plan, the shared breakers and the "
                    "degradation ladder. Each command has its own --help.",
        epilog=exit_codes("a check failed, a configuration does not fit or the ledger could "
                          "not do it"))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").add_parser(subparsers)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    show_warnings()
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return int(args.func(args) or 0)
