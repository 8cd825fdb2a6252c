"""What a drill's figures are judged against: the calls into an outage or a drifted model, and
per analysed photo.

Each is computed from the settings the drill runs with and the scenario, before the run, so
they cannot be bent by what happened in it.

* :func:`probe_bound`: the most Vision AI calls the shared breaker lets through during an
  outage of ``window_s``. Before it opens, the failures must reach ``failure_rate`` of the
  calls in its window, which may still hold the successes of the ``window_s`` before the
  outage (at most every engine calling back to back at the fastest latency), and at least
  ``min_calls``; every engine may have one call in flight when it opens. Then each half-open
  round admits exactly ``half_open_probes``, one round per interval of the breaker's own probe
  schedule (:func:`~fme_ai_resilience.breaker.probe_schedule`) that starts inside the window.
* :func:`drift_call_bound`: the calls into a model that answers out of schema until its fix:
  the ``drift_calls`` answers that show the drift, a call in flight on every other engine and
  one more each on its cached view of the circuit, then the probes of the breaker's probe
  schedule (:func:`~fme_ai_resilience.breaker.outage_probe_bound`) over the drift.
* :func:`outage_call_bound` caps the probe bound at the facts; :func:`probe_interval_s` is
  the recovery lag the report shows beside the measured one (speed, never a target): the
  probe interval in force when the service comes back. Both read the breaker's probe
  schedule from the core, the one place it is computed.
"""
from __future__ import annotations

import math

from ..breaker import cooldown_s, outage_probe_bound, probe_schedule
from ..settings import MAX_COUNT, BreakerSettings

__all__ = ["probe_bound", "outage_call_bound", "drift_call_bound", "probe_interval_s",
           "calls_per_analysed_bound", "CALLS_TOLERANCE"]

#: How far past 1/(1-p) the AI calls per analysed photo may run.
CALLS_TOLERANCE = 1.1


def probe_bound(policy: BreakerSettings, outage_s: float, *, engines: int,
                fastest_call_s: float) -> int:
    """Calls the breaker admits during an outage of ``outage_s`` seconds (see above)."""
    before = engines * policy.window_s / max(fastest_call_s, 1e-9)
    share = policy.failure_rate / max(1.0 - policy.failure_rate, 1e-9)
    to_open = max(policy.min_calls, math.ceil(before * share)) + engines
    return to_open + outage_probe_bound(policy, outage_s, facts=MAX_COUNT)


def outage_call_bound(policy: BreakerSettings, outage_s: float, *, engines: int,
                      fastest_call_s: float, facts: int) -> int:
    """The calls allowed into an outage of ``outage_s``: the breaker's :func:`probe_bound`,
    never more than the facts (a subject that asks once per photo and then waits makes no
    more). The one place the drill computes it: the breaker's own probe schedule, once the
    core gives one, is read here."""
    return min(probe_bound(policy, outage_s, engines=engines, fastest_call_s=fastest_call_s),
               max(0, facts))


def drift_call_bound(policy: BreakerSettings, drift_s: float, *, engines: int,
                     facts: int) -> int:
    """The calls allowed into a model drifted for ``drift_s`` seconds before its fix (see
    above): the drifted model is an outage whose probes are real photos' calls."""
    return (policy.drift_calls + 2 * (max(1, engines) - 1)
            + outage_probe_bound(policy, drift_s, facts=max(0, facts)))


def probe_interval_s(policy: BreakerSettings, outage_s: float) -> float:
    """The recovery lag allowed after an outage of ``outage_s``: one probe interval, the one in
    force when the service comes back (the interval after the last round of the breaker's
    :func:`~fme_ai_resilience.breaker.probe_schedule` inside the outage; the circuit opens
    after the outage starts, so the interval really in force is never longer)."""
    return cooldown_s(policy, len(probe_schedule(policy, outage_s)) + 1)


def calls_per_analysed_bound(transient_rate: float) -> float:
    """The AI calls one analysed photo may cost: :data:`CALLS_TOLERANCE` x 1/(1-p)."""
    return CALLS_TOLERANCE / max(1.0 - transient_rate, 1e-9)
