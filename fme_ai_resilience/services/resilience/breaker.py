"""The circuit breaker every engine shares, through the ledger's ``circuit_state`` rows.

:class:`CircuitBreaker` applies the pure state machine of :mod:`fme_ai_resilience.core.resilience.breaker` to
one service's row: ``allow()`` answers a :class:`~fme_ai_resilience.core.resilience.breaker.Permit` or a
:class:`~fme_ai_resilience.core.resilience.breaker.CircuitOpen` refusal through a short cache, ``record()``
logs each call into ``ai_call_log``, applies the transition it causes by compare-and-set on
the row's generation (a lost race only means another engine applied it first) and says whose
a failure was (:class:`~fme_ai_resilience.core.resilience.blame.Recorded`): the service's, and the wait that
follows, or the photo's. A half-open round admits exactly ``half_open_probes`` calls
fleet-wide (atomic slot claims in the store). Safe to share between an engine's threads.
"""
from __future__ import annotations

import logging
import math
from typing import Optional, Tuple

from ...core.resilience.blame import Blame, Recorded, suspects_service
from ...core.resilience.breaker import (EVIDENCE_CALLS, BreakerAnswer, BreakerMode, BreakerPolicy,
                                        BreakerState, CircuitOpen, CircuitState, DriftObserved,
                                        Event, Manual, Permit, ProbesObserved, StreakObserved,
                                        TimePassed, WindowObserved, down_for_others, step)
from ...core.resilience.calibrate import Suggestion
from ...core.clock import Clock, SystemClock
from ...core.errors import ConfigurationError, ErrorClass, StoreError
from ...core.ledger import CallRecord
from ...store.protocols import BreakerRows
from .calibrate import calibrate

__all__ = ["CircuitBreaker", "known_service"]

log = logging.getLogger("fme_ai_resilience.core.resilience.breaker")

#: The token of a slot's first claim (the store starts tokens at 0 and adds 1 per claim); a
#: claim with a later token took over a slot whose probe went silent past ``probe_timeout_s``.
_FIRST_CLAIM = 1


def known_service(service: str, *, store: BreakerRows) -> bool:
    """Whether some engine uses ``service``: it has a ``circuit_state`` row or calls in
    ``ai_call_log`` (what operators may steer without creating a circuit by a typo)."""
    if service in store.breaker_list():
        return True
    return store.call_window(service, 0.0, BreakerPolicy().slow_call_s).calls > 0


class CircuitBreaker:
    """The breaker of one ``service``, shared through ``store`` by every engine.

    ``allow()`` reads the state through a cache of at most ``policy.cache_ttl_s`` seconds;
    ``record()`` logs the call into ``ai_call_log`` and applies any transition at once (by
    compare-and-set, so a lost race only means another engine applied it first).
    """

    def __init__(self, service: str, policy: Optional[BreakerPolicy] = None, *,
                 store: BreakerRows,
                 clock: Optional[Clock] = None) -> None:
        if not isinstance(service, str) or not service:
            raise ConfigurationError("service", service, "must be a non-empty name")
        self.store = store
        self.service = service
        self.policy = policy or BreakerPolicy()
        self.clock = clock or SystemClock()
        # (state, when it was read on the monotonic clock, the permit a circuit that admits
        # every call hands out): one tuple, replaced whole, so an engine's threads never see
        # a state with another state's time or permit
        self._cache: Tuple[Optional[BreakerState], float, Optional[Permit]] = (
            None, -math.inf, None)

    def __repr__(self) -> str:
        return f"CircuitBreaker(service={self.service!r}, state={self._cache[0]!r})"

    # -- reading -------------------------------------------------------------------------------
    def state(self, fresh: bool = False) -> BreakerState:
        """The shared state, from the cache unless it is older than ``cache_ttl_s``."""
        cached, cached_at, _ = self._cache
        if fresh or cached is None or \
                self.clock.monotonic() - cached_at >= self.policy.cache_ttl_s:
            return self._remember(self.store.breaker_get(self.service, now=self.clock.now()))
        return cached

    def _remember(self, state: BreakerState) -> BreakerState:
        # Permits are immutable: a circuit that admits every call hands out one shared permit.
        admits_all = state.mode in (BreakerMode.FORCED_CLOSED, BreakerMode.DISABLED) or (
            state.mode is BreakerMode.AUTO and state.state is CircuitState.CLOSED)
        self._cache = (state, self.clock.monotonic(),
                       Permit(self.service, state.generation) if admits_all else None)
        return state

    def invalidate(self) -> None:
        """Forget the cached state (the next read goes to the store)."""
        self._cache = (None, -math.inf, None)

    # -- the call path -------------------------------------------------------------------------
    def allow(self) -> BreakerAnswer:
        """A :class:`Permit` to call the service now, or a :class:`CircuitOpen` refusal."""
        _, cached_at, permit = self._cache
        if permit is not None and self.clock.monotonic() - cached_at < self.policy.cache_ttl_s:
            return permit   # the hot path: a closed circuit, state fresh enough
        now = self.clock.now()
        current = self.state()
        if (current.mode is BreakerMode.AUTO and current.state is CircuitState.OPEN
                and now >= (current.open_until or 0.0)):
            current = self._apply(current, TimePassed(), now=now)
        return self._decide(current, now=now)

    def refusal(self) -> Optional[CircuitOpen]:
        """Why a call would be refused now, or None when one may be tried, claiming nothing.

        For a caller with work to do before its call (a photo to download): a half-open
        circuit's probe slot is claimed by :meth:`allow` at the call itself, so that a slot
        is never held by work that then makes no call (its silence would count as a failed
        probe and re-open the circuit)."""
        current = self.state()
        if current.mode is BreakerMode.FORCED_OPEN:
            return CircuitOpen(self.service, self.policy.cooldown_s, current.state, current.mode)
        now = self.clock.now()
        if (current.mode is BreakerMode.AUTO and current.state is CircuitState.OPEN
                and now < (current.open_until or 0.0)):
            return CircuitOpen(self.service, (current.open_until or now) - now, current.state,
                               current.mode)
        return None

    def _decide(self, current: BreakerState, *, now: float) -> BreakerAnswer:
        if current.mode is BreakerMode.FORCED_OPEN:
            return CircuitOpen(self.service, self.policy.cooldown_s, current.state, current.mode)
        if current.mode is not BreakerMode.AUTO or current.state is CircuitState.CLOSED:
            return Permit(self.service, current.generation)
        if current.state is CircuitState.OPEN:
            return CircuitOpen(self.service, max(0.0, (current.open_until or now) - now),
                               current.state, current.mode)
        return self._claim_probe(current, now=now)

    def _claim_probe(self, current: BreakerState, *, now: float) -> BreakerAnswer:
        for _ in range(self.policy.half_open_probes + 1):
            claim = self.store.breaker_claim_probe(self.service, current.generation,
                                                   self.policy.probe_timeout_s, now=now)
            if claim is None:
                # Every slot is taken, or the round is over: another engine's probe may have
                # closed (or re-opened) the circuit since this engine's state was read. Look
                # again now rather than send the photo away for a cooldown.
                after = self.state(fresh=True)
                if after.generation != current.generation \
                        and after.state is not CircuitState.HALF_OPEN:
                    return self._decide(after, now=now)
                return CircuitOpen(self.service, min(self.policy.probe_timeout_s,
                                                     self.policy.cooldown_s),
                                   current.state, current.mode)
            slot, token = claim
            if token == _FIRST_CLAIM:
                return Permit(self.service, current.generation, probe_slot=slot,
                              probe_token=token)
            # The slot's earlier probe went silent past probe_timeout_s: it counts as failed
            # (this claim's token makes any late report from it stale) and is not handed out.
            self.store.breaker_report_probe(self.service, current.generation, slot, token, False,
                                            now=now)
            after = self._after_probe(current.generation, now=now)
            if after.generation != current.generation:
                return self._decide(after, now=now)
        return CircuitOpen(self.service, min(self.policy.probe_timeout_s, self.policy.cooldown_s),
                           current.state, current.mode)

    def record(self, permit: Permit, call: CallRecord) -> Recorded:
        """Log ``call`` (made under ``permit``), apply the transition it causes, if any, and
        say whose a failure was: the service's (a probe's failure, or the one that opened the
        circuit, when the service fails for other photos too), with the wait until the
        photo's next try just behind the next probe, or the photo's (its attempt counts)."""
        if call.service != self.service:
            raise ConfigurationError("call.service", call.service, f"is not {self.service!r}")
        self.store.record_call(call)
        after = self._transition(permit, call)
        if call.ok:
            return Recorded(after)
        if suspects_service(call.error_class and ErrorClass(call.error_class),
                            probe=permit.is_probe, after=after) \
                and self.down_for_others(call.task_key or ""):
            return Recorded(after, Blame.SERVICE,
                            self.retry_after_s() + self.policy.behind_s)
        return Recorded(after, Blame.PHOTO)

    def _transition(self, permit: Permit, call: CallRecord) -> BreakerState:
        now = self.clock.now()
        if permit.is_probe:
            self.store.breaker_report_probe(self.service, permit.generation, permit.probe_slot,
                                            permit.probe_token, call.ok, now=now)
            return self._after_probe(permit.generation, now=now)
        current = self.state()
        if current.mode is not BreakerMode.AUTO or current.state is not CircuitState.CLOSED:
            return current
        if call.ok:
            return current   # an answer never opens a circuit (slow is not down)
        if call.down:
            after = self._evaluate_streak(current, now=now)
            if after is not current:
                return after
        if call.error_class == ErrorClass.BAD_FORMAT.value:
            after = self._evaluate_drift(current, now=now)
            if after is not current:
                return after
        if call.error_class == ErrorClass.TTFB_TIMEOUT.value and not call.down:
            return current   # a slow call: no failure of the window
        return self._evaluate_window(current, now=now)

    def _evaluate_streak(self, current: BreakerState, *, now: float) -> BreakerState:
        """Open the circuit when the latest calls said in a row that the service is down."""
        failures, photos = self.store.down_streak(self.service,
                                                  self.policy.consecutive_failures)
        after = self._apply(current, StreakObserved(failures, photos), now=now)
        if after.state is CircuitState.OPEN and after.generation != current.generation:
            log.warning("circuit %s: %d calls in a row said the service is down", self.service,
                        failures)
        return after

    def _evaluate_drift(self, current: BreakerState, *, now: float) -> BreakerState:
        """Open the circuit when the latest answers in a row were out of schema (drift)."""
        latest = self.store.recent_retries(self.service, self.policy.drift_calls)
        if any(error_class != ErrorClass.BAD_FORMAT.value for error_class, _, _ in latest):
            return current
        event = DriftObserved(len(latest), len({key for _, key, _ in latest}),
                              sum(1 for _, _, retry in latest if not retry))
        after = self._apply(current, event, now=now)
        if after.state is CircuitState.OPEN and after.generation != current.generation:
            log.warning("circuit %s: %d answers in a row out of schema: the model drifted; "
                        "the photos wait for the fix", self.service, event.answers)
        return after

    def _evaluate_window(self, current: BreakerState, *, now: float) -> BreakerState:
        since = max(now - self.policy.window_s, current.changed_at)
        window = self.store.call_window(self.service, since, self.policy.slow_call_s)
        return self._apply(current, WindowObserved(window), now=now)

    def _after_probe(self, generation: int, *, now: float) -> BreakerState:
        current = self.state(fresh=True)
        if current.generation != generation or current.state is not CircuitState.HALF_OPEN:
            return current
        successes, failures = self.store.breaker_probe_tally(self.service, generation)
        return self._apply(current, ProbesObserved(successes, failures), now=now)

    def _apply(self, current: BreakerState, event: Event, *, now: float) -> BreakerState:
        target = step(self.policy, current, event, now=now)
        if target is current:
            return current
        probes = self.policy.half_open_probes if target.state is CircuitState.HALF_OPEN else 0
        if self.store.breaker_swap(self.service, current.generation, target, probes):
            log.info("circuit %s: %s -> %s (generation %d)", self.service, current.state.value,
                     target.state.value, target.generation)
            return self._remember(target)
        return self.state(fresh=True)

    # -- compensator and operators ---------------------------------------------------------------
    def evaluate(self) -> BreakerState:
        """Apply what is due with nobody calling: cooldown over, window or probes decided.

        For the scheduled compensator (WS-03); safe to run from many places at once.
        """
        now = self.clock.now()
        current = self.state(fresh=True)
        if current.mode is not BreakerMode.AUTO:
            return current
        if current.state is CircuitState.OPEN:
            return self._apply(current, TimePassed(), now=now)
        if current.state is CircuitState.HALF_OPEN:
            # Nobody may be calling: the compensator ends a round stalled by silent probes.
            self.store.breaker_fail_silent_probes(self.service, current.generation,
                                                  self.policy.probe_timeout_s, now=now)
            return self._after_probe(current.generation, now=now)
        return self._evaluate_window(current, now=now)

    def command(self, command: Manual) -> BreakerState:
        """Apply an operator's command (force open/closed, disable, reset), retrying lost races."""
        for _ in range(10):
            current = self.state(fresh=True)
            target = step(self.policy, current, Manual(command), now=self.clock.now())
            if target is current:
                return current
            if self.store.breaker_swap(self.service, current.generation, target, 0):
                log.warning("circuit %s: operator %s (generation %d)", self.service,
                            Manual(command).value, target.generation)
                return self._remember(target)
        raise StoreError(f"circuit {self.service!r} kept changing; command not applied")

    def calibrate(self, days: float = 7.0, margin: float = 0.1) -> Suggestion:
        """Thresholds suggested from this service's last ``days`` days of calls (see calibrate)."""
        return calibrate(self.service, days, self.policy, margin=margin, store=self.store,
                         now=self.clock.now())

    def down_for_others(self, task_key: str) -> bool:
        """Whether a failed call about ``task_key``'s photo says the service is down rather
        than that it cannot answer this photo (:func:`~fme_ai_resilience.core.resilience.breaker.
        down_for_others` on the service's latest calls; one round trip, asked only after a
        failed call)."""
        latest = self.store.recent_calls(self.service,
                                         max(EVIDENCE_CALLS, self.policy.drift_calls))
        return down_for_others(self.policy, task_key, latest)

    def retry_after_s(self) -> float:
        """Seconds until an open circuit may admit a probe (0 when calls are admitted)."""
        current = self.state()
        if current.mode is BreakerMode.FORCED_OPEN:
            return self.policy.cooldown_s
        if current.mode is BreakerMode.AUTO and current.state is CircuitState.OPEN:
            return max(0.0, (current.open_until or 0.0) - self.clock.now())
        return 0.0
