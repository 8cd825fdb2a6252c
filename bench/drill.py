"""The drill's scenarios as a benchmark: the library beside the four baselines, on the same
deliveries and faults, every subject judged by the same function at the stand-ins.

Run: ``.venv/bin/python bench/drill.py --write`` (the full size takes a long while on 2
cores: the storm is 900 photos, 300 phones each sending an inspection with 3 photos, one
related-table row per photo, on 4 engines). ``--scenarios``, ``--submissions`` (one size
for every scenario), ``--photos-per-feature`` (one for every scenario), ``--engines``,
``--time-scale``, ``--seed``, ``--compare`` and ``--db`` change the run; ``--write`` puts the
figures into ``docs/benchmarks.md`` and the storm's excerpt into the README, each between its
markers (``--root`` another checkout's), so no figure is pasted by hand.

For each scenario (default ``storm``, ``outage`` and ``ratelimit``) one
:func:`~fme_ai_resilience.drill.run.run_drill` plays the plan against the library and against
``naive``, ``tenacity``, ``httpcaller`` and ``sweep``, one after the other on fresh stand-ins
seeded alike. The library's targets are :func:`~fme_ai_resilience.drill.invariants.targets`,
the same the ``drill`` command exits on: every photo that can be analysed analysed, lost 0,
nothing paid twice, no conflicting write, no row added twice, calls in flight within engines
x per engine, AI calls per analysed photo at most 1.1 x 1/(1-p) (not in an outage), calls
into the outage within the probe bound and the recovery lag within one probe interval (in
one), and the drain at most 1.15 x its Little's-law bound. Exit 1 when the library misses one.
"""
from __future__ import annotations

import argparse
import logging
import platform
import re
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from fme_ai_resilience.drill.invariants import targets
from fme_ai_resilience.drill.report import DrillReport, SubjectResult
from fme_ai_resilience.drill.run import (BASELINE_NAMES, DEFAULT_ENGINES, DEFAULT_TIME_SCALE,
                                         run_drill)
from fme_ai_resilience.drill.table import render_excerpt

ROOT = Path(__file__).resolve().parent.parent
#: The size of each scenario's run, ``(submissions, photos each)``: the storm is the README's
#: headline, 300 phones x 3 photos.
SIZES = {"storm": (300, 3), "outage": (120, 1), "ratelimit": (120, 1)}
#: The markers ``--write`` replaces between, in docs/benchmarks.md and the README.
MARKERS = {"docs/benchmarks.md": ("<!-- drill-bench: start -->", "<!-- drill-bench: end -->"),
           "README.md": ("<!-- drill-excerpt: start -->", "<!-- drill-excerpt: end -->")}
HEADER = ("| scenario | subject | analysed / can be | flagged | lost | duplicate analyses "
          "| conflicting writes | AI calls per analysed | outage calls / probe bound "
          "| recovery lag | calls in flight / bound | drain (x bound) |")


def _fmt(value: Optional[float], spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def row(report: DrillReport, r: SubjectResult) -> str:
    """One subject's figures as a Markdown row."""
    if r.skipped:
        return f"| {report.scenario} | {r.name} | not run: {r.skipped} |" + " |" * 9
    drain = (r.drain_s / report.drain_bound_s
             if r.drain_s is not None and report.drain_bound_s else None)
    outage = f"{r.outage_ai_calls} / {report.probe_bound}" if report.outage else "-"
    lag = f"{_fmt(r.recovery_lag_s, '.1f')} s" if report.outage else "-"
    return (f"| {report.scenario} | {r.name} | {r.analysed} / {r.analysable} | {r.flagged} | "
            f"{r.lost} | {r.duplicate_analyses} | {r.conflicting_writes} | "
            f"{_fmt(r.ai_calls_per_analysed)} | {outage} | {lag} | "
            f"{r.peak_concurrent_calls} / {r.concurrency_bound} | "
            f"{_fmt(r.drain_s, '.1f')} s ({_fmt(drain)}x) |")


def checklist(reports: Dict[str, DrillReport]) -> List[str]:
    """Every target of the library in every scenario, met or MISSED."""
    return [f"{'met   ' if c.met else 'MISSED'} {name}: {c.name}"
            for name, report in reports.items() for c in targets(report)]


def figures(reports: Dict[str, DrillReport], args: argparse.Namespace) -> str:
    """The benchmark's Markdown: what ran, the table, the checklist."""
    sizes = ", ".join(f"{n} {r.size}" for n, r in reports.items())
    lines = [f"Latest figures, {time.strftime('%Y-%m-%d')} (CPython "
             f"{platform.python_version()}, {args.engines} engines, time scale "
             f"{args.time_scale:g}, seed {args.seed}, {sizes}; times are real seconds):", "",
             HEADER, "|" + "---|" * 12]
    for report in reports.values():
        lines += [row(report, r) for r in report.subjects()]
    lines += [""] + [f"- {line}" for line in checklist(reports)]
    models = next(iter(reports.values())).subjects()
    lines += ["", "What each subject models and assumes:", ""]
    lines += [f"- `{s.name}`: {s.model}" for s in models if s.model]
    return "\n".join(lines)


def write_between(path: Path, markers: Sequence[str], text: str) -> None:
    """Replace what lies between ``path``'s two markers with ``text``."""
    start, end = markers
    old = path.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(start) + r"\n.*?" + re.escape(end), re.S)
    if not pattern.search(old):
        raise SystemExit(f"{path}: the markers {start} ... {end} are missing")
    path.write_text(pattern.sub(lambda _m: f"{start}\n{text}\n{end}", old), encoding="utf-8")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default="storm,outage,ratelimit")
    parser.add_argument("--submissions", type=int, default=None,
                        help=f"one size for every scenario (default: {SIZES})")
    parser.add_argument("--photos-per-feature", type=int, default=None,
                        help="photos of each submission, for every scenario (default: SIZES)")
    parser.add_argument("--engines", type=int, default=DEFAULT_ENGINES)
    parser.add_argument("--time-scale", type=float, default=DEFAULT_TIME_SCALE)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compare", default=",".join(BASELINE_NAMES))
    parser.add_argument("--db", default=None, help="the ledger (default: a temporary SQLite)")
    parser.add_argument("--write", action="store_true",
                        help="write the figures into docs/benchmarks.md and the README")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout --write writes")
    args = parser.parse_args(argv)
    for noisy in ("fme_ai_resilience", "waitress"):   # the report says what happened
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    compare = tuple(n for n in args.compare.split(",") if n and n != "none")
    reports: Dict[str, DrillReport] = {}
    for name in args.scenarios.split(","):
        size, photos = SIZES.get(name, (120, 1))
        size, photos = args.submissions or size, args.photos_per_feature or photos
        print(f"running {name} ({size} submissions x {photos} photos) ...", file=sys.stderr,
              flush=True)
        reports[name] = run_drill(name, submissions=size, engines=args.engines,
                                  photos_per_feature=photos,
                                  db_url=args.db, seed=args.seed, time_scale=args.time_scale,
                                  compare=compare)
    text = figures(reports, args)
    print(text)
    if "storm" in reports:
        print("\n" + render_excerpt(reports["storm"]))
    if args.write:
        write_between(args.root / "docs/benchmarks.md", MARKERS["docs/benchmarks.md"], text)
        if "storm" in reports:
            excerpt = "```text\n" + render_excerpt(reports["storm"]) + "```"
            write_between(args.root / "README.md", MARKERS["README.md"], excerpt)
    return 1 if any(not c.met for r in reports.values() for c in targets(r)) else 0


if __name__ == "__main__":
    sys.exit(main())
