"""The task budget: how long one task may hold an engine, and whether a retry policy fits it.

The task budget is 1.5 x the business latency promise (docs/retries.md).
:func:`worst_case_task_s` is the longest a task can take under a retry policy and per-call
timeouts; :func:`check_budget` compares it with the task budget, with the lease a claim takes
(``processing.lease_s``) and with FME's job runtime limit (``tm_ttc``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional, Protocol, Tuple

from ..checks import count, finite
from ..errors import ErrorClass
from .backoff import Backoff
from .classification import ClassRule
from .timeouts import TimeoutBudget

__all__ = ["task_budget_s", "worst_case_task_s", "BudgetCheck", "check_budget", "RetryShape"]


class RetryShape(Protocol):
    """What the budget reads of a retry policy (:class:`~.retry.RetryPolicy` has it all)."""

    @property
    def max_attempts(self) -> int: ...

    @property
    def max_inline_wait_s(self) -> float: ...

    @property
    def rules(self) -> Mapping[ErrorClass, ClassRule]: ...

    @property
    def backoff(self) -> Backoff: ...


def task_budget_s(latency_promise_s: float) -> float:
    """The time a task may take end to end: 1.5 x the business latency promise (docs/retries.md)."""
    return 1.5 * finite("intake.latency_promise_s", latency_promise_s, above=0)


def _max_inline_waits(policy: "RetryShape", attempts: int) -> Tuple[float, ...]:
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


def worst_case_task_s(policy: "RetryShape", timeouts: TimeoutBudget,
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
    """Whether a retry policy fits the task budget, the lease and the FME job runtime limit.

    ``inline_attempts`` is how many attempts fit the task budget in the worst case (the deadline
    parks the task before the rest). ``fits_lease`` and ``fits_job_limit`` are None when no
    lease or limit was given.
    """

    task_budget_s: float
    worst_case_s: float
    per_call_s: float
    attempts: int
    inline_attempts: int
    job_limit_s: Optional[float]
    tasks_per_job: int
    lease_s: Optional[float] = None

    @property
    def fits_task_budget(self) -> bool:
        return self.worst_case_s <= self.task_budget_s

    @property
    def fits_lease(self) -> Optional[bool]:
        """Whether the lease covers the worst-case task time (None: no lease given)."""
        return None if self.lease_s is None else self.lease_s >= self.worst_case_s

    @property
    def fits_job_limit(self) -> Optional[bool]:
        if self.job_limit_s is None:
            return None
        return self.job_limit_s > self.tasks_per_job * self.worst_case_s

    @property
    def fits(self) -> bool:
        return (self.fits_task_budget and self.fits_lease is not False
                and self.fits_job_limit is not False)

    def problems(self) -> Tuple[str, ...]:
        """One sentence per thing that does not fit (empty when everything does)."""
        out = []
        if not self.fits_task_budget:
            out.append(f"worst-case task time {self.worst_case_s:.1f}s exceeds the task budget "
                       f"{self.task_budget_s:.1f}s: only {self.inline_attempts} of "
                       f"{self.attempts} attempts fit before the deadline parks the task")
        if self.fits_lease is False:
            out.append(f"processing.lease_s {self.lease_s:g}s is shorter than the worst-case "
                       f"task time {self.worst_case_s:.1f}s: the lease can lapse while an "
                       f"engine still works on the task, and another engine claims it")
        if self.fits_job_limit is False:
            out.append(f"FME job runtime limit (tm_ttc) {self.job_limit_s:g}s does not exceed "
                       f"{self.tasks_per_job} x worst-case task time "
                       f"{self.worst_case_s:.1f}s; the job would be killed mid-task")
        return tuple(out)


def check_budget(policy: "RetryShape", timeouts: TimeoutBudget, latency_promise_s: float,
                 job_limit_s: Optional[float] = None, tasks_per_job: int = 1,
                 lease_s: Optional[float] = None) -> BudgetCheck:
    """Check ``policy`` with ``timeouts`` against the task budget, the lease and FME's ``tm_ttc``.

    ``job_limit_s`` is the job runtime limit in seconds (None: not checked); ``tasks_per_job``
    is how many tasks one job works through (the processor's claim limit); ``lease_s`` is the
    lease a claim takes (``processing.lease_s``; None: not checked), which must be at least the
    worst-case task time.
    """
    budget = task_budget_s(latency_promise_s)
    if job_limit_s is not None:
        finite("job_limit_s", job_limit_s, above=0)
    if lease_s is not None:
        finite("lease_s", lease_s, above=0)
    count("tasks_per_job", tasks_per_job, minimum=1)
    inline = 0
    while inline < policy.max_attempts and \
            worst_case_task_s(policy, timeouts, inline + 1) <= budget:
        inline += 1
    return BudgetCheck(budget, worst_case_task_s(policy, timeouts), timeouts.total_s,
                       policy.max_attempts, inline, job_limit_s, tasks_per_job, lease_s)
