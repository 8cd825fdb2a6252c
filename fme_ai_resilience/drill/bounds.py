"""What a drill's figures are judged against: the calls into an outage or a drifted model, and
per analysed photo.

Each is computed from the settings the drill runs with and the scenario, before the run, so
they cannot be bent by what happened in it.

* :func:`probe_bound`: the most Vision AI calls the shared breaker lets through during an
  outage of ``window_s`` (a service answering 503: every failure says it is down). It opens at
  whichever rule comes first: ``consecutive_failures`` failures in a row (whatever the window
  holds), or the failure rate over its window, where the failures must reach
  ``failure_rate`` of the calls in it, which may still hold the successes of the
  ``window_s`` before the outage (every engine calling back to back at the fastest latency),
  and at least ``min_calls``. Every slot of the fleet's concurrency limit may hold a call in
  flight when it opens. Then each half-open round admits exactly ``half_open_probes``, one
  round per interval of the breaker's own probe schedule
  (:func:`~fme_ai_resilience.core.resilience.breaker.probe_schedule`) that starts inside the window. Never
  capped at the photos there are: a bound capped at the facts would prove nothing.
* :func:`drift_call_bound`: the calls into a model that answers out of schema until its fix:
  the ``drift_calls`` answers that show the drift, a call in every slot of the fleet's
  concurrency and one more on each engine's cached view of the circuit, then the probes of the breaker's probe
  schedule (:func:`~fme_ai_resilience.core.resilience.breaker.outage_probe_bound`) over the
  drift.
* :func:`outage_call_bound` is the probe bound for a run's settings; :func:`in_flight_bound`
  the calls the fleet may have in flight (its concurrency ceiling, or every engine's workers
  when fewer); :func:`probe_interval_s` is the recovery lag the report shows beside the
  measured one (speed, never a target): the probe interval in force when the service comes
  back. They read the breaker's probe schedule from the core,
  the one place it is computed.
"""
from __future__ import annotations

import math
from typing import Optional

from ..core.config.fields import MAX_COUNT
from ..core.resilience.breaker import (BreakerSettings, cooldown_s, outage_probe_bound,
                                      probe_schedule)
from ..core.resilience.concurrency import ConcurrencySettings

__all__ = ["probe_bound", "outage_call_bound", "in_flight_bound", "drift_call_bound",
           "probe_interval_s", "calls_per_analysed_bound", "CALLS_TOLERANCE"]

#: How far past 1/(1-p) the AI calls per analysed photo may run.
CALLS_TOLERANCE = 1.1


def in_flight_bound(engines: int, concurrency: Optional[ConcurrencySettings] = None) -> int:
    """The most Vision AI calls the fleet may have in flight: its concurrency ceiling, or
    every engine's workers when they are fewer."""
    concurrency = concurrency or ConcurrencySettings()
    return min(concurrency.ceiling, max(1, engines) * concurrency.per_engine)


def probe_bound(policy: BreakerSettings, outage_s: float, *, engines: int,
                fastest_call_s: float, in_flight: Optional[int] = None) -> int:
    """Calls the breaker admits during an outage of ``outage_s`` seconds (see above);
    ``in_flight`` the calls the fleet may have in flight when it opens (default: every
    engine's workers, within the default ceiling)."""
    before = engines * policy.window_s / max(fastest_call_s, 1e-9)
    share = policy.failure_rate / max(1.0 - policy.failure_rate, 1e-9)
    by_rate = max(policy.min_calls, math.ceil(before * share))
    to_open = min(by_rate, policy.consecutive_failures)
    slots = in_flight_bound(engines) if in_flight is None else in_flight
    return to_open + slots + outage_probe_bound(policy, outage_s, facts=MAX_COUNT)


def outage_call_bound(policy: BreakerSettings, outage_s: float, *, engines: int,
                      fastest_call_s: float,
                      concurrency: Optional[ConcurrencySettings] = None) -> int:
    """The calls allowed into an outage of ``outage_s``: the breaker's :func:`probe_bound`
    with the fleet's concurrency (``concurrency``, default the defaults), never capped at
    the photos there are (a subject that asks once per photo and then waits is judged by the
    same bound). The one place the drill computes it: the breaker's own probe schedule is
    read from the core."""
    return probe_bound(policy, outage_s, engines=engines, fastest_call_s=fastest_call_s,
                       in_flight=in_flight_bound(engines, concurrency))


def drift_call_bound(policy: BreakerSettings, drift_s: float, *, engines: int,
                     concurrency: Optional[ConcurrencySettings] = None) -> int:
    """The calls allowed into a model drifted for ``drift_s`` seconds before its fix (see
    above): the drifted model is an outage whose probes are real photos' calls; every slot of
    the fleet's concurrency may hold a call when the drift shows, and each engine one more on
    its cached view of the circuit."""
    return (policy.drift_calls + in_flight_bound(engines, concurrency) + max(1, engines)
            + outage_probe_bound(policy, drift_s, facts=MAX_COUNT))


def probe_interval_s(policy: BreakerSettings, outage_s: float) -> float:
    """The recovery lag allowed after an outage of ``outage_s``: one probe interval, the one in
    force when the service comes back (the interval after the last round of the breaker's
    :func:`~fme_ai_resilience.core.resilience.breaker.probe_schedule` inside the outage; the circuit opens
    after the outage starts, so the interval really in force is never longer)."""
    return cooldown_s(policy, len(probe_schedule(policy, outage_s)) + 1)


def calls_per_analysed_bound(transient_rate: float) -> float:
    """The AI calls one analysed photo may cost: :data:`CALLS_TOLERANCE` x 1/(1-p)."""
    return CALLS_TOLERANCE / max(1.0 - transient_rate, 1e-9)
