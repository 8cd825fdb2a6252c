"""The fleet-wide retry budget: retries stay under a ratio of first attempts, across all engines.

:class:`RetryBudget` is the pure arithmetic: over a sliding window of ``ai_call_log`` (a
:class:`~fme_ai_resilience.core.ledger.CallWindow`), a retry is allowed while::

    retries < ratio * first_attempts + floor_per_s * window_s

The floor lets a quiet service still retry a little. The store-backed gate the retry engine
consults (``fme_ai_resilience.services.resilience.retry_budget.FleetRetryGate``) applies it: past
the budget a transient failure parks its task instead of retrying (docs/breaker.md).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..checks import finite, ratio
from ..ledger import CallWindow
from ..resilience.retry import RetrySettings

__all__ = ["RetryBudget"]


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
        ratio("ratio", self.ratio)
        finite("floor_per_s", self.floor_per_s, minimum=0)
        finite("window_s", self.window_s, above=0)

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
