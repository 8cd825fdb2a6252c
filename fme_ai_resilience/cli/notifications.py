"""``fme-ai-resilience notifications list|take``: what WS-03 tells people, read from a shell.

The compensator turns each dead letter a person must hear of (a photo the layer no longer
has, a task the deployment's setup stopped, an analysis that failed for good) into one
notification row; inside FME its PythonCaller hands each to the Emailer once. ``list`` shows
the notifications not handed over yet, oldest first, and changes nothing; ``take`` prints them
in full and marks them handed over, so a shell mailer (``take --json`` from cron) sends each
once, as the Emailer does. Texts are printed without any configured secret. Exit codes: 0
done, 1 the ledger failed, 2 a usage or configuration error.
"""
from __future__ import annotations

import argparse
import datetime
from typing import Any, Dict

from ..core.clock import SystemClock
from ..core.ledger import Notification
from ..core.text.redact import redact_text
from .common import (EXIT_OK, add_db_option, command, configured_secrets, exit_codes,
                     json_text, ledger, whole)

__all__ = ["add_parser", "describe", "MAX_LISTED"]

#: The most notifications one ``list`` or ``take`` prints.
MAX_LISTED = 1000


def describe(note: Notification, secrets: Any = ()) -> Dict[str, Any]:
    """One notification as a JSON-ready dict, its texts without ``secrets``."""
    return {"id": note.id, "kind": note.kind, "task_key": note.task_key,
            "subject": redact_text(note.subject, secrets),
            "body": redact_text(note.body, secrets), "created_at": note.created_at}


def _when(epoch_s: float) -> str:
    return datetime.datetime.fromtimestamp(epoch_s, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC")


def _print(rows: Any, args: argparse.Namespace, *, full: bool) -> None:
    if args.json:
        print(json_text(rows))
        return
    if not rows:
        print("no notifications waiting")
    for row in rows:
        print(f"#{row['id']}  {_when(row['created_at'])}  {row['kind']}  "
              f"{row['task_key'] or '-'}: {row['subject']}")
        if full:
            print("    " + row["body"].replace("\n", "\n    ") + "\n")


@command
def run_list(args: argparse.Namespace) -> int:
    with ledger(args) as (store, settings):
        secrets = configured_secrets(settings, args.db)
        rows = [describe(n, secrets) for n in store.pending_notifications(args.limit)]
    _print(rows, args, full=args.full)
    return EXIT_OK


@command
def run_take(args: argparse.Namespace) -> int:
    with ledger(args) as (store, settings):
        secrets = configured_secrets(settings, args.db)
        pending = store.pending_notifications(args.limit)
        rows = [describe(n, secrets) for n in pending]
        store.mark_notified([n.id for n in pending], now=SystemClock().now())
    _print(rows, args, full=True)
    return EXIT_OK


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "notifications", help="read what WS-03 tells people (photos gone, tasks stopped)",
        description="The notifications the compensator (WS-03) queued for people, not "
                    "handed over yet: list them, or take them (print and mark handed over).",
        epilog=exit_codes())
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, func, text in (
            ("list", run_list, "the notifications waiting, oldest first; nothing changes"),
            ("take", run_take, "print the notifications waiting in full and mark them "
                               "handed over, each once (for a mailer run from a shell)")):
        action = actions.add_parser(name, help=text, description=text[0].upper() + text[1:]
                                    + ".", epilog=exit_codes())
        action.add_argument("--limit", type=whole(minimum=1, maximum=MAX_LISTED), default=100,
                            metavar="N", help=f"at most N, 1-{MAX_LISTED} (default: 100)")
        if name == "list":
            action.add_argument("--full", action="store_true", help="with each body")
        action.add_argument("--json", action="store_true", help="print JSON")
        add_db_option(action)
        action.set_defaults(func=func)
