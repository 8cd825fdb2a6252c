"""The fleet's adaptive concurrency limit and the time budget that follows the service; pure.

Slow is not down (docs/vision.md, docs/breaker.md). A Vision AI service that queues or thinks
answers late, not never, so the fleet adapts to it instead of giving up on it:

* **How many calls are in flight across every engine** follows the service, as Netflix's
  Gradient2 limit does, with AIMD's cut on loss: :func:`observe` grows the limit while answers
  come back fast and clean (a call per answer while the latency shows no queueing, so the
  limit doubles with each round of answers, like TCP's slow start), shrinks it
  when the latency grows past :data:`TOLERANCE` x its long-run average (the service queues),
  and cuts it by :data:`BACKOFF` on a drop (a time-to-first-byte timeout, 429, 5xx, a
  transport failure); always between 1 and ``concurrency.ceiling``. A limit nobody fills
  (fewer than half its calls in flight) does not grow. The limit is shared through the
  ledger, so every engine on every host agrees (``fme_ai_resilience.services.resilience.concurrency``).
* **How long a call waits for its first byte** follows the service too (:func:`ttfb_s`): at
  least ``timeouts.ttfb_s``, and once the service answers slowly :data:`HEADROOM` x the
  slowest recent answer; a time-to-first-byte timeout doubles it at once, for that photo's
  next call and the fleet's. A call never waits past what the task's deadline leaves.
* **A call the engine gave up on** is still being computed by the service: it counts as in
  flight until the service could no longer be working on it (:func:`abandoned_for_s`).

Everything here is a function of the state and the sample: no clock, no I/O.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace
from typing import Optional

from ..checks import count, finite

__all__ = ["ConcurrencySettings", "LimitState", "Signal", "Sample", "observe", "ttfb_s",
           "abandoned_for_s", "slots", "room", "signal_of", "TOLERANCE", "SMOOTHING", "QUEUE", "BACKOFF",
           "HEADROOM", "LONG_WINDOW", "PEAK_DECAY", "RELAX", "MAX_CEILING"]

#: A latency up to this multiple of the long-run average is no sign of queueing.
TOLERANCE = 1.5
#: How far one answer moves the limit toward what it suggests.
SMOOTHING = 0.2
#: The calls one answer may add to the limit before smoothing (Gradient2's queue size).
QUEUE = 4.0
#: The limit after a drop, as a share of the limit before it.
BACKOFF = 0.75
#: The time-to-first-byte limit as a multiple of the slowest recent answer.
HEADROOM = 2.0
#: The answers the long-run latency average spans.
LONG_WINDOW = 100
#: How much of the slowest recent answer each faster answer keeps (it fades over ~100
#: answers, so photos the model is slow on keep the fleet waiting long enough for them).
PEAK_DECAY = 0.99
#: How far the time-to-first-byte limit comes down per answer toward what the latency needs.
RELAX = 0.9
#: How much of the long-run average an answer at under half of it keeps (Gradient2's relief).
_RELIEF = 0.95
#: The largest ceiling a deployment may set (each call in flight is a ledger row).
MAX_CEILING = 10_000


@dataclass(frozen=True)
class ConcurrencySettings:
    """How many Vision AI calls the fleet has in flight (docs/vision.md, "Several calls in
    flight").

    ``ceiling`` is the most calls in flight across every engine on every host, whatever the
    adaptive limit says; ``per_engine`` how many one engine (one WS-02 job) works at once
    (its worker threads; 1 works one task at a time); ``start`` the limit a new ledger starts
    at (it grows within a few answers). The defaults fit the common case: the limit finds the
    service's own capacity.
    """

    ceiling: int = 32
    per_engine: int = 8
    start: int = 1

    def __post_init__(self) -> None:
        count("concurrency.ceiling", self.ceiling, minimum=1, maximum=MAX_CEILING)
        count("concurrency.per_engine", self.per_engine, minimum=1, maximum=MAX_CEILING)
        count("concurrency.start", self.start, minimum=1, maximum=self.ceiling)


class Signal(str, enum.Enum):
    """What one finished call says about the service's load."""

    ANSWER = "answer"     # a complete answer in schema: its latency is a sample
    NEUTRAL = "neutral"   # says nothing of load: an answer out of schema, a 4xx for the photo
    TIMEOUT = "timeout"   # no first byte within the call's limit: the service queues or thinks
    DROP = "drop"         # 429, 5xx, a refused or cut connection: shed load


@dataclass(frozen=True)
class Sample:
    """One finished call: its ``signal``, its duration ``latency_s``, the calls in flight in
    the fleet when it started (itself included) and the time-to-first-byte limit it ran
    under."""

    signal: Signal
    latency_s: float
    in_flight: int
    ttfb_limit_s: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "signal", Signal(self.signal))
        finite("latency_s", self.latency_s, minimum=0)
        count("in_flight", self.in_flight)
        finite("ttfb_limit_s", self.ttfb_limit_s, above=0)


@dataclass(frozen=True)
class LimitState:
    """One service's shared row: the ``limit`` on calls in flight (a real number, whole calls
    are :func:`slots`), the time-to-first-byte limit in force (``ttfb_s``; None: the
    configured one), the long-run average latency and the slowest recent answer (None before
    the first answer), in seconds."""

    limit: float = 1.0
    ttfb_s: Optional[float] = None
    rtt_long_s: Optional[float] = None
    rtt_peak_s: Optional[float] = None

    def __post_init__(self) -> None:
        finite("limit", self.limit, minimum=1)
        for name in ("ttfb_s", "rtt_long_s", "rtt_peak_s"):
            if getattr(self, name) is not None:
                finite(name, getattr(self, name), minimum=0)

    @classmethod
    def initial(cls, settings: ConcurrencySettings) -> "LimitState":
        """The state a service starts with: ``concurrency.start`` calls, nothing measured."""
        return cls(limit=float(settings.start))


def slots(settings: ConcurrencySettings, state: LimitState) -> int:
    """The whole calls the limit allows in flight now, between 1 and the ceiling."""
    return max(1, min(settings.ceiling, int(math.floor(state.limit + 1e-9))))


def room(settings: ConcurrencySettings, state: LimitState, in_flight: int) -> bool:
    """Whether one more call may start with ``in_flight`` calls already in flight."""
    return in_flight < slots(settings, state)


def observe(settings: ConcurrencySettings, state: LimitState, sample: Sample, *,
            base_ttfb_s: float, cap_ttfb_s: float) -> LimitState:
    """The state after ``sample`` (see the module docstring).

    ``base_ttfb_s`` is the configured time-to-first-byte limit (the least the fleet waits),
    ``cap_ttfb_s`` the most a call may wait (what a task's whole deadline leaves).
    """
    base = finite("base_ttfb_s", base_ttfb_s, above=0)
    cap = max(base, finite("cap_ttfb_s", cap_ttfb_s, above=0))
    signal, latency = sample.signal, sample.latency_s
    limit = min(state.limit, float(settings.ceiling))
    ttfb = min(cap, max(base, state.ttfb_s if state.ttfb_s is not None else base))
    long_s, peak = state.rtt_long_s, state.rtt_peak_s
    if signal is Signal.TIMEOUT:
        limit *= BACKOFF
        ttfb = min(cap, max(ttfb, 2.0 * sample.ttfb_limit_s))
        # The call took at least its limit: the slowest recent answer is at least that slow,
        # so a few fast answers for other photos do not bring the limit back under it.
        peak = max(peak or 0.0, sample.ttfb_limit_s)
    elif signal is Signal.DROP:
        limit *= BACKOFF
    elif signal is Signal.ANSWER:
        short = max(latency, 1e-6)
        long_s = short if long_s is None else long_s + (short - long_s) * 2.0 / (
            LONG_WINDOW + 1)
        if long_s / short > 2.0:   # the latency came back down: forget the slow past sooner
            long_s *= _RELIEF
        peak = short if peak is None else max(short, peak * PEAK_DECAY)
        wanted = min(cap, max(base, HEADROOM * peak))
        ttfb = wanted if ttfb < wanted else max(wanted, ttfb * RELAX)
        if sample.in_flight >= limit / 2.0:   # a limit nobody fills does not grow
            gradient = max(0.5, min(1.0, TOLERANCE * long_s / short))
            smoothed = limit * (1.0 - SMOOTHING) + (limit * gradient + QUEUE) * SMOOTHING
            # no sign of queueing: a call more per answer at least (slow start)
            limit = max(smoothed, limit + 1.0) if gradient >= 1.0 else smoothed
    limit = max(1.0, min(float(settings.ceiling), limit))
    return replace(state, limit=limit, ttfb_s=None if ttfb == base else ttfb,
                   rtt_long_s=long_s, rtt_peak_s=peak)


def ttfb_s(state: LimitState, *, base_s: float, left_s: float,
           photo_s: Optional[float] = None) -> float:
    """How long the next call may wait for its first byte: the fleet's limit in force (at
    least ``base_s``, the configured one), or ``photo_s`` when this photo's last call ran out
    of a longer one; what the task's deadline leaves (``left_s``) caps what is added to the
    configured limit, never the configured limit itself (the retry policy keeps a call that
    cannot fit the deadline from being made again)."""
    base = finite("base_s", base_s, above=0)
    wanted = max(base, state.ttfb_s or 0.0, photo_s or 0.0)
    return max(base, min(wanted, finite("left_s", left_s)))


def abandoned_for_s(state: LimitState, ttfb_used_s: float, *, cap_s: float) -> float:
    """How long after its start a call the engine gave up on (no first byte within
    ``ttfb_used_s``) still counts as in flight: until the service could no longer be working
    on it, taken as twice the wait it was given or half again the slowest recent answer,
    whichever is longer, at most ``cap_s`` (a task's whole deadline)."""
    used = finite("ttfb_used_s", ttfb_used_s, minimum=0)
    return min(finite("cap_s", cap_s, above=0),
               max(2.0 * used, 1.5 * (state.rtt_peak_s or 0.0)))


def signal_of(error_class: Optional[str], *, complete: bool = True) -> Signal:
    """What a call's outcome says about load: an answer (``error_class`` None; ``complete``
    False for one out of schema, which says nothing), a time-to-first-byte timeout, a drop
    (429, 5xx, a connection refused, reset or cut, a body that stalled) or nothing (a refusal
    of the photo or the request)."""
    if error_class is None:
        return Signal.ANSWER if complete else Signal.NEUTRAL
    name = str(getattr(error_class, "value", error_class))
    if name == "TTFB_TIMEOUT":
        return Signal.TIMEOUT
    if name in _DROPS:
        return Signal.DROP
    return Signal.NEUTRAL


_DROPS = frozenset({"RATE_LIMITED", "SERVER_ERROR", "CONNECTION_ERROR", "CONNECT_TIMEOUT",
                    "BODY_TIMEOUT", "TRUNCATED"})
