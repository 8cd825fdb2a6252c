"""``fme-ai-resilience notifications list|take``: what WS-03 tells people, read from a shell.

The compensator turns each dead letter a person must hear of (a photo the layer no longer
has, a task the deployment's setup stopped, an analysis that failed for good) into one
notification row; inside FME its PythonCaller hands each to the Emailer once. ``list`` shows
the notifications not handed over yet, oldest first, and changes nothing; ``take`` prints them
in full and marks them handed over, so a shell mailer (``take --json`` from cron) sends each
once, as the Emailer does: it prints only those its own mark claimed (takes running at once
print each once between them), and gives back those it could not print (its reader gone).
Texts are printed without any configured secret. Exit codes: 0 done, 1 the ledger failed or
the notifications could not be printed, 2 a usage or configuration error.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
from typing import Any, Dict

from ..core.clock import SystemClock
from ..core.errors import StoreError
from ..core.ledger import Notification
from ..core.text.redact import redact_text
from .common import (EXIT_FAILED, EXIT_OK, add_db_option, command, configured_secrets,
                     exit_codes, json_text, ledger, whole)

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


def _text(rows: Any, args: argparse.Namespace, *, full: bool) -> str:
    if args.json:
        return json_text(rows) + "\n"
    lines = [] if rows else ["no notifications waiting"]
    for row in rows:
        lines.append(f"#{row['id']}  {_when(row['created_at'])}  {row['kind']}  "
                     f"{row['task_key'] or '-'}: {row['subject']}")
        if full:
            lines.append("    " + row["body"].replace("\n", "\n    ") + "\n")
    return "".join(line + "\n" for line in lines)


@command
def run_list(args: argparse.Namespace) -> int:
    with ledger(args) as (store, settings):
        secrets = configured_secrets(settings, args.db)
        rows = [describe(n, secrets) for n in store.pending_notifications(args.limit)]
    sys.stdout.write(_text(rows, args, full=args.full))
    return EXIT_OK


@command
def run_take(args: argparse.Namespace) -> int:
    """Claim each waiting notification (a mark that holds only if no other ``take`` or Emailer
    marked it first), print the claimed ones and flush; when they cannot be printed (the
    reader is gone: a broken pipe), give them back, so they wait again, and exit 1."""
    with ledger(args) as (store, settings):
        secrets = configured_secrets(settings, args.db)
        now = SystemClock().now()
        claimed = [n for n in store.pending_notifications(args.limit)
                   if store.mark_notified([n.id], now=now) == 1]
        try:
            sys.stdout.write(_text([describe(n, secrets) for n in claimed], args, full=True))
            sys.stdout.flush()
        except OSError as exc:  # BrokenPipeError among them
            _silence_stdout()
            try:
                given = store.unmark_notified([n.id for n in claimed], sent_at=now)
            except StoreError:
                given = 0
            print(f"error: the notifications could not be printed ({exc.__class__.__name__}); "
                  f"{given} of {len(claimed)} wait again", file=sys.stderr)
            return EXIT_FAILED
    return EXIT_OK


def _silence_stdout() -> None:
    """Point standard output at the null device, so the interpreter's last flush of what a
    gone reader did not take cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor behind stdout (captured): nothing to do
        pass


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
