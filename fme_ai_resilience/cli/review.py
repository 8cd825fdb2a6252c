"""``fme-ai-resilience review list|show|resolve``: the review queue people work.

``list`` shows the photos waiting for a person, oldest first: skipped by the deployment's
policy (``MANUAL_REVIEW`` on the layer, never analysed) or analysed under the confidence
threshold (``REVIEW``); ``show KEY`` one photo with the AI's answer, if any, and its verdict;
``resolve KEY --condition C --reviewer WHO [--note TEXT]`` records the verdict once and writes
it back through the sink once (``REVIEWED`` on the layer). Exit codes: 0 done, 1 no such photo
in the queue, resolved already, or the ledger or the layer failed, 2 a usage or configuration
error.
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Dict

from ..core.clock import SystemClock
from ..core.ledger import ReviewItem, ReviewState
from ..core.text.redact import redact_mapping, scrub_secrets
from ..services.pipeline import build_sink
from ..services.processing.review import ReviewRefused, resolve
from .common import (EXIT_OK, add_db_option, command, configured_secrets, exit_codes, ledger,
                     whole)

__all__ = ["add_parser", "describe", "MAX_LISTED"]

#: The most photos one ``review list`` prints (page on with ``--offset``).
MAX_LISTED = 1000


def describe(item: ReviewItem, *, full: bool = False, now: float) -> Dict[str, Any]:
    """One photo of the queue as a JSON-ready dict (``full``: with its payload)."""
    result = dict(item.result or {})
    out: Dict[str, Any] = {
        "key": item.key, "why": "skipped by policy (never analysed)"
        if item.outcome.value == "SKIPPED" else "analysed under the confidence threshold",
        "layer": item.outcome.on_layer.value, "state": item.state.value,
        "asset_type": item.payload.get("asset_type"), "waiting_s": round(now - item.since, 1),
        "ai_condition": result.get("condition"), "ai_confidence": result.get("confidence"),
        "trace_id": item.trace_id,
        "verdict": None if item.verdict is None else dict(item.verdict.as_dict()),
        "written_at": item.written_at}
    if full:
        out["payload"] = redact_mapping(dict(item.payload))
        out["photo"] = item.payload.get("attachment_url")
        out["reasons"] = result.get("reasons") or result.get("reason")
    return out


@command
def run_list(args: argparse.Namespace) -> int:
    now = SystemClock().now()
    state = ReviewState.RESOLVED if args.resolved else ReviewState.OPEN
    with ledger(args) as (store, settings):
        rows = [describe(i, now=now) for i in store.review_items(state, limit=args.limit,
                                                                 offset=args.offset)]
        waiting = store.review_stats()[0] if state is ReviewState.OPEN else None
        # a verdict kept before its secrets were scrubbed on the way in is scrubbed on the way out
        rows = scrub_secrets(rows, configured_secrets(settings, args.db))
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        print("the review queue is empty" if state is ReviewState.OPEN else "nothing resolved")
    if rows and waiting is not None and waiting > len(rows):
        print(f"photos {args.offset + 1}-{args.offset + len(rows)} of {waiting} waiting "
              f"(--offset to page on)")
    for row in rows:
        ai = "" if row["ai_condition"] is None else \
            f", AI said {row['ai_condition']} ({row['ai_confidence']})"
        print(f"{row['key']}  {row['layer']}  {row['asset_type'] or '-'}  waiting "
              f"{row['waiting_s']:.0f} s{ai}")
    return EXIT_OK


@command
def run_show(args: argparse.Namespace) -> int:
    with ledger(args) as (store, settings):
        item = store.review_item(args.key)
    if item is None:
        raise ReviewRefused(f"{args.key}: not in the review queue")
    shown = json.loads(json.dumps(describe(item, full=True, now=SystemClock().now()),
                                  default=str))
    print(json.dumps(scrub_secrets(shown, configured_secrets(settings, args.db)), indent=2))
    return EXIT_OK


@command
def run_resolve(args: argparse.Namespace) -> int:
    clock = SystemClock()
    with ledger(args) as (store, settings):
        sink = build_sink(settings, store=store, clock=clock)
        done = resolve(args.key, args.condition, args.reviewer, args.note or "", settings,
                       sink, store=store, now=clock.now(),
                       secrets=configured_secrets(settings, args.db))
    v = done.verdict
    print(f"{done.key}: {v.condition} by {v.reviewer} {done.done.value} "
          f"(written back through the {sink.name} sink)")
    return EXIT_OK


def add_parser(subparsers: Any) -> None:
    codes = exit_codes("no such photo in the queue, resolved already, or the ledger or the "
                       "layer could not do it")
    p = subparsers.add_parser(
        "review", help="list, show and resolve the photos waiting for a person",
        description="The review queue: photos skipped by the deployment's policy and answers "
                    "under the confidence threshold, each waiting for a reviewer's verdict.",
        epilog=codes)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    listed = actions.add_parser("list", help="the photos waiting, oldest first",
                                description="The photos waiting for a person, oldest first "
                                            "(--resolved: those with a verdict).",
                                epilog=exit_codes())
    listed.add_argument("--resolved", action="store_true", help="list resolved photos")
    listed.add_argument("--limit", type=whole(minimum=1, maximum=MAX_LISTED), default=50,
                        metavar="N", help=f"at most N photos, 1-{MAX_LISTED} (default: 50)")
    listed.add_argument("--offset", type=whole(minimum=0), default=0, metavar="N",
                        help="skip the first N (default: 0)")
    listed.add_argument("--json", action="store_true", help="print JSON")
    add_db_option(listed)
    listed.set_defaults(func=run_list)
    one = actions.add_parser("show", help="one photo of the queue",
                             description="One photo of the queue: why it is there, the AI's "
                                         "answer if any, the verdict once resolved.",
                             epilog=codes)
    one.add_argument("key", help="the task key")
    add_db_option(one)
    one.set_defaults(func=run_show)
    done = actions.add_parser("resolve", help="record a reviewer's verdict and write it back",
                              description="Record the reviewer's verdict once and write it "
                                          "back through the sink once (REVIEWED on the layer"
                                          "); a second resolve of the same photo is refused.",
                              epilog=codes)
    done.add_argument("key", help="the task key")
    done.add_argument("--condition", required=True,
                      help="the condition the reviewer saw, one of validation.conditions "
                           "(required)")
    done.add_argument("--reviewer", required=True, help="who decided (required)")
    done.add_argument("--note", default="", help="a note kept with the verdict (default: none)")
    add_db_option(done)
    done.set_defaults(func=run_resolve)
