"""``fme-ai-resilience drill``: the whole pipeline on loopback under a named fault scenario,
side by side with the approaches FME users reach for today.

Everything runs on 127.0.0.1: a Survey123 sender, a photo host, a feature layer and a Vision
AI that fails on a schedule, the intake gateway, N engine processes running WS-02 and the
compensator, on a SQLite ledger in a temporary directory (or ``--db``). Then each baseline
(``naive``, ``tenacity``, ``httpcaller``, ``sweep``) meets the same deliveries and faults. The report
goes to the terminal as a table, as JSON with ``--json``, and as a self-contained page with
``--html FILE``. Every subject is judged by one function, at the stand-ins. Exit codes: 0 the
library met every target (every photo that can be analysed analysed, nothing lost, nothing
paid or written twice, calls in flight, into an outage and per analysed photo within their
bounds, recovery and drain in time), 1 it missed one, 2 usage.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from typing import Any, Dict, Iterator, Tuple

from ..core.config.fields import MAX_COUNT
from ..drill.html import render_html
from ..drill.invariants import targets
from ..drill.report import DrillReport
from ..drill.run import (BASELINE_NAMES, DEFAULT_ENGINES, DEFAULT_SUBMISSIONS,
                         DEFAULT_TIME_SCALE, run_drill)
from ..drill.scenarios import SCENARIOS
from ..drill.table import render_checklist, render_table
from ..core.errors import ConfigurationError
from .common import DB_FORMS, EXIT_FAILED, EXIT_OK, command, exit_codes, ledger, number, whole

__all__ = ["add_parser", "verdicts", "THROWAWAY_DEFAULT"]

#: How ``--db`` shows its default: the drill never touches $FAIR_DB_URL's ledger unasked.
THROWAWAY_DEFAULT = "default: a new SQLite file in a temporary directory"


def verdicts(report: DrillReport) -> Dict[str, bool]:
    """Every target of the library (:func:`~fme_ai_resilience.drill.invariants.targets`),
    each True when it held."""
    return {check.name: check.met for check in targets(report)}


def _compare(text: str) -> Tuple[str, ...]:
    """``--compare``: baseline names, comma-separated, or ``none``."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if names == ("none",):
        return ()
    unknown = [n for n in names if n not in BASELINE_NAMES]
    if unknown or not names:
        raise ConfigurationError("--compare", text, f"choose among {', '.join(BASELINE_NAMES)}"
                                                    " (comma-separated), or none")
    return names


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    """The drill's own components log nothing while it runs (the report says what happened):
    their loggers' levels are raised, and put back after."""
    loggers = [logging.getLogger(n) for n in ("fme_ai_resilience", "waitress")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


class _Display:
    """Progress on a terminal: a line per phase, and the running subject's state rewritten
    in place; nothing at all when off (``--json``, or stderr not a terminal)."""

    def __init__(self, on: bool) -> None:
        self.on, self._live = on, False

    def phase(self, text: str) -> None:
        if self.on:
            self.end()
            print(f"  {text}", file=sys.stderr, flush=True)

    def live(self, text: str) -> None:
        if self.on:
            sys.stderr.write(f"\r    {text}\033[K")
            sys.stderr.flush()
            self._live = True

    def end(self) -> None:
        if self._live:
            sys.stderr.write("\n")
            self._live = False


@command
def run(args: argparse.Namespace) -> int:
    display = _Display(not args.json and sys.stderr.isatty())
    compare = _compare(args.compare)
    if args.db:
        with ledger(args, create=True):      # named on stderr, or one line on why not
            pass
    try:
        with _quiet_logs():
            report = run_drill(args.scenario, submissions=args.submissions,
                               engines=args.engines, db_url=args.db, seed=args.seed,
                               time_scale=args.time_scale, compare=compare,
                               photos_per_feature=args.photos_per_feature,
                               on_progress=display.phase, on_live=display.live)
    finally:
        display.end()
    if args.html:
        with open(args.html, "w", encoding="utf-8") as page:
            page.write(render_html(report))
    held = verdicts(report)
    if args.json:
        print(json.dumps({**report.as_dict(), "targets": held}, indent=2))
    else:
        print(render_table(report))
        print(render_checklist(report), end="")
    return EXIT_OK if all(held.values()) else EXIT_FAILED


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "drill", help="the whole pipeline on loopback under faults, beside today's approaches",
        description="Run the pipeline on loopback under a named fault scenario (stand-ins for "
                    "Survey123, the photos, the feature layer and the Vision AI; the intake "
                    "gateway; engines running WS-02; the compensator), then the same "
                    "deliveries and faults through the baselines, and report side by side.",
        epilog=exit_codes("the library missed a target (a photo not analysed or lost, paid "
                          "or written twice, a bound or the drain time missed)"))
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default="storm",
                   help="what goes wrong (default: storm): " + "; ".join(
                       f"{s.name}: {s.summary}" for s in SCENARIOS.values()).replace("%", "%%"))
    p.add_argument("--submissions", type=whole(minimum=1, maximum=100_000),
                   default=DEFAULT_SUBMISSIONS,
                   help=f"survey submissions, each a feature (default: {DEFAULT_SUBMISSIONS})")
    p.add_argument("--photos-per-feature", type=whole(minimum=1, maximum=20), default=1,
                   help="photos of each submission (a photo repeat); above 1, every subject "
                        "writes one row per photo into the layer's related table (default: 1)")
    p.add_argument("--engines", type=whole(minimum=1, maximum=64), default=DEFAULT_ENGINES,
                   help=f"engine processes running WS-02 (default: {DEFAULT_ENGINES})")
    p.add_argument("--db", metavar="URL", default=None,
                   help=f"the ledger, which the drill empties first (it refuses one holding "
                        f"work that is not a drill's): {DB_FORMS} ({THROWAWAY_DEFAULT})")
    p.add_argument("--seed", type=whole(minimum=0, maximum=MAX_COUNT), default=1,
                   help="the seed of the faults, photos and deliveries (default: 1)")
    p.add_argument("--time-scale", type=number(above=0, maximum=1),
                   default=DEFAULT_TIME_SCALE,
                   help="real seconds per production second: waits, windows and faults are "
                        f"scaled by it (default: {DEFAULT_TIME_SCALE:g})")
    p.add_argument("--compare", default=",".join(BASELINE_NAMES), metavar="NAMES",
                   help="baselines to run, comma-separated, or none (default: "
                        f"{','.join(BASELINE_NAMES)})")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--html", metavar="FILE", default=None,
                   help="also write the report as a self-contained HTML page (default: none)")
    p.set_defaults(func=run, db_optional=True)
