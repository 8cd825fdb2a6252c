"""When a drill's scheduled jobs run: FME Flow's cron schedules, on the run's clock.

FME Flow fires a schedule on its cron marks (``0 0/10 * * * ?``: at minute 0, 10, 20... of
every hour), whenever the crew's phones come back online. A drill's run therefore begins at
a moment of the hour drawn from the seed (:func:`clock_offset_s`), and every scheduled job of
every subject fires on its own marks from there (:func:`marks`): the library's WS-03 every
10 minutes, as docs/fme-flow.md deploys it, and the ``sweep`` baseline's workspace every 2.
Times are production seconds after the run's start; the drill scales them like every other
time (:mod:`~fme_ai_resilience.drill.timescale`).

A subject is watched until it settles (docs/drill.md, "When a run ends") or, at the latest,
:data:`GRACE_S` after the scenario's last delivery and last fault (:func:`horizon_s`), the
same horizon for every subject.
"""
from __future__ import annotations

import random
from typing import Iterator

from ..core.checks import finite

__all__ = ["WS03_PERIOD_S", "SWEEP_PERIOD_S", "GRACE_S", "clock_offset_s", "marks",
           "first_mark_after", "horizon_s"]

#: WS-03's schedule as deployed (docs/fme-flow.md): every 10 minutes.
WS03_PERIOD_S = 600.0
#: The sweep baseline's schedule: every 2 minutes.
SWEEP_PERIOD_S = 120.0
#: How long after the last delivery and the last fault a subject is watched at most: two of
#: WS-03's periods, time for its next pass and the one after.
GRACE_S = 1200.0


def clock_offset_s(seed: int) -> float:
    """Seconds past the top of the hour at which the run begins, drawn from the seed."""
    return random.Random(f"clock:{seed}").uniform(0.0, 3600.0)


def first_mark_after(period_s: float, after_s: float, *, seed: int) -> float:
    """The first mark of a schedule every ``period_s`` at or after ``after_s`` (production
    seconds after the run's start)."""
    finite("period_s", period_s, above=0)
    first = (-clock_offset_s(seed)) % period_s
    if after_s <= first:
        return first
    steps = -(-(after_s - first) // period_s)     # ceil
    return first + steps * period_s


def marks(period_s: float, *, seed: int, after_s: float = 0.0) -> Iterator[float]:
    """Every mark of a schedule every ``period_s`` from ``after_s`` on, without end."""
    at = first_mark_after(period_s, after_s, seed=seed)
    while True:
        yield at
        at += period_s


def horizon_s(last_delivery_s: float, faults_end_s: float) -> float:
    """The latest a subject is watched: :data:`GRACE_S` after the last delivery and fault."""
    return max(last_delivery_s, faults_end_s) + GRACE_S
