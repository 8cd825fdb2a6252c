"""``fme-ai-resilience drill``: the whole pipeline on loopback under a named fault scenario,
side by side with the approaches FME users reach for today.

Everything runs on 127.0.0.1: a Survey123 sender, a photo host, a feature layer and a Vision
AI that fails on a schedule, the intake gateway, N engine processes running WS-02 and the
compensator, on a SQLite ledger in a temporary directory (or ``--db``). Then each baseline
(``naive``, ``tenacity``, ``httpcaller``) meets the same deliveries and faults. The report
goes to the terminal as a table, as JSON with ``--json``, and as a self-contained page with
``--html FILE``. Exit codes: 0 the library met every bound (nothing lost, nothing analysed or
written twice, engines within N), 1 it did not, 2 usage.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any, Dict

from ..drill.html import render_html
from ..drill.report import DrillReport
from ..drill.run import (BASELINE_NAMES, DEFAULT_ENGINES, DEFAULT_SUBMISSIONS,
                         DEFAULT_TIME_SCALE, run_drill)
from ..drill.scenarios import SCENARIOS
from ..drill.table import render_table
from .common import EXIT_FAILED, EXIT_OK, check_db_url, command, exit_codes, number, whole

__all__ = ["add_parser", "verdicts"]


def verdicts(report: DrillReport) -> Dict[str, bool]:
    """What the library must hold in every scenario, each True when it did."""
    lib = report.library
    out = {"nothing lost": lib.lost == 0,
           "no photo analysed twice": lib.duplicate_analyses == 0,
           "no feature written twice": lib.duplicate_writes == 0,
           "engines within N": lib.peak_concurrent_engines <= report.engines,
           "backlog within the hard ceiling": lib.peak_backlog <= report.hard_ceiling,
           "every dead letter has its cause": all(lib.dead_by_cause.values())
           and "UNKNOWN" not in lib.dead_by_cause}
    if report.outage:
        out["outage calls within the probe bound"] = lib.outage_ai_calls <= report.probe_bound
    return out


def _baselines(names: Any) -> Dict[str, Any]:
    if not names:
        return {}
    from ..drill import baselines
    return {name: baselines.runner(name) for name in names}


def _compare(text: str) -> tuple:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if names == ("none",):
        return ()
    unknown = [n for n in names if n not in BASELINE_NAMES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown baseline(s) {', '.join(unknown)}: choose "
                                         f"from {', '.join(BASELINE_NAMES)} or none")
    return names


@command
def run(args: argparse.Namespace) -> int:
    quiet = args.json or not sys.stderr.isatty()
    logging.getLogger("fme_ai_resilience").setLevel(logging.CRITICAL)
    logging.getLogger("waitress").setLevel(logging.CRITICAL)

    def progress(text: str) -> None:
        if not quiet:
            print(f"  {text}", file=sys.stderr, flush=True)

    db_url = check_db_url(args.ledger_url) if args.ledger_url else None
    report = run_drill(args.scenario, submissions=args.submissions, engines=args.engines,
                       db_url=db_url, seed=args.seed, time_scale=args.time_scale,
                       compare=args.compare, baselines=_baselines(args.compare),
                       on_progress=progress)
    if args.html:
        with open(args.html, "w", encoding="utf-8") as page:
            page.write(render_html(report))
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(render_table(report))
    held = verdicts(report)
    if not args.json:
        for what, ok in held.items():
            print(f"{'ok ' if ok else 'BAD'}  {what}")
    return EXIT_OK if all(held.values()) else EXIT_FAILED


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "drill", help="the whole pipeline on loopback under faults, beside today's approaches",
        description="Run the pipeline on loopback under a named fault scenario (stand-ins for "
                    "Survey123, the photos, the feature layer and the Vision AI; the intake "
                    "gateway; engines running WS-02; the compensator), then the same "
                    "deliveries and faults through the baselines, and report side by side.",
        epilog=exit_codes("the library missed a bound (something lost, analysed or written "
                          "twice, engines past N)"))
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default="storm",
                   help="what goes wrong (default: storm): " + "; ".join(
                       f"{s.name}: {s.summary}" for s in SCENARIOS.values()))
    p.add_argument("--submissions", type=whole(minimum=1, maximum=100_000),
                   default=DEFAULT_SUBMISSIONS,
                   help=f"survey submissions, one photo each (default: {DEFAULT_SUBMISSIONS})")
    p.add_argument("--engines", type=whole(minimum=1, maximum=64), default=DEFAULT_ENGINES,
                   help=f"engine processes running WS-02 (default: {DEFAULT_ENGINES})")
    p.add_argument("--db", dest="ledger_url", metavar="URL", default=None,
                   help="the ledger, which the drill empties first: sqlite:///path.db or "
                        "postgresql://user@host:port/db (default: a SQLite file in a "
                        "temporary directory)")
    p.add_argument("--seed", type=whole(minimum=0), default=1,
                   help="the seed of the faults, photos and deliveries (default: 1)")
    p.add_argument("--time-scale", type=number(above=0, maximum=1),
                   default=DEFAULT_TIME_SCALE,
                   help="real seconds per production second: waits, windows and faults are "
                        f"scaled by it (default: {DEFAULT_TIME_SCALE:g})")
    p.add_argument("--compare", type=_compare, default=BASELINE_NAMES, metavar="NAMES",
                   help="baselines to run, comma-separated, or none (default: "
                        f"{','.join(BASELINE_NAMES)})")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--html", metavar="FILE", default=None,
                   help="also write the report as a self-contained HTML page (default: none)")
    p.set_defaults(func=run)
