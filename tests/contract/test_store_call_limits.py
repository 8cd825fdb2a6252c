"""The fleet's concurrency limit and its calls in flight, held by every backend alike."""
from __future__ import annotations

import threading
import time

import pytest

from fme_ai_resilience.core.resilience.concurrency import ConcurrencySettings, LimitState
from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.core.ledger import CallRecord
from fme_ai_resilience.store import open_store

T0 = 1_790_000_000.0
TWO = ConcurrencySettings(start=2, ceiling=8)


def test_a_new_service_starts_at_the_configured_limit_and_nothing_in_flight(store):
    """Reading a service never used gives its start and no call in flight, creating nothing."""
    assert store.limit_read("vision", TWO, now=T0) == (LimitState(limit=2.0), 0)
    assert store.limit_read("vision", ConcurrencySettings(start=3), now=T0)[0].limit == 3.0


def test_slots_are_taken_up_to_the_limit_and_no_further(store):
    """Two slots under a limit of 2; the third call is refused until one ends."""
    a, _, first = store.limit_acquire("vision", "e1", TWO, T0 + 30, now=T0)
    b, _, second = store.limit_acquire("vision", "e2", TWO, T0 + 30, now=T0)
    refused, state, in_flight = store.limit_acquire("vision", "e3", TWO, T0 + 30, now=T0)
    assert (a is not None, b is not None, a != b) == (True, True, True)
    assert (first, second, refused, in_flight, state.limit) == (1, 2, None, 2, 2.0)
    store.limit_release("vision", a, TWO, now=T0 + 1)
    c, _, _ = store.limit_acquire("vision", "e3", TWO, T0 + 30, now=T0 + 1)
    assert c is not None and store.limit_read("vision", TWO, now=T0 + 1)[1] == 2


def test_a_call_given_up_on_stays_in_flight_until_its_hold_runs_out(store):
    """A held slot counts until its time: the service may still be computing the call."""
    a, _, _ = store.limit_acquire("vision", "e1", TWO, T0 + 30, now=T0)
    store.limit_acquire("vision", "e2", TWO, T0 + 30, now=T0)
    store.limit_release("vision", a, TWO, hold_until=T0 + 50, now=T0 + 20)
    assert store.limit_read("vision", TWO, now=T0 + 40)[1] == 1      # the other ran out at 30
    assert store.limit_acquire("vision", "e3", TWO, T0 + 60, now=T0 + 40)[0] is not None
    assert store.limit_acquire("vision", "e4", TWO, T0 + 60, now=T0 + 45)[0] is None
    assert store.limit_acquire("vision", "e4", TWO, T0 + 60, now=T0 + 50)[0] is not None


def test_an_engine_that_died_leaves_a_slot_that_runs_out(store):
    """A slot never released stops counting at its time."""
    store.limit_acquire("vision", "dead", ConcurrencySettings(start=1), T0 + 30, now=T0)
    assert store.limit_acquire("vision", "e", ConcurrencySettings(start=1), T0 + 90,
                               now=T0 + 29)[0] is None
    assert store.limit_acquire("vision", "e", ConcurrencySettings(start=1), T0 + 90,
                               now=T0 + 30)[0] is not None


def test_a_release_moves_the_limit_by_the_core_s_step_and_keeps_it(store):
    """The update runs on the stored state; its result is stored and read back by others."""
    slot, _, _ = store.limit_acquire("vision", "e", TWO, T0 + 30, now=T0)
    after = store.limit_release(
        "vision", slot, TWO, lambda s: LimitState(limit=s.limit + 1.5, ttfb_s=40.0,
                                                  rtt_long_s=25.0, rtt_peak_s=26.0), now=T0 + 1)
    assert after == LimitState(limit=3.5, ttfb_s=40.0, rtt_long_s=25.0, rtt_peak_s=26.0)
    assert store.limit_read("vision", TWO, now=T0 + 2) == (after, 0)
    assert store.limit_read("other", TWO, now=T0 + 2)[0] == LimitState(limit=2.0)


def test_limits_are_per_service(store):
    """A full service leaves another's slots alone."""
    one = ConcurrencySettings(start=1)
    assert store.limit_acquire("a", "e", one, T0 + 30, now=T0)[0] is not None
    assert store.limit_acquire("a", "e", one, T0 + 30, now=T0)[0] is None
    assert store.limit_acquire("b", "e", one, T0 + 30, now=T0)[0] is not None


def test_a_slot_needs_a_time_in_the_future(store):
    """A slot that would be over before it starts is a ConfigurationError, nothing stored."""
    with pytest.raises(ConfigurationError):
        store.limit_acquire("vision", "e", TWO, T0, now=T0)
    assert store.limit_read("vision", TWO, now=T0)[1] == 0


def test_the_down_streak_counts_the_newest_down_calls_in_a_row_and_their_photos(store):
    """Calls are read newest logged first; the run stops at the first call that was not
    down; photos are counted once each."""
    def call(down, key, error="SERVER_ERROR"):
        store.record_call(CallRecord("vision", T0, 0.1, error, 503, task_key=key, down=down))

    assert store.down_streak("vision", 5) == (0, 0)
    call(False, "a", None)
    call(True, "a")
    call(True, "b")
    call(True, "b")
    assert store.down_streak("vision", 5) == (3, 2)
    assert store.down_streak("vision", 2) == (2, 1)
    call(False, "c", "TTFB_TIMEOUT")
    assert store.down_streak("vision", 5) == (0, 0)


def test_a_slow_ttfb_timeout_is_no_failure_of_the_window_but_a_down_one_is(store):
    """Slow is not down: a time-to-first-byte timeout that did not say down leaves the
    window's failure count alone."""
    store.record_call(CallRecord("vision", T0, 20.0, "TTFB_TIMEOUT", None, down=False))
    store.record_call(CallRecord("vision", T0, 40.0, "TTFB_TIMEOUT", None, down=True))
    store.record_call(CallRecord("vision", T0, 0.1, "SERVER_ERROR", 500))
    store.record_call(CallRecord("vision", T0, 0.1))
    window = store.call_window("vision", T0 - 1, 20.0)
    assert (window.calls, window.failures, window.slow) == (4, 2, 2)


def test_concurrent_engines_never_take_more_slots_than_the_limit(shared_ledger_url):
    """Twelve threads with their own connections race for a limit of 3, many times over: the
    slots taken at once never pass 3, and every released slot is taken again."""
    three = ConcurrencySettings(start=3)
    held, peak, lock = [0], [0], threading.Lock()
    errors = []

    def engine(i):
        try:
            with open_store(shared_ledger_url) as store:
                for _ in range(15):
                    slot, _, _ = store.limit_acquire("vision", f"e{i}", three, T0 + 600,
                                                     now=T0)
                    if slot is None:
                        continue
                    with lock:
                        held[0] += 1
                        peak[0] = max(peak[0], held[0])
                    time.sleep(0.002)
                    with lock:
                        held[0] -= 1
                    store.limit_release("vision", slot, three, now=T0)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=engine, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert 1 <= peak[0] <= 3
    with open_store(shared_ledger_url) as store:
        assert store.limit_read("vision", three, now=T0)[1] == 0


def test_recent_retries_say_which_calls_were_a_photos_first(store):
    """The latest calls, newest first, with whether each was a retry (drift evidence)."""
    store.record_call(CallRecord("vision", T0, 0.1, "BAD_FORMAT", 200, retry=False,
                                 task_key="a"))
    store.record_call(CallRecord("vision", T0 + 1, 0.1, "BAD_FORMAT", 200, retry=True,
                                 task_key="a"))
    store.record_call(CallRecord("vision", T0 + 2, 0.1, None, 200, task_key="b"))
    assert store.recent_retries("vision", 2) == [(None, "b", False), ("BAD_FORMAT", "a", True)]
    assert store.recent_retries("other", 5) == []
