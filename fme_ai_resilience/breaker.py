"""The shared circuit breaker: a pure state machine and the store-backed ``CircuitBreaker``.

The state of each protected service lives in one ``circuit_state`` row shared by every engine
on every host (shared/DESIGN.md section 5)::

    CLOSED --failure rate or slow-call rate over the window >= threshold, >= min calls--> OPEN
    OPEN --cooldown over (grows on consecutive trips up to a cap)--> HALF_OPEN
    HALF_OPEN --exactly k probes reported, success ratio >= close_ratio--> CLOSED
    HALF_OPEN --exactly k probes reported, success ratio below it--> OPEN (next trip)

A half-open round admits exactly k probe calls fleet-wide. A probe silent for
``probe_timeout_s`` after its slot was claimed counts as a *failed* probe: the next ``allow()``
that finds its slot records the failure instead of handing the slot out again, so a round is
decided by the first ``allow()`` after its last probe went silent and never admits a (k+1)-th
call; the compensator's ``evaluate()`` marks such probes failed itself, so a stalled round
ends even when no engine calls. The round is not decided OPEN early once the close ratio has
become unreachable: the remaining probes would then not be made, and k probe results per round are what an operator
reads off the call log to judge a recovering service (the fleet test counts exactly k per
round, including a round that fails).

:func:`step` is the pure part (policy + state + event -> new state); it reads no clock and
does no I/O. Every change it makes increments ``generation``; :class:`CircuitBreaker` writes a
change only by compare-and-set on that generation, so two engines cannot both apply it.
Manual modes sit beside the automatic state: FORCED_OPEN refuses every call, FORCED_CLOSED
admits every call, DISABLED admits every call and only records metrics; ``reset`` returns to
AUTO and CLOSED.
"""
from __future__ import annotations

import enum
import logging
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Optional, Union

from .clock import Clock, SystemClock
from .errors import CircuitOpenError
from .ledger import CallRecord, CallWindow
from .settings import BreakerSettings

if TYPE_CHECKING:  # pragma: no cover
    from .calibrate import Suggestion
    from .store.base import Store

log = logging.getLogger(__name__)

#: The token of a slot's first claim (the store starts tokens at 0 and adds 1 per claim); a
#: claim with a later token took over a slot whose probe went silent past ``probe_timeout_s``.
_FIRST_CLAIM = 1

#: The breaker's thresholds are the ``breaker`` settings group.
BreakerPolicy = BreakerSettings


class CircuitState(str, enum.Enum):
    """The automatic state of one protected service (``circuit_state.state``)."""

    CLOSED = "CLOSED"
    OPEN = "OPEN"
    HALF_OPEN = "HALF_OPEN"


class BreakerMode(str, enum.Enum):
    """Manual control over the automatic state (``circuit_state.mode``)."""

    AUTO = "AUTO"
    FORCED_OPEN = "FORCED_OPEN"
    FORCED_CLOSED = "FORCED_CLOSED"
    DISABLED = "DISABLED"   # every call admitted, calls still recorded (metrics only)


@dataclass(frozen=True)
class BreakerState:
    """One ``circuit_state`` row.

    ``changed_at`` is when ``state`` last changed (epoch seconds): the failure window of a
    closed circuit never reaches back before it. ``open_until`` is the end of the cooldown of
    an open circuit. ``trips`` counts consecutive trips without a successful close (it grows
    the cooldown).
    """

    state: CircuitState = CircuitState.CLOSED
    mode: BreakerMode = BreakerMode.AUTO
    generation: int = 0
    changed_at: float = 0.0
    open_until: Optional[float] = None
    trips: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", CircuitState(self.state))
        object.__setattr__(self, "mode", BreakerMode(self.mode))
        if self.generation < 0:
            raise ValueError(f"generation must be >= 0, got {self.generation}")
        if self.trips < 0:
            raise ValueError(f"trips must be >= 0, got {self.trips}")
        if self.state is CircuitState.OPEN and self.open_until is None:
            raise ValueError("open_until is required when state is OPEN")


# -- events ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WindowObserved:
    """The call statistics of a closed circuit's window were read."""

    window: CallWindow


@dataclass(frozen=True)
class TimePassed:
    """Nothing happened but the clock moved (an open circuit may become half-open)."""


@dataclass(frozen=True)
class ProbesObserved:
    """The probe tally of a half-open circuit: reported successes and failures."""

    successes: int
    failures: int

    def __post_init__(self) -> None:
        if self.successes < 0 or self.failures < 0:
            raise ValueError(f"probe counts must be >= 0, got {self.successes}/{self.failures}")


class Manual(str, enum.Enum):
    """An operator's command."""

    FORCE_OPEN = "FORCE_OPEN"
    FORCE_CLOSED = "FORCE_CLOSED"
    DISABLE = "DISABLE"
    RESET = "RESET"


Event = Union[WindowObserved, TimePassed, ProbesObserved, Manual]


# -- pure policy -------------------------------------------------------------------------------
def cooldown_s(policy: BreakerPolicy, trips: int) -> float:
    """The cooldown after the ``trips``-th consecutive trip (1 = first), capped; seconds."""
    value = policy.cooldown_s
    if policy.cooldown_factor == 1:
        return value
    for _ in range(max(0, trips - 1)):
        value *= policy.cooldown_factor
        if value >= policy.cooldown_max_s:
            return policy.cooldown_max_s
    return min(policy.cooldown_max_s, value)


def should_trip(policy: BreakerPolicy, window: CallWindow) -> bool:
    """Whether a closed circuit opens on ``window`` (enough calls, a rate at its threshold)."""
    if window.calls < policy.min_calls:
        return False
    return (window.failure_rate >= policy.failure_rate
            or window.slow_rate >= policy.slow_call_rate)


def probes_needed(policy: BreakerPolicy) -> int:
    """Successful probes (of ``half_open_probes``) needed to close the circuit."""
    return math.ceil(policy.close_ratio * policy.half_open_probes - 1e-9)


def _open(policy: BreakerPolicy, state: BreakerState, now: float) -> BreakerState:
    trips = state.trips + 1
    return replace(state, state=CircuitState.OPEN, generation=state.generation + 1,
                   changed_at=now, open_until=now + cooldown_s(policy, trips), trips=trips)


def _moved(current: BreakerState, now: float, **changes: object) -> BreakerState:
    return replace(current, generation=current.generation + 1, changed_at=now, **changes)


def step(policy: BreakerPolicy, state: BreakerState, event: Event, now: float) -> BreakerState:
    """The state after ``event`` at ``now``; ``state`` itself (same object) when nothing changes.

    Any change increments ``generation``. Manual modes freeze the automatic state: only a
    manual command changes a circuit that is not in AUTO mode.
    """
    if isinstance(event, Manual):
        return _manual(state, Manual(event), now)
    if state.mode is not BreakerMode.AUTO:
        return state
    if isinstance(event, WindowObserved):
        if state.state is CircuitState.CLOSED and should_trip(policy, event.window):
            return _open(policy, state, now)
        return state
    if isinstance(event, TimePassed):
        if state.state is CircuitState.OPEN and now >= (state.open_until or 0.0):
            return _moved(state, now, state=CircuitState.HALF_OPEN, open_until=None)
        return state
    if isinstance(event, ProbesObserved):
        if state.state is not CircuitState.HALF_OPEN:
            return state
        if event.successes + event.failures < policy.half_open_probes:
            return state
        if event.successes >= probes_needed(policy):
            return _moved(state, now, state=CircuitState.CLOSED, open_until=None, trips=0)
        return _open(policy, state, now)
    raise TypeError(f"not a breaker event: {event!r}")


def _manual(state: BreakerState, command: Manual, now: float) -> BreakerState:
    if command is Manual.RESET:
        target = BreakerState(generation=state.generation + 1, changed_at=now)
        same = (state.mode is BreakerMode.AUTO and state.state is CircuitState.CLOSED
                and state.trips == 0)
        return state if same else target
    mode = {Manual.FORCE_OPEN: BreakerMode.FORCED_OPEN,
            Manual.FORCE_CLOSED: BreakerMode.FORCED_CLOSED,
            Manual.DISABLE: BreakerMode.DISABLED}[command]
    if state.mode is mode:
        return state
    return replace(state, mode=mode, generation=state.generation + 1)


# -- decisions handed to callers ----------------------------------------------------------------
@dataclass(frozen=True)
class Permit:
    """Leave to make one call. ``probe_slot``/``probe_token`` are set for a half-open probe."""

    service: str
    generation: int
    probe_slot: Optional[int] = None
    probe_token: Optional[int] = None

    @property
    def is_probe(self) -> bool:
        return self.probe_slot is not None

    def __bool__(self) -> bool:
        return True


@dataclass(frozen=True)
class CircuitOpen:
    """Refusal: the service is not called now; try again in ``retry_after_s`` seconds."""

    service: str
    retry_after_s: float
    state: CircuitState
    mode: BreakerMode

    def __post_init__(self) -> None:
        if not self.retry_after_s >= 0:
            raise ValueError(f"retry_after_s must be >= 0, got {self.retry_after_s!r}")

    def __bool__(self) -> bool:
        return False

    def to_error(self) -> CircuitOpenError:
        """The exception form, for callers that prefer raising."""
        return CircuitOpenError(self.service, self.retry_after_s)


Decision = Union[Permit, CircuitOpen]


# -- the store-backed breaker ---------------------------------------------------------------------
class CircuitBreaker:
    """The breaker of one ``service``, shared through ``store`` by every engine.

    ``allow()`` reads the state through a cache of at most ``policy.cache_ttl_s`` seconds;
    ``record()`` logs the call into ``ai_call_log`` and applies any transition at once (by
    compare-and-set, so a lost race only means another engine applied it first).
    """

    def __init__(self, store: "Store", service: str, policy: Optional[BreakerPolicy] = None,
                 clock: Optional[Clock] = None) -> None:
        if not service:
            raise ValueError("service must be a non-empty name")
        self.store = store
        self.service = service
        self.policy = policy or BreakerPolicy()
        self.clock = clock or SystemClock()
        self._cached: Optional[BreakerState] = None
        self._cached_at = -math.inf
        self._standing_permit: Optional[Permit] = None

    def __repr__(self) -> str:
        return f"CircuitBreaker(service={self.service!r}, state={self._cached!r})"

    # -- reading -------------------------------------------------------------------------------
    def state(self, fresh: bool = False) -> BreakerState:
        """The shared state, from the cache unless it is older than ``cache_ttl_s``."""
        mono = self.clock.monotonic()
        if fresh or self._cached is None or mono - self._cached_at >= self.policy.cache_ttl_s:
            self._remember(self.store.breaker_get(self.service, self.clock.now()))
        assert self._cached is not None
        return self._cached

    def _remember(self, state: BreakerState) -> BreakerState:
        self._cached = state
        self._cached_at = self.clock.monotonic()
        # Permits are immutable: a circuit that admits every call hands out one shared permit.
        admits_all = state.mode in (BreakerMode.FORCED_CLOSED, BreakerMode.DISABLED) or (
            state.mode is BreakerMode.AUTO and state.state is CircuitState.CLOSED)
        self._standing_permit = Permit(self.service, state.generation) if admits_all else None
        return state

    def invalidate(self) -> None:
        """Forget the cached state (the next read goes to the store)."""
        self._cached = None
        self._standing_permit = None

    # -- the call path -------------------------------------------------------------------------
    def allow(self) -> Decision:
        """A :class:`Permit` to call the service now, or a :class:`CircuitOpen` refusal."""
        permit = self._standing_permit
        if permit is not None and self.clock.monotonic() - self._cached_at < self.policy.cache_ttl_s:
            return permit   # the hot path: a closed circuit, state fresh enough
        now = self.clock.now()
        current = self.state()
        if (current.mode is BreakerMode.AUTO and current.state is CircuitState.OPEN
                and now >= (current.open_until or 0.0)):
            current = self._apply(current, TimePassed(), now)
        return self._decide(current, now)

    def _decide(self, current: BreakerState, now: float) -> Decision:
        if current.mode is BreakerMode.FORCED_OPEN:
            return CircuitOpen(self.service, self.policy.cooldown_s, current.state, current.mode)
        if current.mode is not BreakerMode.AUTO or current.state is CircuitState.CLOSED:
            return Permit(self.service, current.generation)
        if current.state is CircuitState.OPEN:
            return CircuitOpen(self.service, max(0.0, (current.open_until or now) - now),
                               current.state, current.mode)
        return self._claim_probe(current, now)

    def _claim_probe(self, current: BreakerState, now: float) -> Decision:
        for _ in range(self.policy.half_open_probes + 1):
            claim = self.store.breaker_claim_probe(self.service, current.generation, now,
                                                   self.policy.probe_timeout_s)
            if claim is None:
                self.invalidate()   # the half-open round may be over: look again next time
                return CircuitOpen(self.service, min(self.policy.probe_timeout_s,
                                                     self.policy.cooldown_s),
                                   current.state, current.mode)
            slot, token = claim
            if token == _FIRST_CLAIM:
                return Permit(self.service, current.generation, probe_slot=slot,
                              probe_token=token)
            # The slot's earlier probe went silent past probe_timeout_s: it counts as failed
            # (this claim's token makes any late report from it stale) and is not handed out.
            self.store.breaker_report_probe(self.service, current.generation, slot, token,
                                            False, now)
            after = self._after_probe(current.generation, now)
            if after.generation != current.generation:
                return self._decide(after, now)
        return CircuitOpen(self.service, min(self.policy.probe_timeout_s, self.policy.cooldown_s),
                           current.state, current.mode)

    def record(self, permit: Permit, call: CallRecord) -> BreakerState:
        """Log ``call`` (made under ``permit``) and apply the transition it causes, if any."""
        if call.service != self.service:
            raise ValueError(f"call.service {call.service!r} is not {self.service!r}")
        self.store.record_call(call)
        now = self.clock.now()
        if permit.is_probe:
            self.store.breaker_report_probe(self.service, permit.generation, permit.probe_slot,
                                            permit.probe_token, call.ok, now)
            return self._after_probe(permit.generation, now)
        current = self.state()
        if current.mode is not BreakerMode.AUTO or current.state is not CircuitState.CLOSED:
            return current
        if call.ok and call.duration_s < self.policy.slow_call_s:
            return current   # a fast success never opens a circuit: skip the window query
        return self._evaluate_window(current, now)

    def _evaluate_window(self, current: BreakerState, now: float) -> BreakerState:
        since = max(now - self.policy.window_s, current.changed_at)
        window = self.store.call_window(self.service, since, self.policy.slow_call_s)
        return self._apply(current, WindowObserved(window), now)

    def _after_probe(self, generation: int, now: float) -> BreakerState:
        current = self.state(fresh=True)
        if current.generation != generation or current.state is not CircuitState.HALF_OPEN:
            return current
        successes, failures = self.store.breaker_probe_tally(self.service, generation)
        return self._apply(current, ProbesObserved(successes, failures), now)

    def _apply(self, current: BreakerState, event: Event, now: float) -> BreakerState:
        target = step(self.policy, current, event, now)
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
            return self._apply(current, TimePassed(), now)
        if current.state is CircuitState.HALF_OPEN:
            # Nobody may be calling: the compensator ends a round stalled by silent probes.
            self.store.breaker_fail_silent_probes(self.service, current.generation, now,
                                                  self.policy.probe_timeout_s)
            return self._after_probe(current.generation, now)
        return self._evaluate_window(current, now)

    def command(self, command: Manual) -> BreakerState:
        """Apply an operator's command (force open/closed, disable, reset), retrying lost races."""
        for _ in range(10):
            current = self.state(fresh=True)
            target = step(self.policy, current, Manual(command), self.clock.now())
            if target is current:
                return current
            if self.store.breaker_swap(self.service, current.generation, target, 0):
                log.warning("circuit %s: operator %s (generation %d)", self.service,
                            Manual(command).value, target.generation)
                return self._remember(target)
        raise RuntimeError(f"circuit {self.service!r} kept changing; command not applied")

    def calibrate(self, days: float = 7.0, margin: float = 0.1) -> "Suggestion":
        """Thresholds suggested from this service's last ``days`` days of calls (see calibrate)."""
        from .calibrate import calibrate
        return calibrate(self.store, self.service, days, self.clock.now(), self.policy,
                         margin=margin)

    def retry_after_s(self) -> float:
        """Seconds until an open circuit may admit a probe (0 when calls are admitted)."""
        current = self.state()
        if current.mode is BreakerMode.FORCED_OPEN:
            return self.policy.cooldown_s
        if current.mode is BreakerMode.AUTO and current.state is CircuitState.OPEN:
            return max(0.0, (current.open_until or 0.0) - self.clock.now())
        return 0.0
