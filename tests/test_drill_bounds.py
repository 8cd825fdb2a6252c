"""What a drill's figures are judged against, computed before the run: bounds that can fail."""
from __future__ import annotations

import pytest

from fme_ai_resilience.breaker import cooldown_s, probe_schedule
from fme_ai_resilience.drill.bounds import (calls_per_analysed_bound, outage_call_bound,
                                            probe_bound, probe_interval_s)
from fme_ai_resilience.settings import BreakerSettings


def test_the_outage_call_bound_is_never_more_than_the_facts():
    """A long outage lets the breaker probe many rounds; the bound stops at the facts."""
    policy = BreakerSettings()
    wide = probe_bound(policy, 900.0, engines=4, fastest_call_s=2.0)
    assert outage_call_bound(policy, 900.0, engines=4, fastest_call_s=2.0,
                             facts=wide + 10) == wide
    assert outage_call_bound(policy, 900.0, engines=4, fastest_call_s=2.0, facts=12) == 12


def test_the_probe_interval_is_the_one_in_force_when_the_service_returns():
    """Recovery is due within the probe interval in force at the service's return: the first
    one after a short outage, never more than the capped interval (30 s by default) however
    long the outage, read from the breaker's own schedule."""
    policy = BreakerSettings()
    assert probe_interval_s(policy, 1.0) == cooldown_s(policy, 1)
    starts = probe_schedule(policy, 20.0)
    assert probe_interval_s(policy, 20.0) == cooldown_s(policy, len(starts) + 1) > starts[0]
    assert probe_interval_s(policy, 3600.0) == policy.cooldown_max_s <= 30.0


def test_calls_per_analysed_photo_allow_one_retry_of_each_transient_failure():
    """1.1 x 1/(1-p): 1.1 on a healthy service, 1.22 when a tenth of the calls fail."""
    assert calls_per_analysed_bound(0.0) == pytest.approx(1.1)
    assert calls_per_analysed_bound(0.1) == pytest.approx(1.1 / 0.9)


def test_the_calls_into_a_drifted_model_are_bounded_like_probes():
    """The answers that show the drift, a call in flight and one on a stale cache per other
    engine, then the breaker's probe rounds over the drift until the fix."""
    from fme_ai_resilience.breaker import outage_probe_bound
    from fme_ai_resilience.drill.bounds import drift_call_bound

    policy = BreakerSettings()
    assert drift_call_bound(policy, 0.0, engines=1, facts=50) == policy.drift_calls
    assert drift_call_bound(policy, 90.0, engines=4, facts=50) == (
        policy.drift_calls + 6 + outage_probe_bound(policy, 90.0, facts=50))
    assert drift_call_bound(policy, 90.0, engines=4, facts=50) < 50
