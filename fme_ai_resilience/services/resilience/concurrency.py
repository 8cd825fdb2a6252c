"""The fleet's adaptive concurrency limit for one service, through the ledger.

:class:`FleetLimit` is what an engine asks before each Vision AI call and tells after it
(:mod:`fme_ai_resilience.core.resilience.concurrency` holds the decisions, ``call_limit`` and ``call_slot``
the shared state):

* :meth:`FleetLimit.acquire` takes one of the fleet's slots, waiting up to the time given for
  one to come free (polling the ledger); None when none did;
* :meth:`FleetLimit.ttfb_s` is how long the call may wait for its first byte;
* :meth:`FleetLimit.release` ends the slot and moves the limit by the call's sample, in one
  transaction; a call whose first byte never came keeps its slot until the service could no
  longer be working on it;
* :meth:`FleetLimit.room` says, from a short cache, whether the fleet has a free slot (for an
  engine deciding whether to take on another task).

Safe to share between an engine's threads.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import partial
from typing import Optional, Tuple

from ...core.clock import Clock, SystemClock
from ...core.resilience.concurrency import (ConcurrencySettings, LimitState, Sample, Signal,
                                            abandoned_for_s, observe, room, ttfb_s)
from ...core.config.settings import Settings
from ...store.protocols import LimitRows
from ...core.resilience.task_budget import task_budget_s

__all__ = ["FleetLimit", "Slot"]

#: How often a caller waiting for a slot looks again, at most and at least (seconds); in
#: between, a quarter of the service's usual latency (a call of this engine that ends wakes
#: it at once).
_POLL_MAX_S = 0.5
_POLL_MIN_S = 0.02


@dataclass(frozen=True)
class Slot:
    """One call's place under the fleet's limit: its row, when it was taken (epoch seconds),
    the calls in flight then, itself included, and whether the caller waited for it (while
    other calls ended: one of them may have been refused with a 429 meanwhile)."""

    id: int
    started_at: float
    in_flight: int
    waited: bool = False


class FleetLimit:
    """The concurrency limit of ``service``, shared by every engine on the ledger.

    ``settings`` gives the ``concurrency`` group, the configured time-to-first-byte limit
    (``timeouts``) and the task budget that caps every wait; ``holder`` names this engine in
    the slots it takes.
    """

    def __init__(self, service: str, settings: Settings, *, store: LimitRows,
                 clock: Optional[Clock] = None, holder: str = "processor") -> None:
        self.service = service
        self.settings: ConcurrencySettings = settings.concurrency
        self.timeouts = settings.timeouts
        self.budget_s = task_budget_s(settings.intake.latency_promise_s)
        self.cache_ttl_s = settings.breaker.cache_ttl_s
        self.store = store
        self.clock = clock or SystemClock()
        self.holder = holder
        self._seen: Tuple[LimitState, int, float] = (LimitState.initial(self.settings), 0,
                                                     -math.inf)
        self._reading = threading.Lock()     # one read of a stale cache, not one per thread
        self._freed = threading.Condition()  # this engine's calls that ended

    def __repr__(self) -> str:
        state, in_flight, _ = self._seen
        return (f"FleetLimit(service={self.service!r}, limit={state.limit:.1f}, "
                f"in_flight={in_flight})")

    @property
    def cap_ttfb_s(self) -> float:
        """The longest any call may wait for its first byte: what a whole task budget leaves
        after the connect and body budgets."""
        t = self.timeouts
        return max(t.ttfb_s, self.budget_s - (t.connect_s + t.tls_s + t.body_s))

    @property
    def hold_cap_s(self) -> float:
        """The longest a call given up on counts in flight after its start: a task budget."""
        return self.budget_s

    def state(self, fresh: bool = False) -> Tuple[LimitState, int]:
        """The limit and the calls in flight, from a cache at most ``breaker.cache_ttl_s``
        old unless ``fresh``."""
        state, in_flight, read_at = self._seen
        if fresh or self.clock.monotonic() - read_at >= self.cache_ttl_s:
            with self._reading:
                state, in_flight, read_at = self._seen
                if fresh or self.clock.monotonic() - read_at >= self.cache_ttl_s:
                    state, in_flight = self.store.limit_read(self.service, self.settings,
                                                             now=self.clock.now())
                    self._seen = (state, in_flight, self.clock.monotonic())
        return state, in_flight

    def room(self, busy: int = 0) -> bool:
        """Whether the fleet had a free slot when last read (a cache, not a reservation), with
        at least ``busy`` calls in flight (this engine's workers already working a task)."""
        state, in_flight = self.state()
        return room(self.settings, state, max(in_flight, busy))

    def poll_s(self) -> float:
        """How long a caller waiting for a slot waits before looking again."""
        state, _, _ = self._seen
        usual = state.rtt_long_s if state.rtt_long_s is not None else 1.0
        return max(_POLL_MIN_S, min(_POLL_MAX_S, usual / 4.0))

    def ttfb_s(self, *, left_s: float, photo_s: Optional[float] = None) -> float:
        """How long the next call may wait for its first byte (the fleet's limit in force,
        or this photo's when its last call ran out of a longer one), within ``left_s``."""
        state, _ = self.state()
        return ttfb_s(state, base_s=self.timeouts.ttfb_s, left_s=left_s, photo_s=photo_s)

    def acquire(self, *, wait_s: float, call_s: float) -> Optional[Slot]:
        """A slot for one call expected to last at most ``call_s`` seconds (an engine that
        dies leaves it counted that long), waiting at most ``wait_s`` for one; None when
        none came free. A waiting caller asks the ledger again when one of this engine's calls
        ends, or after :meth:`poll_s` (another engine's may have)."""
        waited = 0.0
        while True:
            now = self.clock.now()
            slot, state, in_flight = self.store.limit_acquire(
                self.service, self.holder, self.settings, now + max(call_s, 1e-3), now=now)
            self._seen = (state, in_flight, self.clock.monotonic())
            if slot is not None:
                return Slot(slot, now, in_flight, waited > 0)
            pause = min(self.poll_s(), wait_s - waited)
            if pause <= 0:
                return None
            if getattr(self.clock, "shared", True):
                started = self.clock.monotonic()
                with self._freed:
                    self._freed.wait(pause)
                waited += max(self.clock.monotonic() - started, 1e-3)
            else:
                self.clock.sleep(pause)   # a clock that serves one thread: nothing else ends
                waited += pause

    def release(self, slot: Optional[Slot], signal: Signal, *, latency_s: float,
                ttfb_used_s: float) -> LimitState:
        """End ``slot`` (None: a call made without one, still a sample) and move the limit by
        the call's sample. A time-to-first-byte timeout keeps the slot counted until the
        service could no longer be working on the call."""
        in_flight = slot.in_flight if slot is not None else 1
        sample = Sample(signal, max(0.0, latency_s), in_flight, ttfb_used_s)
        step = partial(observe, self.settings, sample=sample, base_ttfb_s=self.timeouts.ttfb_s,
                       cap_ttfb_s=self.cap_ttfb_s)
        hold = None
        if slot is not None and signal is Signal.TIMEOUT:
            state, _, _ = self._seen
            hold = slot.started_at + abandoned_for_s(state, ttfb_used_s, cap_s=self.hold_cap_s)
        after = self.store.limit_release(self.service, None if slot is None else slot.id,
                                         self.settings, step, hold_until=hold,
                                         now=self.clock.now())
        _, in_flight_now, _ = self._seen
        self._seen = (after, max(0, in_flight_now - (hold is None)), self.clock.monotonic())
        self._notify()
        return after

    def _notify(self) -> None:
        with self._freed:
            self._freed.notify_all()

    def give_back(self, slot: Slot) -> None:
        """End a slot whose call was never made (the breaker or the pace held it): no
        sample."""
        self.store.limit_release(self.service, slot.id, self.settings, now=self.clock.now())
        self._notify()
