"""The fleet's adaptive concurrency limit and the time budget that follows a slow service."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from fme_ai_resilience.core.resilience.blame import Blame, Recorded, says_down, suspects_service
from fme_ai_resilience.core.resilience.breaker import BreakerState, CircuitState
from fme_ai_resilience.core.resilience.concurrency import (BACKOFF, HEADROOM, ConcurrencySettings,
                                                           LimitState, Sample, Signal,
                                                           abandoned_for_s, observe, room,
                                                           signal_of, slots, ttfb_s)
from fme_ai_resilience.core.errors import ConfigurationError, ErrorClass

SETTINGS = ConcurrencySettings(ceiling=32, start=1)
BASE, CAP = 20.0, 170.0


def step(state, signal, latency, in_flight, ttfb=BASE, settings=SETTINGS):
    return observe(settings, state, Sample(signal, latency, in_flight, ttfb),
                   base_ttfb_s=BASE, cap_ttfb_s=CAP)


def test_answers_at_a_steady_latency_grow_the_limit_like_a_slow_start():
    """A service answering at one latency, its slots filled: every answer raises the limit,
    and a few dozen answers take it from 1 to the ceiling, whatever the latency."""
    for latency in (0.5, 25.0):
        state, grown = LimitState.initial(SETTINGS), []
        for _ in range(60):
            state = step(state, Signal.ANSWER, latency, slots(SETTINGS, state))
            grown.append(state.limit)
        assert all(b >= a for a, b in zip(grown, grown[1:]))
        assert grown[4] >= 4 and grown[-1] == 32.0


def test_a_limit_nobody_fills_does_not_grow():
    """Answers that came with fewer than half the limit's calls in flight leave it alone."""
    state = LimitState(limit=10.0, rtt_long_s=1.0, rtt_peak_s=1.0)
    assert step(state, Signal.ANSWER, 1.0, in_flight=4).limit == 10.0
    assert step(state, Signal.ANSWER, 1.0, in_flight=5).limit > 10.0


def test_latency_growth_shrinks_the_limit_toward_what_queues_nothing():
    """Answers three times as slow as the long-run average say the service queues: each brings
    the limit down until the average has caught up with the new latency (then it is the
    service's normal, as in Gradient2), never below 1."""
    state, seen = LimitState(limit=30.0, rtt_long_s=2.0, rtt_peak_s=2.0), []
    for _ in range(12):
        state = step(state, Signal.ANSWER, 6.0, in_flight=30)
        seen.append(state.limit)
    assert all(b < a for a, b in zip([30.0] + seen, seen))
    assert seen[-1] < 20.0


@pytest.mark.parametrize("signal", [Signal.DROP, Signal.TIMEOUT])
def test_drops_and_timeouts_cut_the_limit(signal):
    """A 429, a 5xx, a refused or cut connection or a TTFB timeout cuts the limit at once."""
    state = step(LimitState(limit=20.0), signal, 1.0, in_flight=20)
    assert state.limit == pytest.approx(20.0 * BACKOFF)
    assert step(LimitState(limit=1.0), signal, 1.0, 1).limit == 1.0


def test_neutral_outcomes_move_nothing():
    """An answer out of schema, a 4xx for the photo: no sign of load either way."""
    state = LimitState(limit=7.0, ttfb_s=40.0, rtt_long_s=3.0, rtt_peak_s=3.0)
    assert step(state, Signal.NEUTRAL, 9.0, in_flight=7) == state


def test_a_ttfb_timeout_doubles_the_fleets_wait_up_to_the_deadline():
    """Slow is not down: a call that got no first byte within its limit doubles the fleet's
    time-to-first-byte limit, up to what a task's deadline leaves."""
    state = step(LimitState(), Signal.TIMEOUT, BASE, 1, ttfb=BASE)
    assert state.ttfb_s == 2 * BASE
    state = step(state, Signal.TIMEOUT, 2 * BASE, 1, ttfb=2 * BASE)
    assert state.ttfb_s == 4 * BASE
    for _ in range(5):
        state = step(state, Signal.TIMEOUT, CAP, 1, ttfb=state.ttfb_s)
    assert state.ttfb_s == CAP


def test_the_wait_follows_slow_answers_and_comes_back_down_when_they_are_fast():
    """Answers at 25 s raise the limit to HEADROOM x 25 s; fast answers bring it back to the
    configured limit within some dozens of answers (shown as None: the base)."""
    state = step(LimitState(), Signal.ANSWER, 25.0, 1)
    assert state.ttfb_s == HEADROOM * 25.0
    for _ in range(120):
        state = step(state, Signal.ANSWER, 1.0, 1)
    assert state.ttfb_s is None


def test_a_timeouts_lesson_outlasts_a_few_fast_answers_for_other_photos():
    """A photo the model is slow on timed out: the fast answers other photos get meanwhile
    do not bring the fleet's wait back under what that call was given (the next slow photo
    would time out and be paid again), yet some dozens of them do."""
    state = step(LimitState(), Signal.TIMEOUT, BASE, 1, ttfb=BASE)
    for _ in range(10):
        state = step(state, Signal.ANSWER, 2.0, 1)
    assert state.ttfb_s is not None and state.ttfb_s >= 1.5 * BASE
    for _ in range(150):
        state = step(state, Signal.ANSWER, 2.0, 1)
    assert state.ttfb_s is None


def test_a_calls_wait_is_the_fleets_or_the_photos_never_past_the_deadline():
    """The next call waits the fleet's limit (at least the configured one), or longer for a
    photo whose last call ran out, but what it waits past the configured one never passes
    what the deadline leaves."""
    fleet = LimitState(ttfb_s=40.0)
    assert ttfb_s(LimitState(), base_s=BASE, left_s=150) == BASE
    assert ttfb_s(fleet, base_s=BASE, left_s=150) == 40.0
    assert ttfb_s(fleet, base_s=BASE, left_s=150, photo_s=80.0) == 80.0
    assert ttfb_s(fleet, base_s=BASE, left_s=30.0, photo_s=80.0) == 30.0
    assert ttfb_s(fleet, base_s=BASE, left_s=-5.0) == BASE


def test_a_call_given_up_on_counts_until_the_service_cannot_be_working_on_it():
    """Twice the wait it was given, or half again the slowest recent answer, at most the cap."""
    assert abandoned_for_s(LimitState(), 20.0, cap_s=180.0) == 40.0
    assert abandoned_for_s(LimitState(rtt_peak_s=60.0), 20.0, cap_s=180.0) == 90.0
    assert abandoned_for_s(LimitState(rtt_peak_s=600.0), 20.0, cap_s=180.0) == 180.0


@settings(deadline=None)
@given(st.lists(st.tuples(st.sampled_from(list(Signal)),
                          st.floats(min_value=0.0, max_value=500.0),
                          st.integers(min_value=0, max_value=64),
                          st.floats(min_value=0.01, max_value=400.0)), max_size=60))
def test_the_limit_and_the_wait_stay_within_their_bounds(samples):
    """Whatever the samples: the limit between 1 and the ceiling, the wait between the
    configured limit and the cap."""
    state = LimitState.initial(SETTINGS)
    for signal, latency, in_flight, used in samples:
        state = observe(SETTINGS, state, Sample(signal, latency, in_flight, used),
                        base_ttfb_s=BASE, cap_ttfb_s=CAP)
        assert 1.0 <= state.limit <= SETTINGS.ceiling
        assert state.ttfb_s is None or BASE < state.ttfb_s <= CAP
        assert 1 <= slots(SETTINGS, state) <= SETTINGS.ceiling


def test_room_is_whole_slots_under_the_limit_and_the_ceiling():
    """2.9 allows two calls; the ceiling wins over a larger limit."""
    assert [room(SETTINGS, LimitState(limit=2.9), n) for n in (0, 1, 2)] == [True, True, False]
    small = ConcurrencySettings(ceiling=2)
    assert slots(small, LimitState(limit=9.0)) == 2


@pytest.mark.parametrize("error, complete, signal", [
    (None, True, Signal.ANSWER), (None, False, Signal.NEUTRAL),
    ("TTFB_TIMEOUT", True, Signal.TIMEOUT), (ErrorClass.RATE_LIMITED, True, Signal.DROP),
    ("SERVER_ERROR", True, Signal.DROP), ("TRUNCATED", True, Signal.DROP),
    ("CONNECTION_ERROR", True, Signal.DROP), ("BAD_FORMAT", True, Signal.NEUTRAL),
    ("NOT_FOUND", True, Signal.NEUTRAL), ("AUTH", True, Signal.NEUTRAL)])
def test_what_each_outcome_says_about_load(error, complete, signal):
    """Answers are samples, overload signals cut, a photo's own refusals say nothing."""
    assert signal_of(error, complete=complete) is signal


def test_bad_settings_name_their_field():
    """A start above the ceiling, a ceiling of 0: ConfigurationError naming the field."""
    for kwargs, field in (({"start": 5, "ceiling": 4}, "concurrency.start"),
                          ({"ceiling": 0}, "concurrency.ceiling"),
                          ({"per_engine": 0}, "concurrency.per_engine")):
        with pytest.raises(ConfigurationError) as info:
            ConcurrencySettings(**kwargs)
        assert info.value.field == field


# -- whose failure it is -------------------------------------------------------------------------

@pytest.mark.parametrize("error, status, longer, down", [
    ("CONNECTION_ERROR", None, False, True), ("CONNECT_TIMEOUT", None, False, True),
    ("SERVER_ERROR", 502, False, True), ("SERVER_ERROR", 503, False, True),
    ("SERVER_ERROR", 504, False, True), ("SERVER_ERROR", 500, False, False),
    ("TTFB_TIMEOUT", None, False, False), ("TTFB_TIMEOUT", None, True, True),
    ("TRUNCATED", 200, False, False), ("RATE_LIMITED", 429, False, False),
    ("BAD_FORMAT", 200, False, False), (None, 200, False, False)])
def test_which_failures_say_the_service_is_down(error, status, longer, down):
    """Refused connections and a gateway's 502/503/504 say down; a first TTFB timeout says
    slow (only one after the fleet already waited longer says down); a 500, a cut body, a
    429 or an answer out of schema say nothing of availability."""
    assert says_down(error and ErrorClass(error), status, waited_longer=longer) is down


def test_a_failure_is_suspected_of_the_service_only_from_a_probe_or_an_open_circuit():
    """A closed circuit's failure is the photo's; a probe's, or one that left the circuit
    open, may be the service's (its latest calls then decide); a 429 never is."""
    closed = BreakerState()
    opened = BreakerState(state=CircuitState.OPEN, open_until=10.0, generation=1)
    assert not suspects_service(ErrorClass.SERVER_ERROR, probe=False, after=closed)
    assert suspects_service(ErrorClass.SERVER_ERROR, probe=True, after=closed)
    assert suspects_service(ErrorClass.TTFB_TIMEOUT, probe=False, after=opened)
    assert not suspects_service(ErrorClass.RATE_LIMITED, probe=True, after=opened)
    assert not suspects_service(None, probe=True, after=opened)


def test_a_record_blaming_the_service_carries_the_wait():
    """The wait is set exactly when the service is blamed."""
    assert Recorded(BreakerState(), Blame.SERVICE, 6.5).wait_s == 6.5
    with pytest.raises(ConfigurationError):
        Recorded(BreakerState(), Blame.PHOTO, 3.0)
    with pytest.raises(ConfigurationError):
        Recorded(BreakerState(), Blame.SERVICE)
