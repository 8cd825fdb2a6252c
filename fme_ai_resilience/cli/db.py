"""``fme-ai-resilience db init|upgrade --db URL``: create or upgrade the ledger schema.

Both are idempotent: run them at every deployment. ``--db`` defaults to ``$FAIR_DB_URL``.
Also holds the ``--db`` option and store opening that other command groups share.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Optional

from ..clock import SystemClock
from ..errors import StoreError
from ..store import SqlStore, display_url, open_store

DB_ENV = "FAIR_DB_URL"

#: Exit code for a ledger that cannot be reached or used.
EXIT_STORE = 1


def add_db_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--db URL`` (default ``$FAIR_DB_URL``) to a sub-command."""
    parser.add_argument("--db", metavar="URL", default=os.environ.get(DB_ENV),
                        help="ledger database: sqlite:///path.db or "
                             f"postgresql://user@host:port/db (default: ${DB_ENV})")


def open_from_args(args: argparse.Namespace, create: bool = False) -> Optional[SqlStore]:
    """The store named by ``--db``, or None after telling the user what is missing.

    Only ``create=True`` (``db init``) may bring a new SQLite file into existence.
    """
    if not args.db:
        print(f"error: no ledger given: pass --db URL or set {DB_ENV}", file=sys.stderr)
        return None
    try:
        return open_store(args.db, create=create)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def store_failed(args: argparse.Namespace, exc: StoreError) -> int:
    """Report a ledger error without a traceback (and without the URL's password)."""
    print(f"error: ledger {display_url(args.db)}: {exc}", file=sys.stderr)
    return EXIT_STORE


def _migrate(args: argparse.Namespace) -> int:
    store = open_from_args(args, create=True)
    if store is None:
        return 2
    try:
        with store:
            before = store.schema_version()
            applied = store.init_schema(now=SystemClock().now())
            after = store.schema_version()
    except StoreError as exc:
        return store_failed(args, exc)
    where = display_url(args.db)
    if applied:
        print(f"{where}: schema version {before} -> {after} "
              f"(applied {', '.join(str(v) for v in applied)})")
    else:
        print(f"{where}: schema already at version {after}; nothing to do")
    return 0


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("db", help="create or upgrade the ledger schema",
                                   description=__doc__.splitlines()[0])
    actions = parser.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    for name, text in (("init", "create the ledger tables (harmless when they exist)"),
                       ("upgrade", "apply the migrations a database does not have yet")):
        action = actions.add_parser(name, help=text, description=text)
        add_db_option(action)
        action.set_defaults(func=_migrate)
