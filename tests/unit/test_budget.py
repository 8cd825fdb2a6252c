"""Timeout budgets, the task budget, worst-case task time and the capacity plan."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fme_ai_resilience.core.resilience.backoff import Backoff
from fme_ai_resilience.core.intake.capacity import MAX_DRAIN_RETRY_AFTER_S, plan_capacity
from fme_ai_resilience.core.resilience.timeouts import TimeoutBudget
from fme_ai_resilience.core.resilience.task_budget import (check_budget, task_budget_s,
                                                           worst_case_task_s)
from fme_ai_resilience.core.resilience.classification import CLASSIFICATION
from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.core.resilience.retry import RetryPolicy
from fme_ai_resilience.core.config.settings import Settings


def test_timeout_defaults_are_the_seeds():
    """connect 3 s, TLS 3 s, TTFB 20 s, body 4 s: 30 s for one call at most."""
    t = TimeoutBudget()
    assert (t.connect_s, t.tls_s, t.ttfb_s, t.body_s, t.total_s) == (3, 3, 20, 4, 30)


@pytest.mark.parametrize("name, value", [("connect_s", 0), ("ttfb_s", -1),
                                         ("body_s", float("nan")), ("tls_s", "3")])
def test_timeout_budget_rejects_bad_values(name, value):
    """A non-positive, non-finite or non-numeric phase limit names its field."""
    with pytest.raises(ConfigurationError) as info:
        TimeoutBudget(**{name: value})
    assert info.value.field == f"timeouts.{name}"


def test_task_budget_is_one_and_a_half_times_the_promise():
    """A 120 s promise gives a 180 s task budget."""
    assert task_budget_s(120) == 180.0
    with pytest.raises(ConfigurationError):
        task_budget_s(0)


def test_capacity_plan_for_the_seed_example():
    """8 engines x 120 s / 20 s gives a watermark of 48 and a drain rate of 0.4 tasks/s."""
    plan = plan_capacity(8, 20, 120)
    assert plan.watermark == 48
    assert plan.drain_rate_per_s == pytest.approx(0.4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.watermark = 1  # type: ignore[misc]


def test_watermark_floors_and_is_at_least_one():
    """A fractional watermark rounds down; a tiny pool still admits one task."""
    assert plan_capacity(3, 7, 20).watermark == 8   # 8.57
    assert plan_capacity(1, 600, 60).watermark == 1


def test_retry_after_drains_the_excess_at_the_planned_or_measured_rate():
    """Little's law: (backlog - watermark) / rate, whole seconds, at least 1."""
    plan = plan_capacity(8, 20, 120)
    assert plan.retry_after_s(100) == 130           # 52 excess / 0.4 per s
    assert plan.retry_after_s(100, drain_rate_per_s=1.0) == 52
    assert plan.retry_after_s(49) == 3              # 1 / 0.4 = 2.5 -> 3
    assert plan.retry_after_s(10) == 1              # under the watermark
    assert plan.retry_after_s(100, drain_rate_per_s=0.0) == 130   # no measurement: planned
    assert plan.retry_after_s(10**12) == MAX_DRAIN_RETRY_AFTER_S
    assert plan.saturating_backlog() == 48 + 34560      # 24 h at 0.4 per s
    assert plan.saturating_backlog(1.0) == 48 + 86400   # at the measured rate
    assert plan.retry_after_s(48 + 34559) < MAX_DRAIN_RETRY_AFTER_S


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 500), st.floats(0.1, 600), st.floats(1, 7200), st.integers(0, 10**6),
       st.one_of(st.none(), st.floats(0.001, 100)))
def test_retry_after_is_always_a_whole_positive_second(engines, mean, latency, backlog, rate):
    """Whatever the inputs, Retry-After is an int in [1, 24 h] and grows with the backlog."""
    plan = plan_capacity(engines, mean, latency)
    value = plan.retry_after_s(backlog, rate)
    assert isinstance(value, int) and 1 <= value <= MAX_DRAIN_RETRY_AFTER_S
    assert plan.retry_after_s(backlog + 100, rate) >= value


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 500), st.floats(0.1, 600), st.floats(1, 7200),
       st.one_of(st.none(), st.just(0.0), st.floats(0.001, 1000)), st.integers(0, 10**6))
def test_saturating_backlog_already_answers_the_cap(engines, mean, latency, rate, deeper):
    """From the saturating backlog on, Retry-After is the 24 h cap, so counting may stop there."""
    plan = plan_capacity(engines, mean, latency)
    cap = plan.saturating_backlog(rate)
    assert cap > plan.watermark
    assert plan.retry_after_s(cap, rate) == MAX_DRAIN_RETRY_AFTER_S
    assert plan.retry_after_s(cap + deeper, rate) == MAX_DRAIN_RETRY_AFTER_S


@pytest.mark.parametrize("args, field", [
    ((0, 20, 120), "intake.engines"),
    ((2.5, 20, 120), "intake.engines"),
    ((8, 0, 120), "intake.mean_processing_s"),
    ((8, 20, float("inf")), "intake.latency_promise_s"),
])
def test_plan_capacity_rejects_bad_inputs(args, field):
    """Non-positive or non-finite capacity inputs raise ConfigurationError naming the field."""
    with pytest.raises(ConfigurationError) as info:
        plan_capacity(*args)
    assert info.value.field == field


def test_worst_case_task_time_adds_calls_and_bounded_inline_waits():
    """Attempts x 30 s plus the longest wait before each retry, each capped at the inline limit."""
    policy = RetryPolicy(max_attempts=3, max_inline_wait_s=5.0, backoff=Backoff(1.0, 60.0))
    # a Retry-After class (429, 5xx) may be told to wait up to the inline limit every time
    assert worst_case_task_s(policy, TimeoutBudget()) == pytest.approx(3 * 30 + 5 + 5)
    assert worst_case_task_s(policy, TimeoutBudget(), attempts=1) == 30


def test_worst_case_without_retry_after_uses_the_longest_backoff_profile():
    """Without Retry-After classes the waits follow the LONG profile's bounds (4 s, then 8 s)."""
    rules = {c: dataclasses.replace(r, retry_after=False) for c, r in CLASSIFICATION.items()}
    policy = RetryPolicy(max_attempts=3, max_inline_wait_s=5.0, backoff=Backoff(1.0, 60.0),
                         rules=rules)
    assert worst_case_task_s(policy, TimeoutBudget()) == pytest.approx(3 * 30 + 4 + 5)
    short = RetryPolicy(max_attempts=3, max_inline_wait_s=5.0, backoff=Backoff(0.1, 1.0),
                        rules=rules)
    assert worst_case_task_s(short, TimeoutBudget()) == pytest.approx(3 * 30 + 0.4 + 0.8)


def test_the_default_policy_fits_the_default_task_budget():
    """Out of the box five 30 s attempts and four 5 s waits take 170 s of the 180 s budget."""
    check = check_budget(RetryPolicy(), TimeoutBudget(), 120)
    assert check.task_budget_s == 180 and check.worst_case_s == pytest.approx(170)
    assert check.fits_task_budget and check.inline_attempts == 5 and check.fits
    assert RetryPolicy().max_attempts == RetryPolicy.from_settings(Settings()).max_attempts == 5


def test_a_policy_overrunning_the_task_budget_says_how_many_attempts_fit():
    """Six 30 s attempts plus waits exceed 180 s: five fit, and the check says so."""
    check = check_budget(RetryPolicy(max_attempts=6), TimeoutBudget(), 120)
    assert check.task_budget_s == 180 and check.worst_case_s == pytest.approx(205)
    assert not check.fits_task_budget and check.inline_attempts == 5
    assert "5 of 6 attempts" in check.problems()[0]


def test_a_lease_shorter_than_the_worst_case_does_not_fit():
    """processing.lease_s must cover the worst-case task time, or a second engine may claim it."""
    short = check_budget(RetryPolicy(), TimeoutBudget(), 120, lease_s=150)
    assert short.fits_task_budget and short.fits_lease is False and not short.fits
    assert short.problems() == ("processing.lease_s 150s is shorter than the worst-case task "
                                "time 170.0s: the lease can lapse while an engine still works "
                                "on the task, and another engine claims it",)
    assert check_budget(RetryPolicy(), TimeoutBudget(), 120, lease_s=170).fits_lease is True
    assert check_budget(RetryPolicy(), TimeoutBudget(), 120).fits_lease is None
    with pytest.raises(ConfigurationError, match="lease_s"):
        check_budget(RetryPolicy(), TimeoutBudget(), 120, lease_s=float("inf"))


def test_a_smaller_policy_fits_and_the_job_limit_is_checked():
    """Four attempts fit 180 s; tm_ttc must exceed the worst case times the tasks per job."""
    policy = RetryPolicy(max_attempts=4)
    ok = check_budget(policy, TimeoutBudget(), 120, job_limit_s=600, tasks_per_job=2)
    assert ok.fits and ok.fits_job_limit and ok.problems() == ()
    short = check_budget(policy, TimeoutBudget(), 120, job_limit_s=100)
    assert short.fits_job_limit is False and not short.fits
    assert "tm_ttc" in short.problems()[0]
    assert check_budget(policy, TimeoutBudget(), 120).fits_job_limit is None


def test_check_budget_rejects_a_bad_job_limit():
    """A zero job runtime limit is a configuration error, not a silent pass."""
    with pytest.raises(ConfigurationError):
        check_budget(RetryPolicy(), TimeoutBudget(), 120, job_limit_s=0)
