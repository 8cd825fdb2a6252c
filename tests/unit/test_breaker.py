"""The breaker's pure state machine: policy + state + event -> new state."""
from __future__ import annotations

from dataclasses import replace

import pytest

from fme_ai_resilience.core.resilience.breaker import (BreakerMode, BreakerPolicy, BreakerState,
                                                       CircuitOpen, CircuitState, Manual, Permit,
                                                       ProbesObserved, StreakObserved, TimePassed,
                                                       WindowObserved, cooldown_s, probes_needed,
                                                       should_trip, step, streaking)
from fme_ai_resilience.core.resilience.blame import Blame
from fme_ai_resilience.services.resilience.breaker import CircuitBreaker
from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.errors import CircuitOpenError
from fme_ai_resilience.core.ledger import CallRecord, CallWindow
from fme_ai_resilience.store import open_store

POLICY = BreakerPolicy(failure_rate=0.5, min_calls=20, slow_call_s=5.0,
                       cooldown_s=60.0, cooldown_max_s=300.0, cooldown_factor=2.0,
                       half_open_probes=5, close_ratio=0.8)
T0 = 1_790_000_000.0


def opened(at: float = T0, trips: int = 1) -> BreakerState:
    return step(POLICY, BreakerState(trips=trips - 1), WindowObserved(CallWindow(20, 20, 0, 0)),
                now=at)


def test_trips_at_failure_rate_threshold_with_enough_calls():
    """CLOSED opens when failures/calls reaches the threshold over >= min_calls calls."""
    assert should_trip(POLICY, CallWindow(calls=20, failures=10, slow=0, retries=0))
    assert not should_trip(POLICY, CallWindow(calls=20, failures=9, slow=0, retries=0))
    assert not should_trip(POLICY, CallWindow(calls=19, failures=19, slow=0, retries=0))


def test_slow_calls_never_trip_the_circuit():
    """Slow is not down: a service answering successfully but slowly keeps its circuit
    closed, however many of its calls are slow (its concurrency shrinks instead)."""
    assert not should_trip(POLICY, CallWindow(calls=20, failures=0, slow=20, retries=0))
    assert not should_trip(POLICY, CallWindow(calls=100, failures=9, slow=100, retries=0))


def test_consecutive_down_failures_about_two_photos_trip_whatever_the_window():
    """A run of ``consecutive_failures`` calls that said "down", about two photos at least,
    opens a closed circuit however many successes its window holds; one photo alone, or a
    shorter run, does not."""
    state = BreakerState()
    n = POLICY.consecutive_failures
    assert step(POLICY, state, StreakObserved(n, 2), now=T0).state is CircuitState.OPEN
    assert step(POLICY, state, StreakObserved(n - 1, 3), now=T0) is state
    assert step(POLICY, state, StreakObserved(n * 10, 1), now=T0) is state
    assert streaking(POLICY, StreakObserved(n, 2)) and not streaking(
        POLICY, StreakObserved(n, 1))


def test_open_sets_cooldown_and_bumps_generation():
    """Opening records when, until when, the trip count and a new generation."""
    state = opened()
    assert state.state is CircuitState.OPEN
    assert state.open_until == T0 + 60.0
    assert state.trips == 1 and state.generation == 1 and state.changed_at == T0


def test_no_change_returns_same_object():
    """An event that changes nothing returns the very same state (no write needed)."""
    state = BreakerState()
    assert step(POLICY, state, WindowObserved(CallWindow(20, 1, 0, 0)), now=T0) is state
    assert step(POLICY, state, TimePassed(), now=T0) is state
    assert step(POLICY, state, ProbesObserved(5, 0), now=T0) is state


def test_open_becomes_half_open_only_after_cooldown():
    """OPEN stays open before open_until and turns HALF_OPEN at it."""
    state = opened()
    assert step(POLICY, state, TimePassed(), now=T0 + 59.9) is state
    half = step(POLICY, state, TimePassed(), now=T0 + 60.0)
    assert half.state is CircuitState.HALF_OPEN and half.generation == 2
    assert half.open_until is None and half.trips == 1


def test_cooldown_grows_on_consecutive_trips_up_to_cap():
    """Cooldowns double per consecutive trip and stop at the cap."""
    assert [cooldown_s(POLICY, n) for n in (1, 2, 3, 4, 5, 50, 10_000)] == [
        60.0, 120.0, 240.0, 300.0, 300.0, 300.0, 300.0]


def test_half_open_decides_only_when_all_probes_reported():
    """HALF_OPEN waits for all k probes, then closes at the success ratio or reopens."""
    half = step(POLICY, opened(), TimePassed(), now=T0 + 60)
    assert step(POLICY, half, ProbesObserved(4, 0), now=T0 + 61) is half
    closed = step(POLICY, half, ProbesObserved(4, 1), now=T0 + 61)
    assert closed.state is CircuitState.CLOSED and closed.trips == 0
    assert closed.changed_at == T0 + 61
    reopened = step(POLICY, half, ProbesObserved(3, 2), now=T0 + 61)
    assert reopened.state is CircuitState.OPEN and reopened.trips == 2
    assert reopened.open_until == T0 + 61 + 120.0


def test_probes_needed_rounds_up():
    """k=5 at 0.8 needs 4 successes; k=3 at 0.8 needs 3."""
    assert probes_needed(POLICY) == 4
    assert probes_needed(BreakerPolicy(half_open_probes=3, close_ratio=0.8)) == 3
    assert probes_needed(BreakerPolicy(half_open_probes=10, close_ratio=0.5)) == 5


def test_manual_modes_freeze_automatic_transitions():
    """FORCED_OPEN, FORCED_CLOSED and DISABLED ignore window, time and probe events."""
    for command in (Manual.FORCE_OPEN, Manual.FORCE_CLOSED, Manual.DISABLE):
        state = step(POLICY, BreakerState(), command, now=T0)
        assert state.mode is not BreakerMode.AUTO and state.generation == 1
        assert step(POLICY, state, WindowObserved(CallWindow(50, 50, 0, 0)), now=T0) is state
        assert step(POLICY, state, command, now=T0) is state


def test_reset_returns_to_auto_closed_with_new_generation():
    """Reset clears mode, state and trips; resetting a fresh circuit changes nothing."""
    state = step(POLICY, opened(trips=3), Manual.FORCE_OPEN, now=T0 + 1)
    reset = step(POLICY, state, Manual.RESET, now=T0 + 2)
    assert (reset.state, reset.mode, reset.trips) == (CircuitState.CLOSED, BreakerMode.AUTO, 0)
    assert reset.generation == state.generation + 1 and reset.changed_at == T0 + 2
    fresh = BreakerState()
    assert step(POLICY, fresh, Manual.RESET, now=T0) is fresh


def test_state_validation_names_field():
    """An OPEN state without open_until, or a negative generation, is refused."""
    with pytest.raises(ValueError, match="open_until"):
        BreakerState(state=CircuitState.OPEN)
    with pytest.raises(ValueError, match="generation"):
        BreakerState(generation=-1)


def test_decisions_are_truthy_permit_falsy_refusal():
    """A permit is truthy; a refusal is falsy and converts to CircuitOpenError."""
    assert Permit("vision", 3)
    refusal = CircuitOpen("vision", 12.5, CircuitState.OPEN, BreakerMode.AUTO)
    assert not refusal
    error = refusal.to_error()
    assert isinstance(error, CircuitOpenError) and error.retry_after_s == 12.5


# -- the store-backed breaker ------------------------------------------------------------------
FAST = BreakerPolicy(failure_rate=0.5, min_calls=4, window_s=30.0, slow_call_s=5.0,
                     cooldown_s=10.0, cooldown_max_s=40.0, half_open_probes=2, close_ratio=1.0,
                     probe_timeout_s=20.0, cache_ttl_s=1.0)


@pytest.fixture
def shared(tmp_path):
    """One SQLite ledger file, as several engines on a host share it."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_store(url, init_schema=True):
        pass
    stores = []

    def engine(clock):
        store = open_store(url)
        stores.append(store)
        return CircuitBreaker("vision", FAST, store=store, clock=clock)

    yield engine
    for store in stores:
        store.close()


def calls(breaker, clock, n=1, duration=0.1, error="SERVER_ERROR"):
    """Make ``n`` permitted calls that fail with ``error`` (None: succeed)."""
    for _ in range(n):
        permit = breaker.allow()
        assert isinstance(permit, Permit)
        breaker.record(permit, CallRecord("vision", clock.now(), duration, error))


def fail(breaker, clock, n=1):
    calls(breaker, clock, n)


def test_failures_open_the_circuit_for_every_engine_within_the_cache_ttl(shared):
    """Engine A trips the circuit; engine B refuses once its <= 1 s cache has expired."""
    clock = FakeClock()
    a, b = shared(clock), shared(clock)
    assert isinstance(b.allow(), Permit)
    fail(a, clock, 4)
    assert a.state().state is CircuitState.OPEN
    assert isinstance(b.allow(), Permit)          # B's cached view is still fresh
    clock.advance(1.0)
    refusal = b.allow()
    assert isinstance(refusal, CircuitOpen) and refusal.retry_after_s == pytest.approx(9.0)


def test_engine_started_while_open_neither_resets_nor_reopens(shared):
    """A new process reads the open row as it is: same generation, timestamps and refusal."""
    clock = FakeClock()
    a = shared(clock)
    fail(a, clock, 4)
    before = a.state(fresh=True)
    clock.advance(3.0)
    late = shared(clock)
    refusal = late.allow()
    assert isinstance(refusal, CircuitOpen) and refusal.retry_after_s == pytest.approx(7.0)
    assert late.state(fresh=True) == before


def test_half_open_admits_k_probes_across_engines_then_closes(shared):
    """After the cooldown only k probes pass, from whichever engines ask; successes close it."""
    clock = FakeClock()
    a, b = shared(clock), shared(clock)
    fail(a, clock, 4)
    clock.advance(10.0)
    first, second, third = a.allow(), b.allow(), b.allow()
    assert first.is_probe and second.is_probe and isinstance(third, CircuitOpen)
    a.record(first, CallRecord("vision", clock.now(), 0.1))
    assert a.state().state is CircuitState.HALF_OPEN      # waits for all k reports
    b.record(second, CallRecord("vision", clock.now(), 0.1))
    assert b.state().state is CircuitState.CLOSED
    clock.advance(1.0)
    assert a.allow() and a.state().trips == 0


def test_evaluate_moves_an_idle_open_circuit_to_half_open(shared):
    """The compensator's evaluate() turns OPEN into HALF_OPEN after the cooldown, no caller needed."""
    clock = FakeClock()
    a = shared(clock)
    fail(a, clock, 4)
    assert a.evaluate().state is CircuitState.OPEN
    clock.advance(10.0)
    assert a.evaluate().state is CircuitState.HALF_OPEN


def test_evaluate_trips_on_a_window_whose_successes_aged_out(shared):
    """Old successes leaving the window can expose a failure rate no single call triggered."""
    clock = FakeClock()
    a = shared(clock)
    calls(a, clock, 5, error=None)
    clock.advance(20.0)
    fail(a, clock, 4)
    assert a.state().state is CircuitState.CLOSED      # 4 of 9 failed
    clock.advance(11.0)
    assert a.evaluate().state is CircuitState.OPEN      # 4 of 4 failed


def test_slow_successes_never_open_the_circuit(shared):
    """Calls that succeed but take longer than slow_call_s leave the circuit closed (slow is
    not down), and so do time-to-first-byte timeouts that did not say down."""
    clock = FakeClock()
    a = shared(clock)
    calls(a, clock, 8, duration=6.0, error=None)
    calls(a, clock, 8, duration=6.0, error="TTFB_TIMEOUT")
    assert a.state(fresh=True).state is CircuitState.CLOSED
    assert a.evaluate().state is CircuitState.CLOSED


def test_a_run_of_down_failures_opens_the_circuit_after_a_busy_healthy_minute(shared):
    """Fifty successes in the window, then five 503s about two photos that said down: the
    circuit opens at the fifth, whatever the window's successes; the failed call that opened
    it is the service's, with a wait just behind the next probe."""
    clock = FakeClock()
    a = shared(clock)
    calls(a, clock, 50, error=None)
    for i in range(FAST.consecutive_failures):
        permit = a.allow()
        recorded = a.record(permit, CallRecord("vision", clock.now(), 0.1, "SERVER_ERROR",
                                               503, task_key=f"photo-{i % 2}", down=True))
        opened_now = recorded.state.state is CircuitState.OPEN
        assert opened_now is (i == FAST.consecutive_failures - 1)
    assert recorded.blame is Blame.SERVICE
    assert recorded.wait_s == pytest.approx(FAST.cooldown_s + FAST.behind_s)


def test_a_down_run_broken_by_an_answer_starts_again(shared):
    """An answer between the failures breaks the run: four, an answer, four do not open."""
    clock = FakeClock()
    a = shared(clock)
    calls(a, clock, 50, error=None)
    for batch in range(2):
        for i in range(FAST.consecutive_failures - 1):
            a.record(a.allow(), CallRecord("vision", clock.now(), 0.1, "CONNECTION_ERROR",
                                           task_key=f"p{i}", down=True))
        calls(a, clock, 1, error=None)
    assert a.state(fresh=True).state is CircuitState.CLOSED


def test_operator_commands_apply_fleet_wide(shared):
    """Force open refuses everywhere; disabled admits and records but never trips; reset clears."""
    clock = FakeClock()
    a, b = shared(clock), shared(clock)
    a.command(Manual.FORCE_OPEN)
    clock.advance(1.0)
    assert isinstance(b.allow(), CircuitOpen)
    b.command(Manual.DISABLE)
    fail(b, clock, 10)
    assert b.state(fresh=True).mode is BreakerMode.DISABLED
    assert b.state().state is CircuitState.CLOSED
    assert a.command(Manual.RESET).mode is BreakerMode.AUTO


def test_record_refuses_a_call_of_another_service(shared):
    """A call logged under the wrong breaker is a programming error, not a silent miscount."""
    clock = FakeClock()
    a = shared(clock)
    with pytest.raises(ValueError, match="service"):
        a.record(a.allow(), CallRecord("other", clock.now(), 0.1))


def test_probe_of_a_dead_engine_counts_as_failed_after_the_probe_timeout(shared):
    """A probe silent past probe_timeout_s is a failed probe: the round ends, no k+1-th call."""
    clock = FakeClock()
    a, b = shared(clock), shared(clock)
    fail(a, clock, 4)
    clock.advance(10.0)
    lost, kept = a.allow(), a.allow()          # engine A takes both slots, then dies
    assert lost.is_probe and kept.is_probe
    clock.advance(1.0)
    assert isinstance(b.allow(), CircuitOpen)
    a.record(kept, CallRecord("vision", clock.now(), 0.1))
    assert b.state(fresh=True).state is CircuitState.HALF_OPEN
    clock.advance(FAST.probe_timeout_s)
    refusal = b.allow()                        # 1 success of 2 < close_ratio 1.0: reopened
    assert isinstance(refusal, CircuitOpen)
    reopened = b.state(fresh=True)
    assert reopened.state is CircuitState.OPEN and reopened.trips == 2
    assert refusal.retry_after_s == pytest.approx(cooldown_s(FAST, 2))
    a.record(lost, CallRecord("vision", clock.now(), 0.1))    # the late report changes nothing
    assert b.state(fresh=True) == reopened


def test_silent_probes_end_the_round_on_every_backend(store):
    """On each store a round whose probes all went silent reopens after the probe timeout."""
    clock = FakeClock()
    breaker = CircuitBreaker("vision", FAST, store=store, clock=clock)
    fail(breaker, clock, 4)
    clock.advance(10.0)
    first, second = breaker.allow(), breaker.allow()
    assert first.is_probe and second.is_probe and first.probe_token == second.probe_token == 1
    clock.advance(FAST.probe_timeout_s - 0.5)
    assert isinstance(breaker.allow(), CircuitOpen)
    clock.advance(0.5)
    assert isinstance(breaker.allow(), CircuitOpen)
    assert breaker.state(fresh=True).state is CircuitState.OPEN
    assert breaker.state().trips == 2


def test_silent_probe_still_lets_a_round_with_enough_successes_close(shared):
    """With close_ratio 0.5, one success and one silent probe close the circuit at the timeout."""
    clock = FakeClock()
    a = shared(clock)
    a.policy = b_policy = replace(FAST, close_ratio=0.5)
    fail(a, clock, 4)
    clock.advance(10.0)
    silent, kept = a.allow(), a.allow()
    assert silent.is_probe and kept.is_probe
    a.record(kept, CallRecord("vision", clock.now(), 0.1))
    assert a.state(fresh=True).state is CircuitState.HALF_OPEN
    clock.advance(b_policy.probe_timeout_s - 1.0)
    assert isinstance(a.allow(), CircuitOpen)  # not silent long enough yet
    clock.advance(1.0)
    permit = a.allow()
    assert isinstance(permit, Permit) and not permit.is_probe
    assert a.state().state is CircuitState.CLOSED and a.state().trips == 0


def test_calibrate_reads_this_services_history(shared):
    """breaker.calibrate(days) suggests from the call log of its own service."""
    clock = FakeClock()
    a = shared(clock)
    for i in range(100):
        a.store.record_call(CallRecord("vision", clock.now() - 1800 + i,
                                       0.1, "BAD_FORMAT" if i % 5 == 0 else None))
        a.store.record_call(CallRecord("other", clock.now() - 1800 + i, 0.1, "SERVER_ERROR"))
    advice = a.calibrate(days=1)
    assert advice.baseline_failure_p95 == pytest.approx(0.2)
    assert advice.failure_rate == pytest.approx(0.3)


def test_evaluate_ends_a_round_stalled_by_silent_probes_with_nobody_calling(store):
    """The compensator alone reopens a round whose probes went silent; late reports change nothing."""
    clock = FakeClock()
    breaker = CircuitBreaker("vision", FAST, store=store, clock=clock)
    fail(breaker, clock, 4)
    clock.advance(10.0)
    first, second = breaker.allow(), breaker.allow()   # the round's k probes, then the engine dies
    assert first.is_probe and second.is_probe
    clock.advance(FAST.probe_timeout_s - 0.5)
    assert breaker.evaluate().state is CircuitState.HALF_OPEN   # not silent long enough yet
    clock.advance(1.0)
    reopened = breaker.evaluate()
    assert reopened.state is CircuitState.OPEN and reopened.trips == 2
    breaker.record(first, CallRecord("vision", clock.now(), 0.1))
    assert breaker.state(fresh=True) == reopened


def test_odd_photos_asked_again_together_are_no_drift():
    """Answers out of schema in a row about three photos say the model drifted only when two
    at least were a photo's first call: the second tries of a few photos the model cannot
    answer, which come together, are their own dead letters, not a drift to wait out."""
    from fme_ai_resilience.core.resilience.breaker import DriftObserved, drifted

    policy = BreakerPolicy(drift_calls=3)
    assert drifted(policy, DriftObserved(3, 3))               # every one a first call
    assert drifted(policy, DriftObserved(3, 3, first=2))
    assert not drifted(policy, DriftObserved(3, 3, first=1))
    assert not drifted(policy, DriftObserved(3, 3, first=0))
