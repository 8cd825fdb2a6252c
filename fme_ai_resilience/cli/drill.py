"""``fme-ai-resilience drill``: the whole pipeline on loopback under a named fault scenario,
side by side with the approaches FME users reach for today.

Everything runs on 127.0.0.1: a Survey123 sender, a photo host, a feature layer and a Vision
AI that fails on a schedule, the intake gateway, N engine processes running WS-02 and the
compensator, on a SQLite ledger in a temporary directory (or ``--db``, whose schema the drill
creates when it is new). Then each baseline (``naive``, ``tenacity``, ``httpcaller``,
``sweep``) meets the same deliveries and faults; ``--scenario all`` plays every scenario in
turn. The report goes to the terminal as a table, the library's targets, the speed side by
side with the strongest peer and one verdict line last; as JSON with ``--json``; as a
self-contained page with ``--html FILE``. Progress goes to stderr while it runs: rewritten in
place on a terminal, a line every few seconds otherwise. Every subject is judged by one
function, at the stand-ins. Exit codes: 0 the library met every target (every photo that can
be analysed analysed, nothing lost, nothing paid or written twice, calls in flight, into an
outage and per analysed photo within their bounds), 1 it missed one, 2 usage. Speed is
compared, never a target.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import time
from typing import Any, Dict, Iterator, List, Sequence, TextIO, Tuple

from ..core.config.settings import MAX_COUNT
from ..drill.html import render_pages
from ..drill.invariants import targets, verdict
from ..drill.library import refuse_work_not_a_drills
from ..drill.report import DrillReport
from ..drill.run import (BASELINE_NAMES, DEFAULT_ENGINES, DEFAULT_SUBMISSIONS,
                         DEFAULT_TIME_SCALE, run_drill)
from ..drill.scenarios import ALL, SCENARIOS
from ..drill.speed import comparison, plainly
from ..drill.table import render_report
from ..core.errors import ConfigurationError, StoreError, StoreUnavailable
from ..store import open_store
from .common import DB_FORMS, EXIT_FAILED, EXIT_OK, announce, command, exit_codes, number, whole
from .files import write_file

__all__ = ["add_parser", "verdicts", "THROWAWAY_DEFAULT", "PROGRESS_EVERY_S", "scenarios"]

#: How ``--db`` shows its default: the drill never touches $FAIR_DB_URL's ledger unasked.
THROWAWAY_DEFAULT = "default: a new SQLite file in a temporary directory"
#: Off a terminal, the running subject's progress line is printed this often (real seconds).
PROGRESS_EVERY_S = 5.0


def verdicts(report: DrillReport) -> Dict[str, bool]:
    """Every target of the library (:func:`~fme_ai_resilience.drill.invariants.targets`),
    each True when it held."""
    return {check.name: check.met for check in targets(report)}


def scenarios(name: str) -> List[str]:
    """The scenarios ``--scenario`` names: one, or every one for ``all``."""
    return list(SCENARIOS) if name == ALL else [name]


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
    """Progress on stderr: a line per phase, and the running subject's state, rewritten in
    place on a terminal, else printed as a line every :data:`PROGRESS_EVERY_S` seconds."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.terminal = stream.isatty()
        self._live = False
        self._shown = 0.0

    def phase(self, text: str) -> None:
        self.end()
        print(f"  {text}", file=self.stream, flush=True)

    def live(self, text: str) -> None:
        if self.terminal:
            self.stream.write(f"\r    {text}\033[K")
            self.stream.flush()
            self._live = True
        elif time.monotonic() - self._shown >= PROGRESS_EVERY_S:
            self._shown = time.monotonic()
            print(f"    {text}", file=self.stream, flush=True)

    def end(self) -> None:
        if self._live:
            self.stream.write("\n")
            self._live = False


def _ledger(url: str) -> None:
    """Open ``--db`` once before the run: a new database gets the drill's schema; one that
    cannot be reached is one line saying how to make it, and one holding a pipeline's work is
    refused (exit 1 each)."""
    try:
        with open_store(url, init_schema=True, create=True) as store:
            announce(store=store)
            refuse_work_not_a_drills(store=store)
    except StoreError as exc:
        if url.startswith("postgres") and "does not exist" in str(exc):
            name = url.rsplit("/", 1)[-1].split("?", 1)[0]
            raise StoreUnavailable(
                f"the database {name!r} does not exist: create it (`createdb {name}`, or "
                f"CREATE DATABASE {name}) and run the drill again; it creates its schema "
                "itself") from None
        raise


def _json(report: DrillReport) -> Dict[str, Any]:
    said = plainly(report)
    return {**report.as_dict(), "targets": verdicts(report),
            "speed": list(comparison(report).lines) + ([said] if said else []),
            "verdict": verdict([report])}


def _print(reports: Sequence[DrillReport], as_json: bool) -> None:
    if as_json:
        if len(reports) == 1:
            out: Dict[str, Any] = _json(reports[0])
        else:
            out = {"scenarios": {r.scenario: _json(r) for r in reports},
                   "verdict": verdict(list(reports))}
        print(json.dumps(out, indent=2))
        return
    print(render_report(reports), end="")


@command
def run(args: argparse.Namespace) -> int:
    display = _Display(sys.stderr)
    compare = _compare(args.compare)
    if args.db:
        _ledger(args.db)
    reports: List[DrillReport] = []
    try:
        with _quiet_logs():
            for name in scenarios(args.scenario):
                reports.append(run_drill(
                    name, submissions=args.submissions, engines=args.engines, db_url=args.db,
                    seed=args.seed, time_scale=args.time_scale, compare=compare,
                    photos_per_feature=args.photos_per_feature, on_progress=display.phase,
                    on_live=display.live))
    finally:
        display.end()
    if args.html:
        write_file(args.html, render_pages(reports))
    _print(reports, args.json)
    return EXIT_OK if all(c.met for r in reports for c in targets(r)) else EXIT_FAILED


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "drill", help="the whole pipeline on loopback under faults, beside today's approaches",
        description="Run the pipeline on loopback under a named fault scenario (stand-ins for "
                    "Survey123, the photos, the feature layer and the Vision AI; the intake "
                    "gateway; engines running WS-02; the compensator), then the same "
                    "deliveries and faults through the baselines, and report side by side.",
        epilog=exit_codes("the library missed a target (a photo not analysed or lost, paid "
                          "or written twice, calls past a bound), never for its speed"))
    p.add_argument("--scenario", choices=[*SCENARIOS, ALL], default="storm",
                   help="what goes wrong (default: storm; all: every scenario in turn): "
                   + "; ".join(f"{s.name}: {s.summary}"
                               for s in SCENARIOS.values()).replace("%", "%%"))
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
                        f"work that is not a drill's, and creates the schema of a new one): "
                        f"{DB_FORMS} ({THROWAWAY_DEFAULT})")
    p.add_argument("--seed", type=whole(minimum=0, maximum=MAX_COUNT), default=1,
                   help="the seed of the faults, photos, deliveries and the schedules' clock "
                        "(default: 1)")
    p.add_argument("--time-scale", type=number(above=0, maximum=1),
                   default=DEFAULT_TIME_SCALE,
                   help="real seconds per production second: every wait, window, timeout and "
                        "fault of every subject is scaled by it (default: "
                        f"{DEFAULT_TIME_SCALE:g})")
    p.add_argument("--compare", default=",".join(BASELINE_NAMES), metavar="NAMES",
                   help="baselines to run, comma-separated, or none (default: "
                        f"{','.join(BASELINE_NAMES)})")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--html", metavar="FILE", default=None,
                   help="also write the report as a self-contained HTML page (default: none)")
    p.set_defaults(func=run, db_optional=True)
