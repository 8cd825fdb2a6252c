"""What the store-backed commands share: the ``--db`` option and settings over the config table."""
from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from typing import Any, Callable, Iterator, Tuple

from ..errors import ResilienceError
from ..settings import Settings
from ..store import DEFAULT_URL, open_store

#: Not ``FAIR_``-prefixed: every ``FAIR_*`` variable must name a setting.
DB_ENV = "FME_AI_RESILIENCE_DB"


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--db URL`` (default: ``$FAIR_DB_URL``, else the embedded SQLite file)."""
    parser.add_argument("--db", default=None, metavar="URL",
                        help=f"ledger URL (default ${DB_ENV} or {DEFAULT_URL})")


def open_from_args(args: argparse.Namespace) -> Any:
    """The store named by ``--db``, its schema created or upgraded."""
    url = args.db or os.environ.get(DB_ENV) or DEFAULT_URL
    return open_store(url, init_schema=True)


def settings_for(store: Any) -> Settings:
    """Settings from ``FAIR_*`` variables, then the run-time ``resilience_config`` table."""
    return Settings.from_env(os.environ).with_values(store.get_config())


@contextlib.contextmanager
def ledger(args: argparse.Namespace) -> Iterator[Tuple[Any, Settings]]:
    """The store named by ``--db`` and the settings in force, closed afterwards."""
    store = open_from_args(args)
    try:
        yield store, settings_for(store)
    finally:
        store.close()


def reports_errors(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn a bad value or an unreachable ledger into one line on stderr and exit code 2."""
    @functools.wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except (ValueError, ResilienceError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return wrapper
