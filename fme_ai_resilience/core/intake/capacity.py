"""How much backlog an engine pool drains within the latency promise (Little's law).

:func:`plan_capacity` turns engines, mean processing time and the latency promise into a
:class:`CapacityPlan`: the backlog watermark, the drain rate and the Retry-After that drains an
excess (docs/intake.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ..checks import count, finite

__all__ = ["CapacityPlan", "plan_capacity", "MAX_DRAIN_RETRY_AFTER_S"]

#: The longest Retry-After intake ever answers (24 h), however deep the backlog.
MAX_DRAIN_RETRY_AFTER_S = 24 * 3600


@dataclass(frozen=True)
class CapacityPlan:
    """What an engine pool can absorb within the latency promise (Little's law).

    ``watermark`` is the backlog the pool drains within the promise
    (``engines x acceptable_latency_s / mean_processing_s``, at least 1);
    ``drain_rate_per_s`` is tasks finished per second (``engines / mean_processing_s``).
    """

    engines: int
    mean_processing_s: float
    acceptable_latency_s: float
    watermark: int
    drain_rate_per_s: float

    def retry_after_s(self, backlog: int, drain_rate_per_s: Optional[float] = None) -> int:
        """Whole seconds (>= 1) to drain ``backlog``'s excess over the watermark.

        ``drain_rate_per_s`` is the measured rate (tasks/s); None or a non-positive value uses
        the planned rate. Capped at :data:`MAX_DRAIN_RETRY_AFTER_S`.
        """
        rate = self._rate(drain_rate_per_s)
        excess = max(0, int(backlog) - self.watermark)
        return int(min(MAX_DRAIN_RETRY_AFTER_S, max(1, math.ceil(excess / rate))))

    def saturating_backlog(self, drain_rate_per_s: Optional[float] = None) -> int:
        """A backlog from which on :meth:`retry_after_s` answers its cap, however deep: a
        count of the backlog may stop there without changing the answer."""
        return self.watermark + math.ceil(MAX_DRAIN_RETRY_AFTER_S * self._rate(drain_rate_per_s))

    def _rate(self, drain_rate_per_s: Optional[float]) -> float:
        """The measured drain rate when there is one (> 0), else the planned rate."""
        return drain_rate_per_s if drain_rate_per_s and drain_rate_per_s > 0 \
            else self.drain_rate_per_s


def plan_capacity(engines: int, mean_processing_s: float,
                  acceptable_latency_s: float) -> CapacityPlan:
    """The backlog watermark and drain rate of ``engines`` taking ``mean_processing_s`` each.

    8 engines, 20 s per task and a 120 s promise give a watermark of 48 tasks and 0.4 tasks/s.
    Raises :class:`ConfigurationError` for a non-positive input.
    """
    count("intake.engines", engines, minimum=1)
    finite("intake.mean_processing_s", mean_processing_s, above=0)
    finite("intake.latency_promise_s", acceptable_latency_s, above=0)
    # The small epsilon keeps 8 x 120 / 20 from landing on 47.999... through float rounding.
    watermark = max(1, int(math.floor(engines * acceptable_latency_s / mean_processing_s + 1e-9)))
    return CapacityPlan(engines, float(mean_processing_s), float(acceptable_latency_s),
                        watermark, engines / mean_processing_s)
