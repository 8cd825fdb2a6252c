"""The drill's scenarios as a benchmark: the library beside the usual approaches, on the same
deliveries and faults, and each figure against the bound it names.

Run: ``.venv/bin/python bench/drill.py`` (about five minutes on 2 cores; ``--scenarios``,
``--submissions``, ``--engines``, ``--time-scale``, ``--seed``, ``--db`` to change the run).

For each scenario (default ``storm``, ``outage`` and ``ratelimit``) one
:func:`~fme_ai_resilience.drill.run.run_drill` plays the plan against the library and against
``naive``, ``tenacity`` and ``httpcaller``, one after the other on fresh stand-ins seeded
alike. Per subject: facts lost, duplicate analyses (valid answers beyond one per photo), AI
calls per succeeded fact, calls that reached the Vision AI during its outage, and the drain
time. The library's targets, computed from the settings and the scenario before the run:

* lost 0 and duplicate analyses 0;
* AI calls per succeeded fact <= 1.1 x 1/(1-p), where p is the scenario's share of transient
  failures (each such call is asked again once); not in an outage, where the calls beyond one
  per fact are the calls into the outage, judged by the next target instead;
* calls during the outage <= the breaker's probe bound;
* drain <= 1.15 x the Little's-law bound (the work over the engines, no sooner than the last
  arrival, the rate limit's pace or the outage's end).

The ratios against each baseline (its AI calls over the library's, its facts lost) are
printed beside. Exit 1 when the library misses a target.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from fme_ai_resilience.drill.report import DrillReport, SubjectResult
from fme_ai_resilience.drill.run import (BASELINE_NAMES, DEFAULT_ENGINES, DEFAULT_TIME_SCALE,
                                         run_drill)
from fme_ai_resilience.drill.scenarios import SCENARIOS

DRAIN_TARGET = 1.15
CALLS_TARGET = 1.1


def _calls_per_fact(r: SubjectResult) -> Optional[float]:
    return r.ai_calls / r.succeeded_total if r.succeeded_total else None


def _fmt(value: Optional[float], spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def _row(report: DrillReport, r: SubjectResult) -> str:
    if r.skipped:
        return f"| {report.scenario} | {r.name} | not run: {r.skipped} | | | | | |"
    drain = (r.drain_s / report.drain_bound_s
             if r.drain_s is not None and report.drain_bound_s else None)
    outage = f"{r.outage_ai_calls} / {report.probe_bound}" if report.outage else "-"
    return (f"| {report.scenario} | {r.name} | {r.succeeded_total} / {r.distinct_facts} | "
            f"{r.lost} | {r.duplicate_analyses} | {_fmt(_calls_per_fact(r))} | {outage} | "
            f"{_fmt(r.drain_s, '.1f')} s ({_fmt(drain)}x) |")


def targets(report: DrillReport) -> List[Tuple[str, bool]]:
    """The library's targets in this scenario, each with whether it was met."""
    lib = report.library
    p = SCENARIOS[report.scenario].transient_rate
    calls = _calls_per_fact(lib)
    out = [("lost 0", lib.lost == 0), ("duplicate analyses 0", lib.duplicate_analyses == 0)]
    if not report.outage:
        # In an outage the calls beyond one per fact are the calls into it, which the breaker
        # must make to notice it: they are judged against the probe bound instead.
        out.append((f"AI calls per succeeded fact {_fmt(calls)} <= {CALLS_TARGET} x "
                    f"1/(1-{p:g}) = {CALLS_TARGET / (1 - p):.2f}",
                    calls is not None and calls <= CALLS_TARGET / (1 - p)))
    if report.outage:
        out.append((f"outage calls {lib.outage_ai_calls} <= probe bound {report.probe_bound}",
                    lib.outage_ai_calls <= report.probe_bound))
    if lib.drain_s is not None and report.drain_bound_s:
        ratio = lib.drain_s / report.drain_bound_s
        out.append((f"drain {lib.drain_s:.1f} s = {ratio:.2f}x <= {DRAIN_TARGET}x the bound "
                    f"{report.drain_bound_s:.1f} s", ratio <= DRAIN_TARGET))
    return out


def versus(report: DrillReport) -> List[str]:
    """Each baseline against the library: its AI calls over the library's, what it lost."""
    lib = report.library
    lines = []
    for r in report.baselines.values():
        if r.skipped or not lib.ai_calls:
            continue
        lines.append(f"{report.scenario}: {r.name} made {r.ai_calls / lib.ai_calls:.2f}x the "
                     f"library's AI calls ({r.ai_calls} vs {lib.ai_calls}), "
                     f"{r.outage_ai_calls} into the outage vs {lib.outage_ai_calls}, "
                     f"lost {r.lost} of {r.distinct_facts} facts vs {lib.lost}, analysed "
                     f"{r.duplicate_analyses} photos twice vs {lib.duplicate_analyses}")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default="storm,outage,ratelimit")
    parser.add_argument("--submissions", type=int, default=120)
    parser.add_argument("--engines", type=int, default=DEFAULT_ENGINES)
    parser.add_argument("--time-scale", type=float, default=DEFAULT_TIME_SCALE)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compare", default=",".join(BASELINE_NAMES))
    parser.add_argument("--db", default=None, help="the ledger (default: a temporary SQLite)")
    args = parser.parse_args(argv)
    for noisy in ("fme_ai_resilience", "waitress"):   # the report says what happened
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    compare = tuple(n for n in args.compare.split(",") if n and n != "none")
    reports: Dict[str, DrillReport] = {}
    for name in args.scenarios.split(","):
        print(f"running {name} ...", file=sys.stderr, flush=True)
        reports[name] = run_drill(name, submissions=args.submissions, engines=args.engines,
                                  db_url=args.db, seed=args.seed, time_scale=args.time_scale,
                                  compare=compare)
    print(f"drill bench: {args.submissions} submissions, {args.engines} engines, time scale "
          f"{args.time_scale:g}, seed {args.seed}; times are real seconds\n")
    print("| scenario | subject | succeeded / facts | lost | duplicate analyses "
          "| AI calls per succeeded | outage calls / probe bound | drain (x bound) |")
    print("|---|---|---|---|---|---|---|---|")
    for report in reports.values():
        for r in (report.library, *report.baselines.values()):
            print(_row(report, r))
    print()
    missed = 0
    for report in reports.values():
        for what, ok in targets(report):
            missed += not ok
            print(f"{'met   ' if ok else 'MISSED'} {report.scenario}: {what}")
    print()
    for report in reports.values():
        for line in versus(report):
            print(line)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
