"""A baseline's gauges while it runs: jobs queued, engines busy, transfers in flight.

:class:`Progress` is what the drill's sampler reads (thread-safe, each gauge with its peak);
it describes a run for the timeline and is never read for a judged figure.
"""
from __future__ import annotations

import threading
import time
from typing import Tuple

__all__ = ["Progress", "Both"]


def _gauge(index: int, peak: bool) -> property:
    """A read-only view of one of :class:`Progress`'s gauges (now, or its peak)."""
    return property(lambda self: self._read(index, peak))


class Progress:
    """What a baseline's run is doing now, thread-safe, for the drill's sampler.

    ``queued``: jobs waiting for an engine; ``busy``: engines working on a job; ``in_flight``:
    HTTP transfers in progress; ``backlog``: deliveries not yet done (queued + busy). Each has
    its peak (``peak_queued``...). ``busy_s``: the engine-seconds held so far (real seconds,
    the busy engines summed over time).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now = [0, 0, 0, 0]                    # queued, busy, in_flight, backlog
        self._peak = [0, 0, 0, 0]
        self._busy_s = 0.0
        self._since = time.monotonic()

    def __repr__(self) -> str:
        queued, busy, in_flight = self.sample()
        return f"Progress(queued={queued}, busy={busy}, in_flight={in_flight})"

    def change(self, *, queued: int = 0, busy: int = 0, in_flight: int = 0) -> None:
        """Move the gauges by these amounts, at once."""
        with self._lock:
            now = time.monotonic()
            self._busy_s += self._now[1] * (now - self._since)
            self._since = now
            for i, delta in enumerate((queued, busy, in_flight, queued + busy)):
                self._now[i] += delta
                self._peak[i] = max(self._peak[i], self._now[i])

    def sample(self) -> Tuple[int, int, int]:
        """``(queued, busy, in_flight)`` now."""
        with self._lock:
            return self._now[0], self._now[1], self._now[2]

    @property
    def busy_s(self) -> float:
        """Engine-seconds held so far (real seconds)."""
        with self._lock:
            return self._busy_s + self._now[1] * (time.monotonic() - self._since)

    def _read(self, index: int, peak: bool) -> int:
        with self._lock:
            return (self._peak if peak else self._now)[index]

    queued = _gauge(0, False)
    busy = _gauge(1, False)
    in_flight = _gauge(2, False)
    backlog = _gauge(3, False)
    peak_queued = _gauge(0, True)
    peak_busy = _gauge(1, True)
    peak_in_flight = _gauge(2, True)
    peak_backlog = _gauge(3, True)



class Both(Progress):
    """The run's own gauges (its peaks) and the caller's, moved together."""

    def __init__(self, own: Progress, theirs: Progress) -> None:
        super().__init__()
        self._pair = (own, theirs)

    def change(self, *, queued: int = 0, busy: int = 0, in_flight: int = 0) -> None:
        for gauges in self._pair:
            gauges.change(queued=queued, busy=busy, in_flight=in_flight)

    def sample(self) -> Tuple[int, int, int]:
        return self._pair[0].sample()
