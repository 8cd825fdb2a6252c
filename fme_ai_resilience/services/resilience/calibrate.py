"""Breaker thresholds suggested from a service's own call history (``breaker calibrate``).

:func:`history` reads per-bucket call windows from the ledger's call log; :func:`calibrate`
hands them to the pure :func:`fme_ai_resilience.core.resilience.calibrate.suggest`.
"""
from __future__ import annotations

import math
from typing import List, Optional

from ...core.resilience.calibrate import Suggestion, suggest
from ...core.checks import finite
from ...core.ledger import CallWindow
from ...core.resilience.breaker import BreakerSettings
from ...store.protocols import CallLogRows

__all__ = ["history", "calibrate"]


def history(service: str, days: float, slow_s: float, bucket_s: float = 3600.0, *,
            store: CallLogRows, now: float) -> List[CallWindow]:
    """Per-bucket call windows over the last ``days`` days, oldest first.

    Built from cumulative ``store.call_window`` reads (calls since each bucket's start), so the
    store needs no extra query; ``days * 86400 / bucket_s`` reads.
    """
    finite("days", days, above=0)
    finite("bucket_s", bucket_s, above=0)
    buckets = max(1, int(math.ceil(days * 86400.0 / bucket_s)))
    starts = [now - (buckets - i) * bucket_s for i in range(buckets)]
    cumulative = [store.call_window(service, t, slow_s) for t in starts]
    out = []
    for i, total in enumerate(cumulative):
        later = cumulative[i + 1] if i + 1 < buckets else CallWindow(0, 0, 0, 0)
        out.append(CallWindow(total.calls - later.calls, total.failures - later.failures,
                              total.slow - later.slow, total.retries - later.retries))
    return out


def calibrate(service: str, days: float = 7.0, policy: Optional[BreakerSettings] = None,
              margin: float = 0.1, bucket_s: float = 3600.0, *, store: CallLogRows,
              now: float) -> Suggestion:
    """Suggest thresholds for ``service`` from the last ``days`` days of its call log."""
    policy = policy or BreakerSettings()
    buckets = history(service, days, policy.slow_call_s, bucket_s, store=store, now=now)
    return suggest(buckets, margin=margin, min_calls=policy.min_calls)
