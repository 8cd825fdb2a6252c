"""What a drill's figures are judged against, computed before the run: bounds that can fail."""
from __future__ import annotations

import pytest

from fme_ai_resilience.core.resilience.breaker import (BreakerSettings, cooldown_s,
                                                       outage_probe_bound, probe_schedule)
from fme_ai_resilience.core.resilience.concurrency import ConcurrencySettings
from fme_ai_resilience.drill.bounds import (calls_per_analysed_bound, drift_call_bound,
                                            in_flight_bound, outage_call_bound, probe_bound,
                                            probe_interval_s)


def test_the_outage_call_bound_is_the_consecutive_run_the_slots_and_the_probes():
    """After a busy healthy minute the breaker opens at the run of consecutive "down"
    failures, not after as many failures as the window had successes: the bound is that run,
    one call in flight per slot of the fleet's limit, then one probe round per interval of
    the schedule; never capped at the facts, so a small run is judged by the same bound."""
    policy = BreakerSettings()
    probes = len(probe_schedule(policy, 900.0)) * policy.half_open_probes
    slots = in_flight_bound(4)
    assert slots == min(ConcurrencySettings().ceiling, 4 * ConcurrencySettings().per_engine)
    bound = probe_bound(policy, 900.0, engines=4, fastest_call_s=2.0)
    assert bound == policy.consecutive_failures + slots + probes
    assert outage_call_bound(policy, 900.0, engines=4, fastest_call_s=2.0) == bound
    assert probe_bound(policy, 900.0, engines=4, fastest_call_s=2.0, in_flight=3) == (
        policy.consecutive_failures + 3 + probes)
    # a window rule that would open sooner than the run (few calls, a low minimum) wins
    eager = BreakerSettings(min_calls=2, consecutive_failures=9)
    assert probe_bound(eager, 0.0, engines=1, fastest_call_s=1e9, in_flight=1) == 2 + 1


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
    """The answers that show the drift, a call in every slot of the fleet's limit and one on
    each engine's stale cache, then the breaker's probe rounds over the drift until the fix;
    never capped at the photos there are."""
    policy = BreakerSettings()
    one = ConcurrencySettings(ceiling=1, per_engine=1)
    assert drift_call_bound(policy, 0.0, engines=1, concurrency=one) == policy.drift_calls + 2
    probes = outage_probe_bound(policy, 90.0, facts=10 ** 6)
    assert drift_call_bound(policy, 90.0, engines=4) == (
        policy.drift_calls + in_flight_bound(4) + 4 + probes)
