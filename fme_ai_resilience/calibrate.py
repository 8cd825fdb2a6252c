"""Suggest breaker thresholds from the service's own history (``breaker calibrate``).

A fixed threshold is wrong for a service whose baseline already fails often: a model that
answers "cannot judge" for 15 % of photos would keep a 10 % breaker open forever (seed
section 5.2). :func:`suggest` is pure: it takes the P95 of per-bucket failure and slow-call
rates and adds a margin. :func:`history` reads the buckets from the store's call log.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Sequence

from .ledger import CallWindow
from .settings import BreakerSettings

if TYPE_CHECKING:  # pragma: no cover
    from .store.base import Store


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
    if not 0 <= pct <= 100:
        raise ValueError(f"pct must be between 0 and 100, got {pct!r}")
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
    if not 0 <= margin <= 1:
        raise ValueError(f"margin must be between 0 and 1, got {margin!r}")
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


def history(store: "Store", service: str, days: float, now: float, slow_s: float,
            bucket_s: float = 3600.0) -> List[CallWindow]:
    """Per-bucket call windows over the last ``days`` days, oldest first.

    Built from cumulative ``store.call_window`` reads (calls since each bucket's start), so the
    store needs no extra query; ``days * 86400 / bucket_s`` reads.
    """
    if days <= 0 or bucket_s <= 0:
        raise ValueError(f"days and bucket_s must be > 0, got {days!r}, {bucket_s!r}")
    count = max(1, int(math.ceil(days * 86400.0 / bucket_s)))
    starts = [now - (count - i) * bucket_s for i in range(count)]
    cumulative = [store.call_window(service, t, slow_s) for t in starts]
    out = []
    for i, total in enumerate(cumulative):
        later = cumulative[i + 1] if i + 1 < count else CallWindow(0, 0, 0, 0)
        out.append(CallWindow(total.calls - later.calls, total.failures - later.failures,
                              total.slow - later.slow, total.retries - later.retries))
    return out


def calibrate(store: "Store", service: str, days: float, now: float,
              policy: BreakerSettings, margin: float = 0.1,
              bucket_s: float = 3600.0) -> Suggestion:
    """Suggest thresholds for ``service`` from the last ``days`` days of its call log."""
    buckets = history(store, service, days, now, policy.slow_call_s, bucket_s)
    return suggest(buckets, margin=margin, min_calls=policy.min_calls)
