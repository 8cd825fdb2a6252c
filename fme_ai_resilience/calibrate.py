"""Suggest breaker thresholds from the service's own history (``breaker calibrate``).

A fixed threshold is wrong for a service whose baseline already fails often: a model that
answers "cannot judge" for 15 % of photos would keep a 10 % breaker open forever (seed
section 5.2). :func:`suggest` takes the P95 of per-bucket failure and slow-call rates and adds
a margin; ``fme_ai_resilience.services.calibration`` reads the buckets from the call log.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .checks import finite
from .ledger import CallWindow
from .settings import BreakerSettings

__all__ = ["Suggestion", "percentile", "suggest"]


@dataclass(frozen=True)
class Suggestion:
    """Suggested thresholds and the baseline they came from (rates 0..1)."""

    failure_rate: float
    slow_call_rate: float
    baseline_failure_p95: float
    baseline_slow_p95: float
    buckets: int
    calls: int

    def as_settings(self) -> dict:
        """The suggestion as ``{"breaker.name": "value"}`` for ``resilience_config``."""
        return {"breaker.failure_rate": f"{self.failure_rate:.3f}",
                "breaker.slow_call_rate": f"{self.slow_call_rate:.3f}"}


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

    Buckets with fewer than ``min_calls`` calls are too noisy and are left out (all buckets
    are used when none has enough). With no history at all the defaults are suggested.
    """
    finite("margin", margin, minimum=0, maximum=1)
    used = [b for b in buckets if b.calls >= min_calls] or [b for b in buckets if b.calls > 0]
    defaults = BreakerSettings()
    if not used:
        return Suggestion(defaults.failure_rate, defaults.slow_call_rate, 0.0, 0.0, 0, 0)
    fail_p95 = percentile([b.failure_rate for b in used], 95)
    slow_p95 = percentile([b.slow_rate for b in used], 95)
    return Suggestion(
        failure_rate=round(min(ceiling, fail_p95 + margin), 3),
        slow_call_rate=round(min(ceiling, slow_p95 + margin), 3),
        baseline_failure_p95=fail_p95, baseline_slow_p95=slow_p95,
        buckets=len(used), calls=sum(b.calls for b in used))
