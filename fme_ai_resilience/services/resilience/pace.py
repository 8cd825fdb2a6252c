"""The fleet's pace for one rate-limited service, through the ledger (see :mod:`..pace`).

:meth:`CallPacer.wait_s` is asked before each call: 0 while the service is not paced (read
from a cache at most ``cache_ttl_s`` old, no round trip), else the seconds until the slot it
took, one statement (a slot further off than the caller will wait is not taken).
:meth:`CallPacer.refused` after a 429 slows the pace (and holds every call
until the Retry-After has passed); :meth:`CallPacer.passed` after a call that went through
relaxes it.
"""
from __future__ import annotations

import math
from typing import Optional

from ...core.clock import Clock, SystemClock
from ...core.resilience.pace import FLOOR_S, RELAX_FACTOR, slower
from ...store.protocols import PaceRows

__all__ = ["CallPacer"]


class CallPacer:
    """The pace of ``service``'s calls, shared by every engine on the ledger."""

    def __init__(self, service: str, *, store: PaceRows, cache_ttl_s: float,
                 clock: Optional[Clock] = None) -> None:
        self.service = service
        self.store = store
        self.clock = clock or SystemClock()
        self.cache_ttl_s = cache_ttl_s
        self._interval_s = 0.0
        self._read_at = -math.inf

    def __repr__(self) -> str:
        return f"CallPacer(service={self.service!r}, interval_s={self._interval_s:g})"

    def _paced(self) -> bool:
        mono = self.clock.monotonic()
        if mono - self._read_at >= self.cache_ttl_s:
            self._interval_s = self.store.pace_get(self.service)
            self._read_at = mono
        return self._interval_s > 0

    def wait_s(self, max_wait_s: Optional[float] = None) -> float:
        """Seconds until this call may start (0 when the service is not paced); a paced
        service's next slot is taken for it, unless it is more than ``max_wait_s`` away (the
        caller parks instead of waiting: the slot stays for a caller that calls)."""
        if not self._paced():
            return 0.0
        now = self.clock.now()
        claim = self.store.pace_claim(self.service, now=now,
                                      latest=None if max_wait_s is None else now + max_wait_s)
        if claim is None:                 # the pace went off meanwhile
            self._interval_s = 0.0
            return 0.0
        slot_at, self._interval_s = claim
        self._read_at = self.clock.monotonic()
        return max(0.0, slot_at - now)

    def refused(self, retry_after_s: Optional[float]) -> None:
        """The service answered 429: space the calls further, none before its Retry-After."""
        now = self.clock.now()
        interval = slower(self._interval_s)
        self.store.pace_slow(self.service, interval, not_before=now + (retry_after_s or 0.0))
        self._interval_s = max(self._interval_s, interval)
        self._read_at = self.clock.monotonic()

    def passed(self) -> None:
        """A call went through: a paced service's interval shrinks (no round trip if not
        paced)."""
        if self._interval_s > 0:
            self.store.pace_relax(self.service, RELAX_FACTOR, FLOOR_S)
            self._interval_s *= RELAX_FACTOR
            if self._interval_s < FLOOR_S:
                self._interval_s = 0.0
