"""The degradation ladder: scripted signals, hysteresis, override, and the processor's queries."""
from __future__ import annotations

from dataclasses import replace

import pytest

from fme_ai_resilience.core.resilience.breaker import CircuitState
from fme_ai_resilience.core.resilience.degrade import (CRITICAL, ORDINARY, Admission, LadderState,
                                                       Level, Model, Signals, holding_level,
                                                       model_for, next_state, admission,
                                                       priority_of, sampled, should_analyze,
                                                       target_level, with_override)
from fme_ai_resilience.core.ledger import CallWindow
from fme_ai_resilience.core.config.settings import DegradeSettings

S = DegradeSettings(sample_backlog=1.0, critical_backlog=3.0, pause_backlog=6.0,
                    fallback_error_rate=0.3, exit_ratio=0.7, hold_s=60.0, sample_ratio=0.25,
                    critical_types=("hydrant",))


def run(script, state=None):
    """Feed (seconds, Signals) pairs; return the effective level after each."""
    state = state or LadderState()
    levels = []
    for at, signals in script:
        state = next_state(S, state, signals, now=at)
        levels.append(int(state.effective))
    return state, levels


def backlog(ratio: float) -> Signals:
    return Signals(backlog_ratio=ratio)


def test_levels_follow_backlog_thresholds():
    """Entry thresholds: L1 at 1x the watermark, L3 at 3x, L4 at 6x."""
    assert [int(target_level(S, backlog(r))) for r in (0.5, 1.0, 2.9, 3.0, 6.0)] == [0, 1, 1, 3, 4]


def test_breaker_signals_choose_the_fallback_and_leave_the_rest_to_the_breaker():
    """Primary open with a usable fallback -> L2; with none the level stays where the backlog
    puts it (the open breaker defers every task itself and releases them when it closes)."""
    assert target_level(S, Signals(primary=CircuitState.OPEN,
                                   fallback=CircuitState.CLOSED)) is Level.FALLBACK
    assert target_level(S, Signals(primary=CircuitState.OPEN)) is Level.NORMAL
    assert target_level(S, Signals(primary=CircuitState.OPEN,
                                   fallback=CircuitState.OPEN)) is Level.NORMAL
    assert target_level(S, Signals(error_rate=0.35, fallback=CircuitState.CLOSED)) is Level.FALLBACK
    assert target_level(S, Signals(error_rate=0.35)) is Level.NORMAL
    assert target_level(S, Signals(error_rate=0.35, fallback=CircuitState.OPEN)) is Level.NORMAL


def test_half_open_primary_is_called_again_so_its_round_can_close():
    """Primary OPEN -> L2; once HALF_OPEN the ladder returns after its hold and calls the
    primary again, so its probes reach it."""
    both = dict(fallback=CircuitState.CLOSED)
    script = [(0, Signals(primary=CircuitState.OPEN, **both)),
              (10, Signals(primary=CircuitState.HALF_OPEN, **both)),
              (69, Signals(primary=CircuitState.HALF_OPEN, **both)),
              (70, Signals(primary=CircuitState.HALF_OPEN, **both))]
    state, levels = run(script)
    assert levels == [2, 2, 2, 0]
    assert model_for(state.effective) is Model.PRIMARY    # the half-open round gets its probes
    assert target_level(S, Signals(primary=CircuitState.HALF_OPEN, **both)) is Level.NORMAL


def test_climbs_at_once_and_descends_to_the_justified_level_after_a_hold():
    """A spike climbs straight to L4; after a calm hold period it goes straight to the level
    the signals still justify, never through levels that would skip photos for nothing."""
    script = [(0, backlog(0.2)), (10, backlog(7.0)), (20, backlog(0.1)), (79, backlog(0.1)),
              (80, backlog(0.1)), (81, backlog(0.1))]
    _, levels = run(script)
    assert levels == [0, 4, 4, 4, 0, 0]
    script = [(0, backlog(7.0)), (10, backlog(1.5)), (69, backlog(1.5)), (70, backlog(1.5))]
    _, levels = run(script)
    assert levels == [4, 4, 4, 1]             # 1.5x still justifies sampling, nothing more


def test_signal_oscillating_around_threshold_does_not_flap():
    """A backlog hovering around the L1 threshold enters L1 once and stays there."""
    script = [(t, backlog(1.05 if t % 20 == 0 else 0.95)) for t in range(0, 600, 10)]
    _, levels = run(script)
    assert levels[0] == 1 and set(levels) == {1}


def test_calm_period_restarts_when_signal_returns():
    """A signal back above the exit threshold restarts the hold, so no early step down."""
    script = [(0, backlog(3.5)), (10, backlog(1.0)), (60, backlog(2.5)), (65, backlog(1.0)),
              (100, backlog(1.0)), (126, backlog(1.0))]
    state, levels = run(script)
    assert levels == [3, 3, 3, 3, 3, 1]
    changes = sum(1 for a, b in zip(levels, levels[1:]) if a != b)
    assert changes == 1


def test_holding_level_uses_exit_thresholds():
    """Between exit (0.7x) and entry thresholds the current level is still justified."""
    assert holding_level(S, backlog(2.2)) is Level.CRITICAL_ONLY
    assert target_level(S, backlog(2.2)) is Level.SAMPLE


def test_override_holds_until_cleared():
    """An override wins over every signal; clearing it returns to the computed level."""
    state = with_override(LadderState(), Level.PAUSED, now=0)
    state, levels = run([(t, backlog(0.0)) for t in range(0, 1000, 100)], state)
    assert set(levels) == {4}
    cleared = with_override(state, None, now=1000)
    assert cleared.effective is Level.NORMAL and cleared.generation == state.generation + 1
    assert with_override(cleared, None, now=1001) is cleared


def test_should_analyze_per_level():
    """L0 all; L1/L2 critical plus a sample; L3 critical only; L4 none."""
    keys = [f"task-{i}" for i in range(400)]
    in_sample = sum(sampled(k, 0.25) for k in keys)
    assert 60 < in_sample < 140
    for level in (Level.SAMPLE, Level.FALLBACK):
        assert should_analyze(S, level, "hydrant")
        assert [should_analyze(S, level, "bench", k) for k in keys] == [
            sampled(k, 0.25) for k in keys]
    assert should_analyze(S, Level.NORMAL, "bench")
    assert should_analyze(S, Level.CRITICAL_ONLY, "hydrant")
    assert not any(should_analyze(S, Level.CRITICAL_ONLY, "bench", k) for k in keys)
    assert not should_analyze(S, Level.PAUSED, "hydrant")


def test_a_held_back_photo_is_deferred_unless_the_deployment_skips_its_type():
    """Under an operator's hold every held-back photo is DEFER; only a named type under skip
    is SKIP."""
    assert admission(S, Level.PAUSED, "hydrant", operator_hold=True) is Admission.DEFER
    assert admission(S, Level.CRITICAL_ONLY, "bench", operator_hold=True) is Admission.DEFER
    assert admission(S, Level.CRITICAL_ONLY, "hydrant", operator_hold=True) is Admission.ANALYSE
    skipping = replace(S, non_critical_types=("bench",), when_degraded="skip")
    assert admission(skipping, Level.CRITICAL_ONLY, "bench", operator_hold=True) is Admission.SKIP
    assert admission(skipping, Level.CRITICAL_ONLY, "sign", operator_hold=True) is Admission.DEFER
    assert admission(skipping, Level.NORMAL, "bench", operator_hold=True) is Admission.ANALYSE
    assert (priority_of(S, "hydrant"), priority_of(S, "bench"), priority_of(S, None)) == (
        CRITICAL, ORDINARY, ORDINARY)


def test_a_computed_level_analyses_what_an_engine_claimed_and_skips_only_by_policy():
    """A level the ladder computed holds nothing back (an engine that claimed a photo is free
    to analyse it; critical types are claimed first), but still skips a type the deployment
    lets it skip."""
    for level in (Level.SAMPLE, Level.CRITICAL_ONLY, Level.PAUSED):
        assert admission(S, level, "bench", operator_hold=False) is Admission.ANALYSE
        assert admission(S, level, "hydrant", operator_hold=False) is Admission.ANALYSE
    skipping = replace(S, non_critical_types=("bench",), when_degraded="skip")
    assert admission(skipping, Level.CRITICAL_ONLY, "bench", operator_hold=False) \
        is Admission.SKIP
    assert admission(skipping, Level.CRITICAL_ONLY, "sign", operator_hold=False) \
        is Admission.ANALYSE


def test_model_switches_to_fallback_from_l2():
    """Primary at L0/L1, fallback from L2 up."""
    assert [model_for(level) for level in Level] == [
        Model.PRIMARY, Model.PRIMARY, Model.FALLBACK, Model.FALLBACK, Model.FALLBACK]


def test_level_parse_accepts_labels_numbers_and_names():
    """"L2", "2", 2 and "fallback" all name L2; anything else is a ValueError."""
    assert {Level.parse(v) for v in ("L2", "2", 2, "fallback", "l2")} == {Level.FALLBACK}
    assert Level.parse("critical-only") is Level.CRITICAL_ONLY
    with pytest.raises(ValueError, match="L0-L4"):
        Level.parse("L9x")


def test_signals_measured_from_backlog_and_window():
    """Backlog over watermark and the window's failure rate become the signals."""
    signals = Signals.measured(150, 100, CallWindow(10, 4, 0, 0))
    assert signals.backlog_ratio == 1.5 and signals.error_rate == 0.4
    with pytest.raises(ValueError, match="watermark"):
        Signals.measured(1, 0, CallWindow(0, 0, 0, 0))


def test_engines_share_the_persisted_ladder(tmp_path):
    """One engine's observation moves the level every engine reads; the override holds until auto."""
    from fme_ai_resilience.core.clock import FakeClock
    from fme_ai_resilience.services.resilience.degrade import Degradation
    from fme_ai_resilience.store import open_store

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    clock = FakeClock()
    with open_store(url, init_schema=True) as s1, open_store(url) as s2:
        a, b = Degradation(S, store=s1, clock=clock), Degradation(S, store=s2, clock=clock)
        a.observe(backlog(3.5))
        clock.advance(1.0)
        assert b.level() is Level.CRITICAL_ONLY and b.model() is Model.FALLBACK
        assert b.should_analyze("hydrant") and not b.should_analyze("bench", "k1")
        b.set_override("L4")
        clock.advance(1.0)
        assert a.paused()
        for _ in range(10):
            clock.advance(100.0)
            a.observe(backlog(0.0))
        assert a.state().effective is Level.PAUSED and a.state().level is Level.NORMAL
        a.clear_override()
        clock.advance(1.0)
        assert b.level() is Level.NORMAL and not b.paused()


def test_gather_signals_reads_backlog_window_and_breakers(tmp_path):
    """Backlog over the watermark, the primary's failure rate and forced modes become signals."""
    from fme_ai_resilience.core.resilience.breaker import BreakerPolicy, Manual
    from fme_ai_resilience.services.resilience.breaker import CircuitBreaker
    from fme_ai_resilience.core.clock import FakeClock
    from fme_ai_resilience.services.resilience.degrade import gather_signals
    from fme_ai_resilience.core.ledger import CallRecord
    from fme_ai_resilience.core.config.settings import IntakeSettings
    from fme_ai_resilience.store import open_store
    from fme_ai_resilience.core.intake.submission import Submission

    clock = FakeClock()
    with open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True) as store:
        for i in range(30):
            store.register(Submission(f"k{i}", f"F{i}", f"t{i}"), 1000, now=clock.now())
        for i in range(10):
            store.record_call(CallRecord("vision", clock.now(), 0.1,
                                         "SERVER_ERROR" if i < 4 else None))
        primary = CircuitBreaker("vision", BreakerPolicy(min_calls=10), store=store,
                                 clock=clock)
        fallback = CircuitBreaker("vision-lite", BreakerPolicy(), store=store, clock=clock)
        fallback.command(Manual.FORCE_OPEN)
        signals = gather_signals(IntakeSettings(watermark=20), primary, fallback, store=store,
                                 now=clock.now())
        few = gather_signals(IntakeSettings(watermark=20),
                             CircuitBreaker("vision", BreakerPolicy(min_calls=11), store=store,
                                            clock=clock), store=store, now=clock.now())
    assert signals.backlog_ratio == 1.5 and signals.error_rate == 0.4
    assert few.error_rate == 0.0   # 10 calls are too few to speak of a rate (min_calls 11)
    assert signals.primary is CircuitState.CLOSED and signals.fallback is CircuitState.OPEN
    assert target_level(S, signals) is Level.SAMPLE         # no usable fallback to switch to
    assert target_level(S, replace(signals, fallback=CircuitState.CLOSED)) is Level.FALLBACK


def test_ladder_from_settings_uses_the_degrade_group_and_breaker_cache(tmp_path):
    """Degradation.from_settings reads degrade.* and caches for breaker.cache_ttl_s."""
    from fme_ai_resilience.core.clock import FakeClock
    from fme_ai_resilience.services.resilience.degrade import Degradation
    from fme_ai_resilience.core.config.settings import Settings
    from fme_ai_resilience.store import open_store

    settings = Settings.from_mapping({"degrade.hold_s": "42", "breaker.cache_ttl_s": "0.25"})
    with open_store(f"sqlite:///{tmp_path / 'ledger.db'}", init_schema=True) as store:
        ladder = Degradation.from_settings(settings, store=store, clock=FakeClock())
        assert ladder.settings.hold_s == 42.0 and ladder.cache_ttl_s == 0.25
