"""Time as an injected dependency: the system clock, a fake one for tests, and deadlines.

Nothing in the pure core reads the time; it is handed a :class:`Clock` (or a ``now`` value).
``now()`` is wall-clock epoch seconds (for the ledger, shared across hosts); ``monotonic()`` is
for measuring durations inside one process; ``sleep()`` is the only place that waits.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import List, Protocol

from .checks import finite

__all__ = ["Clock", "SystemClock", "FakeClock", "Deadline"]


class Clock(Protocol):
    """Where time comes from."""

    def now(self) -> float:
        """Wall-clock time in epoch seconds (UTC)."""

    def monotonic(self) -> float:
        """A clock that never goes backwards, in seconds, for measuring durations."""

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (no-op for zero or negative values)."""

    # A clock may say ``shared = False`` (FakeClock): it serves one thread, and code that would
    # work in threads works one thing at a time on it. Absent, it is shared.


class SystemClock:
    """The real clock."""

    #: Several threads may share it: each one's sleep waits on its own.
    shared = True

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def __repr__(self) -> str:
        return "SystemClock()"


class FakeClock:
    """A clock that only moves when told to; ``sleep`` advances it instantly.

    Every sleep is recorded in :attr:`sleeps`, so tests can assert how long code would have
    waited without waiting. It serves one thread (``shared`` is False): a thread's sleep moves
    every other thread's time, so code that would work in threads works one thing at a time
    on it (the processor works one task at a time), and a test stays deterministic.
    """

    shared = False

    def __init__(self, start: float = 1_790_000_000.0) -> None:
        self._now = float(start)
        self._mono = 0.0
        self.sleeps: List[float] = []

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if seconds > 0:
            self.advance(seconds)

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by ``seconds`` (must not be negative)."""
        # also refuses NaN, which would poison every later reading
        finite("seconds", seconds, minimum=0)
        self._now += seconds
        self._mono += seconds

    def __repr__(self) -> str:
        return f"FakeClock(now={self._now!r}, slept={sum(self.sleeps):.3f}s)"


@dataclass(frozen=True)
class Deadline:
    """A point in time after which work on a task stops, from ``start`` plus ``budget_s``.

    Both values are on the same clock as the ``now`` later passed to :meth:`remaining`.
    """

    start: float
    budget_s: float

    def __post_init__(self) -> None:
        finite("budget_s", self.budget_s, minimum=0)

    @property
    def expires_at(self) -> float:
        return self.start + self.budget_s

    def remaining(self, *, now: float) -> float:
        """Seconds left at ``now`` (never negative)."""
        return max(0.0, self.expires_at - now)

    def expired(self, *, now: float) -> bool:
        return now >= self.expires_at
