"""Time budgets: how long one call may take, phase by phase, and how long a task may take.

``TimeoutBudget`` is the per-call budget the Vision AI client enforces (connect, TLS, time to
first byte, body read). Task-level arithmetic (worst case of a retry policy, capacity planning)
builds on it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

from .errors import ConfigurationError


@dataclass(frozen=True)
class TimeoutBudget:
    """Per-call time limits in seconds, one per phase (seed section 3.1).

    ``connect_s`` bounds the TCP handshake, ``tls_s`` the TLS handshake, ``ttfb_s`` the wait for
    the response headers (server queue plus inference), ``body_s`` reading the response body.
    """

    connect_s: float = 3.0
    tls_s: float = 3.0
    ttfb_s: float = 20.0
    body_s: float = 4.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigurationError(f"timeouts.{f.name}", value, "must be a finite number > 0")

    @property
    def total_s(self) -> float:
        """The longest one call can take when every phase uses its whole budget."""
        return self.connect_s + self.tls_s + self.ttfb_s + self.body_s


def task_budget_s(latency_promise_s: float) -> float:
    """The time a task may take end to end: 1.5 x the business latency promise (seed 3.2)."""
    if not (math.isfinite(latency_promise_s) and latency_promise_s > 0):
        raise ConfigurationError("intake.latency_promise_s", latency_promise_s, "must be > 0")
    return 1.5 * latency_promise_s
