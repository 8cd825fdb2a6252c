"""The drill's named scenarios, and the plan of one run: which features, which deliveries, when.

A :class:`Scenario` says, in production seconds, how submissions arrive (all at once after an
offline sync, or spread out), what goes wrong on the way (redeliveries, features re-created
with new GlobalIDs and the same photos, photos gone, webhooks that never arrive) and how the
Vision AI misbehaves (a :class:`~fme_ai_resilience.drill.standins.FaultSchedule`). Every
subject of a drill (the library and each baseline) runs the same :class:`Plan`: made once from
the scenario and the seed, on stand-ins seeded alike, so they meet the same photos, the same
faults and the same deliveries at the same times.

With :class:`LayerHooks` (the ``layerhooks`` scenario) no app webhook is delivered: the
features reach the layer at the plan's times and the layer's own webhook notifies each
subject of its changes on a schedule (:mod:`~fme_ai_resilience.drill.layer_hooks`).

``time_scale`` (real seconds per production second) compresses a run: the stand-ins' schedule,
the deliveries' times and every wait and window of the settings the drill runs with are
multiplied by it.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from ..core.errors import ConfigurationError
from .standins import FaultSchedule

__all__ = ["Scenario", "SCENARIOS", "ALL", "Scheduled", "Plan", "plan_deliveries",
           "LayerHooks"]


@dataclass(frozen=True)
class LayerHooks:
    """How the layer's webhook notifies every subject instead of the app's (production s).

    ``interval_s`` is the webhook's ``scheduleInfo`` interval (ArcGIS's minimum is 30 s);
    ``notify_layers`` the layers each batch is notified for (a form with a repeat edits two:
    two notifications per batch, naming the same changes); the first ``changes_failures``
    ``extractChanges`` jobs of a subject's run fail; every job answers asynchronously, pending
    for ``polls_pending`` status polls.
    """

    interval_s: float = 30.0
    notify_layers: Tuple[int, ...] = (0, 1)
    changes_failures: int = 1
    polls_pending: int = 2
    style: str = "online-json"

    def __post_init__(self) -> None:
        if not (self.interval_s > 0) or not self.notify_layers:
            raise ConfigurationError("layer_hooks", self, "needs an interval above 0 and a "
                                                          "layer to notify")

    def next_notification_s(self, at_s: float) -> float:
        """When a change at ``at_s`` is notified at the latest: the schedule's next tick."""
        return math.ceil(max(at_s, 0.0) / self.interval_s + 1e-9) * self.interval_s


@dataclass(frozen=True)
class Scenario:
    """A named drill. Times are production seconds; rates are shares of the submissions."""

    name: str
    summary: str
    faults: FaultSchedule
    burst: bool = True                  # all at once (offline sync) or spread over spread_s
    spread_s: float = 120.0
    redelivery_rate: float = 0.0        # deliveries sent again under a new delivery id
    recreate_rate: float = 0.0          # features re-created: new GlobalIDs, the same photos
    missing_photo_rate: float = 0.0     # photos the host answers 404 for
    never_delivered: int = 0            # webhooks lost on the way: only the layer has them
    kills_at_s: Tuple[float, ...] = ()   # each: SIGKILL an engine at a random stage boundary
    terminate_connections_at_s: Optional[float] = None   # PostgreSQL backends (chaos)
    edit_refusals: Tuple[Tuple[float, float], ...] = ()  # the layer refuses every edit
    meets: str = ""                     # what a real deployment meets that this plays
    layer_hooks: Optional[LayerHooks] = None   # no app webhook: the layer's, on a schedule

    @property
    def outage(self) -> Optional[Tuple[float, float]]:
        return self.faults.outages[0] if self.faults.outages else None

    @property
    def drift(self) -> Optional[Tuple[float, float]]:
        """The model's drift, from its start to the operator's fix (None: no fix)."""
        f = self.faults
        if f.drift_from_s is None or f.drift_until_s is None:
            return None
        return (f.drift_from_s, f.drift_until_s)

    def submitted_at_s(self, index: int, count: int) -> float:
        """When the ``index``-th of ``count`` first submissions is sent (production s): all
        at once in a burst, else spread evenly over ``spread_s``."""
        return 0.0 if self.burst else self.spread_s * index / count

    @property
    def faults_end_s(self) -> float:
        """When the scenario's last fault ends: an outage, the drifted model's fix, the
        layer's refusals, the slowdown's last point, the last kill (0: none ends)."""
        f = self.faults
        ends = [end for _, end in f.outages] + [end for _, end in self.edit_refusals]
        ends += [at for at, _ in f.latency_profile] + list(self.kills_at_s)
        if self.drift is not None:
            ends.append(self.drift[1])
        return max(ends, default=0.0)

    @property
    def transient_rate(self) -> float:
        """The share of calls that fail and succeed when asked again."""
        f = self.faults
        return f.error_rate + f.html_502_rate + f.truncated_rate


_LATENCY = dict(latency_s=2.0, latency_jitter_s=2.0)   # a vision model: 2-4 s a call

SCENARIOS: Dict[str, Scenario] = {s.name: s for s in (
    Scenario("calm", "submissions spread over two minutes, a healthy Vision AI",
             FaultSchedule(**_LATENCY), burst=False,
             meets="an ordinary day: crews submit as they go"),
    Scenario("storm", "a crew's phones back online: every submission at once, redeliveries, "
                      "re-created features, missing photos, lost webhooks, 10 % flaky calls",
             FaultSchedule(error_rate=0.06, html_502_rate=0.02, truncated_rate=0.02,
                           **_LATENCY),
             redelivery_rate=0.1, recreate_rate=0.05, missing_photo_rate=0.02,
             never_delivered=2,
             meets="a crew back in coverage after a day offline: Survey123 syncs every "
                   "submission at once"),
    Scenario("outage", "the Vision AI down for 90 s while submissions keep coming",
             FaultSchedule(outages=[(30.0, 120.0)], **_LATENCY), burst=False,
             spread_s=150.0, meets="a regional incident of the AI provider"),
    Scenario("ratelimit", "a burst against a Vision AI that allows one call a second",
             FaultSchedule(rate_limit_per_s=1.0, rate_limit_burst=2, **_LATENCY),
             meets="a subscription tier's requests-per-second limit"),
    Scenario("drift", "the Vision AI changes its JSON halfway through; at 150 s an operator "
                      "fixes the model and requeues the FORMAT dead letters",
             FaultSchedule(drift_from_s=60.0, drift_until_s=150.0, **_LATENCY), burst=False,
             meets="a model version rolled out under the same endpoint"),
    Scenario("chaos", "the storm, a short outage, engines killed at random stage boundaries "
                      "and (on PostgreSQL) the database connections cut",
             FaultSchedule(error_rate=0.06, html_502_rate=0.02, truncated_rate=0.02,
                           outages=[(20.0, 50.0)], **_LATENCY),
             redelivery_rate=0.1, recreate_rate=0.05, missing_photo_rate=0.02,
             never_delivered=2, kills_at_s=(6.0, 12.0, 24.0, 40.0), terminate_connections_at_s=15.0,
             meets="an FME Flow host rebooted or an engine crashed mid-job"),
    Scenario("slow", "a Vision AI slower than the default 20 s time-to-first-byte, 25-35 s a "
                     "call, well inside the task's budget",
             FaultSchedule(latency_s=25.0, latency_jitter_s=10.0), burst=False,
             meets="a model under load: queueing and thinking, answering every call, late"),
    Scenario("slowdown", "the Vision AI slows down gradually from 2 s to 35 s a call over two "
                         "minutes, stays slow a minute, and recovers",
             FaultSchedule(latency_profile=((20.0, 2.0), (140.0, 35.0), (200.0, 35.0),
                                            (290.0, 3.0)), latency_jitter_s=1.0),
             burst=False, spread_s=240.0,
             meets="a provider region filling up through the morning, then scaled out"),
    Scenario("longoutage", "the Vision AI down for five minutes while submissions keep "
                           "coming",
             FaultSchedule(outages=[(60.0, 360.0)], **_LATENCY), burst=False, spread_s=420.0,
             meets="a provider's incident of minutes, while crews keep submitting"),
    Scenario("readonly", "the layer refuses every edit for three minutes while photos keep "
                         "coming",
             FaultSchedule(**_LATENCY), burst=False, spread_s=150.0,
             edit_refusals=((20.0, 200.0),),
             meets="a hosted feature layer being overwritten, in maintenance or overloaded"),
    Scenario("cutoff", "a third of the Vision AI's answers cut short mid-body (the connection "
                       "drops, or the body ends early)",
             FaultSchedule(truncated_rate=0.3, **_LATENCY),
             meets="a proxy or load balancer dropping long responses, a flaky mobile "
                   "backhaul"),
    Scenario("quota", "a burst against a per-minute quota of 30 calls: each 429 says to "
                      "retry when the minute ends, up to 60 s",
             FaultSchedule(rate_limit_per_s=0.5, rate_window_s=60.0, **_LATENCY),
             meets="a provider's requests-per-minute quota (Azure, OpenAI) and its "
                   "Retry-After"),
    Scenario("layerhooks", "photos announced only by the layer's webhook: thin, batched "
                           "notifications every 30 s, two per batch (a form with a repeat), "
                           "read through extractChanges, whose first job fails",
             FaultSchedule(**_LATENCY), burst=False, spread_s=120.0,
             layer_hooks=LayerHooks(),
             meets="an ArcGIS Online layer webhook instead of the app's: Field Maps and "
                   "Survey123 edits alike, notified in batches on a schedule"),
)}
#: ``drill --scenario all`` runs every scenario, in this order.
ALL = "all"


@dataclass(frozen=True)
class Scheduled:
    """One webhook delivery of a plan: when (real seconds after the start) and what."""

    at_s: float
    body: dict
    redelivery: bool = False


@dataclass(frozen=True)
class Plan:
    """What one subject meets: the deliveries in time order and the facts behind them.

    ``facts`` are the photos of the distinct submissions by SHA-256 (a re-created feature
    carries the same photos: the same facts); ``never_delivered`` the features only the layer
    holds; ``outage`` the Vision AI's outage in real seconds after the start.
    """

    deliveries: Tuple[Scheduled, ...]
    facts: Tuple[str, ...]
    features: int
    key_facts: Dict[str, str] = field(default_factory=dict)   # task key -> photo SHA-256
    never_delivered: Tuple[str, ...] = ()
    missing_photos: Tuple[str, ...] = ()
    outage: Optional[Tuple[float, float]] = None


def plan_deliveries(scenario: Scenario, bodies: Sequence[dict], *, seed: int,
                    time_scale: float) -> List[Scheduled]:
    """The deliveries of ``bodies`` (first deliveries, in order) under ``scenario``: their
    times, and the redeliveries drawn from the seed, each a little after its first."""
    if not bodies:
        raise ConfigurationError("submissions", 0, "a drill needs at least one submission")
    rng = random.Random(f"deliveries:{seed}:{scenario.name}")
    out: List[Scheduled] = []
    n = len(bodies)
    for i, body in enumerate(bodies):
        at = scenario.submitted_at_s(i, n)
        out.append(Scheduled(round(at * time_scale, 6), body))
        if rng.random() < scenario.redelivery_rate:
            later = at + rng.uniform(1.0, 10.0)
            out.append(Scheduled(round(later * time_scale, 6), body, redelivery=True))
    return sorted(out, key=lambda s: s.at_s)
