"""FME Flow's engine capacity as intake sees it: a cached answer, refreshed off the request path.

:class:`HealthCache` never makes its caller wait for FME Flow. ``get()`` answers at once from
the last probe's result; when that result is older than ``cache_ttl_s`` (or there is none)
it starts one probe in a background thread and still answers at once: with the previous
result while it is at most ``max_stale_s`` past its freshness, otherwise with "not known"
(``reachable=False``, ``has_capacity=True``: the ledger holds the work whatever Flow's
state, so a Flow that cannot be asked never turns submissions away). One probe runs at a
time; the probe itself runs under a total deadline (the client bounds every phase of every
call), and a probe that overruns it is reported as such, never waited for.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable, Optional

from ...core.checks import count, finite
from ...core.clock import Clock

__all__ = ["FlowHealth", "HealthCache", "NOT_YET", "OVERDUE", "CLOSED"]

log = logging.getLogger("fme_ai_resilience.flow")

#: Why an answer says nothing of Flow: no probe has finished yet.
NOT_YET = "no answer from FME Flow yet"
#: Why an answer says nothing of Flow: the probe in flight overran its deadline.
OVERDUE = "the FME Flow health probe overran its deadline"
#: Why an answer says nothing of Flow: the client was closed.
CLOSED = "the FME Flow client is closed"


@dataclass(frozen=True)
class FlowHealth:
    """What FME Flow reported at ``checked_at`` (monotonic seconds), and the verdict.

    ``has_capacity`` is False only when Flow was reached and reports no engine at all, or
    every engine busy with at least ``max_queued_per_engine`` x engines jobs waiting.
    """

    reachable: bool
    has_capacity: bool
    queued: int = 0
    running: int = 0
    engines: int = 0
    busy_engines: int = 0
    api_version: Optional[str] = None
    checked_at: float = 0.0
    error: Optional[str] = None

    def __post_init__(self) -> None:
        for field in ("queued", "running", "engines", "busy_engines"):
            count(field, getattr(self, field))

    @property
    def idle_engines(self) -> int:
        return max(0, self.engines - self.busy_engines)


def unknown(error: str, *, at: float) -> FlowHealth:
    """An answer that says nothing of Flow and turns no submission away."""
    return FlowHealth(reachable=False, has_capacity=True, checked_at=at, error=error)


class HealthCache:
    """The last answer of ``probe`` (a callable returning a :class:`FlowHealth`), refreshed in
    the background; see the module docstring. ``deadline_s`` is the probe's total budget."""

    def __init__(self, probe: Callable[[], FlowHealth], *, clock: Clock, cache_ttl_s: float,
                 max_stale_s: float, deadline_s: float) -> None:
        finite("cache_ttl_s", cache_ttl_s, minimum=0)
        finite("max_stale_s", max_stale_s, minimum=0)
        finite("deadline_s", deadline_s, minimum=0.001)
        self._probe = probe
        self._clock = clock
        self.cache_ttl_s = cache_ttl_s
        self.max_stale_s = max_stale_s
        self.deadline_s = deadline_s
        self._cached: Optional[FlowHealth] = None
        self._started: Optional[float] = None  # when the probe in flight started
        self._idle = threading.Event()
        self._idle.set()
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        """Start no probe any more (one in flight ends by its deadline); ``get()`` then says
        nothing of Flow."""
        with self._lock:
            self._closed = True

    def get(self) -> FlowHealth:
        """The answer now, never waiting for Flow and never raising."""
        try:
            return self._get()
        except Exception as exc:  # noqa: BLE001 - the promise: intake never fails on Flow
            log.warning("FME Flow health: %s", type(exc).__name__)
            return unknown(type(exc).__name__, at=0.0)

    def _get(self) -> FlowHealth:
        now = self._clock.monotonic()
        with self._lock:
            if self._closed:
                return unknown(CLOSED, at=now)
            cached = self._cached
            age = None if cached is None else now - cached.checked_at
            if age is not None and age < self.cache_ttl_s:
                return cached  # type: ignore[return-value]
            if self._started is None:
                self._start(started=now)
            elif now - self._started > self.deadline_s:
                return unknown(OVERDUE, at=now)
            if age is not None and age < self.cache_ttl_s + self.max_stale_s:
                return cached  # type: ignore[return-value]
            return unknown(NOT_YET, at=now)

    def refresh(self) -> FlowHealth:
        """Probe now in the caller's thread (the probe's own deadline bounds it), keep the
        answer and return it; used where waiting is the point (a command line check)."""
        fresh = self._run_probe()
        with self._lock:
            self._cached = fresh
        return fresh

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the probe in flight; True when none is running."""
        return self._idle.wait(timeout_s)

    def _start(self, *, started: float) -> None:
        self._started = started
        self._idle.clear()
        thread = threading.Thread(target=self._background, name="fair-flow-health",
                                  daemon=True)
        try:
            thread.start()
        except RuntimeError:
            self._started = None
            self._idle.set()
            raise

    def _background(self) -> None:
        fresh: Optional[FlowHealth] = None
        try:
            fresh = self._run_probe()
        finally:
            with self._lock:
                if fresh is not None:
                    self._cached = fresh
                self._started = None
                self._idle.set()

    def _run_probe(self) -> FlowHealth:
        try:
            return self._probe()
        except Exception as exc:  # noqa: BLE001 - a probe's failure is an answer
            log.warning("FME Flow health probe failed: %s", type(exc).__name__)
            return unknown(type(exc).__name__, at=self._clock.monotonic())
