"""What a drill's figures are judged against: the outage's probe bound and the drain bound.

Both are computed from the settings the drill runs with and the scenario, before the run, so
they cannot be bent by what happened in it.

* :func:`probe_bound`: the most Vision AI calls the shared breaker lets through during an
  outage of ``window_s``. Before it opens, the failures must reach ``failure_rate`` of the
  calls in its window, which may still hold the successes of the ``window_s`` before the
  outage (at most every engine calling back to back at the fastest latency), and at least
  ``min_calls``; every engine may have one call in flight when it opens. Then each half-open
  round admits exactly ``half_open_probes``, one round per cooldown (growing by
  ``cooldown_factor`` up to ``cooldown_max_s``) that ends inside the window.
* :func:`drain_bound_s`: Little's law for the run: the work over the engines, where one task
  costs the mean latency and a share ``p`` of calls fails and is asked again (``1/(1-p)``
  calls per task), and no sooner than the last arrival plus one task, the rate limit's pace
  or the end of the outage plus one task.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

from ..breaker import cooldown_s
from ..settings import BreakerSettings

__all__ = ["probe_bound", "drain_bound_s", "service_s"]


def probe_bound(policy: BreakerSettings, outage_s: float, *, engines: int,
                fastest_call_s: float) -> int:
    """Calls the breaker admits during an outage of ``outage_s`` seconds (see above)."""
    before = engines * policy.window_s / max(fastest_call_s, 1e-9)
    share = policy.failure_rate / max(1.0 - policy.failure_rate, 1e-9)
    to_open = max(policy.min_calls, math.ceil(before * share)) + engines
    rounds, elapsed, trip = 0, 0.0, 1
    while True:
        elapsed += cooldown_s(policy, trip)
        if elapsed >= outage_s:
            break
        rounds += 1
        trip += 1
    return to_open + rounds * policy.half_open_probes


def service_s(mean_latency_s: float, transient_rate: float) -> float:
    """What one task costs an engine: its calls, ``1/(1-p)`` of them, at the mean latency."""
    return mean_latency_s / max(1.0 - transient_rate, 1e-9)


def drain_bound_s(tasks: int, *, engines: int, mean_latency_s: float, transient_rate: float,
                  last_arrival_s: float, rate_limit_per_s: Optional[float] = None,
                  outage: Optional[Tuple[float, float]] = None) -> float:
    """The least time ``tasks`` can drain in from the first delivery (see above)."""
    per_task = service_s(mean_latency_s, transient_rate)
    bound = max(tasks * per_task / engines, last_arrival_s + per_task)
    if rate_limit_per_s:
        bound = max(bound, tasks / (rate_limit_per_s * (1.0 - transient_rate)))
    if outage is not None:
        bound = max(bound, outage[1] + per_task)
    return bound
