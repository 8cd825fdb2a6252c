"""Recovery after an outage: the default probe schedule, its bound and the fleet's lag."""
from __future__ import annotations

import pytest

from fme_ai_resilience.core.resilience.breaker import (BreakerPolicy, CircuitState, Permit,
                                                       cooldown_s, down_for_others,
                                                       outage_probe_bound, probe_schedule)
from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.ledger import CallRecord
from fme_ai_resilience.services.resilience.breaker import CircuitBreaker
from fme_ai_resilience.store import open_store

DEFAULT = BreakerPolicy()


def test_the_default_probe_interval_is_at_most_thirty_seconds_after_any_number_of_trips():
    """However many consecutive trips, the next probe is at most 30 s away by default."""
    assert max(cooldown_s(DEFAULT, n) for n in range(1, 200)) <= 30.0
    assert DEFAULT.half_open_probes == 1


def test_the_probe_schedule_starts_short_and_is_capped():
    """Rounds start 5 s after the trip, then 10, 20 and 30 s apart, then every 30 s."""
    assert probe_schedule(DEFAULT, 100.0) == (5.0, 15.0, 35.0, 65.0, 95.0)
    gaps = [b - a for a, b in zip((0.0,) + probe_schedule(DEFAULT, 3600.0),
                                  probe_schedule(DEFAULT, 3600.0))]
    assert max(gaps) == DEFAULT.cooldown_max_s and min(gaps) == DEFAULT.cooldown_s


def test_the_probe_bound_counts_rounds_inside_the_outage_and_never_exceeds_the_facts():
    """One probe per round started inside the outage, capped at the number of photos."""
    assert outage_probe_bound(DEFAULT, 4.9, facts=80) == 0
    assert outage_probe_bound(DEFAULT, 7.0, facts=80) == 1
    assert outage_probe_bound(DEFAULT, 3600.0, facts=500) == 3 + (3600 - 35) // 30
    assert outage_probe_bound(DEFAULT, 3600.0, facts=10) == 10
    three = BreakerPolicy(half_open_probes=3)
    assert outage_probe_bound(three, 16.0, facts=100) == 6


@pytest.mark.parametrize("outage_s", [7.0, 90.0, 600.0, 3600.0])
def test_an_engine_calling_four_times_a_second_learns_of_the_return_within_one_probe_interval(
        tmp_path, outage_s):
    """Default breaker, a service down for ``outage_s`` then healthy: the first successful
    call comes at most ``cooldown_max_s`` after the return, and the calls into the dead
    service after the trip stay within the probe bound."""
    clock = FakeClock()
    with open_store(f"sqlite:///{tmp_path / 'ledger.db'}", init_schema=True) as store:
        breaker = CircuitBreaker("vision", store=store, clock=clock)
        start = clock.now()
        opened_at = None
        dead_calls = 0
        while True:
            permit = breaker.allow()
            down = clock.now() - start < outage_s
            if isinstance(permit, Permit):
                breaker.record(permit, CallRecord("vision", clock.now(), 0.05,
                                                  "SERVER_ERROR" if down else None))
                if not down:
                    break
                if opened_at is not None:
                    dead_calls += 1
                elif breaker.state(fresh=True).state is CircuitState.OPEN:
                    opened_at = clock.now()
            clock.advance(0.25)
        lag = clock.now() - (start + outage_s)
    assert opened_at is not None
    assert lag <= DEFAULT.cooldown_max_s
    assert dead_calls <= outage_probe_bound(DEFAULT, outage_s, facts=10**6)


def test_the_drill_scales_the_defaults_the_product_ships():
    """Every production wait the drill scales down is the setting's own default, the probe
    schedule included, so a drill judges the schedule users get."""
    from fme_ai_resilience.drill.library import PRODUCTION_WAITS
    from fme_ai_resilience.core.config.settings import Settings

    defaults = Settings()
    for name, value in PRODUCTION_WAITS.items():
        group, field = name.split(".", 1)
        assert getattr(getattr(defaults, group), field) == value, name


def test_answers_out_of_schema_about_as_many_photos_open_a_closed_circuit():
    """drift_calls answers in a row out of schema, each about another photo, open the circuit
    (its probe schedule then bounds the calls into the drifted model); fewer photos never do."""
    from fme_ai_resilience.core.resilience.breaker import BreakerState, DriftObserved, step

    closed = BreakerState()
    opened = step(DEFAULT, closed, DriftObserved(3, 3), now=100.0)
    assert opened.state is CircuitState.OPEN and opened.open_until == 100.0 + 5.0
    assert step(DEFAULT, closed, DriftObserved(3, 1), now=100.0) is closed
    assert step(DEFAULT, closed, DriftObserved(3, 2), now=100.0) is closed
    assert step(DEFAULT, closed, DriftObserved(2, 2), now=100.0) is closed
    assert step(DEFAULT, opened, DriftObserved(9, 9), now=101.0) is opened


def test_a_failure_is_the_services_only_while_it_fails_others_and_answers_nobody():
    """down_for_others, on the service's latest calls (newest first): others failing since
    its last answer say it is down; the latest calls all about this photo, or an answer
    after one of this photo's failures, say it is the photo."""
    policy = DEFAULT
    fail, ok = "SERVER_ERROR", None
    outage = [(fail, "p"), (fail, "q"), (fail, "r"), (fail, "p"), (ok, "s")]
    assert down_for_others(policy, "p", outage)
    assert not down_for_others(policy, "p", [(fail, "p")] * policy.drift_calls + outage)
    answered_others = [(fail, "p"), (fail, "q"), (ok, "s"), (fail, "p"), (fail, "q")]
    assert not down_for_others(policy, "p", answered_others)
    assert down_for_others(policy, "p", [(fail, "p"), (fail, "q"), (ok, "s"), (fail, "q")])
    assert not down_for_others(policy, "p", [])


def test_a_few_photos_never_answered_in_schema_are_theirs_not_a_drifted_models():
    """Two photos the model never answers in schema, left alone once every other photo is
    done, probe in turn: answers out of schema about fewer than ``drift_calls`` photos are
    the photos' (their attempts count, they end FORMAT dead letters), never the service's,
    or they would be probed and paid for without end; about ``drift_calls`` photos or more
    they still say the model drifted. Other failures keep saying the service is down."""
    policy = DEFAULT
    drift = "BAD_FORMAT"
    alternating = [(drift, "a"), (drift, "b")] * 40
    assert not down_for_others(policy, "a", alternating)
    assert not down_for_others(policy, "b", alternating[1:])
    rotating = [(drift, k) for k in "abcdefgh"] * 5
    assert down_for_others(policy, "a", rotating)
    down = [("CONNECTION_ERROR", "a"), ("CONNECTION_ERROR", "b")] * 40
    assert down_for_others(policy, "a", down)


def test_an_engine_that_saw_the_round_open_is_admitted_once_another_engines_probe_closed_it(
        tmp_path):
    """Engine A read the half-open round just before engine B's probe closed the circuit:
    A's next call is admitted at once (it looks again), not sent away for a cooldown."""
    clock = FakeClock()
    with open_store(f"sqlite:///{tmp_path / 'ledger.db'}", init_schema=True) as store:
        a = CircuitBreaker("vision", store=store, clock=clock)
        b = CircuitBreaker("vision", store=store, clock=clock)
        while a.state(fresh=True).state is not CircuitState.OPEN:
            permit = a.allow()
            a.record(permit, CallRecord("vision", clock.now(), 0.05, "SERVER_ERROR"))
            clock.advance(0.1)
        clock.advance(DEFAULT.cooldown_s + 0.1)
        probe = b.allow()
        assert isinstance(probe, Permit) and probe.is_probe
        assert a.state(fresh=True).state is CircuitState.HALF_OPEN      # A's cache: half open
        b.record(probe, CallRecord("vision", clock.now(), 0.05, None))
        assert b.state(fresh=True).state is CircuitState.CLOSED
        assert isinstance(a.allow(), Permit)
