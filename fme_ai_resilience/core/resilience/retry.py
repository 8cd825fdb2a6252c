"""The retry policy: what to do after each attempt, as a pure decision step.

An *outcome* is any object with ``error_class`` (``None`` means success) and ``retry_after_s``
(``None`` when the service gave no hint); the Vision client's ``VisionOutcome`` is one.
:meth:`RetryPolicy.decide` turns the history so far plus the latest outcome into a
:class:`RetryDecision`:

* ``SUCCESS`` - done;
* ``RETRY`` after ``wait_s`` - a short wait, inside the engine;
* ``PARK`` until ``until`` (epoch seconds) - the next attempt is further away than
  ``max_inline_wait_s``, beyond the task's deadline, refused by the fleet-wide retry gate, or the
  class never counts an attempt (open circuit): the caller stores the task for later and moves on;
* ``GIVE_UP`` - the class is final, its own limit is spent (BAD_FORMAT: one retry) or the
  task-wide attempt budget is spent; ``failure_class`` says which dead letter it becomes.

The loop that runs a callable under a policy, sleeping through an injected clock, is
``fme_ai_resilience.services.resilience.retry.Retrying``.
"""
from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Optional, Protocol, Tuple

from ..checks import count, finite
from ..clock import Deadline
from ..config.fields import check_field, enum_field, positive_fields, ratio_fields
from ..errors import ConfigurationError, ErrorClass, FailureClass
from ..intake.policy import IntakeSettings
from .backoff import MAX_RETRY_AFTER_S, Backoff, Jitter
from .breaker import BreakerSettings
from .classification import CLASSIFICATION, ClassRule
from .task_budget import task_budget_s
from .timeouts import TimeoutBudget

__all__ = ["RetrySettings", "PolicySources", "AttemptResult", "RetryGate", "DecisionKind",
           "AttemptRecord", "RetryHistory", "RetryDecision", "RetryEvent", "RetryHook",
           "RetryPolicy"]


@dataclass(frozen=True)
class RetrySettings:
    """Backoff and attempt budgets (docs/retries.md).

    ``task_attempts`` is 5 so that the defaults fit their own task budget: five attempts of
    the 30 s per-call limit and four inline waits of 5 s take 170 s of the 180 s budget
    (docs/retries.md explains the choice).
    """

    backoff_base_s: float = 1.0
    backoff_cap_s: float = 60.0
    jitter: Jitter = Jitter.FULL
    task_attempts: int = 5
    max_inline_wait_s: float = 5.0
    fleet_retry_ratio: float = 0.1
    fleet_retry_floor_per_s: float = 0.2
    fleet_window_s: float = 60.0

    def __post_init__(self) -> None:
        positive_fields("retry", self, "backoff_base_s", "backoff_cap_s", "task_attempts",
                  "fleet_window_s")
        positive_fields("retry", self, "max_inline_wait_s", "fleet_retry_floor_per_s", allow_zero=True)
        ratio_fields("retry", self, "fleet_retry_ratio")
        enum_field("retry", self, "jitter", Jitter)
        check_field("retry", "backoff_cap_s", self.backoff_cap_s,
               self.backoff_cap_s >= self.backoff_base_s, "must be >= backoff_base_s")


class AttemptResult(Protocol):
    """What one attempt produced (duck-typed; ``error_class`` None means success)."""

    error_class: Optional[ErrorClass]
    retry_after_s: Optional[float]


class PolicySources(Protocol):
    """What :meth:`RetryPolicy.from_settings` reads of the settings (``Settings`` has it all)."""

    @property
    def retry(self) -> RetrySettings: ...

    @property
    def breaker(self) -> BreakerSettings: ...

    @property
    def intake(self) -> IntakeSettings: ...

    @property
    def timeouts(self) -> TimeoutBudget: ...


class RetryGate(Protocol):
    """The fleet-wide retry budget: may this engine retry inline right now?"""

    def allow_retry(self, *, now: float) -> bool:
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
        count("prior_attempts", self.prior_attempts)
        object.__setattr__(self, "prior_by_class", MappingProxyType(
            {ErrorClass(k): int(v) for k, v in self.prior_by_class.items()}))

    def with_attempt(self, record: AttemptRecord) -> "RetryHistory":
        """A new history with ``record`` appended."""
        return RetryHistory(self.attempts + (record,), self.prior_attempts, self.prior_by_class)

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
class RetryDecision:
    """The policy's answer after one attempt (see the module docstring for the kinds).

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
    """An immutable retry policy (docs/retries.md).

    ``max_attempts`` is the task-wide budget across every class (first call included);
    ``max_inline_wait_s`` is the longest wait done inside an engine (longer ones park);
    ``deadline_s`` is the default per-task deadline :class:`Retrying` uses when none is given
    (None: only the attempt budget stops). ``attempt_s`` is the longest one attempt can take
    (the per-call timeout budget): when set, an inline retry is made only if its wait *and*
    a whole attempt still fit before the deadline, so the deadline bounds the time a task holds
    an engine, not just its waits. ``rules`` is the classification table.
    ``park_last_attempt`` parks the budget's last attempt, and a class's last retry (the one
    retry of an answer out of schema), instead of making it inline (the processor's policy:
    by the end of its backoff a fleet-wide outage or a drifted model shows on the shared
    breaker, which defers the task without spending it). ``format_wait_s`` is the least wait
    before an answer out of schema is asked again (the processor's: ``breaker.cooldown_max_s``,
    time for the breaker to tell a drifted model, whose answers come from many engines at
    once, from one photo the model cannot answer, which then spends its one retry).
    """

    max_attempts: int = RetrySettings.task_attempts
    max_inline_wait_s: float = RetrySettings.max_inline_wait_s
    backoff: Backoff = field(default_factory=Backoff)
    deadline_s: Optional[float] = None
    attempt_s: Optional[float] = None
    park_last_attempt: bool = False
    format_wait_s: float = 0.0
    rules: Mapping[ErrorClass, ClassRule] = field(default_factory=lambda: CLASSIFICATION,
                                                  repr=False)

    def __post_init__(self) -> None:
        count("retry.task_attempts", self.max_attempts, minimum=1)
        finite("retry.max_inline_wait_s", self.max_inline_wait_s, minimum=0)
        if self.deadline_s is not None:
            finite("deadline_s", self.deadline_s, above=0)
        if self.attempt_s is not None:
            finite("attempt_s", self.attempt_s, above=0)
        finite("format_wait_s", self.format_wait_s, minimum=0)
        missing = [c.value for c in ErrorClass if c not in self.rules]
        if missing:
            raise ConfigurationError("rules", missing, "every error class needs a rule")

    @classmethod
    def from_settings(cls, settings: "PolicySources") -> "RetryPolicy":
        """The policy the settings describe.

        The deadline is the task budget (1.5 x promise); one attempt takes at most the whole
        per-call timeout budget (``settings.timeouts.total_s``); an answer out of schema is
        asked again after ``breaker.cooldown_max_s`` at the soonest.
        """
        r = settings.retry
        return cls(max_attempts=r.task_attempts, max_inline_wait_s=r.max_inline_wait_s,
                   backoff=Backoff(r.backoff_base_s, r.backoff_cap_s, r.jitter),
                   deadline_s=task_budget_s(settings.intake.latency_promise_s),
                   attempt_s=settings.timeouts.total_s, park_last_attempt=True,
                   format_wait_s=settings.breaker.cooldown_max_s)

    def decide(self, history: RetryHistory, outcome: Any, *, now: float, rng: random.Random,
               deadline: Optional[Deadline] = None,
               gate: Optional[RetryGate] = None) -> RetryDecision:
        """What to do after ``outcome``: the pure step, no sleeping and no clock reads.

        ``now`` is epoch seconds; ``rng`` draws the jitter (seed it for a reproducible run);
        ``deadline`` bounds every inline wait and, with ``attempt_s``, the attempt after it;
        ``gate`` is the optional fleet-wide budget, asked only when the engine would otherwise
        retry inline.
        """
        error_class = outcome.error_class
        if error_class is None:
            return RetryDecision(DecisionKind.SUCCESS,
                                 history.with_attempt(AttemptRecord(None, now)))
        error_class = ErrorClass(error_class)
        rule = self.rules[error_class]

        def give_up(failure: Optional[FailureClass], reason: str) -> RetryDecision:
            return RetryDecision(DecisionKind.GIVE_UP,
                                 history.with_attempt(AttemptRecord(error_class, now)),
                                 error_class, failure_class=failure or FailureClass.BUDGET,
                                 reason=reason)

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
                retry_number, rng=rng, previous_s=history.last_wait_s)
            why = f"{rule.backoff.value} backoff"
            if error_class is ErrorClass.BAD_FORMAT and wait < self.format_wait_s:
                wait, why = self.format_wait_s, "time to tell drift from one odd photo"
        failed = history.with_attempt(AttemptRecord(error_class, now, wait))

        def park(reason: str) -> RetryDecision:
            return RetryDecision(DecisionKind.PARK, failed, error_class, wait_s=wait,
                                 until=now + wait, reason=reason)

        if not rule.counts_attempt:
            return park(f"{error_class.value} spends no attempt; parked for {wait:.1f}s ({why})")
        if wait > self.max_inline_wait_s:
            return park(f"{why} {wait:.1f}s exceeds the inline limit {self.max_inline_wait_s:g}s")
        if self.park_last_attempt and (
                history.counted(self.rules) + 2 >= self.max_attempts
                or (rule.max_retries is not None
                    and history.failures_of(error_class) + 1 >= rule.max_retries)):
            return park(f"the last attempt of {self.max_attempts} waits {wait:.1f}s parked")
        if deadline is not None:
            left = deadline.remaining(now=now)
            if wait >= left:
                return park(f"{why} {wait:.1f}s exceeds the {left:.1f}s left")
            if self.attempt_s is not None and wait + self.attempt_s > left:
                return park(f"{why} {wait:.1f}s plus one attempt of up to {self.attempt_s:g}s "
                            f"does not fit in the {left:.1f}s left")
        if gate is not None and not gate.allow_retry(now=now):
            return park("fleet-wide retry budget spent")
        return RetryDecision(DecisionKind.RETRY, failed, error_class, wait_s=wait,
                             reason=f"retry in {wait:.2f}s ({why})")
