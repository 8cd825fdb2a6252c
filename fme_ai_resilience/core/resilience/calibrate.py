"""Suggest breaker thresholds from the service's own history (``breaker calibrate``).

A fixed threshold is wrong for a service whose baseline already fails often: a model that
answers "cannot judge" for 15 % of photos would keep a 10 % breaker open forever
(docs/breaker.md). :func:`suggest` takes the P95 of per-bucket failure rates and adds a margin,
and reports the slow-call rate's P95 beside it (slow calls never open the circuit: they lower
the fleet's concurrency); ``fme_ai_resilience.services.resilience.calibrate`` reads the buckets from
the call log.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..checks import count, finite
from ..errors import ConfigurationError
from ..ledger import CallWindow
from ..resilience.breaker import BreakerSettings

__all__ = ["Suggestion", "percentile", "suggest"]


@dataclass(frozen=True)
class Suggestion:
    """Suggested thresholds and the baseline they came from (rates 0..1).

    ``buckets`` and ``calls`` count what the suggestion was learned from: the buckets holding
    at least ``min_calls`` calls. ``calls_seen`` counts every call of the history and
    ``busiest_bucket`` the calls of its fullest bucket. With ``buckets`` 0 nothing was learned:
    the rates are the defaults and :meth:`as_settings` refuses.
    """

    failure_rate: float
    baseline_failure_p95: float
    baseline_slow_p95: float
    buckets: int
    calls: int
    calls_seen: int = 0
    busiest_bucket: int = 0
    min_calls: int = 0

    @property
    def learned(self) -> bool:
        """Whether at least one bucket held enough calls to learn from."""
        return self.buckets > 0

    def shortfall(self, over: str = "") -> str:
        """Why nothing was learned, naming the calls needed ("" when something was); ``over``
        describes the history (" in the last 7 days")."""
        if self.learned:
            return ""
        if not self.calls_seen:
            return f"no calls{over}"
        return (f"{self.calls_seen} calls{over}, at most {self.busiest_bucket} in one hour: "
                f"calibrating needs at least {self.min_calls} calls in an hour "
                f"(breaker.min_calls)")

    def as_settings(self) -> dict:
        """The suggestion as ``{"breaker.name": "value"}`` for ``resilience_config``.

        Raises :class:`ConfigurationError` when nothing was learned: thresholds every engine
        shares are never stored from a handful of calls.
        """
        if not self.learned:
            raise ConfigurationError("history", self.calls_seen, self.shortfall())
        return {"breaker.failure_rate": f"{self.failure_rate:.3f}"}


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (``pct`` 0..100) of ``values``; 0 for no values."""
    finite("pct", pct, minimum=0, maximum=100)
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def suggest(buckets: Sequence[CallWindow], margin: float = 0.1, min_calls: int = 20,
            ceiling: float = 0.95) -> Suggestion:
    """Thresholds = P95 of the per-bucket rates + ``margin``, capped at ``ceiling``.

    Buckets with fewer than ``min_calls`` calls are too noisy and are left out; when none has
    enough (a thin or empty history) nothing is learned: the defaults come back with
    ``buckets`` 0, and :meth:`Suggestion.as_settings` refuses to store them.
    """
    finite("margin", margin, minimum=0, maximum=1)
    count("min_calls", min_calls, minimum=1)
    used = [b for b in buckets if b.calls >= min_calls]
    seen = {"calls_seen": sum(b.calls for b in buckets),
            "busiest_bucket": max((b.calls for b in buckets), default=0), "min_calls": min_calls}
    if not used:
        defaults = BreakerSettings()
        return Suggestion(defaults.failure_rate, 0.0, 0.0, 0, 0, **seen)
    fail_p95 = percentile([b.failure_rate for b in used], 95)
    slow_p95 = percentile([b.slow_rate for b in used], 95)
    return Suggestion(
        failure_rate=round(min(ceiling, fail_p95 + margin), 3),
        baseline_failure_p95=fail_p95, baseline_slow_p95=slow_p95,
        buckets=len(used), calls=sum(b.calls for b in used), **seen)
