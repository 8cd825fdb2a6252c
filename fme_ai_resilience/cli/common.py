"""What every command shares: the ledger named by ``--db``, the settings, one exit-code policy.

Exit codes, the same for every command:

* :data:`EXIT_OK` (0): done;
* :data:`EXIT_FAILED` (1): a check failed, a configuration does not fit, or the ledger could
  not do what was asked (unreachable, locked, no schema);
* :data:`EXIT_USAGE` (2): a usage or configuration error (a missing or malformed ``--db``, a bad
  setting, an unknown option).

Commands are plain functions ``run(args) -> int`` wrapped in :func:`command`, which turns the
library's exceptions into one line on stderr and the exit code above.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from typing import Any, Callable, Dict, Iterator, Mapping, Sequence, Tuple

from ..errors import ConfigurationError, ResilienceError, StoreError
from ..settings import Settings
from ..store import SqlStore, display_url, open_store

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "DB_ENV", "add_db_option", "announce",
           "command", "ledger", "open_from_args", "settings_for", "settings_from_args"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

DB_ENV = "FAIR_DB_URL"


def add_db_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--db URL`` (default ``$FAIR_DB_URL``) to a sub-command."""
    parser.add_argument("--db", metavar="URL", default=os.environ.get(DB_ENV),
                        help="ledger database: sqlite:///path.db or "
                             f"postgresql://user@host:port/db (default: ${DB_ENV})")


def settings_from_args(items: Sequence[str], explicit: Mapping[str, Any]) -> Settings:
    """Settings from ``FAIR_*`` variables, then ``--set NAME=VALUE`` items, then options.

    ``explicit`` maps setting names to option values; None means "not given".
    Raises :class:`ConfigurationError` for an item without ``=`` or a bad value.
    """
    values: Dict[str, Any] = {}
    for item in items:
        setting, sep, value = item.partition("=")
        if not sep:
            raise ConfigurationError("--set", item, "expected NAME=VALUE")
        values[setting.strip()] = value
    values.update({k: v for k, v in explicit.items() if v is not None})
    return Settings.from_env(os.environ).with_values(values)


def settings_for(*, store: SqlStore) -> Settings:
    """Settings from ``FAIR_*`` variables, then the run-time ``resilience_config`` table."""
    return Settings.from_env(os.environ).with_values(store.get_config())


def open_from_args(args: argparse.Namespace, *, create: bool = False) -> SqlStore:
    """The store named by ``--db``, limited by the ``database.*`` settings of the ``FAIR_*``
    variables; only ``create=True`` (``db init``) may bring a new SQLite file (and its
    directory) into existence.
    Raises :class:`ConfigurationError` when ``--db`` is missing or malformed."""
    if not args.db:
        raise ConfigurationError("--db", "", f"no ledger given: pass --db URL or set {DB_ENV}")
    # db init/upgrade (create=True) also makes a new SQLite file's directory, and migrates
    # explicitly, reporting what it applied: the store does not do it on opening then.
    store = open_store(args.db, create=create, create_parents=create, auto_schema=not create,
                       settings=Settings.from_env(os.environ).database)
    announce(store=store)
    return store


def announce(*, store: SqlStore) -> None:
    """Say on stderr which ledger the command works on (never with its password)."""
    print(f"ledger: {store.describe()}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def ledger(args: argparse.Namespace, *, create: bool = False) -> Iterator[
        Tuple[SqlStore, Settings]]:
    """The store named by ``--db`` and the settings in force, closed afterwards."""
    store = open_from_args(args, create=create)
    try:
        yield store, settings_for(store=store)
    finally:
        store.close()


def command(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``run`` with the exit-code policy: a ledger that cannot do the work exits 1, a usage or
    configuration error 2; each with one line on stderr and no traceback."""
    @functools.wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except StoreError as exc:
            where = display_url(args.db) if getattr(args, "db", None) else "ledger"
            print(f"error: ledger {where}: {exc}", file=sys.stderr)
            return EXIT_FAILED
        except (ConfigurationError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except ResilienceError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_FAILED
    return wrapper
