"""``fme-ai-resilience dlq list|show|requeue``: the dead letters, by cause.

``list`` shows the newest dead letters (of one ``--cause``); ``show KEY`` one row with its
error, checkpoints and payload (secrets redacted); ``requeue`` puts dead letters back to
PENDING as fresh tasks, by key or by cause (``INVALID_PAYLOAD`` evidence only with
``--force``). Exit codes: 0 done, 1 no such dead letter or the ledger failed, 2 a usage or
configuration error.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict

from ..core.config.fields import MAX_COUNT
from ..core.clock import SystemClock
from ..core.errors import ConfigurationError, FailureClass
from ..core.ledger import Status, TaskRecord
from ..core.text.redact import redact_mapping, scrub_secrets
from .common import (EXIT_FAILED, EXIT_OK, add_db_option, command, configured_secrets,
                     exit_codes, ledger, whole)

__all__ = ["add_parser", "describe"]

CAUSES = [c.value for c in FailureClass]


def describe(record: TaskRecord, *, full: bool = False) -> Dict[str, Any]:
    """One dead letter as a JSON-ready dict (``full``: with payload and checkpoints)."""
    out: Dict[str, Any] = {
        "key": record.key, "cause": record.failure_class.value if record.failure_class else None,
        "error": record.last_error, "trace_id": record.trace_id, "source": record.source,
        "attempts": record.attempt_count, "requeues": record.requeue_count,
        "created_at": record.created_at, "completed_at": record.completed_at}
    if full:
        out["payload"] = redact_mapping(dict(record.payload))
        out["checkpoints"] = dict(record.checkpoints)
    return out


@command
def run_list(args: argparse.Namespace) -> int:
    with ledger(args) as (store, settings):
        cause = FailureClass(args.cause) if args.cause else None
        rows = [describe(r) for r in store.dead_letter_records(cause, limit=args.limit,
                                                               offset=args.offset)]
        rows = scrub_secrets(rows, configured_secrets(settings, args.db))
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        print("no dead letters" + (f" of cause {args.cause}" if args.cause else ""))
    for row in rows:
        print(f"{row['key']}  {row['cause']}  attempts {row['attempts']}, requeued "
              f"{row['requeues']}x, trace {row['trace_id']}: {row['error'] or ''}")
    return EXIT_OK


@command
def run_show(args: argparse.Namespace) -> int:
    with ledger(args) as (store, settings):
        record = store.get(args.key)
        secrets = configured_secrets(settings, args.db)
    if record is None or record.status is not Status.DEAD:
        state = "no such task" if record is None else f"is {record.status.value}, not DEAD"
        print(f"error: {args.key}: {state}", file=sys.stderr)
        return EXIT_FAILED
    shown = json.loads(json.dumps(describe(record, full=True), default=str))
    print(json.dumps(scrub_secrets(shown, secrets), indent=2))
    return EXIT_OK


@command
def run_requeue(args: argparse.Namespace) -> int:
    if not args.keys and not args.cause:
        raise ConfigurationError("requeue", "", "needs KEY ... or --cause CAUSE")
    with ledger(args) as (store, _):
        moved = store.requeue(args.keys or None,
                              FailureClass(args.cause) if args.cause else None,
                              force=args.force, now=SystemClock().now())
    print(f"requeued {moved} dead letter(s)")
    return EXIT_OK if moved or not args.keys else EXIT_FAILED


def add_parser(subparsers: Any) -> None:
    codes = exit_codes("no such dead letter, or the ledger could not do it")
    p = subparsers.add_parser(
        "dlq", help="list, show and requeue dead letters",
        description="The dead letters, by cause: list the newest, show one, requeue by key or "
                    "by cause.", epilog=codes)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    show_list = actions.add_parser("list", help="the newest dead letters, of one cause",
                                   description="The newest dead letters, of one --cause.",
                                   epilog=exit_codes())
    show_list.add_argument("--cause", choices=CAUSES,
                           help="only this failure class (default: every cause)")
    show_list.add_argument("--limit", type=whole(minimum=1, maximum=100_000),
                           default=50, metavar="N",
                           help="rows to show (default: 50)")
    show_list.add_argument("--offset", type=whole(minimum=0, maximum=MAX_COUNT),
                           default=0, metavar="N",
                           help="rows to skip (default: 0)")
    show_list.add_argument("--json", action="store_true", help="print JSON")
    add_db_option(show_list)
    show_list.set_defaults(func=run_list)
    one = actions.add_parser("show", help="one dead letter in full", epilog=codes,
                             description="One dead letter with its error, checkpoints and "
                                         "payload (secrets redacted).")
    one.add_argument("key", help="the task key")
    add_db_option(one)
    one.set_defaults(func=run_show)
    again = actions.add_parser("requeue", help="back to PENDING, by key or by cause",
                               epilog=codes,
                               description="Put dead letters back to PENDING as fresh tasks "
                                           "(attempts reset, checkpoints kept), by KEY or by "
                                           "--cause.")
    again.add_argument("keys", nargs="*", metavar="KEY", help="task keys")
    again.add_argument("--cause", choices=CAUSES,
                       help="every dead letter of this cause (default: only the KEYs given)")
    again.add_argument("--force", action="store_true",
                       help="also INVALID_PAYLOAD evidence (bodies that never parsed)")
    add_db_option(again)
    again.set_defaults(func=run_requeue)
