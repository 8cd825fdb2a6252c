"""``fme-ai-resilience db init|upgrade --db URL``: create or upgrade the ledger schema.

Both are idempotent: run them at every deployment. ``--db`` defaults to ``$FAIR_DB_URL``. The
line they print names the schema version the ledger is at and the release whose latest it is
(CHANGELOG.md maps each schema version to the release that brought it).
"""
from __future__ import annotations

import argparse
from typing import Any

from .. import __version__
from ..core.clock import SystemClock
from ..store import display_url
from .common import EXIT_OK, add_db_option, command, exit_codes, open_from_args

__all__ = ["add_parser"]

CANNOT = "the ledger could not be reached, created or upgraded"


@command
def _migrate(args: argparse.Namespace) -> int:
    with open_from_args(args, create=True) as store:
        before = store.schema_version()
        applied = store.init_schema(now=SystemClock().now())
        after = store.schema_version()
        latest = store.latest_schema_version(store.dialect)
    where = display_url(args.db)
    release = f"fme-ai-resilience {__version__}"
    if after > latest:
        print(f"{where}: schema at version {after}, newer than the {latest} of {release}: "
              f"nothing done (run the release that brought version {after}, or a later one)")
    elif applied:
        print(f"{where}: schema version {before} -> {after} "
              f"(applied {', '.join(str(v) for v in applied)}), the latest of {release}")
    else:
        print(f"{where}: schema already at version {after}, the latest of {release}; "
              f"nothing to do")
    return EXIT_OK


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "db", help="create or upgrade the ledger schema",
        description="Create or upgrade the ledger schema. Both actions are idempotent: run "
                    "one at every deployment.", epilog=exit_codes(CANNOT))
    actions = parser.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    for name, text in (("init", "create the ledger tables (harmless when they exist)"),
                       ("upgrade", "apply the migrations a database does not have yet")):
        action = actions.add_parser(
            name, help=text, epilog=exit_codes(CANNOT),
            description=f"{text[0].upper()}{text[1:]}. Creates a new SQLite file; PostgreSQL "
                        f"databases must exist.")
        add_db_option(action)
        action.set_defaults(func=_migrate)
