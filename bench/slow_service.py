"""Slow is not down, measured: the library beside its peers on a slow Vision AI and in a storm.

Run: ``.venv/bin/python bench/slow_service.py --write`` (about ten minutes on 2 cores).

Two comparisons, each side by side in one run, every subject on the drill's machinery (the same
plan, the same stand-ins seeded alike, judged by the drill's one judge at the stand-ins):

* **A slow service** (``slow``): a Vision AI answering every call correctly, 26 s +- 1 s after
  the request (past the default time to first byte of 20 s, far inside the 180 s task
  budget), 24 photos at once, 2 engines. The library on its defaults against ``naive`` (the
  usual 30 s timeout, three tries). Figures: answers the service computed per analysed photo
  (each one billed; counted at the stand-in), the most calls the service had in flight at once
  (counted at the stand-in), photos analysed and the drain time (production seconds).
* **A storm** (``storm``): the drill's storm (every submission at once, redeliveries,
  re-created features, missing photos, 10 % flaky calls) against a Vision AI with a capacity
  (``--capacity`` calls computed at once, the rest queued: the service's capacity is the
  physical limit every subject meets), 4 engines. The library against ``sweep`` (HTTPCaller
  with up to 25 transfers per job and the scheduled sweep, the strongest peer). Figures: drain
  time, engine-seconds per analysed photo (the engines busy with the work, summed over the
  run: an engine is FME Flow's licensed resource) and the peak calls in flight at the service.

The time scale compresses every subject's every wait and timeout alike. ``--write`` puts the
figures into ``docs/benchmarks.md`` between its markers.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

from fme_ai_resilience.drill.library import run_library
from fme_ai_resilience.drill.report import LIBRARY, SubjectResult
from fme_ai_resilience.drill.run import judged, run_baseline_subject
from fme_ai_resilience.drill.scenarios import SCENARIOS, Scenario
from fme_ai_resilience.drill.standins import FaultSchedule
from fme_ai_resilience.drill.world import World

ROOT = Path(__file__).resolve().parent.parent
MARKERS = ("<!-- slow-bench: start -->", "<!-- slow-bench: end -->")

SLOW = Scenario("slow", "a Vision AI answering every call correctly, 26 s after the request",
                FaultSchedule(latency_s=25.0, latency_jitter_s=2.0))


@contextlib.contextmanager
def _ledger() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="fair-bench-") as tmp:
        yield f"sqlite:///{tmp}/ledger.db"


def _engine_seconds(result: SubjectResult, time_scale: float) -> Optional[float]:
    """The engines busy with the work, summed over the run, in production seconds."""
    tl = result.timeline
    if tl is None or not tl.in_flight:
        return None
    return sum(tl.in_flight) * tl.step_s / time_scale


def _run(name: str, scenario: Scenario, *, submissions: int, engines: int, time_scale: float,
         seed: int) -> Dict[str, object]:
    """One subject on a fresh world: its judged result and what the Vision stand-in saw."""
    with World(scenario, seed=seed, time_scale=time_scale) as world:
        plan = world.plan(submissions)
        if name == LIBRARY:
            with _ledger() as url:
                ran = run_library(plan, world, db_url=url, engines=engines,
                                  time_scale=time_scale)
            result = judged(LIBRARY, world, started=ran.started,
                            **ran.extras(world, engines=engines))
            result.timeline = ran.timeline
        else:
            result = run_baseline_subject(name, plan, world, engines=engines,
                                          time_scale=time_scale, seed=seed)
        seen = world.vision.snapshot()
    analysed = result.analysed or 0
    answers = sum(seen["analysed_by_sha256"].values())
    engine_s = _engine_seconds(result, time_scale)
    return {"subject": name, "analysed": analysed, "analysable": result.analysable,
            "answers_per_analysed": round(answers / analysed, 2) if analysed else None,
            "peak_in_flight": seen["peak_in_flight"],
            "drain_s": None if result.drain_s is None else round(result.drain_s / time_scale, 1),
            "engine_s_per_analysed": (round(engine_s / analysed, 1)
                                      if engine_s is not None and analysed else None),
            "lost": result.lost, "duplicate_analyses": result.duplicate_analyses}


def _table(title: str, rows: List[Dict[str, object]], columns: Sequence[str]) -> List[str]:
    def cell(value: object) -> str:
        return "-" if value is None else str(value)
    header = "| " + " | ".join(("subject",) + tuple(columns)) + " |"
    lines = [title, "", header, "| --- |" + " ---: |" * len(columns)]
    lines += ["| " + " | ".join([str(r["subject"])] + [cell(r[c]) for c in columns]) + " |"
              for r in rows]
    return lines


def figures(slow: List[Dict[str, object]], storm: List[Dict[str, object]],
            args: argparse.Namespace) -> str:
    lines = [f"Latest figures, {time.strftime('%Y-%m-%d')} (CPython "
             f"{platform.python_version()}, {platform.system()} {platform.machine()}, "
             f"seed {args.seed}).", ""]
    if slow:
        lines += _table(f"A slow service: 26 +- 1 s an answer (the default time to first "
                        f"byte is 20 s), {args.slow_photos} photos at once, 2 engines, time "
                        f"scale {args.slow_time_scale:g}.", slow,
                        ("analysed", "answers_per_analysed", "peak_in_flight", "drain_s",
                         "lost"))
        lines.append("")
    if storm:
        lines += _table(f"The storm: {args.storm_submissions} submissions, a service that "
                        f"computes {args.capacity} calls at once, {args.engines} engines, "
                        f"time scale {args.storm_time_scale:g}.", storm,
                        ("analysed", "drain_s", "engine_s_per_analysed", "peak_in_flight",
                         "answers_per_analysed", "lost", "duplicate_analyses"))
    return "\n".join(lines)


def write_between(path: Path, markers: Sequence[str], text: str) -> None:
    """Replace what lies between the two markers of ``path`` with ``text``."""
    start, end = markers
    body = path.read_text(encoding="utf-8")
    head, _, rest = body.partition(start)
    _, found, tail = rest.partition(end)
    if not found:
        raise SystemExit(f"{path}: markers {start} ... {end} not found")
    path.write_text(f"{head}{start}\n{text}\n{end}{tail}", encoding="utf-8")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="slow,storm")
    parser.add_argument("--slow-photos", type=int, default=24)
    parser.add_argument("--slow-time-scale", type=float, default=0.25,
                        help="real seconds per production second of the slow run (the "
                             "drill's timeout floors are inert from 0.25 on)")
    parser.add_argument("--storm-submissions", type=int, default=120)
    parser.add_argument("--storm-time-scale", type=float, default=0.1)
    parser.add_argument("--capacity", type=int, default=24,
                        help="calls the storm's Vision AI computes at once")
    parser.add_argument("--engines", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--write", action="store_true",
                        help="write the figures into docs/benchmarks.md")
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args(argv)
    for noisy in ("fme_ai_resilience", "waitress"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    parts = args.parts.split(",")
    slow: List[Dict[str, object]] = []
    storm: List[Dict[str, object]] = []
    if "slow" in parts:
        for name in (LIBRARY, "naive"):
            print(f"slow service: {name} ...", file=sys.stderr, flush=True)
            slow.append(_run(name, SLOW, submissions=args.slow_photos, engines=2,
                             time_scale=args.slow_time_scale, seed=args.seed))
    if "storm" in parts:
        base = SCENARIOS["storm"]
        scenario = dataclasses.replace(
            base, faults=dataclasses.replace(base.faults, capacity=args.capacity))
        for name in (LIBRARY, "sweep"):
            print(f"storm: {name} ...", file=sys.stderr, flush=True)
            storm.append(_run(name, scenario, submissions=args.storm_submissions,
                              engines=args.engines, time_scale=args.storm_time_scale,
                              seed=args.seed))
    text = figures(slow, storm, args)
    print(text)
    if args.write:
        write_between(args.root / "docs/benchmarks.md", MARKERS, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
