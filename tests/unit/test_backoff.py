"""Backoff strategies and Retry-After parsing."""
from __future__ import annotations

import random
from email.utils import formatdate
from itertools import islice

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fme_ai_resilience.core.resilience.backoff import (MAX_RETRY_AFTER_S, Backoff, Jitter,
                                                       parse_retry_after,
                                                       retry_after_from_headers)
from fme_ai_resilience.core.resilience.classification import BackoffProfile
from fme_ai_resilience.core.errors import ConfigurationError

NOW = 1_790_000_000.0

backoffs = st.builds(
    lambda base, factor, jitter: Backoff(base, base * factor, jitter),
    st.floats(0.01, 30.0), st.floats(1.0, 100.0), st.sampled_from(list(Jitter)))


def _envelope(b: Backoff, n: int) -> float:
    return b.cap_s if n > 64 else min(b.cap_s, b.base_s * 2.0 ** n)


@settings(max_examples=200, deadline=None)
@given(backoffs, st.integers(0, 2000), st.integers(0, 2**32 - 1))
def test_every_strategy_stays_within_its_bounds(b, n, seed):
    """For any attempt number each strategy's delay lies in the documented interval."""
    rng = random.Random(seed)
    e = _envelope(b, n)
    delay = b.delay(n, rng=rng)
    if b.jitter is Jitter.FULL:
        assert 0.0 <= delay <= e
    elif b.jitter is Jitter.EQUAL:
        assert e / 2 <= delay <= e
    elif b.jitter is Jitter.PROPORTIONAL:
        assert 0.5 * e <= delay <= 1.5 * e
    else:
        assert b.base_s <= delay <= min(b.cap_s, 3 * b.base_s)


@settings(max_examples=100, deadline=None)
@given(backoffs, st.integers(0, 2**32 - 1))
def test_whole_sequences_stay_within_bounds(b, seed):
    """Across 30 consecutive retries (decorrelated feeding on its previous wait) no delay escapes."""
    rng = random.Random(seed)
    previous = None
    for n in range(30):
        low, high = b.bounds(n, previous)
        delay = b.delay(n, rng=random.Random(rng.random()), previous_s=previous)
        assert low <= delay <= high
        assert delay <= b.max_delay(n)
        previous = delay


@settings(max_examples=100, deadline=None)
@given(backoffs, st.integers(0, 2**32 - 1))
def test_a_fixed_seed_reproduces_the_exact_sequence(b, seed):
    """Two generators seeded alike yield identical delays; the sequence depends on the seed."""
    first = list(islice(b.delays(rng=random.Random(seed)), 12))
    again = list(islice(b.delays(rng=random.Random(seed)), 12))
    assert first == again


def test_different_seeds_give_different_sequences():
    """Jitter really is random: two seeds do not give the same waits."""
    b = Backoff(1.0, 60.0, Jitter.FULL)
    assert list(islice(b.delays(rng=random.Random(1)),
                       5)) != list(islice(b.delays(rng=random.Random(2)), 5))


def test_full_jitter_is_the_default():
    """Without a choice the strategy is full jitter with base 1 s and cap 60 s."""
    assert Backoff() == Backoff(1.0, 60.0, Jitter.FULL)


def test_envelope_grows_then_caps():
    """The envelope doubles per retry and stops at the cap, even for huge retry numbers."""
    b = Backoff(1.0, 60.0)
    assert [b.ceiling(n) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert b.ceiling(10_000) == 60.0


def test_profiles_scale_base_and_cap():
    """SHORT retries sooner, LONG starts later, STANDARD is the policy itself."""
    b = Backoff(1.0, 60.0)
    assert b.for_profile(BackoffProfile.STANDARD) is b
    short, long_ = b.for_profile(BackoffProfile.SHORT), b.for_profile(BackoffProfile.LONG)
    assert (short.base_s, short.cap_s) == (0.5, 15.0)
    assert (long_.base_s, long_.cap_s) == (4.0, 60.0)
    assert Backoff(30.0, 60.0).for_profile(BackoffProfile.LONG).base_s == 60.0


def test_jitter_accepts_its_string_value():
    """A jitter name from settings becomes the enum member."""
    assert Backoff(1, 2, "decorrelated").jitter is Jitter.DECORRELATED


@pytest.mark.parametrize("kwargs, field", [
    ({"base_s": 0}, "backoff.base_s"),
    ({"cap_s": float("inf")}, "backoff.cap_s"),
    ({"base_s": 5, "cap_s": 1}, "backoff.cap_s"),
    ({"jitter": "wobbly"}, "backoff.jitter"),
])
def test_invalid_backoff_names_the_field(kwargs, field):
    """A bad base, cap or strategy raises ConfigurationError naming it."""
    with pytest.raises(ConfigurationError) as info:
        Backoff(**kwargs)
    assert info.value.field == field


# -- Retry-After -----------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ("120", 120.0),                                     # delta-seconds
    ("  7 ", 7.0),
    ("1.5", 1.5),
    (formatdate(NOW + 90, usegmt=True), 90.0),          # HTTP date in the future
    (formatdate(NOW - 3600, usegmt=True), 0.0),         # HTTP date in the past
    ("Please try again in 41.724s", 41.724),            # OpenAI text form
    ("Rate limit reached. Please try again in 20ms.", 0.02),
    ("try again in 20 seconds", 20.0),
    ("6m0s", 360.0),                                    # x-ratelimit-reset-requests
    ("1s", 1.0),
    ("20ms", 0.02),
    ("1h2m3.5s", 3723.5),
    ("-5", 0.0),                                        # negative -> 0
    ("99999999", MAX_RETRY_AFTER_S),                    # absurd -> clamped to 24 h
    ("garbage", None),
    ("", None),
    (None, None),
    ("nan", None),
    ("1e5", None),
    ("Mon, 99 Foo 2025 99:99:99 GMT", None),
    ("\u0661\u0662\u0660", None),                          # Arabic-Indic digits: ASCII only
    ("\u0663s", None),
    ("\uff11\uff12", None),                                 # fullwidth digits
    ("try again in \u0663 seconds", None),
    ("Wed, \u0662\u0661 Oct 2037 07:28:00 GMT", None),
])
def test_retry_after_table(value, expected):
    """Each Retry-After form gives the documented wait, garbage gives None."""
    got = parse_retry_after(value, now=NOW)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected, abs=1e-6)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_retry_after_never_raises_and_stays_in_range(text):
    """Whatever the header holds, the result is None or a wait in [0, 24 h]."""
    got = parse_retry_after(text, now=NOW)
    assert got is None or 0.0 <= got <= MAX_RETRY_AFTER_S


def test_headers_prefer_retry_after_then_ms_then_ratelimit_then_body():
    """The standard header wins; the rate-limit headers and the body are fall-backs in order."""
    assert retry_after_from_headers({"retry-after": "3", "retry-after-ms": "9000"}, "",
                                    now=NOW) == 3
    assert retry_after_from_headers({"Retry-After-Ms": "1500"}, "", now=NOW) == 1.5
    assert retry_after_from_headers({
        "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s",
        "x-ratelimit-remaining-tokens": "100", "x-ratelimit-reset-tokens": "1s",
    }, "Please try again in 41.724s", now=NOW) == 360.0
    assert retry_after_from_headers({}, '{"error": {"message": "Please try again in 41.724s"}}',
                                    now=NOW) == pytest.approx(41.724)
    assert retry_after_from_headers(None, None, now=NOW) is None


def test_headers_read_ascii_digits_only():
    """retry-after-ms and the rate-limit headers ignore other scripts' digits."""
    assert retry_after_from_headers({"retry-after-ms": "\u0661\u0662\u0660"}, "", now=NOW) is None
    assert retry_after_from_headers({"x-ratelimit-reset-requests": "\u0663s"}, "", now=NOW) is None


def test_ratelimit_reset_without_remaining_counts():
    """A reset header with no remaining counter is still taken; the longest reset wins."""
    headers = {"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "20ms"}
    assert retry_after_from_headers(headers, "", now=NOW) == 1.0
