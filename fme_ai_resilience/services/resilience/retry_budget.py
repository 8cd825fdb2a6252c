"""The fleet-wide retry budget, applied through the ledger's call log.

:class:`FleetRetryGate` is what the retry engine consults (``allow_retry(now=...) -> bool``):
over a sliding window of ``ai_call_log`` a retry is allowed while the
:class:`~fme_ai_resilience.core.resilience.retry_budget.RetryBudget` has headroom; past it a
transient failure parks its task instead of retrying (docs/breaker.md).
"""
from __future__ import annotations

import math
from typing import Optional

from ...core.checks import finite
from ...core.resilience.retry_budget import RetryBudget
from ...core.config.settings import Settings
from ...store.protocols import CallLogRows

__all__ = ["FleetRetryGate"]


class FleetRetryGate:
    """The store-backed gate: ``allow_retry(now)`` for the retry engine's decision step.

    Every grant is decided on a fresh ``store.call_window(service, now - window_s, slow_s)``
    read (one indexed count), so engines never spend the same headroom from stale copies;
    a refusal is remembered for ``cache_ttl_s`` (on the clock of ``now``), so a retry storm
    against a dead service costs one read per engine per TTL. The fleet can overshoot only
    by retries several engines granted at the same moment, before any of them was logged
    (at most one per engine). ``slow_s`` only matters to the window's slow count.
    """

    def __init__(self, service: str, budget: Optional[RetryBudget] = None,
                 cache_ttl_s: float = 1.0, slow_s: float = 20.0, *, store: CallLogRows) -> None:
        finite("cache_ttl_s", cache_ttl_s, minimum=0)
        self.store = store
        self.service = service
        self.budget = budget or RetryBudget()
        self.cache_ttl_s = cache_ttl_s
        self.slow_s = slow_s
        self._refused_at = -math.inf

    @classmethod
    def from_settings(cls, service: str, settings: Settings, *,
                      store: CallLogRows) -> "FleetRetryGate":
        """The gate the settings describe: the ``retry.fleet_*`` budget, the breaker's cache
        time and slow-call threshold."""
        return cls(service, RetryBudget.from_settings(settings.retry),
                   cache_ttl_s=settings.breaker.cache_ttl_s, slow_s=settings.breaker.slow_call_s,
                   store=store)

    def __repr__(self) -> str:
        return f"FleetRetryGate(service={self.service!r}, budget={self.budget!r})"

    def allow_retry(self, *, now: float) -> bool:
        """Whether the fleet may spend one more retry at ``now``."""
        if 0 <= now - self._refused_at < self.cache_ttl_s:
            return False
        window = self.store.call_window(self.service, now - self.budget.window_s, self.slow_s)
        if self.budget.allows(window):
            return True
        self._refused_at = now
        return False
