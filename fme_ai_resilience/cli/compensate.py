"""``fme-ai-resilience compensate`` and ``reconcile``: WS-03 outside FME.

``compensate`` runs one pass of the compensator (reap expired leases, requeue dead letters by
cause, notify missing photos, evaluate the breakers and the ladder, reconcile the last
``compensation.reconcile_window_s`` against ``--layer`` or ``writeback.layer_url``, prune),
or with ``--loop`` a pass every ``--interval`` seconds until SIGTERM (a pass the ledger fails
is logged, and the next pass comes on time).

``reconcile --layer URL --since T [--until T] [--backfill]`` compares one window of the layer
with the ledger and reports the gaps by day, asset type and crew; with ``--backfill`` the
missing photos are registered PENDING for the processor. Times are ISO 8601 (UTC unless an
offset is given: ``2026-11-30``, ``2026-11-30T06:00+01:00``) or epoch seconds.
"""
from __future__ import annotations

import argparse
import datetime
import json
import logging
from typing import Any, Dict

from ..core.clock import SystemClock
from ..core.errors import ConfigurationError, ResilienceError, StoreError
from ..core.text.redact import redact_text
from ..services.pipeline import build_compensator
from ..services.compensation.reconcile import ReconcileReport
from .common import (EXIT_OK, OptionError, add_db_option, command, exit_codes, ledger,
                     number, parse_values)
from .logs import add_log_option, setup_logging
from .process import stopping
from .common import DAY_S

__all__ = ["add_parser", "read_time"]

log = logging.getLogger("fme_ai_resilience.compensate")


def read_time(text: str) -> float:
    """An argparse ``type``: ISO 8601 (naive means UTC) or epoch seconds, as epoch seconds."""
    raw = text.strip()
    try:
        float(raw)
    except ValueError:
        pass
    else:
        return float(number()(raw))     # epoch seconds, finite
    try:
        moment = datetime.datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith("Z")
                                                 else raw)
    except ValueError:
        raise OptionError("time", text, "must be ISO 8601 (2026-11-30T06:00Z) or epoch "
                                        "seconds") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def _summary(report: ReconcileReport) -> str:
    def tally(groups: Dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(groups.items())) or "-"
    return (f"{report.layer_url}: {report.features} feature(s), {report.expected} photo(s) "
            f"expected, {len(report.missing)} missing, {report.backfilled} backfilled\n"
            f"  by day:        {tally(dict(report.by_day))}\n"
            f"  by asset type: {tally(dict(report.by_asset_type))}\n"
            f"  by crew:       {tally(dict(report.by_crew))}")


@command
def run_compensate(args: argparse.Namespace) -> int:
    setup_logging(args)
    with ledger(args) as (store, settings), stopping() as stop:
        settings = settings.with_values(parse_values(args.values))
        compensator = build_compensator(settings, store=store, layer_url=args.layer)
        while True:
            try:
                report = compensator.run(requeue_format=args.requeue_format,
                                         reconcile=not args.no_reconcile,
                                         backfill=True if args.backfill else None)
            except StoreError as exc:
                if not args.loop:
                    raise
                # the loop outlives a ledger that is away for a while, as `process --loop` does
                log.error("compensate: ledger unavailable: %s", redact_text(str(exc)))
            except ConfigurationError:
                raise
            except ResilienceError as exc:
                if not args.loop:
                    raise
                # the layer to reconcile against, or its portal, is away: the next pass
                # reconciles the window again (as WS-03's caller reports FAILED and goes on)
                log.error("compensate: reconciliation failed: %s", redact_text(str(exc)))
            else:
                print(json.dumps(report.as_dict()) if args.json else report.summary(),
                      flush=True)
            if not args.loop or stop.event.wait(args.interval):
                return EXIT_OK


@command
def run_reconcile(args: argparse.Namespace) -> int:
    setup_logging(args)
    now = SystemClock().now()
    until = now if args.until is None else args.until
    if args.since >= until:
        raise ConfigurationError("--since", args.since, "must be before --until")
    with ledger(args) as (store, settings):
        settings = settings.with_values(parse_values(args.values))
        compensator = build_compensator(settings, store=store, layer_url=args.layer)
        report = compensator.reconcile(since=args.since, until=until, backfill=args.backfill)
    print(json.dumps(report.as_dict(), indent=2) if args.json else _summary(report))
    return EXIT_OK


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--set", dest="values", action="append", default=[], metavar="NAME=VALUE",
                   help="a setting for this run over $FAIR_* and the ledger's config, e.g. "
                        "--set compensation.date_field=EditDate; repeatable (default: none)")
    add_db_option(p)
    add_log_option(p)


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "compensate", help="run WS-03: reap, requeue by cause, notify, evaluate, reconcile",
        description="One pass of the compensator (or one every --interval seconds with "
                    "--loop): reap expired leases, requeue dead letters by cause, notify "
                    "missing photos, evaluate the breakers and the ladder, reconcile the "
                    "recent window against the layer, prune old call logs.",
        epilog=exit_codes())
    p.add_argument("--layer", metavar="URL", default=None,
                   help="the layer to reconcile against (default: writeback.layer_url)")
    p.add_argument("--no-reconcile", action="store_true", help="skip the reconciliation")
    p.add_argument("--backfill", action="store_true",
                   help="register the missing photos reconciliation finds")
    p.add_argument("--requeue-format", action="store_true",
                   help="also requeue FORMAT dead letters (after a schema fix)")
    p.add_argument("--loop", action="store_true", help="run a pass every --interval seconds")
    p.add_argument("--interval", type=number(above=0, maximum=DAY_S), default=300.0, metavar="S",
                   help="with --loop: seconds between passes (default: 300)")
    _common(p)
    p.set_defaults(func=run_compensate)

    r = subparsers.add_parser(
        "reconcile", help="compare a window of the feature layer with the ledger",
        description="List the layer's features created in [--since, --until) and their "
                    "photos, and report the ones the ledger lacks by day, asset type and "
                    "crew; --backfill registers them for the processor.",
        epilog=exit_codes())
    r.add_argument("--layer", metavar="URL", required=True,
                   help="the feature layer: https://host/.../FeatureServer/0 (required)")
    r.add_argument("--since", type=read_time, required=True, metavar="TIME",
                   help="window start: ISO 8601 (UTC unless an offset) or epoch seconds "
                        "(required)")
    r.add_argument("--until", type=read_time, default=None, metavar="TIME",
                   help="window end (default: now)")
    r.add_argument("--backfill", action="store_true",
                   help="register the missing photos PENDING with source=reconcile")
    _common(r)
    r.set_defaults(func=run_reconcile)
