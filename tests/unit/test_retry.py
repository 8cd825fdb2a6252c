"""The retry engine: the pure decision step and the loop that waits only through the clock."""
from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import List, Optional

import pytest
import requests
import urllib3

from fme_ai_resilience.core.resilience.backoff import Backoff
from fme_ai_resilience.core.resilience.task_budget import check_budget
from fme_ai_resilience.core.clock import Deadline
from fme_ai_resilience.core.errors import (CircuitOpenError, ConfigurationError, ErrorClass,
                                           FailureClass, FormatError, UnsafeURL)
from fme_ai_resilience.core.resilience.retry import (DecisionKind, RetryEvent, RetryHistory,
                                                     RetryPolicy)
from fme_ai_resilience.services.resilience.retry import Retrying, classify_exception
from fme_ai_resilience.core.config.settings import Settings

E = ErrorClass


@dataclass(frozen=True)
class Outcome:
    error_class: Optional[ErrorClass] = None
    retry_after_s: Optional[float] = None


class Script:
    """A callable that plays back outcomes (or raises exceptions) in order, then repeats the last."""

    def __init__(self, *steps):
        self.steps = list(steps)
        self.calls = 0

    def __call__(self):
        step = self.steps[min(self.calls, len(self.steps) - 1)]
        self.calls += 1
        if isinstance(step, BaseException):
            raise step
        return step


class Gate:
    def __init__(self, allow: bool):
        self.allow = allow
        self.asked: List[float] = []

    def allow_retry(self, now: float) -> bool:
        self.asked.append(now)
        return self.allow


#: Waits never park: only the budgets (six attempts) stop.
ROOMY = RetryPolicy(max_attempts=6, max_inline_wait_s=1000.0)


def engine(clock, rng, policy=ROOMY, **kw) -> Retrying:
    return Retrying(policy, clock=clock, rng=rng, **kw)


# -- the acceptance scenarios ----------------------------------------------------------------

def test_retry_after_longer_than_the_deadline_parks_instead_of_sleeping(clock, rng):
    """A 30 s Retry-After with 10 s of deadline left parks until now + 30 s; nothing sleeps."""
    policy = RetryPolicy(max_inline_wait_s=60.0)  # so only the deadline can be the reason
    deadline = Deadline(clock.now() - 170.0, 180.0)
    result = engine(clock, rng, policy).run(Script(Outcome(E.RATE_LIMITED, 30.0)),
                                            deadline=deadline)
    assert result.decision.kind is DecisionKind.PARK
    assert result.decision.until == clock.now() + 30.0
    assert "10.0s left" in result.decision.reason
    assert clock.sleeps == []


def test_bad_format_retries_exactly_once(clock, rng):
    """A schema-violating answer is tried twice in all, then becomes a FORMAT dead letter."""
    fn = Script(Outcome(E.BAD_FORMAT))
    result = engine(clock, rng).run(fn)
    assert fn.calls == 2
    assert result.decision.kind is DecisionKind.GIVE_UP
    assert result.decision.failure_class is FailureClass.FORMAT
    assert len(clock.sleeps) == 1


def test_auth_never_retries(clock, rng):
    """401/403 give up at once as an AUTH dead letter, without waiting."""
    fn = Script(Outcome(E.AUTH))
    result = engine(clock, rng).run(fn)
    assert fn.calls == 1
    assert (result.decision.kind, result.decision.failure_class) == (DecisionKind.GIVE_UP,
                                                                     FailureClass.AUTH)
    assert clock.sleeps == []


def test_task_wide_budget_stops_at_six_across_mixed_classes(clock, rng):
    """Six attempts of different transient classes spend the budget: a BUDGET dead letter."""
    fn = Script(Outcome(E.CONNECT_TIMEOUT), Outcome(E.SERVER_ERROR), Outcome(E.TTFB_TIMEOUT),
                Outcome(E.CONNECTION_ERROR), Outcome(E.BAD_FORMAT), Outcome(E.BODY_TIMEOUT),
                Outcome(E.RATE_LIMITED))
    result = engine(clock, rng).run(fn)
    assert fn.calls == 6
    assert result.decision.kind is DecisionKind.GIVE_UP
    assert result.decision.failure_class is FailureClass.BUDGET
    assert result.decision.error_class is E.BODY_TIMEOUT
    assert result.decision.attempt == 6
    assert len(clock.sleeps) == 5


# -- the decision step -----------------------------------------------------------------------

def test_success_is_success(clock, rng):
    """An outcome without an error class ends the run with the value returned."""
    ok = Outcome()
    result = engine(clock, rng).run(Script(ok))
    assert result.ok and result.value is ok and result.decision.attempt == 1


def test_plain_return_values_are_successes(clock, rng):
    """A callable returning something that is not an outcome succeeds with that value."""
    assert engine(clock, rng).run(lambda: 42).value == 42


def test_retry_after_is_honoured_inline_when_short(clock, rng):
    """A 2 s Retry-After on a 429 is slept exactly, through the clock."""
    fn = Script(Outcome(E.RATE_LIMITED, 2.0), Outcome())
    assert engine(clock, rng, RetryPolicy()).run(fn).ok
    assert clock.sleeps == [2.0]


def test_retry_after_is_ignored_for_classes_it_does_not_govern(rng):
    """A connect timeout uses its short backoff even if the outcome carries a hint."""
    d = RetryPolicy().decide(RetryHistory(), Outcome(E.CONNECT_TIMEOUT, 50.0), now=0.0, rng=rng)
    assert d.kind is DecisionKind.RETRY and d.wait_s <= 0.5


def test_long_backoff_parks_beyond_the_inline_limit(rng):
    """A wait longer than max_inline_wait_s parks the task until the wait is over."""
    policy = RetryPolicy(max_inline_wait_s=5.0, backoff=Backoff(10.0, 60.0, "equal"))
    d = policy.decide(RetryHistory(), Outcome(E.SERVER_ERROR), now=100.0, rng=rng)
    assert d.kind is DecisionKind.PARK
    assert 5.0 <= d.wait_s <= 10.0 and d.until == 100.0 + d.wait_s


def test_circuit_open_parks_without_spending_an_attempt(rng):
    """An open circuit parks for its Retry-After and leaves the attempt budget untouched."""
    history = RetryHistory(prior_attempts=5)
    d = RetryPolicy().decide(history, Outcome(E.CIRCUIT_OPEN, 1.0), now=10.0, rng=rng)
    assert d.kind is DecisionKind.PARK and d.until == 11.0
    assert d.history.counted() == 5


def test_gate_refusal_parks_a_transient_failure(rng):
    """When the fleet-wide retry gate says no, a retry that would be inline parks instead."""
    gate = Gate(False)
    d = RetryPolicy().decide(RetryHistory(), Outcome(E.CONNECT_TIMEOUT), now=7.0, rng=rng,
                             gate=gate)
    assert d.kind is DecisionKind.PARK and d.until == 7.0 + d.wait_s
    assert gate.asked == [7.0]


def test_gate_approval_retries_and_gate_is_not_asked_needlessly(clock, rng):
    """An approving gate lets the retry happen; final classes and successes never ask it."""
    gate = Gate(True)
    result = engine(clock, rng, gate=gate).run(Script(Outcome(E.SERVER_ERROR), Outcome()))
    assert result.ok and len(gate.asked) == 1
    engine(clock, rng, gate=gate).run(Script(Outcome(E.NOT_FOUND)))
    assert len(gate.asked) == 1


def test_prior_attempts_from_the_ledger_count(rng):
    """A task resumed with 5 attempts spent gives up on its next failure."""
    d = RetryPolicy().decide(RetryHistory(prior_attempts=5), Outcome(E.SERVER_ERROR), now=0.0,
                             rng=rng)
    assert (d.kind, d.failure_class) == (DecisionKind.GIVE_UP, FailureClass.BUDGET)


def test_prior_format_failure_counts_toward_the_class_limit(rng):
    """A format failure in an earlier run uses up BAD_FORMAT's single retry."""
    history = RetryHistory(prior_attempts=1, prior_by_class={"BAD_FORMAT": 1})
    d = RetryPolicy().decide(history, Outcome(E.BAD_FORMAT), now=0.0, rng=rng)
    assert (d.kind, d.failure_class) == (DecisionKind.GIVE_UP, FailureClass.FORMAT)


def test_history_is_immutable_and_grows_by_one_per_decision(rng):
    """decide never changes the history it is given; the decision carries the longer one."""
    history = RetryHistory()
    d = RetryPolicy().decide(history, Outcome(E.SERVER_ERROR), now=0.0, rng=rng)
    assert history.attempts == () and len(d.history.attempts) == 1
    assert d.history.attempts[0].wait_s == d.wait_s
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.history.prior_attempts = 3  # type: ignore[misc]


def test_same_seed_same_waits(clock):
    """Two runs with equally seeded random sources wait exactly the same."""
    from fme_ai_resilience.core.clock import FakeClock
    c1, c2 = FakeClock(), FakeClock()
    engine(c1, random.Random(9)).run(Script(Outcome(E.SERVER_ERROR)))
    engine(c2, random.Random(9)).run(Script(Outcome(E.SERVER_ERROR)))
    assert c1.sleeps == c2.sleeps and len(c1.sleeps) == 5


def test_decorrelated_waits_feed_on_the_previous_wait(rng):
    """The decorrelated strategy's next bound is three times the previous wait."""
    policy = RetryPolicy(backoff=Backoff(1.0, 1000.0, "decorrelated"), max_inline_wait_s=1e6)
    d1 = policy.decide(RetryHistory(), Outcome(E.SERVER_ERROR), now=0.0, rng=rng)
    d2 = policy.decide(d1.history, Outcome(E.SERVER_ERROR), now=0.0, rng=rng)
    assert 1.0 <= d2.wait_s <= 3.0 * d1.wait_s


def test_from_settings_takes_budget_inline_limit_backoff_and_deadline():
    """The policy mirrors the settings; the deadline is 1.5 x the latency promise."""
    s = Settings.from_mapping({"retry.task_attempts": "4", "retry.jitter": "equal",
                               "retry.max_inline_wait_s": "2", "intake.latency_promise_s": "60"})
    p = RetryPolicy.from_settings(s)
    assert (p.max_attempts, p.max_inline_wait_s, p.backoff.jitter.value, p.deadline_s) == (
        4, 2.0, "equal", 90.0)
    assert p.attempt_s == s.timeouts.total_s == 30.0


def test_a_retry_whose_attempt_would_overrun_the_deadline_parks(rng):
    """With attempt_s, a short wait still parks when a whole attempt no longer fits."""
    deadline = Deadline(0.0, 180.0)
    bounded = RetryPolicy(attempt_s=30.0)
    unbounded = RetryPolicy()
    now = 160.0  # 20 s left: any wait plus a 30 s attempt overruns
    assert bounded.decide(RetryHistory(), Outcome(E.CONNECT_TIMEOUT), now=now, deadline=deadline,
                          rng=rng).kind is DecisionKind.PARK
    assert unbounded.decide(RetryHistory(), Outcome(E.CONNECT_TIMEOUT), now=now, deadline=deadline,
                            rng=rng).kind is DecisionKind.RETRY


def test_the_engine_never_holds_a_task_past_its_deadline(clock, rng):
    """Every attempt timing out at its full 30 s budget: the run parks before the 180 s deadline."""
    settings = Settings.from_mapping({"retry.backoff_base_s": "0.01",
                                      "retry.backoff_cap_s": "0.05",
                                      "retry.task_attempts": "6"})  # more than fit
    policy = RetryPolicy.from_settings(settings)
    promised = check_budget(policy, settings.timeouts,
                            settings.intake.latency_promise_s).inline_attempts
    calls = []

    def attempt():
        calls.append(clock.now())
        clock.advance(settings.timeouts.total_s)
        return Outcome(E.CONNECT_TIMEOUT)

    result = Retrying(policy, clock=clock, rng=rng).run(attempt)
    assert result.decision.kind is DecisionKind.PARK
    assert clock.now() - calls[0] <= policy.deadline_s
    assert len(calls) == promised == 5  # the sixth would end past 180 s


@pytest.mark.parametrize("kwargs, field", [
    ({"max_attempts": 0}, "retry.task_attempts"),
    ({"max_inline_wait_s": -1.0}, "retry.max_inline_wait_s"),
    ({"deadline_s": 0.0}, "deadline_s"),
    ({"rules": {}}, "rules"),
])
def test_invalid_policy_names_the_field(kwargs, field):
    """A bad policy value raises ConfigurationError naming the setting."""
    with pytest.raises(ConfigurationError) as info:
        RetryPolicy(**kwargs)
    assert info.value.field == field


# -- exceptions ------------------------------------------------------------------------------

def test_a_classified_exception_is_retried_then_reraised_unchanged(clock, rng):
    """A connect timeout that never stops is retried to the budget, then the same object raised."""
    exc = requests.exceptions.ConnectTimeout("connect timed out")
    fn = Script(exc)
    with pytest.raises(requests.exceptions.ConnectTimeout) as info:
        engine(clock, rng).run(fn)
    assert info.value is exc and fn.calls == 6


def test_an_unknown_exception_is_raised_at_once(clock, rng):
    """An exception the classifier does not know is a bug, not a transient: no retry."""
    fn = Script(KeyError("x"))
    with pytest.raises(KeyError):
        engine(clock, rng).run(fn)
    assert fn.calls == 1 and clock.sleeps == []


def test_an_exception_that_parks_comes_back_in_the_result(clock, rng):
    """An open circuit raised by the callable parks; the result keeps the exception."""
    exc = CircuitOpenError("vision", 42.0)
    result = engine(clock, rng).run(Script(exc))
    assert result.decision.kind is DecisionKind.PARK and result.exception is exc
    assert result.decision.until == clock.now() + 42.0


def test_exception_then_success(clock, rng):
    """A transient exception followed by a success returns the success."""
    result = engine(clock, rng).run(Script(requests.exceptions.ConnectionError("reset"), "done"))
    assert result.ok and result.value == "done" and len(clock.sleeps) == 1


def test_custom_classifier_is_used(clock, rng):
    """An injected classifier decides which exceptions are which class."""
    fn = Script(KeyError("x"), "ok")
    result = engine(clock, rng, classifier=lambda e: E.SERVER_ERROR).run(fn)
    assert result.ok and fn.calls == 2


@pytest.mark.parametrize("exc, expected", [
    (requests.exceptions.ConnectTimeout(), E.CONNECT_TIMEOUT),
    (requests.exceptions.ReadTimeout(), E.TTFB_TIMEOUT),
    (requests.exceptions.ConnectionError(), E.CONNECTION_ERROR),
    (requests.exceptions.ChunkedEncodingError("Read timed out."), E.BODY_TIMEOUT),
    (requests.exceptions.ChunkedEncodingError("Connection broken"), E.CONNECTION_ERROR),
    (urllib3.exceptions.ConnectTimeoutError(), E.CONNECT_TIMEOUT),
    (urllib3.exceptions.ReadTimeoutError(None, "/", "timed out"), E.TTFB_TIMEOUT),
    (urllib3.exceptions.NewConnectionError(None, "refused"), E.CONNECTION_ERROR),
    (TimeoutError(), E.TTFB_TIMEOUT),
    (ConnectionResetError(), E.CONNECTION_ERROR),
    (CircuitOpenError("vision", 3.0), E.CIRCUIT_OPEN),
    (FormatError("drift"), E.BAD_FORMAT),
    (UnsafeURL("private address"), E.UNSAFE_URL),
    (ValueError("bug"), None),
    (requests.exceptions.HTTPError("500"), None),
])
def test_default_classifier(exc, expected):
    """Library, urllib3 and stdlib network exceptions map to the matching class; others to None."""
    assert classify_exception(exc) is expected


# -- hooks -----------------------------------------------------------------------------------

def test_hooks_receive_frozen_events(clock, rng):
    """Each failed attempt produces one frozen event with its number, class and wait."""
    events: List[RetryEvent] = []
    engine(clock, rng, hooks=[events.append]).run(
        Script(Outcome(E.SERVER_ERROR), Outcome(E.AUTH)))
    assert [(e.attempt, e.error_class, e.kind) for e in events] == [
        (1, E.SERVER_ERROR, DecisionKind.RETRY), (2, E.AUTH, DecisionKind.GIVE_UP)]
    assert events[0].wait_s == clock.sleeps[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        events[0].attempt = 9  # type: ignore[misc]


def test_default_deadline_from_policy_is_applied(clock, rng):
    """With deadline_s set and no deadline given, the run starts its own deadline."""
    policy = RetryPolicy(max_inline_wait_s=100.0, deadline_s=10.0)
    result = engine(clock, rng, policy).run(Script(Outcome(E.RATE_LIMITED, 20.0)))
    assert result.decision.kind is DecisionKind.PARK and clock.sleeps == []


def test_an_absurd_retry_after_is_clamped_to_a_day(rng):
    """An infinite or enormous hint parks for at most 24 h instead of forever."""
    d = RetryPolicy().decide(RetryHistory(), Outcome(E.RATE_LIMITED, float("inf")), now=0.0,
                             rng=rng)
    assert d.kind is DecisionKind.PARK and d.until == 86400.0


def test_a_nan_retry_after_falls_back_to_backoff(rng):
    """A NaN hint is ignored: the class's backoff decides the wait."""
    d = RetryPolicy().decide(RetryHistory(), Outcome(E.RATE_LIMITED, float("nan")), now=0.0,
                             rng=rng)
    assert d.kind is DecisionKind.RETRY and 0.0 <= d.wait_s <= 1.0
