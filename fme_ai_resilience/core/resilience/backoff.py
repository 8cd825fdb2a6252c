"""How long to wait before the next attempt: jittered backoff and server-given Retry-After.

Strategies (``n`` is the retry number, 0 for the wait after the first failure;
``e = min(cap, base * 2**n)``):

* ``full`` (default): ``uniform(0, e)``
* ``equal``: ``e/2 + uniform(0, e/2)``
* ``decorrelated``: ``min(cap, uniform(base, 3 * previous))`` (``previous`` starts at ``base``)
* ``proportional``: ``e * uniform(0.5, 1.5)`` (the seed's form; it may reach 1.5 x cap)

A class's :class:`~fme_ai_resilience.core.resilience.classification.BackoffProfile` scales base and
cap (:data:`PROFILE_SCALE`). Randomness only comes from the ``random.Random`` passed in.

:func:`parse_retry_after` reads ``Retry-After`` (delta-seconds or HTTP-date) and the providers'
own forms (``"Please try again in 41.724s"``, ``x-ratelimit-reset-requests: 6m0s``); waits are
never negative and never longer than :data:`MAX_RETRY_AFTER_S`.
"""
from __future__ import annotations

import datetime
import enum
import math
import random
import re
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from typing import Iterator, Mapping, Optional, Tuple

from ..text.caseless import get_ignoring_case
from ..checks import finite
from .classification import BackoffProfile
from ..errors import ConfigurationError

__all__ = ["Jitter", "Backoff", "PROFILE_SCALE", "MAX_RETRY_AFTER_S", "parse_retry_after",
           "retry_after_from_headers"]

#: The longest wait any server hint can impose (24 h); longer values are clamped to it.
MAX_RETRY_AFTER_S = 24 * 3600.0

# 2**62 seconds is far beyond any cap; stopping the exponent there avoids float overflow.
_MAX_EXPONENT = 62


class Jitter(str, enum.Enum):
    """The backoff strategy (``retry.jitter`` setting)."""

    FULL = "full"
    EQUAL = "equal"
    DECORRELATED = "decorrelated"
    PROPORTIONAL = "proportional"


#: (base factor, cap factor) per profile: connect failures retry soon, slow answers get room.
PROFILE_SCALE: Mapping[BackoffProfile, Tuple[float, float]] = {
    BackoffProfile.SHORT: (0.5, 0.25),
    BackoffProfile.STANDARD: (1.0, 1.0),
    BackoffProfile.LONG: (4.0, 1.0),
    BackoffProfile.NONE: (1.0, 1.0),
}


@dataclass(frozen=True)
class Backoff:
    """A jittered exponential backoff: ``base_s`` and ``cap_s`` in seconds, and a strategy."""

    base_s: float = 1.0
    cap_s: float = 60.0
    jitter: Jitter = Jitter.FULL

    def __post_init__(self) -> None:
        for name in ("base_s", "cap_s"):
            finite(f"backoff.{name}", getattr(self, name), above=0)
        if self.cap_s < self.base_s:
            raise ConfigurationError("backoff.cap_s", self.cap_s, "must be >= base_s")
        try:
            object.__setattr__(self, "jitter", Jitter(self.jitter))
        except ValueError:
            raise ConfigurationError("backoff.jitter", self.jitter,
                                     f"must be one of {[j.value for j in Jitter]}") from None

    def for_profile(self, profile: BackoffProfile) -> "Backoff":
        """This backoff with base and cap scaled for an error class's profile."""
        base_f, cap_f = PROFILE_SCALE[BackoffProfile(profile)]
        if base_f == 1.0 and cap_f == 1.0:
            return self
        cap = self.cap_s * cap_f
        return replace(self, base_s=min(self.base_s * base_f, cap), cap_s=cap)

    def ceiling(self, retry: int) -> float:
        """``min(cap, base * 2**retry)``: the exponential envelope for retry number ``retry``."""
        return min(self.cap_s, self.base_s * 2.0 ** min(max(retry, 0), _MAX_EXPONENT))

    def bounds(self, retry: int, previous_s: Optional[float] = None) -> Tuple[float, float]:
        """The smallest and largest wait :meth:`delay` can return for these arguments."""
        if self.jitter is Jitter.FULL:
            return 0.0, self.ceiling(retry)
        if self.jitter is Jitter.EQUAL:
            e = self.ceiling(retry)
            return e / 2.0, e
        if self.jitter is Jitter.PROPORTIONAL:
            e = self.ceiling(retry)
            return 0.5 * e, 1.5 * e
        prev = self.base_s if previous_s is None else max(previous_s, self.base_s)
        return self.base_s, min(self.cap_s, 3.0 * prev)

    def max_delay(self, retry: int) -> float:
        """The longest wait this backoff can ever produce for retry number ``retry``."""
        if self.jitter is Jitter.DECORRELATED:
            return min(self.cap_s, self.base_s * 3.0 ** min(max(retry, 0) + 1, _MAX_EXPONENT))
        return self.bounds(retry)[1]

    def delay(self, retry: int, *, rng: random.Random,
              previous_s: Optional[float] = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based).

        ``previous_s`` is the previous wait, used only by the decorrelated strategy.
        """
        low, high = self.bounds(retry, previous_s)
        if self.jitter is Jitter.DECORRELATED:
            prev = self.base_s if previous_s is None else max(previous_s, self.base_s)
            return min(self.cap_s, rng.uniform(self.base_s, 3.0 * prev))
        return rng.uniform(low, high)

    def delays(self, *, rng: random.Random) -> Iterator[float]:
        """An endless sequence of waits for retries 0, 1, 2, ..."""
        previous: Optional[float] = None
        retry = 0
        while True:
            previous = self.delay(retry, rng=rng, previous_s=previous)
            yield previous
            retry += 1


# -- Retry-After ---------------------------------------------------------------------------

# ASCII digits only: ``\d`` and int()/float() also take other scripts' digits ("١٢٠").
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
_DELTA = re.compile(rf"^[+-]?{_NUMBER}$", re.ASCII)
# Go-style durations as OpenAI's x-ratelimit-reset-* headers use them: 6m0s, 1s, 20ms, 1h2m3.5s
_DURATION = re.compile(
    rf"^(?:(?P<h>{_NUMBER})h)?(?:(?P<m>{_NUMBER})m(?!s))?(?:(?P<s>{_NUMBER})s)?"
    rf"(?:(?P<ms>{_NUMBER})ms)?$", re.ASCII)
_WORD_UNITS = {"ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001, "s": 1.0, "sec": 1.0,
               "secs": 1.0, "second": 1.0, "seconds": 1.0, "m": 60.0, "min": 60.0,
               "mins": 60.0, "minute": 60.0, "minutes": 60.0}
_TEXT = re.compile(r"(?i)\b(?:try\s+again|retry)\s+(?:in|after)\s+(?P<value>[0-9hms.]+)"
                   r"(?:\s*(?P<unit>[a-z]+))?", re.ASCII)


def _clamp(seconds: float) -> Optional[float]:
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _duration(text: str) -> Optional[float]:
    match = _DURATION.match(text)
    if not match or not any(match.groupdict().values()):
        return None
    parts = match.groupdict()
    return (float(parts["h"] or 0) * 3600 + float(parts["m"] or 0) * 60
            + float(parts["s"] or 0) + float(parts["ms"] or 0) / 1000.0)


def _http_date(text: str, *, now: float) -> Optional[float]:
    if not text.isascii():   # the date parser's int() would read other scripts' digits
        return None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:  # pragma: no cover - Python < 3.10 returns None instead of raising
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; a naive one is read as UTC
        when = when.replace(tzinfo=datetime.timezone.utc)
    try:
        return when.timestamp() - now
    except (OverflowError, ValueError):  # pragma: no cover - dates outside the platform's range
        return None


def _text_form(text: str) -> Optional[float]:
    match = _TEXT.search(text)
    if not match:
        return None
    value, unit = match.group("value").rstrip("."), (match.group("unit") or "").lower()
    if re.fullmatch(_NUMBER, value, re.ASCII) and unit in _WORD_UNITS:
        return float(value) * _WORD_UNITS[unit]
    return _duration(value)


def parse_retry_after(value: Optional[str], *, now: float) -> Optional[float]:
    """Seconds to wait from a Retry-After value, or ``None`` when absent or unreadable.

    Accepts delta-seconds (``"120"``, ``"1.5"``), an HTTP-date relative to ``now`` (epoch
    seconds), a Go-style duration (``"6m0s"``, ``"1s"``, ``"20ms"``) and provider text such as
    ``"Please try again in 41.724s"``. Negative values and past dates give 0; anything longer
    than :data:`MAX_RETRY_AFTER_S` is clamped to it.
    """
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    if _DELTA.match(text):
        return _clamp(float(text))
    seconds = _duration(text)
    if seconds is None and text[:1].isalpha():
        seconds = _http_date(text, now=now)
    if seconds is None:
        seconds = _text_form(text)
    return None if seconds is None else _clamp(seconds)


def retry_after_from_headers(headers: Optional[Mapping[str, str]], body_text: Optional[str], *,
                             now: float) -> Optional[float]:
    """The wait a rate-limited or failing response asks for, from every place it may say so.

    In order: ``Retry-After``; ``retry-after-ms`` / ``x-ms-retry-after-ms`` (milliseconds);
    the ``x-ratelimit-reset-requests`` / ``-tokens`` headers whose ``x-ratelimit-remaining-*``
    is 0 (or not given), taking the longer; the body text ("try again in 41.724s").
    ``None`` when nothing usable is found.
    """
    seconds = parse_retry_after(get_ignoring_case(headers, "Retry-After"), now=now)
    if seconds is not None:
        return seconds
    for name in ("retry-after-ms", "x-ms-retry-after-ms"):
        raw = get_ignoring_case(headers, name)
        if raw is not None and _DELTA.match(str(raw).strip()):
            return _clamp(float(str(raw).strip()) / 1000.0)
    resets = []
    for kind in ("requests", "tokens"):
        remaining = get_ignoring_case(headers, f"x-ratelimit-remaining-{kind}")
        if remaining is not None and str(remaining).strip() not in ("0", "0.0"):
            continue
        reset = parse_retry_after(get_ignoring_case(headers, f"x-ratelimit-reset-{kind}"), now=now)
        if reset is not None:
            resets.append(reset)
    if resets:
        return max(resets)
    if body_text:
        found = _text_form(str(body_text)[:4096])
        if found is not None:
            return _clamp(found)
    return None
