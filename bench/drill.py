"""The drill as a benchmark: the README's main job as the README runs it, and the scenarios at
full size, the library beside the four baselines on the same deliveries and faults, every
subject judged by the same function at the stand-ins.

Run: ``.venv/bin/python bench/drill.py --write``. It does three things:

1. the README's main job, the README's own command (``fme-ai-resilience drill``, its default
   arguments, in a child process): its output is the README's excerpt, cut from what the
   command printed (the heading, the rows of ``EXCERPT_ROWS``, the targets, the speed and the
   verdict), never rebuilt; ``--main-args`` adds arguments (the tests shrink it);
2. with ``--repeat N``, the same command N times in a row, ``--busy K`` with K CPU-heavy
   processes (busy loops) running beside it: each run's exit code, verdict, drains and the
   machine's load average, recorded in docs/benchmarks.md (the acceptance of a drill that
   holds on a busy machine);
3. each scenario of ``--scenarios`` at its full size (``SIZES``: the storm is 300 phones x 3
   photos, one related-table row per photo; every scenario on 4 engines), one
   :func:`~fme_ai_resilience.drill.run.run_drill` each, a Markdown row per subject.

``--write`` puts the excerpt into the README and the rest into docs/benchmarks.md, each
between its markers (``--root`` another checkout's), so no figure is pasted by hand. Exit 1
when the library misses a target in any run.
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from fme_ai_resilience.drill.invariants import targets
from fme_ai_resilience.drill.report import DrillReport, SubjectResult
from fme_ai_resilience.drill.run import (BASELINE_NAMES, DEFAULT_ENGINES, DEFAULT_TIME_SCALE,
                                         run_drill)
from fme_ai_resilience.drill.table import SPEED_TITLE, excerpt

ROOT = Path(__file__).resolve().parent.parent
#: The size of each scenario's run, ``(submissions, photos each)``: the storm is the full-size
#: headline, 300 phones x 3 photos.
SIZES = {"storm": (300, 3), "outage": (120, 1), "ratelimit": (120, 1), "longoutage": (120, 1),
         "slow": (60, 1), "cutoff": (120, 1), "quota": (120, 1)}
#: The markers ``--write`` replaces between.
MARKERS = {"bench": ("docs/benchmarks.md", "<!-- drill-bench: start -->",
                     "<!-- drill-bench: end -->"),
           "repeat": ("docs/benchmarks.md", "<!-- drill-repeat: start -->",
                      "<!-- drill-repeat: end -->"),
           "excerpt": ("README.md", "<!-- drill-excerpt: start -->",
                       "<!-- drill-excerpt: end -->")}
HEADER = ("| scenario | subject | analysed / can be | flagged | lost | paid twice "
          "| conflicting writes | AI calls per analysed | outage calls / probe bound "
          "| calls in flight / bound | drain (limit) | time to result p50 / p95 "
          "| engine s per photo |")
#: The README's main job, as the README types it.
MAIN_JOB = ("fme-ai-resilience", "drill")


def _fmt(value: Optional[float], spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def row(report: DrillReport, r: SubjectResult) -> str:
    """One subject's figures as a Markdown row."""
    if r.skipped:
        return f"| {report.scenario} | {r.name} | not run: {r.skipped} |" + " |" * 10
    outage = f"{r.outage_ai_calls} / {report.probe_bound}" if report.outage else "-"
    return (f"| {report.scenario} | {r.name} | {r.analysed} / {r.analysable} | {r.flagged} | "
            f"{r.lost} | {r.duplicate_analyses} | {r.conflicting_writes} | "
            f"{_fmt(r.ai_calls_per_analysed)} | {outage} | "
            f"{r.peak_concurrent_calls} / {r.concurrency_bound} | "
            f"{_fmt(r.drain_s, '.1f')} s ({_fmt(report.drain_limit_s, '.1f')} s) | "
            f"{_fmt(r.time_to_result_p50_s, '.1f')} / {_fmt(r.time_to_result_p95_s, '.1f')} s"
            f" | {_fmt(r.engine_s_per_analysed, '.1f')} |")


def checklist(reports: Dict[str, DrillReport]) -> List[str]:
    """Every target of the library in every scenario, met or MISSED."""
    return [f"{'met   ' if c.met else 'MISSED'} {name}: {c.name}"
            for name, report in reports.items() for c in targets(report)]


def figures(reports: Dict[str, DrillReport], args: argparse.Namespace) -> str:
    """The full-size runs' Markdown: what ran, the table, the checklist."""
    sizes = ", ".join(f"{n} {r.size}" for n, r in reports.items())
    lines = [f"Latest figures, {time.strftime('%Y-%m-%d')} (CPython "
             f"{platform.python_version()}, {args.engines} engines, time scale "
             f"{args.time_scale:g}, seed {args.seed}, {sizes}; times are real seconds, the "
             "engine time production seconds):", "", HEADER, "|" + "---|" * 13]
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


def _spin(stop: "multiprocessing.synchronize.Event") -> None:   # type: ignore[name-defined]
    while not stop.is_set():
        sum(i * i for i in range(10_000))


@contextlib.contextmanager
def busy_machine(count: int) -> Iterator[int]:
    """``count`` CPU-heavy processes (busy loops) for the block's length: the number."""
    if count <= 0:
        yield 0
        return
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    hogs = [ctx.Process(target=_spin, args=(stop,), daemon=True) for _ in range(count)]
    for hog in hogs:
        hog.start()
    try:
        yield len(hogs)
    finally:
        stop.set()
        for hog in hogs:
            hog.join(10)


def main_job(extra: Sequence[str]) -> Tuple[int, str, float, Tuple[float, float, float]]:
    """The README's command once: its exit code, what it printed, how long it took and the
    load average over the last 1, 5 and 15 minutes at its end."""
    command = [sys.executable, "-m", "fme_ai_resilience", *MAIN_JOB[1:], *extra]
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    return done.returncode, done.stdout, time.monotonic() - began, os.getloadavg()


def _verdict(printed: str) -> str:
    return next((line for line in reversed(printed.splitlines())
                 if line.startswith("verdict:")), "no verdict printed")


def repeated(runs: List[Tuple[int, str, float, Tuple[float, float, float]]], hogs: int,
             extra: Sequence[str]) -> str:
    """The repeated main job's Markdown: one line per run."""
    command = " ".join([*MAIN_JOB, *extra])
    lines = [f"`{command}` {len(runs)} times in a row, {time.strftime('%Y-%m-%d')}, CPython "
             f"{platform.python_version()}, {os.cpu_count()} cores"
             + (f", {hogs} CPU-heavy processes (busy loops) running beside it" if hogs
                else "") + "; the load average counts every process on the machine:", "",
             "| run | exit | took | load average at its end (1, 5, 15 min) | drain, beside the "
             "strongest peer | verdict |",
             "|---|---|---|---|---|---|"]
    for i, (code, printed, took, load) in enumerate(runs, 1):
        lines_out = printed.splitlines()
        at = lines_out.index(SPEED_TITLE) if SPEED_TITLE in lines_out else len(lines_out)
        speed = next((line.strip() for line in lines_out[at + 1:]
                      if line.strip().startswith("drain ")), "-")
        lines.append(f"| {i} | {code} | {took:.0f} s | {load[0]:.1f}, {load[1]:.1f}, "
                     f"{load[2]:.1f} | {speed} | {_verdict(printed)} |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default="storm,outage,ratelimit",
                        help="the full-size scenarios (none: only the main job)")
    parser.add_argument("--submissions", type=int, default=None,
                        help=f"one size for every scenario (default: {SIZES})")
    parser.add_argument("--photos-per-feature", type=int, default=None,
                        help="photos of each submission, for every scenario (default: SIZES)")
    parser.add_argument("--engines", type=int, default=DEFAULT_ENGINES)
    parser.add_argument("--time-scale", type=float, default=DEFAULT_TIME_SCALE)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compare", default=",".join(BASELINE_NAMES))
    parser.add_argument("--db", default=None, help="the ledger (default: a temporary SQLite)")
    parser.add_argument("--main-args", default="",
                        help="arguments added to the README's main job (default: none)")
    parser.add_argument("--repeat", type=int, default=0,
                        help="run the README's main job this many more times in a row")
    parser.add_argument("--busy", type=int, default=0, metavar="K",
                        help="with --repeat: K CPU-heavy processes run beside it (default: 0)")
    parser.add_argument("--write", action="store_true",
                        help="write the figures into docs/benchmarks.md and the README")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout --write writes")
    args = parser.parse_args(argv)
    for noisy in ("fme_ai_resilience", "waitress"):   # the report says what happened
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    extra = shlex.split(args.main_args)
    failed = False
    print(f"running the README's main job: {' '.join([*MAIN_JOB, *extra])} ...",
          file=sys.stderr, flush=True)
    code, printed, _, _ = main_job(extra)
    failed |= code != 0
    cut = excerpt(printed)
    print(cut)
    writes: Dict[str, str] = {"excerpt": "```text\n" + cut + "```"}
    if args.repeat:
        with busy_machine(args.busy) as hogs:
            runs = []
            for i in range(args.repeat):
                print(f"main job, run {i + 1} of {args.repeat} ...", file=sys.stderr,
                      flush=True)
                runs.append(main_job(extra))
        failed |= any(run[0] != 0 for run in runs)
        writes["repeat"] = repeated(runs, hogs, extra)
        print(writes["repeat"])
    compare = tuple(n for n in args.compare.split(",") if n and n != "none")
    reports: Dict[str, DrillReport] = {}
    for name in [n for n in args.scenarios.split(",") if n and n != "none"]:
        size, photos = SIZES.get(name, (120, 1))
        size, photos = args.submissions or size, args.photos_per_feature or photos
        print(f"running {name} ({size} submissions x {photos} photos) ...", file=sys.stderr,
              flush=True)
        reports[name] = run_drill(name, submissions=size, engines=args.engines,
                                  photos_per_feature=photos,
                                  db_url=args.db, seed=args.seed, time_scale=args.time_scale,
                                  compare=compare)
    if reports:
        writes["bench"] = figures(reports, args)
        print(writes["bench"])
        failed |= any(not c.met for r in reports.values() for c in targets(r))
    if args.write:
        for key, text in writes.items():
            path, *markers = MARKERS[key]
            write_between(args.root / path, markers, text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
