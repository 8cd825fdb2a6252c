"""Clocks and deadlines."""
from __future__ import annotations

import math

import pytest

from fme_ai_resilience.core.clock import Clock, Deadline, FakeClock, SystemClock


def test_fake_clock_sleep_advances_both_clocks_and_is_recorded():
    """sleep moves now() and monotonic() together and keeps the requested duration."""
    c = FakeClock(start=1000.0)
    c.sleep(2.5)
    c.sleep(0)
    assert (c.now(), c.monotonic(), c.sleeps) == (1002.5, 2.5, [2.5, 0])


def test_fake_clock_ignores_negative_sleeps_but_records_them():
    """A negative sleep waits nothing, like the real clock, and is still visible to tests."""
    c = FakeClock(start=0.0)
    c.sleep(-3)
    assert c.now() == 0.0 and c.sleeps == [-3]


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_fake_clock_refuses_to_go_backwards_or_to_nan(bad):
    """advance() with a negative or NaN step raises and leaves the clock as it was."""
    c = FakeClock(start=5.0)
    with pytest.raises(ValueError):
        c.advance(bad)
    assert c.now() == 5.0


def test_fake_clock_repr_shows_time_and_sleeping():
    """The repr says where the clock is and how long code slept."""
    c = FakeClock(start=10.0)
    c.sleep(1.25)
    assert repr(c) == "FakeClock(now=11.25, slept=1.250s)"


def test_system_clock_reads_real_time_and_never_sleeps_for_zero():
    """SystemClock satisfies the Clock protocol; monotonic never goes backwards."""
    c: Clock = SystemClock()
    a = c.monotonic()
    c.sleep(0)
    c.sleep(-1)
    assert c.monotonic() >= a
    assert c.now() > 1_700_000_000
    assert repr(c) == "SystemClock()"


def test_deadline_remaining_and_expiry():
    """remaining() counts down to zero and never below; expired() flips at the end."""
    d = Deadline(start=100.0, budget_s=30.0)
    assert d.expires_at == 130.0
    assert d.remaining(now=110.0) == 20.0 and not d.expired(now=110.0)
    assert d.remaining(now=130.0) == 0.0 and d.expired(now=130.0)
    assert d.remaining(now=500.0) == 0.0


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_deadline_rejects_negative_or_nan_budget(bad):
    """A deadline needs a budget of zero or more seconds."""
    with pytest.raises(ValueError, match="budget_s"):
        Deadline(0.0, bad)
