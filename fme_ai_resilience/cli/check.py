"""``fme-ai-resilience check --db URL``: the golden signals as one line and an exit code.

For FME Flow, a cron job or any monitor: exit 0 when every signal is within its threshold,
1 for a warning (end-to-end P95 over 80 % of the promise, backlog near the watermark), 2 for an
alert (format anomalies over 5 % of the AI calls, credentials refused) and also when the check
itself cannot run (no ledger, a bad setting: as a monitor should see it).
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from ..core.clock import SystemClock
from ..core.errors import ResilienceError, StoreError
from ..services.observe.signals import read_signals
from .common import (EXIT_USAGE, add_db_option, ledger, ledger_error, number,
                     setting_default)
from .common import DAY_S, json_text

__all__ = ["add_parser"]


def run(args: argparse.Namespace) -> int:
    try:
        with ledger(args) as (store, settings):
            signals = read_signals(settings, store=store, now=SystemClock().now(),
                                   window_s=args.window)
    except StoreError as exc:
        print(f"ALERT: the check cannot run: {ledger_error(args, exc)}", file=sys.stderr)
        return EXIT_USAGE
    except (ResilienceError, ValueError) as exc:
        print(f"ALERT: the check cannot run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json_text(signals.as_dict()))
    else:
        print(signals.summary())
    return int(signals.level)


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("check", help="the golden signals as an exit code (0/1/2)",
                              description="The golden signals over a window as one line and "
                                          "an exit code, for FME Flow or any monitor.",
                              epilog="Exit codes: 0 every signal within its threshold; 1 a "
                                     "warning; 2 an alert, or the check cannot run (a usage or "
                                     "configuration error, an unreachable ledger), as a "
                                     "monitor should see it.")
    p.add_argument("--window", type=number(above=0, maximum=366 * DAY_S),
                   default=None, metavar="S",
                   help=f"seconds to look back {setting_default('alerts.window_s')}")
    p.add_argument("--json", action="store_true", help="print every signal as JSON")
    add_db_option(p)
    p.set_defaults(func=run)
