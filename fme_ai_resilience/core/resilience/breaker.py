"""The circuit breaker's policy and state machine, pure: states, events, transitions, permits.

The state of each protected service lives in one ``circuit_state`` row shared by every engine
on every host (docs/breaker.md)::

    CLOSED --failure rate over the window >= threshold, >= min calls--> OPEN
    CLOSED --``consecutive_failures`` calls in a row that say the service is down, about two
          photos at least, whatever the window's successes--> OPEN
    OPEN --probe interval over (the probe schedule: grows on consecutive trips up to a short
          cap)--> HALF_OPEN
    HALF_OPEN --exactly k probes reported, success ratio >= close_ratio--> CLOSED
    CLOSED --``drift_calls`` answers in a row out of schema, each about another photo--> OPEN
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

:func:`step` is the state machine (policy + state + event -> new state); it reads no clock and
does no I/O. Every change it makes increments ``generation``; the shared breaker
(``fme_ai_resilience.services.resilience.breaker.CircuitBreaker``) writes a change only by
compare-and-set on that generation, so two engines cannot both apply it.
Recovery is a probe schedule (:func:`probe_schedule`): by default one probe 5 s after the
trip, then one each 10, 20 and 30 s, then one every 30 s however long the outage lasts, so
the fleet learns that the service is back within one probe interval (at most
``cooldown_max_s``), and calls into a dead service stay one probe round per interval
(:func:`outage_probe_bound`).
Slow is not down: a slow call never opens the circuit (the fleet's concurrency limit and its
time-to-first-byte limit follow a slow service, :mod:`fme_ai_resilience.core.resilience.concurrency`); which
failures say "down" is :func:`fme_ai_resilience.core.resilience.blame.says_down`.
Manual modes sit beside the automatic state: FORCED_OPEN refuses every call, FORCED_CLOSED
admits every call, DISABLED admits every call and only records metrics; ``reset`` returns to
AUTO and CLOSED.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace
from typing import List, Optional, Sequence, Tuple, Union

from ..checks import count, finite
from ..config.fields import check_field, positive_fields, ratio_fields
from ..errors import CircuitOpenError, ConfigurationError, ErrorClass
from ..ledger import CallWindow

__all__ = ["BreakerSettings", "BreakerPolicy", "CircuitState", "BreakerMode", "BreakerState", "WindowObserved",
           "DriftObserved", "StreakObserved", "TimePassed", "ProbesObserved", "Manual", "Event",
           "drifted", "streaking", "cooldown_s", "probe_schedule", "outage_probe_bound",
           "should_trip", "EVIDENCE_CALLS", "down_for_others", "probes_needed", "step",
           "effective_state", "Permit", "CircuitOpen", "BreakerAnswer"]


@dataclass(frozen=True)
class BreakerSettings:
    """The shared circuit breaker (docs/breaker.md).

    Detection: ``consecutive_failures`` calls in a row that say the service is down (refused
    connections, 502/503/504, time-to-first-byte timeouts the fleet had already waited longer
    for), about two photos at least, open the circuit whatever the window's successes; the
    failure rate over ``window_s`` (at least ``min_calls`` calls) catches partial failure.
    Slow calls never open it (slow is not down): ``slow_call_s`` only says which calls
    ``status`` and ``calibrate`` count as slow.
    Recovery is a probe schedule: an open circuit admits one probe (``half_open_probes``)
    after ``cooldown_s``, then after each failed probe the interval doubles
    (``cooldown_factor``) up to ``cooldown_max_s``, the longest the fleet takes to learn that
    a service is back, whatever the outage's length.
    ``drift_calls`` answers in a row that do not match the schema, about at least two
    photos, mean the model drifted: they open the circuit whatever the window holds, the
    photos wait deferred for the fix, and the drifted model gets only the probes.
    The photos an open circuit (or the fleet's full limit of calls) turns away wait for the
    next probe (or a free place) at a random place within ``line_s`` behind it, so no photo
    stands first in every round; a photo whose failure the service is blamed for waits
    ``behind_s`` behind the next probe, behind that line, so the next probe is likely
    another photo's. Both are times like the others: a time-compressed run scales them.
    """

    failure_rate: float = 0.5
    min_calls: int = 20
    window_s: float = 60.0
    slow_call_s: float = 20.0
    consecutive_failures: int = 5
    cooldown_s: float = 5.0
    cooldown_max_s: float = 30.0
    cooldown_factor: float = 2.0
    half_open_probes: int = 1
    close_ratio: float = 0.8
    probe_timeout_s: float = 60.0
    cache_ttl_s: float = 1.0
    drift_calls: int = 3
    line_s: float = 1.0
    behind_s: float = 1.5

    def __post_init__(self) -> None:
        # A rate of 0 would trip a healthy service and close on a round of failed probes.
        ratio_fields("breaker", self, "failure_rate", "close_ratio", allow_zero=False)
        positive_fields("breaker", self, "min_calls", "window_s", "slow_call_s", "cooldown_s",
                  "cooldown_max_s", "half_open_probes", "probe_timeout_s", "drift_calls",
                  "consecutive_failures", "behind_s")
        positive_fields("breaker", self, "cache_ttl_s", "line_s", allow_zero=True)
        check_field("breaker", "behind_s", self.behind_s, self.behind_s > self.line_s,
               "must be > line_s (a photo the service was blamed for waits behind the line)")
        finite("breaker.cooldown_factor", self.cooldown_factor, minimum=1)
        check_field("breaker", "cooldown_max_s", self.cooldown_max_s,
               self.cooldown_max_s >= self.cooldown_s, "must be >= cooldown_s")
        check_field("breaker", "cache_ttl_s", self.cache_ttl_s, self.cache_ttl_s <= 1.0,
               "engines must see a state change within 1 s")
        check_field("breaker", "drift_calls", self.drift_calls, self.drift_calls >= 2,
               "must be >= 2 (answers about two photos tell drift from one odd photo)")
        check_field("breaker", "consecutive_failures", self.consecutive_failures,
               self.consecutive_failures >= 2,
               "must be >= 2 (failures about two photos tell an outage from one odd photo)")

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
        count("generation", self.generation)
        count("trips", self.trips)
        if self.state is CircuitState.OPEN and self.open_until is None:
            raise ConfigurationError("open_until", None, "is required when state is OPEN")


# -- events ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WindowObserved:
    """The call statistics of a closed circuit's window were read."""

    window: CallWindow


@dataclass(frozen=True)
class DriftObserved:
    """The service's latest ``answers`` answers in a row did not match the schema, about
    ``photos`` different photos, ``first`` of them a photo's first call (None: all)."""

    answers: int
    photos: int
    first: Optional[int] = None

    def __post_init__(self) -> None:
        count("answers", self.answers)
        count("photos", self.photos)
        if self.first is None:
            object.__setattr__(self, "first", self.answers)
        count("first", self.first)


@dataclass(frozen=True)
class StreakObserved:
    """The service's latest ``failures`` calls in a row each said it is down (refused
    connections, 502/503/504, time-to-first-byte timeouts no longer wait could cure), about
    ``photos`` different photos."""

    failures: int
    photos: int

    def __post_init__(self) -> None:
        count("failures", self.failures)
        count("photos", self.photos)


@dataclass(frozen=True)
class TimePassed:
    """Nothing happened but the clock moved (an open circuit may become half-open)."""


@dataclass(frozen=True)
class ProbesObserved:
    """The probe tally of a half-open circuit: reported successes and failures."""

    successes: int
    failures: int

    def __post_init__(self) -> None:
        count("successes", self.successes)
        count("failures", self.failures)


class Manual(str, enum.Enum):
    """An operator's command."""

    FORCE_OPEN = "FORCE_OPEN"
    FORCE_CLOSED = "FORCE_CLOSED"
    DISABLE = "DISABLE"
    RESET = "RESET"


Event = Union[WindowObserved, DriftObserved, StreakObserved, TimePassed, ProbesObserved, Manual]


# -- pure policy -------------------------------------------------------------------------------
def cooldown_s(policy: BreakerPolicy, trips: int) -> float:
    """The probe interval after the ``trips``-th consecutive trip (1 = first): the wait
    before the next half-open round, capped at ``cooldown_max_s``; seconds."""
    value = policy.cooldown_s
    if policy.cooldown_factor == 1:
        return value
    for _ in range(max(0, trips - 1)):
        value *= policy.cooldown_factor
        if value >= policy.cooldown_max_s:
            return policy.cooldown_max_s
    return min(policy.cooldown_max_s, value)


def probe_schedule(policy: BreakerPolicy, window_s: float) -> Tuple[float, ...]:
    """When the half-open rounds of a circuit that stays failing start, in seconds after it
    opened, for every round that starts before ``window_s``.

    The earliest each round can start: a round starts only when its interval is over and an
    engine asks, and a failed round re-opens the circuit for the next, longer interval.
    """
    window_s = finite("window_s", window_s, minimum=0)
    starts: List[float] = []
    at, trips = 0.0, 1
    while True:
        at += cooldown_s(policy, trips)
        if at >= window_s:
            return tuple(starts)
        starts.append(at)
        trips += 1


def outage_probe_bound(policy: BreakerPolicy, outage_s: float, *, facts: int) -> int:
    """The most probe calls the breaker admits into a service that stays down for
    ``outage_s`` seconds after its circuit opened: ``half_open_probes`` per round of
    :func:`probe_schedule`, capped at ``facts``, the photos there are to ask about, as the
    drill judges it (a fleet without a breaker makes at least one call per photo: a bound
    above that could not tell the two apart). The cap is a true bound only while the outage
    holds at most ``facts`` rounds (about ``facts`` x ``cooldown_max_s`` seconds): the breaker
    goes on probing once per interval however long the outage lasts."""
    rounds = len(probe_schedule(policy, outage_s))
    return min(count("facts", facts), rounds * policy.half_open_probes)


def should_trip(policy: BreakerPolicy, window: CallWindow) -> bool:
    """Whether a closed circuit opens on ``window`` (enough calls, the failure rate at its
    threshold). Slow calls do not count: slow is not down."""
    if window.calls < policy.min_calls:
        return False
    return window.failure_rate >= policy.failure_rate


def streaking(policy: BreakerPolicy, event: StreakObserved) -> bool:
    """Whether calls in a row that said "down" open the circuit: ``consecutive_failures`` of
    them, about two photos at least (one photo the service never answers is its own dead
    letter, not an outage)."""
    return event.failures >= policy.consecutive_failures and event.photos >= 2


def drifted(policy: BreakerPolicy, event: DriftObserved) -> bool:
    """Whether answers out of schema in a row say the model drifted: ``drift_calls`` of them,
    each about another photo, two at least a photo's first call (a few odd photos answered
    again, whose second tries come together, are their own dead letters, not a drift)."""
    return (event.answers >= policy.drift_calls and event.photos >= policy.drift_calls
            and (event.first or 0) >= min(2, policy.drift_calls))


#: How many of a service's latest calls :func:`down_for_others` reads.
EVIDENCE_CALLS = 50


def down_for_others(policy: BreakerPolicy, task_key: str,
                    latest: Sequence[Tuple[Optional[str], Optional[str]]]) -> bool:
    """Whether a failed call about ``task_key``'s photo says the service is down, rather than
    that the service cannot answer this photo, from the service's ``latest`` calls (newest
    first, ``(error_class, task_key)``, error class None for an answer; the failed call
    itself first).

    Not when the latest ``drift_calls`` calls were all about this photo (nothing says the
    service fails for others), nor, for an answer out of schema, when they were about fewer
    than ``drift_calls`` photos (the evidence that opens the circuit for drift: a few photos
    the model never answers in schema, probing in turn once every other photo is done, are
    theirs, not a drifted model's, or they would be probed and paid for without end), nor when
    the service answered a call after one of this photo's earlier failures (it answers others
    and fails this photo). Otherwise the failures of other photos since the last answer say
    the service is down.
    """
    window = latest[:policy.drift_calls]
    if all(key == task_key for _, key in window):
        return False
    if window[0][0] == ErrorClass.BAD_FORMAT.value and \
            len({key for _, key in window}) < policy.drift_calls:
        return False
    answered = False
    for error_class, key in latest:
        if error_class is None:
            answered = True
        elif answered and key == task_key:
            return False
    return True


def probes_needed(policy: BreakerPolicy) -> int:
    """Successful probes (of ``half_open_probes``) needed to close the circuit."""
    return math.ceil(policy.close_ratio * policy.half_open_probes - 1e-9)


def _open(policy: BreakerPolicy, state: BreakerState, *, now: float) -> BreakerState:
    trips = state.trips + 1
    return replace(state, state=CircuitState.OPEN, generation=state.generation + 1,
                   changed_at=now, open_until=now + cooldown_s(policy, trips), trips=trips)


def _moved(current: BreakerState, *, now: float, **changes: object) -> BreakerState:
    return replace(current, generation=current.generation + 1, changed_at=now, **changes)


def step(policy: BreakerPolicy, state: BreakerState, event: Event, *,
         now: float) -> BreakerState:
    """The state after ``event`` at ``now``; ``state`` itself (same object) when nothing changes.

    Any change increments ``generation``. Manual modes freeze the automatic state: only a
    manual command changes a circuit that is not in AUTO mode.
    """
    if isinstance(event, Manual):
        return _manual(state, Manual(event), now=now)
    if state.mode is not BreakerMode.AUTO:
        return state
    if isinstance(event, WindowObserved):
        if state.state is CircuitState.CLOSED and should_trip(policy, event.window):
            return _open(policy, state, now=now)
        return state
    if isinstance(event, DriftObserved):
        if state.state is CircuitState.CLOSED and drifted(policy, event):
            return _open(policy, state, now=now)
        return state
    if isinstance(event, StreakObserved):
        if state.state is CircuitState.CLOSED and streaking(policy, event):
            return _open(policy, state, now=now)
        return state
    if isinstance(event, TimePassed):
        if state.state is CircuitState.OPEN and now >= (state.open_until or 0.0):
            return _moved(state, now=now, state=CircuitState.HALF_OPEN, open_until=None)
        return state
    if isinstance(event, ProbesObserved):
        if state.state is not CircuitState.HALF_OPEN:
            return state
        if event.successes + event.failures < policy.half_open_probes:
            return state
        if event.successes >= probes_needed(policy):
            return _moved(state, now=now, state=CircuitState.CLOSED, open_until=None, trips=0)
        return _open(policy, state, now=now)
    raise ConfigurationError("event", event, "is not a breaker event")


def _manual(state: BreakerState, command: Manual, *, now: float) -> BreakerState:
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
        finite("retry_after_s", self.retry_after_s, minimum=0)

    def __bool__(self) -> bool:
        return False

    def to_error(self) -> CircuitOpenError:
        """The exception form, for callers that prefer raising."""
        return CircuitOpenError(self.service, self.retry_after_s)


#: What ``CircuitBreaker.allow()`` answers: leave to call, or a refusal.
BreakerAnswer = Union[Permit, CircuitOpen]


def effective_state(state: BreakerState) -> CircuitState:
    """How a circuit looks to callers: a forced mode counts as OPEN or CLOSED."""
    if state.mode is BreakerMode.FORCED_OPEN:
        return CircuitState.OPEN
    if state.mode is not BreakerMode.AUTO:
        return CircuitState.CLOSED
    return state.state
