"""Threshold suggestions from the service's own history."""
from __future__ import annotations

import pytest

from fme_ai_resilience.core.resilience.breaker import BreakerPolicy, should_trip
from fme_ai_resilience.core.resilience.calibrate import percentile, suggest
from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.core.ledger import CallWindow


def test_percentile_nearest_rank():
    """Nearest-rank P95 of 1..100 is 95; of nothing is 0."""
    assert percentile(list(range(1, 101)), 95) == 95
    assert percentile([], 95) == 0.0
    with pytest.raises(ValueError, match="pct"):
        percentile([1.0], 101)


def test_cannot_judge_baseline_raises_threshold_above_it():
    """A service with 15 % "cannot judge" answers gets a threshold it does not trip at."""
    buckets = [CallWindow(calls=100, failures=15 + (i % 3) - 1, slow=2, retries=0)
               for i in range(168)]
    advice = suggest(buckets, margin=0.1)
    assert advice.baseline_failure_p95 == pytest.approx(0.16)
    assert advice.failure_rate == pytest.approx(0.26)
    policy = BreakerPolicy(failure_rate=advice.failure_rate, min_calls=20)
    assert not should_trip(policy, CallWindow(calls=100, failures=16, slow=0, retries=0))
    assert not should_trip(BreakerPolicy(failure_rate=advice.failure_rate),
                           CallWindow(calls=100, failures=10, slow=0, retries=0))
    assert should_trip(policy, CallWindow(calls=100, failures=40, slow=0, retries=0))


def test_quiet_buckets_ignored_and_no_history_keeps_defaults():
    """Buckets under min_calls are noise; an empty history suggests the defaults."""
    buckets = [CallWindow(calls=2, failures=2, slow=0, retries=0)] * 10 + [
        CallWindow(calls=50, failures=1, slow=0, retries=0)] * 10
    advice = suggest(buckets, margin=0.1, min_calls=20)
    assert advice.buckets == 10 and advice.failure_rate == pytest.approx(0.12)
    empty = suggest([], margin=0.1)
    assert (empty.failure_rate, empty.buckets) == (0.5, 0)


def test_suggestion_capped_and_exported_as_settings():
    """Suggested rates never exceed the ceiling; as_settings gives config strings; the
    slow-call rate is reported, never suggested (slow calls never open the circuit)."""
    advice = suggest([CallWindow(calls=40, failures=39, slow=40, retries=0)], margin=0.2)
    assert advice.failure_rate == 0.95 and advice.baseline_slow_p95 == 1.0
    assert advice.as_settings() == {"breaker.failure_rate": "0.950"}


def test_a_history_without_one_full_bucket_suggests_nothing_to_store():
    """Under min_calls in every bucket nothing is learned: the defaults, and as_settings refuses."""
    buckets = [CallWindow(calls=4, failures=0, slow=0, retries=0),
               CallWindow(calls=3, failures=1, slow=0, retries=0)]
    advice = suggest(buckets, margin=0.1, min_calls=20)
    assert (advice.buckets, advice.calls, advice.calls_seen, advice.busiest_bucket) == (0, 0, 7, 4)
    assert (advice.failure_rate, advice.min_calls) == (0.5, 20)
    with pytest.raises(ConfigurationError, match="needs at least 20 calls in an hour"):
        advice.as_settings()
