"""The fleet's pace for one rate-limited service, through the ledger (see :mod:`..pace`).

:meth:`CallPacer.take` is asked before each call: its :class:`Slot`, no wait while the service
is not paced (read from a cache at most ``cache_ttl_s`` old, no round trip), else the seconds
until the slot it took, one statement (a slot further off than the caller will wait is not
taken), and the interval the call goes at. :meth:`CallPacer.refused` after a 429 slows the
pace to twice that interval, or to what the calls taken since the service's previous 429 show
it allows, and holds every call until the Retry-After has passed: the calls in flight at one
pace, refused together, slow it once, not once each.
:meth:`CallPacer.passed` after a call that went through relaxes it.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

from ...core.clock import Clock, SystemClock
from ...core.resilience.pace import FLOOR_S, RELAX_FACTOR, after_refusal, shown_since
from ...store.protocols import PaceRows

__all__ = ["CallPacer", "Slot"]


class Slot(NamedTuple):
    """A call's place in its service's pace."""

    wait_s: float        # seconds until the call may start
    interval_s: float    # the interval the call is paced at (0: the service is not paced)


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

    def take(self, max_wait_s: Optional[float] = None) -> Slot:
        """This call's slot: no wait when the service is not paced; a paced service's next
        slot is taken for it, unless it is more than ``max_wait_s`` away (the caller parks
        instead of waiting: the slot stays for a caller that calls)."""
        if not self._paced():
            return Slot(0.0, 0.0)
        now = self.clock.now()
        claim = self.store.pace_claim(self.service, now=now,
                                      latest=None if max_wait_s is None else now + max_wait_s)
        if claim is None:                 # the pace went off meanwhile
            self._interval_s = 0.0
            return Slot(0.0, 0.0)
        slot_at, interval_s = claim
        self._interval_s = interval_s
        self._read_at = self.clock.monotonic()
        return Slot(max(0.0, slot_at - now), interval_s)

    def slowed_since(self, slot: Slot) -> float:
        """After waiting (for ``slot``, or for a place among the fleet's calls in flight): 0
        when the call may go, else the seconds until the service's next free slot, because a
        429 slowed the pace while this call waited (it would be refused too: the caller
        parks, and the slot it took goes unused). One read, which refreshes the cache: the
        caller asks only after a wait."""
        now = self.clock.now()
        pace = self.store.pace_next(self.service, now=now)
        self._interval_s = 0.0 if pace is None else pace[1]
        self._read_at = self.clock.monotonic()
        if pace is None or pace[1] <= slot.interval_s:
            return 0.0
        return max(0.0, pace[0] - now)

    def refused(self, retry_after_s: Optional[float], paced_s: float) -> None:
        """The service answered 429 to a call paced at ``paced_s`` (its :class:`Slot`'s
        interval): space the calls twice that far apart, or as far as the calls the service
        took since its previous 429 show (:func:`~...core.resilience.pace.after_refusal`),
        none before the Retry-After. The ledger keeps the longer of that and the interval in
        force, so every call refused at one pace, from any engine or thread, slows it once."""
        now = self.clock.now()
        since = shown_since(retry_after_s, now=now)
        shown = None if since is None else self.store.pace_shown(self.service, since=since,
                                                                 before=now)
        taken, since_s = (shown[1], max(0.0, now - shown[0])) if shown else (0, 0.0)
        interval = after_refusal(paced_s, taken=taken, since_refusal_s=since_s,
                                 retry_after_s=retry_after_s)
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
