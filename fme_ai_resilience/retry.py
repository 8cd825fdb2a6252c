"""The retry engine: a pure decision step, and a loop on top that sleeps only through a clock.

An *outcome* is any object with ``error_class`` (``None`` means success) and ``retry_after_s``
(``None`` when the service gave no hint); the Vision client's ``VisionOutcome`` is one.
:meth:`RetryPolicy.decide` turns the history so far plus the latest outcome into a
:class:`Decision`:

* ``SUCCESS`` - done;
* ``RETRY`` after ``wait_s`` - a short wait, inside the engine;
* ``PARK`` until ``until`` (epoch seconds) - the next attempt is further away than
  ``max_inline_wait_s``, beyond the task's deadline, refused by the fleet-wide retry gate, or the
  class never counts an attempt (open circuit): the caller stores the task for later and moves on;
* ``GIVE_UP`` - the class is final, its own limit is spent (BAD_FORMAT: one retry) or the
  task-wide attempt budget is spent; ``failure_class`` says which dead letter it becomes.

:class:`Retrying` runs a callable under a policy. A callable that raises is classified
(:func:`classify_exception` by default); an exception the classifier does not know is not
retried, and one the engine gives up on is re-raised unchanged.
"""
from __future__ import annotations

import enum
import logging
import random
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import (Any, Callable, Iterable, Mapping, Optional, Protocol, Tuple,
                    TYPE_CHECKING)

from .backoff import MAX_RETRY_AFTER_S, Backoff, Jitter
from .clock import Clock, Deadline, SystemClock
from .errors import (CLASSIFICATION, CircuitOpenError, ClassRule, ConfigurationError, ErrorClass,
                     FailureClass, FormatError, UnsafeURL)
from .retry_budget import FleetRetryGate, RetryBudget  # noqa: F401  (re-exported)

if TYPE_CHECKING:  # pragma: no cover
    from .settings import Settings

log = logging.getLogger(__name__)

_new = object.__new__
# Jitter for callers that pass no random source; tests and reproducible runs inject their own.
_SHARED_RNG = random.Random()


def _assemble(cls: Any, **values: Any) -> Any:
    """A frozen dataclass instance from values already known to be valid.

    The success path runs once per call in every engine; a frozen dataclass's ``__init__``
    (one guarded ``setattr`` per field, plus ``__post_init__``) is most of its cost.
    Fields left out keep their class-level defaults.
    """
    obj = _new(cls)
    obj.__dict__.update(values)
    return obj


class Outcome(Protocol):
    """What one attempt produced (duck-typed; ``error_class`` None means success)."""

    error_class: Optional[ErrorClass]
    retry_after_s: Optional[float]


class RetryGate(Protocol):
    """The fleet-wide retry budget: may this engine retry inline right now?"""

    def allow_retry(self, now: float) -> bool:
        """False when retries across the fleet are over budget (the failure then parks)."""


class DecisionKind(str, enum.Enum):
    """What to do after an attempt."""

    SUCCESS = "SUCCESS"
    RETRY = "RETRY"
    PARK = "PARK"
    GIVE_UP = "GIVE_UP"


@dataclass(frozen=True)
class AttemptRecord:
    """One finished attempt in a :class:`RetryHistory`; ``wait_s`` is the wait chosen after it."""

    error_class: Optional[ErrorClass]
    at: float
    wait_s: Optional[float] = None


@dataclass(frozen=True)
class RetryHistory:
    """The attempts of one task so far: an immutable value, extended by :meth:`with_attempt`.

    ``prior_attempts`` and ``prior_by_class`` carry what earlier runs spent (the ledger's
    ``attempt_count``), so a task resumed after parking keeps its task-wide and per-class budgets.
    """

    attempts: Tuple[AttemptRecord, ...] = ()
    prior_attempts: int = 0
    prior_by_class: Mapping[ErrorClass, int] = field(
        default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.prior_attempts < 0:
            raise ValueError(f"prior_attempts must be >= 0, got {self.prior_attempts}")
        object.__setattr__(self, "prior_by_class", MappingProxyType(
            {ErrorClass(k): int(v) for k, v in self.prior_by_class.items()}))

    def with_attempt(self, record: AttemptRecord) -> "RetryHistory":
        """A new history with ``record`` appended."""
        return _assemble(RetryHistory, attempts=self.attempts + (record,),
                         prior_attempts=self.prior_attempts, prior_by_class=self.prior_by_class)

    def failures_of(self, error_class: ErrorClass) -> int:
        """How many attempts failed with ``error_class`` (earlier runs included)."""
        return self.prior_by_class.get(error_class, 0) + sum(
            1 for a in self.attempts if a.error_class is error_class)

    def counted(self, rules: Mapping[ErrorClass, ClassRule] = CLASSIFICATION) -> int:
        """Attempts that spend the task-wide budget (earlier runs included)."""
        return self.prior_attempts + sum(
            1 for a in self.attempts if a.error_class is None or rules[a.error_class].counts_attempt)

    @property
    def last_wait_s(self) -> Optional[float]:
        for record in reversed(self.attempts):
            if record.wait_s is not None:
                return record.wait_s
        return None


@dataclass(frozen=True)
class Decision:
    """The engine's answer after one attempt (see the module docstring for the kinds).

    ``history`` includes the attempt just decided on. ``until`` (epoch seconds) is set for PARK;
    ``failure_class`` for GIVE_UP; ``reason`` is a short human explanation for logs.
    """

    kind: DecisionKind
    history: RetryHistory
    error_class: Optional[ErrorClass] = None
    wait_s: float = 0.0
    until: Optional[float] = None
    failure_class: Optional[FailureClass] = None
    reason: str = ""

    @property
    def attempt(self) -> int:
        """The number of attempts spent so far, this one included."""
        return self.history.counted()


@dataclass(frozen=True)
class RetryEvent:
    """What hooks receive after each decided failure: the attempt, its class and what follows."""

    attempt: int
    error_class: ErrorClass
    kind: DecisionKind
    wait_s: float
    until: Optional[float]
    failure_class: Optional[FailureClass]
    reason: str
    exception: Optional[BaseException] = None


class RetryHook(Protocol):
    """Called with a frozen :class:`RetryEvent` after every failed attempt."""

    def __call__(self, event: RetryEvent) -> None: ...


@dataclass(frozen=True)
class RetryPolicy:
    """An immutable retry policy (seed section 4).

    ``max_attempts`` is the task-wide budget across every class (first call included);
    ``max_inline_wait_s`` is the longest wait done inside an engine (longer ones park);
    ``deadline_s`` is the default per-task deadline :class:`Retrying` uses when none is given
    (None: only the attempt budget stops). ``attempt_s`` is the longest one attempt can take
    (the per-call timeout budget): when set, an inline retry is made only if its wait *and*
    a whole attempt still fit before the deadline, so the deadline bounds the time a task holds
    an engine, not just its waits. ``rules`` is the classification table.
    """

    max_attempts: int = 6
    max_inline_wait_s: float = 5.0
    backoff: Backoff = field(default_factory=Backoff)
    deadline_s: Optional[float] = None
    attempt_s: Optional[float] = None
    rules: Mapping[ErrorClass, ClassRule] = field(default_factory=lambda: CLASSIFICATION,
                                                  repr=False)

    def __post_init__(self) -> None:
        if not (isinstance(self.max_attempts, int) and self.max_attempts >= 1):
            raise ConfigurationError("retry.task_attempts", self.max_attempts, "must be >= 1")
        if not self.max_inline_wait_s >= 0:
            raise ConfigurationError("retry.max_inline_wait_s", self.max_inline_wait_s,
                                     "must be >= 0")
        if self.deadline_s is not None and not self.deadline_s > 0:
            raise ConfigurationError("retry.deadline_s", self.deadline_s, "must be > 0")
        if self.attempt_s is not None and not self.attempt_s > 0:
            raise ConfigurationError("timeouts.total_s", self.attempt_s, "must be > 0")
        missing = [c.value for c in ErrorClass if c not in self.rules]
        if missing:
            raise ConfigurationError("retry.rules", missing, "every error class needs a rule")

    @classmethod
    def from_settings(cls, settings: "Settings") -> "RetryPolicy":
        """The policy the settings describe.

        The deadline is the task budget (1.5 x promise); one attempt takes at most the whole
        per-call timeout budget (``settings.timeouts.total_s``).
        """
        from .budget import task_budget_s
        r = settings.retry
        return cls(max_attempts=r.task_attempts, max_inline_wait_s=r.max_inline_wait_s,
                   backoff=Backoff(r.backoff_base_s, r.backoff_cap_s, Jitter(r.jitter)),
                   deadline_s=task_budget_s(settings.intake.latency_promise_s),
                   attempt_s=settings.timeouts.total_s)

    def decide(self, history: RetryHistory, outcome: Any, now: float,
               deadline: Optional[Deadline] = None, rng: Optional[random.Random] = None,
               gate: Optional[RetryGate] = None) -> Decision:
        """What to do after ``outcome``: the pure step, no sleeping and no clock reads.

        ``now`` is epoch seconds; ``deadline`` bounds every inline wait and, with
        ``attempt_s``, the attempt after it; ``rng`` draws the
        jitter (omitted: a process-wide unseeded source, so not reproducible); ``gate`` is the
        optional fleet-wide budget, asked only when the engine would otherwise retry inline.
        """
        error_class = outcome.error_class
        if error_class is None:
            return Decision(DecisionKind.SUCCESS, history.with_attempt(AttemptRecord(None, now)))
        error_class = ErrorClass(error_class)
        rule = self.rules[error_class]

        def give_up(failure: Optional[FailureClass], reason: str) -> Decision:
            return Decision(DecisionKind.GIVE_UP,
                            history.with_attempt(AttemptRecord(error_class, now)), error_class,
                            failure_class=failure or FailureClass.BUDGET, reason=reason)

        if not rule.retry:
            return give_up(rule.dead_letter, f"{error_class.value} is never retried")
        if rule.max_retries is not None and history.failures_of(error_class) >= rule.max_retries:
            return give_up(rule.dead_letter,
                           f"{error_class.value} retried {rule.max_retries} time(s) already")
        if rule.counts_attempt and history.counted(self.rules) + 1 >= self.max_attempts:
            return give_up(FailureClass.BUDGET,
                           f"task attempt budget of {self.max_attempts} spent")

        hint = getattr(outcome, "retry_after_s", None)
        if rule.retry_after and hint is not None and hint >= 0:
            wait, why = min(float(hint), MAX_RETRY_AFTER_S), "Retry-After"
        else:
            retry_number = len(history.attempts) + history.prior_attempts
            wait = self.backoff.for_profile(rule.backoff).delay(
                retry_number, rng or _SHARED_RNG, history.last_wait_s)
            why = f"{rule.backoff.value} backoff"
        failed = history.with_attempt(AttemptRecord(error_class, now, wait))

        def park(reason: str) -> Decision:
            return Decision(DecisionKind.PARK, failed, error_class, wait_s=wait,
                            until=now + wait, reason=reason)

        if not rule.counts_attempt:
            return park(f"{error_class.value} spends no attempt; parked for {wait:.1f}s ({why})")
        if wait > self.max_inline_wait_s:
            return park(f"{why} {wait:.1f}s exceeds the inline limit {self.max_inline_wait_s:g}s")
        if deadline is not None:
            left = deadline.remaining(now)
            if wait >= left:
                return park(f"{why} {wait:.1f}s exceeds the {left:.1f}s left")
            if self.attempt_s is not None and wait + self.attempt_s > left:
                return park(f"{why} {wait:.1f}s plus one attempt of up to {self.attempt_s:g}s "
                            f"does not fit in the {left:.1f}s left")
        if gate is not None and not gate.allow_retry(now):
            return park("fleet-wide retry budget spent")
        return Decision(DecisionKind.RETRY, failed, error_class, wait_s=wait,
                        reason=f"retry in {wait:.2f}s ({why})")


# -- exceptions -----------------------------------------------------------------------------

Classifier = Callable[[BaseException], Optional[ErrorClass]]


def classify_exception(exc: BaseException) -> Optional[ErrorClass]:
    """The error class of an exception from requests, urllib3, the stdlib or this library.

    ``None`` for anything else: such exceptions are not retried.
    """
    if isinstance(exc, CircuitOpenError):
        return ErrorClass.CIRCUIT_OPEN
    if isinstance(exc, FormatError):
        return ErrorClass.BAD_FORMAT
    if isinstance(exc, UnsafeURL):
        return ErrorClass.UNSAFE_URL
    found = _classify_http_library(exc)
    if found is not None:
        return found
    if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError from 3.10
        return ErrorClass.TTFB_TIMEOUT
    if isinstance(exc, ConnectionError):
        return ErrorClass.CONNECTION_ERROR
    return None


def _classify_http_library(exc: BaseException) -> Optional[ErrorClass]:
    # Imported here so that the pure core does not pay for requests at import time.
    import requests.exceptions as rq
    import urllib3.exceptions as u3

    if isinstance(exc, u3.NewConnectionError):  # a ConnectTimeoutError subclass in urllib3
        return ErrorClass.CONNECTION_ERROR
    if isinstance(exc, (rq.ConnectTimeout, u3.ConnectTimeoutError)):
        return ErrorClass.CONNECT_TIMEOUT
    if isinstance(exc, (rq.Timeout, u3.ReadTimeoutError, u3.TimeoutError)):
        return ErrorClass.TTFB_TIMEOUT
    if isinstance(exc, (rq.ChunkedEncodingError, u3.ProtocolError)):
        return ErrorClass.BODY_TIMEOUT if _mentions_timeout(exc) else ErrorClass.CONNECTION_ERROR
    if isinstance(exc, (rq.ConnectionError, u3.MaxRetryError)):
        return ErrorClass.CONNECTION_ERROR
    return None


def _mentions_timeout(exc: BaseException) -> bool:
    return "timed out" in str(exc).lower() or "timeout" in str(exc).lower()


# -- the loop -------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunResult:
    """The end of :meth:`Retrying.run`: the last decision and what the last attempt produced.

    ``value`` is the callable's last return value (an outcome or any value on success);
    ``exception`` is set when the last attempt raised and the decision is PARK.
    """

    decision: Decision
    value: Any = None
    exception: Optional[BaseException] = None

    @property
    def ok(self) -> bool:
        return self.decision.kind is DecisionKind.SUCCESS


@dataclass(frozen=True)
class _Raised:
    error_class: ErrorClass
    retry_after_s: Optional[float]


class Retrying:
    """Runs a callable under a :class:`RetryPolicy`, waiting only through the injected clock.

    ``classifier`` maps an exception to an :class:`ErrorClass` (None: re-raise at once);
    ``gate`` is the optional fleet-wide retry budget; ``hooks`` receive a :class:`RetryEvent`
    after each failed attempt.
    """

    def __init__(self, policy: Optional[RetryPolicy] = None, *, clock: Optional[Clock] = None,
                 rng: Optional[random.Random] = None, classifier: Classifier = classify_exception,
                 gate: Optional[RetryGate] = None, hooks: Iterable[RetryHook] = ()) -> None:
        self.policy = policy or RetryPolicy()
        self.clock = clock or SystemClock()
        self.rng = rng or _SHARED_RNG
        self.classifier = classifier
        self.gate = gate
        self.hooks = tuple(hooks)

    def run(self, fn: Callable[..., Any], *args: Any, history: Optional[RetryHistory] = None,
            deadline: Optional[Deadline] = None, **kwargs: Any) -> RunResult:
        """Call ``fn(*args, **kwargs)`` until success, a park or giving up.

        Returns a :class:`RunResult` for SUCCESS, PARK and a GIVE_UP on a returned outcome.
        Raises the callable's own exception, unchanged, when the engine gives up on it or the
        classifier does not know it.
        """
        history = history if history is not None else _EMPTY
        policy = self.policy
        # The policy's own deadline starts now but is only built once something fails.
        started = self.clock.now() if deadline is None and policy.deadline_s is not None \
            else None
        while True:
            exc: Optional[BaseException] = None
            try:
                value = fn(*args, **kwargs)
            except Exception as raised:
                error_class = self.classifier(raised)
                if error_class is None:
                    raise
                exc, value = raised, None
                outcome: Any = _Raised(error_class, getattr(raised, "retry_after_s", None))
            else:
                outcome = value
                if getattr(value, "error_class", None) is None:
                    record = _assemble(AttemptRecord, error_class=None, at=self.clock.now())
                    return _assemble(RunResult, value=value, decision=_assemble(
                        Decision, kind=DecisionKind.SUCCESS, history=history.with_attempt(record)))
            if started is not None and deadline is None:
                deadline = Deadline(started, policy.deadline_s)  # type: ignore[arg-type]
            decision = policy.decide(history, outcome, self.clock.now(), deadline, self.rng,
                                     self.gate)
            self._notify(decision, exc)
            if decision.kind is DecisionKind.RETRY:
                self.clock.sleep(decision.wait_s)
                history = decision.history
                continue
            if decision.kind is DecisionKind.GIVE_UP and exc is not None:
                raise exc
            return RunResult(decision, value, exc)

    def _notify(self, decision: Decision, exc: Optional[BaseException]) -> None:
        log.debug("attempt %d failed with %s: %s", decision.attempt,
                  decision.error_class.value if decision.error_class else "-", decision.reason)
        if not self.hooks:
            return
        event = RetryEvent(decision.attempt, decision.error_class, decision.kind,  # type: ignore[arg-type]
                           decision.wait_s, decision.until, decision.failure_class,
                           decision.reason, exc)
        for hook in self.hooks:
            hook(event)


_EMPTY = RetryHistory()
