"""The fleet-wide retry budget: pure arithmetic and the cached store-backed gate."""
from __future__ import annotations

import pytest

from fme_ai_resilience.core.ledger import CallWindow
from fme_ai_resilience.services.resilience.retry_budget import FleetRetryGate
from fme_ai_resilience.core.resilience.retry_budget import RetryBudget
from fme_ai_resilience.core.config.settings import RetrySettings, Settings


def test_budget_is_ratio_of_first_attempts_plus_floor():
    """100 first attempts at 10 % with a 0.1/s floor over 60 s allow 16 retries."""
    budget = RetryBudget(ratio=0.1, floor_per_s=0.1, window_s=60)
    assert budget.limit(CallWindow(calls=110, failures=0, slow=0, retries=10)) == pytest.approx(16)
    assert budget.allows(CallWindow(calls=115, failures=0, slow=0, retries=15))
    assert not budget.allows(CallWindow(calls=116, failures=0, slow=0, retries=16))
    assert not budget.allows(CallWindow(calls=115, failures=0, slow=0, retries=15),
                             extra_retries=1)


def test_zero_floor_quiet_service_gets_no_retries():
    """With no floor and no traffic nothing may be retried."""
    assert not RetryBudget(floor_per_s=0).allows(CallWindow(0, 0, 0, 0))


def test_from_settings_uses_fleet_settings():
    """The retry.fleet_* settings configure the budget."""
    budget = RetryBudget.from_settings(RetrySettings(fleet_retry_ratio=0.2,
                                                     fleet_retry_floor_per_s=0.0,
                                                     fleet_window_s=30.0))
    assert budget == RetryBudget(ratio=0.2, floor_per_s=0.0, window_s=30.0)


def test_validation_names_field():
    """Bad ratio, floor or window are refused with the field named."""
    for kwargs, name in (({"ratio": 1.5}, "ratio"), ({"floor_per_s": -1}, "floor_per_s"),
                         ({"window_s": 0}, "window_s")):
        with pytest.raises(ValueError, match=name):
            RetryBudget(**kwargs)


class CountingStore:
    """Answers call_window from a settable window and counts reads."""

    def __init__(self, window: CallWindow) -> None:
        self.window = window
        self.reads = []

    def call_window(self, service, since, slow_s):
        self.reads.append((service, since))
        return self.window


def test_gate_decides_grants_on_fresh_reads():
    """Every grant reads the log afresh, so a stale copy never spends headroom twice."""
    store = CountingStore(CallWindow(calls=100, failures=100, slow=0, retries=0))
    gate = FleetRetryGate("vision", RetryBudget(0.1, 0.0, 60.0), store=store, cache_ttl_s=1.0)
    assert gate.allow_retry(now=100.0) and gate.allow_retry(now=100.1)
    assert [since for _, since in store.reads] == pytest.approx([40.0, 40.1])
    store.window = CallWindow(calls=110, failures=110, slow=0, retries=10)
    assert not gate.allow_retry(now=100.2)


def test_gate_remembers_a_refusal_for_the_ttl():
    """Past the budget, refusals come from memory for cache_ttl_s, then the log is read again."""
    store = CountingStore(CallWindow(calls=110, failures=110, slow=0, retries=10))
    gate = FleetRetryGate("vision", RetryBudget(0.1, 0.0, 60.0), store=store, cache_ttl_s=1.0)
    assert [gate.allow_retry(now=10.0 + i * 0.1) for i in range(10)] == [False] * 10
    assert len(store.reads) == 1
    store.window = CallWindow(calls=130, failures=130, slow=0, retries=10)
    assert gate.allow_retry(now=11.0)
    assert len(store.reads) == 2


def test_retry_policy_parks_a_transient_failure_past_the_budget(rng):
    """Wired into RetryPolicy.decide: a refused budget parks instead of retrying inline."""
    from fme_ai_resilience.core.errors import ErrorClass
    from fme_ai_resilience.core.resilience.retry import DecisionKind, RetryHistory, RetryPolicy

    class Failed:
        error_class = ErrorClass.CONNECTION_ERROR
        retry_after_s = None

    spent = FleetRetryGate("vision", RetryBudget(0.1, 0.0, 60.0),
                           store=CountingStore(CallWindow(calls=110, failures=110, slow=0,
                                                          retries=10)))
    fresh = FleetRetryGate("vision", RetryBudget(0.1, 0.0, 60.0),
                           store=CountingStore(CallWindow(calls=100, failures=100, slow=0,
                                                          retries=0)))
    policy = RetryPolicy()
    parked = policy.decide(RetryHistory(), Failed(), now=100.0, rng=rng, gate=spent)
    retried = policy.decide(RetryHistory(), Failed(), now=100.0, rng=rng, gate=fresh)
    assert parked.kind is DecisionKind.PARK and "budget" in parked.reason
    assert retried.kind is DecisionKind.RETRY


def test_gate_from_settings_follows_the_retry_and_breaker_groups():
    """The gate takes its budget from retry.fleet_* and its cache and slow threshold from breaker."""
    settings = Settings.from_mapping({"retry.fleet_retry_ratio": "0.2",
                                      "retry.fleet_window_s": "30",
                                      "breaker.cache_ttl_s": "0.5", "breaker.slow_call_s": "8"})
    store = CountingStore(CallWindow(calls=10, failures=10, slow=0, retries=0))
    gate = FleetRetryGate.from_settings("vision", settings, store=store)
    assert (gate.budget.ratio, gate.budget.window_s, gate.cache_ttl_s, gate.slow_s) == (
        0.2, 30.0, 0.5, 8.0)
    gate.allow_retry(now=100.0)
    assert store.reads == [("vision", 70.0)]
