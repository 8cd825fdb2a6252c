"""Time budgets: how long one call may take, phase by phase, how long a task may take, and
how much backlog the engines can drain within the latency promise.

``TimeoutBudget`` is the per-call budget the Vision AI client enforces (connect, TLS, time to
first byte, body read). :func:`worst_case_task_s` and :func:`check_budget` tie a retry policy to
the task budget (1.5 x the latency promise) and to FME's job runtime limit (``tm_ttc``);
:func:`plan_capacity` applies Little's law to the engine pool (seed section 5.3).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Optional, Tuple

from .errors import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from .retry import RetryPolicy

#: The longest Retry-After intake ever answers (24 h), however deep the backlog.
MAX_DRAIN_RETRY_AFTER_S = 24 * 3600


@dataclass(frozen=True)
class TimeoutBudget:
    """Per-call time limits in seconds, one per phase (seed section 3.1).

    ``connect_s`` bounds the TCP handshake, ``tls_s`` the TLS handshake, ``ttfb_s`` the wait for
    the response headers (server queue plus inference), ``body_s`` reading the response body.
    """

    connect_s: float = 3.0
    tls_s: float = 3.0
    ttfb_s: float = 20.0
    body_s: float = 4.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigurationError(f"timeouts.{f.name}", value, "must be a finite number > 0")

    @property
    def total_s(self) -> float:
        """The longest one call can take when every phase uses its whole budget."""
        return self.connect_s + self.tls_s + self.ttfb_s + self.body_s


def task_budget_s(latency_promise_s: float) -> float:
    """The time a task may take end to end: 1.5 x the business latency promise (seed 3.2)."""
    if not (math.isfinite(latency_promise_s) and latency_promise_s > 0):
        raise ConfigurationError("intake.latency_promise_s", latency_promise_s, "must be > 0")
    return 1.5 * latency_promise_s


def _require_positive(field: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ConfigurationError(field, value, "must be a finite number > 0")


@dataclass(frozen=True)
class CapacityPlan:
    """What an engine pool can absorb within the latency promise (Little's law).

    ``watermark`` is the backlog the pool drains within the promise
    (``engines x acceptable_latency_s / mean_processing_s``, at least 1);
    ``drain_rate_per_s`` is tasks finished per second (``engines / mean_processing_s``).
    """

    engines: int
    mean_processing_s: float
    acceptable_latency_s: float
    watermark: int
    drain_rate_per_s: float

    def retry_after_s(self, backlog: int, drain_rate_per_s: Optional[float] = None) -> int:
        """Whole seconds (>= 1) to drain ``backlog``'s excess over the watermark.

        ``drain_rate_per_s`` is the measured rate (tasks/s); None or a non-positive value uses
        the planned rate. Capped at :data:`MAX_DRAIN_RETRY_AFTER_S`.
        """
        rate = self._rate(drain_rate_per_s)
        excess = max(0, int(backlog) - self.watermark)
        return int(min(MAX_DRAIN_RETRY_AFTER_S, max(1, math.ceil(excess / rate))))

    def saturating_backlog(self, drain_rate_per_s: Optional[float] = None) -> int:
        """A backlog from which on :meth:`retry_after_s` answers its cap, however deep: a
        count of the backlog may stop there without changing the answer."""
        return self.watermark + math.ceil(MAX_DRAIN_RETRY_AFTER_S * self._rate(drain_rate_per_s))

    def _rate(self, drain_rate_per_s: Optional[float]) -> float:
        """The measured drain rate when there is one (> 0), else the planned rate."""
        return drain_rate_per_s if drain_rate_per_s and drain_rate_per_s > 0 \
            else self.drain_rate_per_s


def plan_capacity(engines: int, mean_processing_s: float,
                  acceptable_latency_s: float) -> CapacityPlan:
    """The backlog watermark and drain rate of ``engines`` taking ``mean_processing_s`` each.

    8 engines, 20 s per task and a 120 s promise give a watermark of 48 tasks and 0.4 tasks/s.
    Raises :class:`ConfigurationError` for a non-positive input.
    """
    if not (isinstance(engines, int) and engines >= 1):
        raise ConfigurationError("intake.engines", engines, "must be a whole number >= 1")
    _require_positive("intake.mean_processing_s", mean_processing_s)
    _require_positive("intake.latency_promise_s", acceptable_latency_s)
    # The small epsilon keeps 8 x 120 / 20 from landing on 47.999... through float rounding.
    watermark = max(1, int(math.floor(engines * acceptable_latency_s / mean_processing_s + 1e-9)))
    return CapacityPlan(engines, float(mean_processing_s), float(acceptable_latency_s),
                        watermark, engines / mean_processing_s)


def _max_inline_waits(policy: "RetryPolicy", attempts: int) -> Tuple[float, ...]:
    """The longest inline wait before each retry, over every retried class.

    A class governed by Retry-After can be told to wait anything, so up to the inline limit;
    the others wait at most their backoff profile's largest delay.
    """
    rules = [rule for rule in policy.rules.values() if rule.retry and rule.counts_attempt]
    waits = []
    for retry in range(max(0, attempts - 1)):
        longest = max((math.inf if rule.retry_after
                       else policy.backoff.for_profile(rule.backoff).max_delay(retry))
                      for rule in rules) if rules else 0.0
        waits.append(min(policy.max_inline_wait_s, longest))
    return tuple(waits)


def worst_case_task_s(policy: "RetryPolicy", timeouts: TimeoutBudget,
                      attempts: Optional[int] = None) -> float:
    """The longest a task can hold an engine: every attempt times out, every wait is maximal.

    ``attempts x timeouts.total_s`` plus the longest inline wait before each retry (waits
    beyond ``policy.max_inline_wait_s`` park instead of holding the engine). ``attempts``
    defaults to ``policy.max_attempts``. Seconds.
    """
    n = policy.max_attempts if attempts is None else attempts
    return n * timeouts.total_s + sum(_max_inline_waits(policy, n))


@dataclass(frozen=True)
class BudgetCheck:
    """Whether a retry policy fits the task budget and the FME job runtime limit.

    ``inline_attempts`` is how many attempts fit the task budget in the worst case (the deadline
    parks the task before the rest). ``fits_job_limit`` is None when no limit was given.
    """

    task_budget_s: float
    worst_case_s: float
    per_call_s: float
    attempts: int
    inline_attempts: int
    job_limit_s: Optional[float]
    tasks_per_job: int

    @property
    def fits_task_budget(self) -> bool:
        return self.worst_case_s <= self.task_budget_s

    @property
    def fits_job_limit(self) -> Optional[bool]:
        if self.job_limit_s is None:
            return None
        return self.job_limit_s > self.tasks_per_job * self.worst_case_s

    @property
    def fits(self) -> bool:
        return self.fits_task_budget and self.fits_job_limit is not False

    def problems(self) -> Tuple[str, ...]:
        """One sentence per thing that does not fit (empty when everything does)."""
        out = []
        if not self.fits_task_budget:
            out.append(f"worst-case task time {self.worst_case_s:.1f}s exceeds the task budget "
                       f"{self.task_budget_s:.1f}s: only {self.inline_attempts} of "
                       f"{self.attempts} attempts fit before the deadline parks the task")
        if self.fits_job_limit is False:
            out.append(f"FME job runtime limit (tm_ttc) {self.job_limit_s:g}s does not exceed "
                       f"{self.tasks_per_job} x worst-case task time "
                       f"{self.worst_case_s:.1f}s; the job would be killed mid-task")
        return tuple(out)


def check_budget(policy: "RetryPolicy", timeouts: TimeoutBudget, latency_promise_s: float,
                 job_limit_s: Optional[float] = None, tasks_per_job: int = 1) -> BudgetCheck:
    """Check ``policy`` with ``timeouts`` against the task budget and FME's ``tm_ttc``.

    ``job_limit_s`` is the job runtime limit in seconds (None: not checked); ``tasks_per_job``
    is how many tasks one job works through (the processor's claim limit).
    """
    budget = task_budget_s(latency_promise_s)
    if job_limit_s is not None:
        _require_positive("fme.job_runtime_limit_s", job_limit_s)
    if not (isinstance(tasks_per_job, int) and tasks_per_job >= 1):
        raise ConfigurationError("processing.claim_limit", tasks_per_job, "must be >= 1")
    inline = 0
    while inline < policy.max_attempts and \
            worst_case_task_s(policy, timeouts, inline + 1) <= budget:
        inline += 1
    return BudgetCheck(budget, worst_case_task_s(policy, timeouts), timeouts.total_s,
                       policy.max_attempts, inline, job_limit_s, tasks_per_job)
