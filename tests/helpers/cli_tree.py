"""Walks the ``fme-ai-resilience`` parser: every command, its options, a command line that parses.

The command-line tests use it to hold every command to one policy (exit codes, help, number
options) without a list that a new command could escape.
"""
from __future__ import annotations

import argparse
from typing import Iterator, List, Tuple

from fme_ai_resilience.cli import build_parser, main

#: A value for each required argument of any command (and for the positional ones the tests
#: want given).
REQUIRED = {"--service": "vision", "level": "L1", "key": "feature-1/photo-1",
            "keys": "feature-1/photo-1", "--url": "http://127.0.0.1:9", "--repository": "fair",
            "--layer": "https://gis.test/arcgis/rest/services/inspection/FeatureServer/0",
            "--since": "2026-11-30", "--condition": "good", "--reviewer": "inspector"}

Path = Tuple[str, ...]


def _children(parser: argparse.ArgumentParser) -> Iterator[Tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def commands() -> List[Tuple[Path, argparse.ArgumentParser]]:
    """``(path, parser)`` for the top parser and every sub-command, depth first."""
    out: List[Tuple[Path, argparse.ArgumentParser]] = []

    def walk(path: Path, parser: argparse.ArgumentParser) -> None:
        out.append((path, parser))
        for name, child in _children(parser):
            walk(path + (name,), child)

    walk((), build_parser())
    return out


def leaves() -> List[Tuple[Path, argparse.ArgumentParser]]:
    """The commands that run something (no sub-commands of their own)."""
    return [(path, parser) for path, parser in commands() if not list(_children(parser))]


def options(parser: argparse.ArgumentParser) -> List[argparse.Action]:
    """The options of ``parser`` that take a value (not flags, not --help)."""
    return [a for a in parser._actions
            if a.option_strings and a.nargs != 0 and not isinstance(a, argparse._SubParsersAction)]


def argv(path: Path, parser: argparse.ArgumentParser) -> List[str]:
    """``path`` plus a value for each required argument: a command line that parses."""
    line = list(path)
    for action in parser._actions:
        if action.option_strings and action.required:
            line += [action.option_strings[0], REQUIRED[action.option_strings[0]]]
        elif not action.option_strings and not isinstance(action, argparse._SubParsersAction):
            if action.nargs not in ("*", "?") or action.dest in REQUIRED:
                line.append(REQUIRED[action.dest])
    return line


def takes_db(parser: argparse.ArgumentParser) -> bool:
    return any("--db" in a.option_strings for a in parser._actions)


def run(line: List[str]) -> int:
    """``main(line)``, with argparse's own exits returned as exit codes."""
    try:
        return main(line)
    except SystemExit as exc:
        return int(exc.code or 0)
