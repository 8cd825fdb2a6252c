"""The fleet-wide retry budget: retries stay under a ratio of first attempts, across all engines.

:class:`RetryBudget` is the pure arithmetic: over a sliding window of ``ai_call_log`` (a
:class:`~fme_ai_resilience.ledger.CallWindow`), a retry is allowed while::

    retries < ratio * first_attempts + floor_per_s * window_s

The floor lets a quiet service still retry a little. :class:`FleetRetryGate` is the
store-backed gate the retry engine consults (``allow_retry(now) -> bool``): past the budget a
transient failure parks its task instead of retrying (shared/DESIGN.md section 4).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from .ledger import CallWindow
from .settings import RetrySettings, Settings

if TYPE_CHECKING:  # pragma: no cover
    from .store.base import Store


@dataclass(frozen=True)
class RetryBudget:
    """How many retries the whole fleet may spend per first attempt; pure.

    ``ratio`` is retries per first attempt (0..1); ``floor_per_s`` retries per second allowed
    whatever the traffic; ``window_s`` the sliding window, seconds.
    """

    ratio: float = 0.1
    floor_per_s: float = 0.2
    window_s: float = 60.0

    def __post_init__(self) -> None:
        if not (isinstance(self.ratio, (int, float)) and 0.0 <= self.ratio <= 1.0):
            raise ValueError(f"ratio must be between 0 and 1, got {self.ratio!r}")
        if not (isinstance(self.floor_per_s, (int, float)) and self.floor_per_s >= 0
                and math.isfinite(self.floor_per_s)):
            raise ValueError(f"floor_per_s must be >= 0, got {self.floor_per_s!r}")
        if not (isinstance(self.window_s, (int, float)) and self.window_s > 0
                and math.isfinite(self.window_s)):
            raise ValueError(f"window_s must be > 0, got {self.window_s!r}")

    @classmethod
    def from_settings(cls, retry: RetrySettings) -> "RetryBudget":
        """The budget configured by the ``retry.fleet_*`` settings."""
        return cls(ratio=retry.fleet_retry_ratio, floor_per_s=retry.fleet_retry_floor_per_s,
                   window_s=retry.fleet_window_s)

    def limit(self, window: CallWindow) -> float:
        """Retries the window may hold in total."""
        return self.ratio * max(0, window.first_attempts) + self.floor_per_s * self.window_s

    def headroom(self, window: CallWindow, extra_retries: int = 0) -> float:
        """Retries still allowed after ``window`` plus ``extra_retries`` not yet logged."""
        return self.limit(window) - (window.retries + extra_retries)

    def allows(self, window: CallWindow, extra_retries: int = 0) -> bool:
        """Whether one more retry fits in the budget."""
        return self.headroom(window, extra_retries) >= 1.0


class FleetRetryGate:
    """The store-backed gate: ``allow_retry(now)`` for the retry engine's decision step.

    Every grant is decided on a fresh ``store.call_window(service, now - window_s, slow_s)``
    read (one indexed count), so engines never spend the same headroom from stale copies;
    a refusal is remembered for ``cache_ttl_s`` (on the clock of ``now``), so a retry storm
    against a dead service costs one read per engine per TTL. The fleet can overshoot only
    by retries several engines granted at the same moment, before any of them was logged
    (at most one per engine). ``slow_s`` only matters to the window's slow count.
    """

    def __init__(self, store: "Store", service: str, budget: Optional[RetryBudget] = None,
                 cache_ttl_s: float = 1.0, slow_s: float = 20.0) -> None:
        if not cache_ttl_s >= 0:
            raise ValueError(f"cache_ttl_s must be >= 0, got {cache_ttl_s!r}")
        self.store = store
        self.service = service
        self.budget = budget or RetryBudget()
        self.cache_ttl_s = cache_ttl_s
        self.slow_s = slow_s
        self._refused_at = -math.inf

    @classmethod
    def from_settings(cls, store: "Store", service: str, settings: Settings) -> "FleetRetryGate":
        """The gate the settings describe: the ``retry.fleet_*`` budget, the breaker's cache
        time and slow-call threshold."""
        return cls(store, service, RetryBudget.from_settings(settings.retry),
                   cache_ttl_s=settings.breaker.cache_ttl_s, slow_s=settings.breaker.slow_call_s)

    def __repr__(self) -> str:
        return f"FleetRetryGate(service={self.service!r}, budget={self.budget!r})"

    def allow_retry(self, now: float) -> bool:
        """Whether the fleet may spend one more retry at ``now``."""
        if 0 <= now - self._refused_at < self.cache_ttl_s:
            return False
        window = self.store.call_window(self.service, now - self.budget.window_s, self.slow_s)
        if self.budget.allows(window):
            return True
        self._refused_at = now
        return False
