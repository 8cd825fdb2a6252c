"""The ``fme-ai-resilience`` command line: one module per command group.

Each module in :data:`COMMANDS` exposes ``add_parser(subparsers)``, which adds its sub-command
and sets ``func(args) -> int`` (the exit code) as the parser default. A command line that names
its command imports only that command's module: ``status`` never loads the drill.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional, Sequence

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
    "notifications",
    "dlq",
    "review",
    "check",
    "workspaces",
    "flow",
    "package",
)
#: The commands a module adds beside the one named after it.
ALSO = {"reconcile": "compensate"}


def build_parser(modules: Sequence[str] = COMMANDS) -> argparse.ArgumentParser:
    """The ``fme-ai-resilience`` parser with the command groups of ``modules`` (every one by
    default)."""
    parser = argparse.ArgumentParser(
        prog="fme-ai-resilience",
        description="Keep a Survey123 -> FME Flow -> Vision AI pipeline whole: the ledger, the "
                    "intake gateway, the capacity plan, the shared breakers and the "
                    "degradation ladder. Each command has its own --help.",
        epilog=exit_codes("a check failed, a configuration does not fit or the ledger could "
                          "not do it"))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in modules:
        importlib.import_module(f"{__name__}.{name}").add_parser(subparsers)
    return parser


def _module_named(argv: Sequence[str]) -> Optional[str]:
    """The module of the command ``argv`` names, or None (no command, or an unknown one: the
    whole parser then lists every command)."""
    for arg in argv:
        if not arg.startswith("-"):
            name = ALSO.get(arg, arg)
            return name if name in COMMANDS else None
        if arg in ("-h", "--help", "--version"):
            return None
    return None


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; returns the process exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    named = _module_named(argv)
    if named is None and argv[:1] == ["--version"]:
        parser = build_parser(())   # prints the version and exits: no command is needed
    else:
        parser = build_parser(COMMANDS if named is None else (named,))
    args = parser.parse_args(argv)
    show_warnings()
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return int(args.func(args) or 0)
