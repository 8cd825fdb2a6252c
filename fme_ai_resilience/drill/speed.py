"""Speed, side by side: the library beside the strongest peer in the same run, and beside
what the world allows.

A drill's exit code is decided by what is counted at the stand-ins (nothing lost, paid
once, written once, calls within their bounds: :mod:`~fme_ai_resilience.drill.invariants`).
How fast a subject drains is a wall-clock figure of one run on a machine doing other work,
so it is compared, not bounded (docs/drill.md, "Speed, side by side"):

* against the strongest peer (:data:`STRONGEST_PEER`, ``sweep``) of the same run: the drain
  (the start to the moment the last photo reached the state it ends in), the time to result
  (each photo's submission to its analysis on the layer, median and 95th percentile) and the
  engine time per analysed photo (engine-seconds held, in production seconds: what FME Flow
  licenses);
* against the physical limit (:func:`physical_limit_s`): nothing drains before the last
  photo arrives (and, with a layer webhook, is notified) and one call answers it, before the
  service's rate limit lets every photo through, before an outage ends, the drifted model is
  fixed or the layer takes edits again;
  the Vision AI stand-in works on any number of calls at once, so its capacity is no limit;
  beside it, what each subject's own schedule adds (:func:`schedule_waits`).

:func:`comparison` gives the lines the table, the page and the command print; where the peer
analysed as many photos as the library, :func:`plainly` says so and names what the
library's case then rests on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from .chaos import Kill
from .figures import seconds
from .report import DrillReport, SubjectResult
from .scenarios import Plan, Scenario
from .schedule import SWEEP_PERIOD_S, WS03_PERIOD_S, first_mark_after

__all__ = ["STRONGEST_PEER", "SAME_BAND", "physical_limit_s", "schedule_waits", "peer",
           "Comparison", "comparison", "plainly", "pace"]

#: The strongest peer an FME author builds: the library is compared with it.
STRONGEST_PEER = "sweep"
#: Two drains within this factor of each other are "as fast": one run's noise on a shared
#: machine.
SAME_BAND = 1.15


def physical_limit_s(scenario: Scenario, plan: Plan, *, facts: int,
                     time_scale: float) -> Tuple[float, str]:
    """The least time any subject can drain ``plan`` in (real seconds), and what binds it."""
    f = scenario.faults
    last = max((d.at_s for d in plan.deliveries), default=0.0) / time_scale
    call = f.latency_at(last) + f.latency_jitter_s / 2
    limits = [(last + call, "the last arrival and one call")]
    if scenario.layer_hooks is not None:   # nothing is announced before the webhook's tick
        limits.append((scenario.layer_hooks.next_notification_s(last) + call,
                       "the last arrival's notification and one call"))
    if f.rate_limit_per_s:
        limits.append((facts / f.rate_limit_per_s + call, "the service's rate limit"))
    if f.outages:
        limits.append((max(e for _, e in f.outages) + call, "the outage's end and one call"))
    if scenario.drift is not None:
        limits.append((scenario.drift[1] + call, "the model's fix and one call"))
    if scenario.edit_refusals:
        limits.append((max(e for _, e in scenario.edit_refusals),
                       "the layer taking edits again"))
    bound, why = max(limits)
    return round(bound * time_scale, 3), why


def schedule_waits(scenario: Scenario, plan: Plan, *, kills: Sequence[Kill], seed: int,
                   time_scale: float, lease_s: float) -> List[str]:
    """What each subject's own schedule adds to its drain beyond the physical limit: what
    no webhook brought waits for a scheduled pass (WS-03's, the sweep's), and a task whose
    engine was killed waits out its lease and WS-03's pass after it (a baseline's killed job
    is resubmitted at once)."""
    f = scenario.faults
    call = f.latency_s + f.latency_jitter_s / 2
    out = []
    if plan.never_delivered:
        ws03 = first_mark_after(WS03_PERIOD_S, 0.0, seed=seed) + call
        sweep = first_mark_after(SWEEP_PERIOD_S, 0.0, seed=seed) + call
        out.append(f"what no webhook brought waits for a scheduled pass: the library's "
                   f"WS-03 and one call by {seconds(ws03 * time_scale)}, the sweep's by "
                   f"{seconds(sweep * time_scale)}")
    if kills:
        last = max(k.at_s for k in kills) + lease_s
        reaped = first_mark_after(WS03_PERIOD_S, last, seed=seed) + call
        out.append(f"a task of a killed library engine waits out its lease ({lease_s:g} s "
                   f"production) and WS-03's next pass: the last by {seconds(reaped * time_scale)}"
                   "; a baseline's killed job is resubmitted at once")
    return out


def peer(report: DrillReport) -> Optional[SubjectResult]:
    """The strongest peer that ran: ``sweep``, else the baseline that analysed most."""
    ran = [s for s in report.baselines.values() if s.skipped is None]
    chosen = report.baselines.get(STRONGEST_PEER)
    if chosen is not None and chosen.skipped is None:
        return chosen
    return max(ran, key=lambda s: (s.analysed, -(s.drain_s or math.inf)), default=None)


def pace(mine: Optional[float], theirs: Optional[float]) -> str:
    """``mine`` against ``theirs`` (times): ``0.85x, faster``, ``1.02x, as fast``..."""
    if mine is None or theirs is None or theirs <= 0 or not math.isfinite(mine):
        return "not comparable"
    ratio = mine / theirs
    word = ("as fast" if 1 / SAME_BAND <= ratio <= SAME_BAND
            else "faster" if ratio < 1 else "slower")
    return f"{ratio:.2f}x, {word}"


@dataclass(frozen=True)
class Comparison:
    """The library's speed beside the peer's and the limit's, as lines to print."""

    peer: Optional[str]
    lines: Tuple[str, ...]


def _pair(a: Optional[float], b: Optional[float]) -> str:
    return f"{seconds(a)} / {seconds(b)}"


def comparison(report: DrillReport) -> Comparison:
    """The speed lines of ``report`` (see the module); never a target."""
    lib, other = report.library, peer(report)
    name = other.name if other is not None else None
    limit = report.drain_limit_s
    lines: List[str] = []
    against = f" beside {name} {seconds(other.drain_s)} ({pace(lib.drain_s, other.drain_s)})" \
        if other is not None else ""
    lines.append(f"drain {seconds(lib.drain_s)}{against}; the limit {seconds(limit)} "
                 f"({report.limit_why})")
    lines += list(report.waits)
    if other is not None:
        lines.append("time to result, median / 95th percentile: "
                     f"{_pair(lib.time_to_result_p50_s, lib.time_to_result_p95_s)} beside "
                     f"{_pair(other.time_to_result_p50_s, other.time_to_result_p95_s)}")
        lines.append(f"engine time per analysed photo: {seconds(lib.engine_s_per_analysed)} "
                     f"beside {seconds(other.engine_s_per_analysed)} (production seconds)")
    if report.outage is not None:
        lines.append(f"recovery lag {seconds(lib.recovery_lag_s)}, one probe interval "
                     f"{seconds(report.probe_interval_s)}"
                     + (f"; {name} {seconds(other.recovery_lag_s)}" if other is not None
                        else ""))
    return Comparison(name, tuple(lines))


def plainly(report: DrillReport) -> Optional[str]:
    """When the strongest peer analysed as many photos as the library, a sentence saying so
    and what the library's case rests on then; None otherwise."""
    lib, other = report.library, peer(report)
    if other is None or other.analysed < lib.analysed:
        return None
    how = "as many photos as" if other.analysed == lib.analysed else "more photos than"
    return (f"{other.name} analysed {how} the library ({other.analysed} of "
            f"{other.analysable}, the library {lib.analysed}): the library's case here rests "
            f"on cost ({lib.ai_calls} AI calls against {other.ai_calls}, "
            f"{lib.duplicate_analyses} paid twice against {other.duplicate_analyses}), "
            f"calls into outages ({lib.outage_ai_calls} against {other.outage_ai_calls}), "
            f"calls in flight ({lib.peak_concurrent_calls} against "
            f"{other.peak_concurrent_calls}) and time to result (median "
            f"{seconds(lib.time_to_result_p50_s)} against "
            f"{seconds(other.time_to_result_p50_s)})")
