"""When and how the Vision AI stand-in fails: its :class:`FaultSchedule` and the rate limits
it keeps on schedule time (a token bucket, or a fixed-window quota).

Every time here is in schedule seconds (see :mod:`~fme_ai_resilience.drill.standins.server`);
:mod:`~fme_ai_resilience.drill.standins.vision` reads the schedule call by call, in the order
its docstring gives.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from ...core.checks import finite, ratio
from ...core.errors import ConfigurationError

__all__ = ["FaultSchedule", "RateBucket", "Quota", "TRUNCATION_MODES", "Window"]

TRUNCATION_MODES = ("close", "short", "either")

Window = Tuple[float, float]


@dataclass(frozen=True)
class FaultSchedule:
    """What goes wrong, and when; every time in schedule seconds since ``start()``.

    ``error_rate``, ``html_502_rate`` and ``truncated_rate`` are probabilities per call that
    reaches the model (their sum at most 1). ``rate_limit_per_s`` refills a token bucket of
    ``rate_limit_burst`` tokens (default: one second's worth, at least 1); None: no limit.
    ``outages`` are ``(start_s, end_s)`` windows, start inclusive, end exclusive.
    ``truncated_mode`` is ``close``, ``short`` or ``either`` (drawn per call).
    ``latency_profile`` is ``(at_s, latency_s)`` points, ascending in time: the model's
    latency follows the line through them (a service slowing down and recovering), the first
    point's before it and the last point's after it, instead of ``latency_s``.
    ``rate_window_s`` makes the rate limit a quota of ``rate_limit_per_s * rate_window_s``
    calls (at least 1) per fixed window of that many seconds instead of a token bucket.
    ``drift_rate`` is the share of photos whose every answer drifts (drawn once per photo:
    the model changed its JSON for a kind of image), besides everything from ``drift_from_s``
    until ``drift_until_s`` (the fix; None: never fixed).
    A slow service beside the ``latency_profile``: ``slow_photo_rate`` is the share of photos (drawn once per photo) the model
    takes ``slow_photo_latency_s`` over. ``capacity`` is how many calls the model computes at
    once (None: any number): the others queue, first come first served, and their latency
    starts when one ends, so the time to the first byte grows with the load, as a loaded
    service's does. A call the client gave up on is still computed (and counted in flight).
    Answers cut short: ``cut_photo_rate`` is the share of photos (drawn once per photo) whose
    first 1 to ``cut_answers`` answers (drawn per photo) are cut as ``truncated_mode`` says.
    Raises ConfigurationError naming the bad field.
    """

    latency_s: float = 0.0
    latency_jitter_s: float = 0.0
    error_rate: float = 0.0
    html_502_rate: float = 0.0
    truncated_rate: float = 0.0
    truncated_mode: str = "either"
    rate_limit_per_s: Optional[float] = None
    rate_limit_burst: Optional[int] = None
    outages: Sequence[Window] = ()
    drift_from_s: Optional[float] = None
    drift_rate: float = 0.0
    drift_until_s: Optional[float] = None
    constant_confidence_from_s: Optional[float] = None
    latency_profile: Sequence[Tuple[float, float]] = ()
    rate_window_s: Optional[float] = None
    slow_photo_rate: float = 0.0
    slow_photo_latency_s: float = 0.0
    capacity: Optional[int] = None
    cut_photo_rate: float = 0.0
    cut_answers: int = 1

    def __post_init__(self) -> None:
        finite("latency_s", self.latency_s, minimum=0)
        ratio("slow_photo_rate", self.slow_photo_rate)
        finite("slow_photo_latency_s", self.slow_photo_latency_s, minimum=0)
        ratio("cut_photo_rate", self.cut_photo_rate)
        _whole("cut_answers", self.cut_answers)
        if self.capacity is not None:
            _whole("capacity", self.capacity)
        ratio("drift_rate", self.drift_rate)
        finite("latency_jitter_s", self.latency_jitter_s, minimum=0)
        rates = [ratio(n, getattr(self, n)) for n in ("error_rate", "html_502_rate",
                                                      "truncated_rate")]
        if sum(rates) > 1.0 + 1e-9:
            raise ConfigurationError("error_rate", self.error_rate,
                                     "error_rate + html_502_rate + truncated_rate must be <= 1")
        if self.truncated_mode not in TRUNCATION_MODES:
            raise ConfigurationError("truncated_mode", self.truncated_mode,
                                     f"must be one of {list(TRUNCATION_MODES)}")
        if self.rate_limit_per_s is not None:
            finite("rate_limit_per_s", self.rate_limit_per_s, above=0)
        if self.rate_limit_burst is not None:
            if not (isinstance(self.rate_limit_burst, int)
                    and not isinstance(self.rate_limit_burst, bool)
                    and self.rate_limit_burst >= 1):
                raise ConfigurationError("rate_limit_burst", self.rate_limit_burst,
                                         "must be a whole number >= 1")
        for field_name in ("drift_from_s", "constant_confidence_from_s"):
            if getattr(self, field_name) is not None:
                finite(field_name, getattr(self, field_name), minimum=0)
        if self.drift_until_s is not None:
            if self.drift_from_s is None:
                raise ConfigurationError("drift_until_s", self.drift_until_s,
                                         "a fix needs a drift (drift_from_s)")
            finite("drift_until_s", self.drift_until_s, above=self.drift_from_s)
        windows = []
        for i, window in enumerate(self.outages):
            try:
                start, end = window
            except (TypeError, ValueError):
                raise ConfigurationError(f"outages[{i}]", window,
                                         "must be a (start_s, end_s) pair") from None
            start = finite(f"outages[{i}].start_s", start, minimum=0)
            end = finite(f"outages[{i}].end_s", end, above=start)
            windows.append((start, end))
        object.__setattr__(self, "outages", tuple(windows))
        points = []
        for i, point in enumerate(self.latency_profile):
            try:
                at, latency = point
            except (TypeError, ValueError):
                raise ConfigurationError(f"latency_profile[{i}]", point,
                                         "must be an (at_s, latency_s) pair") from None
            at = finite(f"latency_profile[{i}].at_s", at,
                        minimum=points[-1][0] if points else 0.0)
            points.append((at, finite(f"latency_profile[{i}].latency_s", latency, minimum=0)))
        object.__setattr__(self, "latency_profile", tuple(points))
        if self.rate_window_s is not None:
            if self.rate_limit_per_s is None:
                raise ConfigurationError("rate_window_s", self.rate_window_s,
                                         "a quota window needs a rate (rate_limit_per_s)")
            finite("rate_window_s", self.rate_window_s, above=0)

    def latency_at(self, at_s: float) -> float:
        """The model's latency at ``at_s`` before its jitter: ``latency_s``, or the
        ``latency_profile``'s line at that time."""
        points = self.latency_profile
        if not points:
            return self.latency_s
        if at_s <= points[0][0]:
            return points[0][1]
        for (t0, v0), (t1, v1) in zip(points, points[1:]):
            if at_s <= t1:
                return v1 if t1 == t0 else v0 + (v1 - v0) * (at_s - t0) / (t1 - t0)
        return points[-1][1]

    def drifted(self, at_s: float) -> bool:
        """Whether the model answers out of schema at ``at_s`` (after ``drift_from_s``,
        before the fix ``drift_until_s``)."""
        return (self.drift_from_s is not None and at_s >= self.drift_from_s
                and (self.drift_until_s is None or at_s < self.drift_until_s))

    @property
    def burst(self) -> int:
        """The token bucket's size, or the quota of one window (0 when there is no rate
        limit)."""
        if self.rate_limit_per_s is None:
            return 0
        if self.rate_window_s is not None:
            return max(1, int(round(self.rate_limit_per_s * self.rate_window_s)))
        if self.rate_limit_burst is not None:
            return self.rate_limit_burst
        return max(1, int(self.rate_limit_per_s))

    def outage_at(self, at_s: float) -> Optional[int]:
        """The index of the outage window holding ``at_s``, else None."""
        for i, (start, end) in enumerate(self.outages):
            if start <= at_s < end:
                return i
        return None


def _whole(field_name: str, value: object) -> None:
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise ConfigurationError(field_name, value, "must be a whole number >= 1")


class RateBucket:
    """A token bucket on schedule time."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.last = 0.0

    def take(self, at_s: float) -> Optional[float]:
        """None when a token was taken, else the schedule seconds until one is there."""
        if at_s > self.last:
            self.tokens = min(float(self.burst), self.tokens + (at_s - self.last) * self.rate)
            self.last = at_s
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return None
        return (1.0 - self.tokens) / self.rate


class Quota:
    """A fixed-window quota on schedule time: ``quota`` calls per window of ``window_s``."""

    def __init__(self, quota: int, window_s: float) -> None:
        self.quota = quota
        self.window_s = window_s
        self.window = 0
        self.used = 0

    def take(self, at_s: float) -> Optional[float]:
        """None when the call fits the window, else the schedule seconds to its end."""
        window = int(at_s // self.window_s)
        if window != self.window:
            self.window, self.used = window, 0
        if self.used < self.quota:
            self.used += 1
            return None
        return (window + 1) * self.window_s - at_s
