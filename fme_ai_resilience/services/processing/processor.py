"""The processor (WS-02): claim tasks, download the photo, ask the Vision AI, write back, complete.

:meth:`Processor.run_batch` claims at most ``processing.claim_limit`` tasks and takes each
through its stages (docs/pipeline.md)::

    ladder and breaker permit   open, paused or refused -> DEFERRED, no attempt counted
    photo list (no list sent)   queryAttachments, one task registered per photo
    download                    checkpoint ``downloaded`` (sha256, size, content type)
    analysis                    reused from the analysis cache, or one Vision AI call;
                                checkpoint ``analyzed`` (the validated assessment, the verdict)
    write-back and completion   through the sink; outcome ACCEPTED, REVIEW or SKIPPED

A stage that finished is never redone: a task with ``analyzed`` never calls the Vision AI
again, one with ``written`` never writes again. A validated result is also kept by the photo's
SHA-256 and the model configuration, so the same photo under another GlobalID (Survey123
re-creating a feature, FME Flow replaying a job) costs no second call. Failures follow the
classification table: retried inline within ``retry.max_inline_wait_s`` and the task's deadline,
otherwise parked (FAILED with a retry time, or DEFERRED when no attempt counts) or buried as a
dead letter with its failure class; format anomalies are recorded; every outbound call goes
into ``ai_call_log``. While a task is worked on, its lease is renewed in the background and
checked just before every write that leaves for the layer (a holder whose lease lapsed writes
nothing), and the batch stops claiming when the FME job's remaining runtime cannot fit another
worst-case task.

Several calls in flight per engine: a batch is worked by ``concurrency.per_engine`` workers
(threads; one works inline, and so do all on a clock that serves one thread, such as a test's
``FakeClock``), each claiming one task at a time; every Vision AI call takes a
slot of the fleet's adaptive concurrency limit (``fme_ai_resilience.services.resilience.concurrency``),
and a worker past the first claims only while the fleet has a free slot, so an engine never
hoards tasks it cannot call for (docs/vision.md).
"""
from __future__ import annotations

import enum
import logging
import random
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from ...core.clock import Clock, Deadline, SystemClock
from ...core.resilience.degrade import Level, Model
from ...core.errors import StoreError
from ...core.ledger import Status, Task
from ...core.text.redact import redact_text
from ...core.resilience.retry import RetryPolicy
from ...core.config.settings import Settings
from ...store.base import Store
from ...core.resilience.task_budget import worst_case_task_s
from ..resilience.retry_budget import FleetRetryGate
from ..observe.logs import trace
from ..resilience.pace import CallPacer
from ..resilience.breaker import CircuitBreaker
from ..resilience.degrade import Degradation, gather_signals
from .sinks import Sink
from .collaborators import Collaborators, Downloader, PhotoLister, VisionRoute
from ..resilience.concurrency import FleetLimit
from .lease import Lease
from .task_end import TaskResult
from .task_run import TaskRun, analysis_fingerprint
from ..vision import DownloadPolicy, fetch_photo

__all__ = ["Processor", "VisionRoute", "TaskResult", "BatchReport", "Stop", "PhotoLister",
           "Downloader", "analysis_fingerprint"]

log = logging.getLogger("fme_ai_resilience.processor")


class Stop(enum.Enum):
    """Why a batch stopped claiming; the value is the sentence the report shows."""

    CLAIM_LIMIT = "claim limit reached"
    NO_DUE_TASK = "no due task"
    JOB_ENDING = "the job's remaining runtime cannot fit another task"
    LEDGER_DOWN = "ledger unavailable"
    STOPPED = "asked to stop"


@dataclass(frozen=True)
class BatchReport:
    """One batch: what happened to each task, why the batch stopped claiming and, for a
    ledger that failed, how (redacted)."""

    results: Tuple[TaskResult, ...]
    stopped: Stop
    detail: str = ""

    def count(self, status: Status) -> int:
        return sum(1 for r in self.results if r.status is status)

    def summary(self) -> str:
        """One line: the tasks by final status and why the batch stopped."""
        counts = {}
        for result in self.results:
            counts[result.status.value] = counts.get(result.status.value, 0) + 1
        tally = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        why = self.stopped.value + (f": {self.detail}" if self.detail else "")
        return f"{len(self.results)} task(s){': ' + tally if tally else ''} (stopped: {why})"

    def as_dict(self) -> Dict[str, Any]:
        return {"tasks": len(self.results), "stopped": self.stopped.name,
                "detail": self.detail or None,
                "by_status": {s.value: self.count(s) for s in Status if self.count(s)},
                "results": [r.as_dict() for r in self.results]}


class Processor:
    """Runs WS-02 batches over the ledger (see the module docstring).

    ``primary`` (and ``fallback``, the lighter model the ladder switches to) are the Vision AI
    routes; ``sink`` finishes each task; ``download`` fetches a photo (default: the guarded
    downloader under ``policy``); ``token`` gives the processor's ArcGIS token (``(now) ->
    str``, None for public layers); ``lister`` lists the photos of a webhook that carried
    none; ``job_started`` (epoch seconds, default now) is when the FME job began, for
    ``processing.job_runtime_limit_s``.
    """

    def __init__(self, settings: Settings, primary: VisionRoute, sink: Sink, *,
                 store: Store, fallback: Optional[VisionRoute] = None,
                 policy: Optional[DownloadPolicy] = None,
                 download: Optional[Downloader] = None,
                 token: Optional[Callable[[float], Optional[str]]] = None,
                 lister: Optional[PhotoLister] = None, owner: str = "processor",
                 job_started: Optional[float] = None, clock: Optional[Clock] = None,
                 rng: Optional[random.Random] = None) -> None:
        self.settings = settings
        self.store = store
        self.sink = sink
        self.clock = clock or SystemClock()
        self.rng = rng if rng is not None else random.Random()
        self.owner = owner
        self.routes = {Model.PRIMARY: primary, Model.FALLBACK: fallback or primary}
        self.breakers = {route.service: CircuitBreaker(route.service, settings.breaker,
                                                       store=store, clock=self.clock)
                         for route in self.routes.values()}
        self.pacers = {service: CallPacer(service, store=store, clock=self.clock,
                                          cache_ttl_s=settings.breaker.cache_ttl_s)
                       for service in self.breakers}
        self.limits = {service: FleetLimit(service, settings, store=store, clock=self.clock,
                                           holder=owner)
                       for service in self.breakers}
        self.ladder = Degradation.from_settings(settings, store=store, clock=self.clock)
        self.policy = RetryPolicy.from_settings(settings)
        self.gate = FleetRetryGate.from_settings(primary.service, settings, store=store)
        self.worst_case_s = worst_case_task_s(self.policy, settings.timeouts)
        # configuration only: the served feature services' hosts and the photo hosts
        guarded = policy or DownloadPolicy.from_settings(settings)
        clock = self.clock
        self.collaborators = Collaborators(
            settings=settings, store=store, clock=clock, rng=self.rng, routes=self.routes,
            breakers=self.breakers, pacers=self.pacers, limits=self.limits,
            ladder=self.ladder, policy=self.policy,
            gate=self.gate, sink=sink, token=token, lister=lister,
            download=download or (lambda url, tok: fetch_photo(url, tok, guarded, clock=clock)))
        limit = settings.processing.job_runtime_limit_s
        self.job_deadline = None if not limit else Deadline(
            self.clock.now() if job_started is None else job_started, limit)

    def __repr__(self) -> str:
        return (f"Processor(owner={self.owner!r}, vision={self.routes[Model.PRIMARY].service!r}"
                f", sink={self.sink.name!r})")

    # -- the batch -------------------------------------------------------------------------------
    def run_batch(self, stop: Optional[threading.Event] = None) -> BatchReport:
        """Claim and work through at most ``processing.claim_limit`` tasks, with up to
        ``concurrency.per_engine`` of them at once; once ``stop`` is set (``process --loop``
        on SIGTERM) no task is claimed any more and the batch ends when the tasks in hand
        are done, within one task's worst case (``worst_case_s``)."""
        batch = _Batch(self, self.settings.processing.claim_limit, stop)
        workers = max(1, min(self.settings.concurrency.per_engine,
                             self.settings.processing.claim_limit))
        if not getattr(self.clock, "shared", True):
            workers = 1    # a clock that serves one thread (a test's FakeClock)
        if workers == 1:
            batch.work(first=True)
        else:
            threads = [threading.Thread(target=batch.work, kwargs={"first": i == 0},
                                        name=f"{self.owner} worker {i}", daemon=True)
                       for i in range(workers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        if batch.raised is not None:
            raise batch.raised
        self._observe_ladder()
        return BatchReport(tuple(batch.results), batch.stopped or Stop.CLAIM_LIMIT,
                           batch.detail)

    def _observe_ladder(self) -> None:
        """While the ladder is up, each batch feeds it fresh signals as the compensator does,
        so it steps down by itself (and the photos it held come back) whether or not the
        compensator runs; at L0 this costs nothing (the cached level)."""
        if self.ladder.level() is Level.NORMAL:
            return
        primary, fallback = self.routes[Model.PRIMARY], self.routes[Model.FALLBACK]
        try:
            self.ladder.observe(gather_signals(
                self.settings.intake, self.breakers[primary.service],
                None if fallback is primary else self.breakers[fallback.service],
                store=self.store, now=self.clock.now()))
        except StoreError as exc:
            log.warning("processor %s: the degradation ladder was not updated: %s",
                        self.owner, redact_text(str(exc)))

    def _time_for_another(self) -> bool:
        if self.job_deadline is None:
            return True
        return self.job_deadline.remaining(now=self.clock.now()) >= self.worst_case_s

    def _room(self, busy: int) -> bool:
        """Whether the fleet has a free call slot for the primary model (a cached read), with
        ``busy`` of this engine's workers at work already."""
        return self.limits[self.routes[Model.PRIMARY].service].room(busy)

    # -- one task ------------------------------------------------------------------------------
    def _work(self, task: Task) -> TaskResult:
        lease_s = self.settings.processing.lease_s
        now = self.clock.now()
        if task.lease_expires_at - now < self.worst_case_s and not self.store.renew(
                task.key, task.lease_token, lease_s, now=now):
            return TaskResult(task.key, Status.PROCESSING, task.trace_id,
                              reason="lease lost before the task started")
        with trace(task.trace_id), Lease(task, lease_s, store=self.store,
                                         clock=self.clock) as lease:
            lease.confirmed()   # just claimed (or renewed above)
            result = TaskRun(self.collaborators, task, lease).through()
            _log_result(result)
        return result


class _Batch:
    """One batch's shared state: the claims left, the results, why it stopped. Workers claim
    one task at a time; a worker past the first claims only while the fleet has a free call
    slot (the first always does, so work that needs no call, or waits for a slot, goes on)."""

    def __init__(self, processor: Processor, claim_limit: int,
                 halt: Optional[threading.Event] = None) -> None:
        self.p = processor
        self.halt = halt
        self.left = claim_limit
        self.busy = 0       # workers working a task now
        self.results: List[TaskResult] = []
        self.stopped: Optional[Stop] = None
        self.detail = ""
        self.raised: Optional[BaseException] = None
        self._lock = threading.Lock()

    def _stop(self, why: Stop, detail: str = "") -> None:
        with self._lock:
            if self.stopped is None:
                self.stopped, self.detail = why, detail

    def _next(self, first: bool) -> Optional[Task]:
        p = self.p
        while True:
            with self._lock:
                if self.stopped is None and self.halt is not None and self.halt.is_set():
                    self.stopped = Stop.STOPPED
                if self.stopped is not None:
                    return None
                if self.left <= 0:
                    self.stopped = Stop.CLAIM_LIMIT
                    return None
            if not p._time_for_another():
                self._stop(Stop.JOB_ENDING)
                return None
            if first or p._room(self.busy):
                break
            p.clock.sleep(p.limits[p.routes[Model.PRIMARY].service].poll_s())
        with self._lock:
            if self.stopped is not None or self.left <= 0:
                return None
            self.left -= 1
        tasks = p.store.claim(p.owner, 1, p.settings.processing.lease_s, now=p.clock.now())
        if not tasks:
            self._stop(Stop.NO_DUE_TASK)
            return None
        with self._lock:
            self.busy += 1
        return tasks[0]

    def work(self, *, first: bool) -> None:
        """Claim and work tasks until the batch stops; a ledger that fails stops it."""
        try:
            while True:
                task = self._next(first)
                if task is None:
                    return
                try:
                    result = self.p._work(task)
                except StoreError as exc:
                    # The ledger cannot record progress: stop; the leases lapse and the
                    # compensator hands the tasks to the next batch.
                    detail = redact_text(str(exc))
                    log.error("processor %s: ledger unavailable: %s", self.p.owner, detail)
                    result = TaskResult(task.key, Status.PROCESSING, task.trace_id,
                                        reason=f"ledger unavailable: {detail}")
                    with self._lock:
                        self.results.append(result)
                    self._stop(Stop.LEDGER_DOWN, detail)
                    return
                finally:
                    with self._lock:
                        self.busy -= 1
                with self._lock:
                    self.results.append(result)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the batch's own thread
            with self._lock:
                if self.raised is None:
                    self.raised = exc
                if self.stopped is None:
                    self.stopped = Stop.LEDGER_DOWN
                    self.detail = redact_text(str(exc))


def _log_result(result: TaskResult) -> None:
    """One line per task: INFO for a finish or a park, WARNING for a dead letter."""
    if result.status is Status.DEAD:
        log.warning("task %s: DEAD (%s): %s", result.key,
                    result.failure_class.value if result.failure_class else "?",
                    redact_text(result.reason))
    elif result.status is Status.SUCCEEDED:
        log.info("task %s: SUCCEEDED (%s%s)", result.key,
                 result.outcome.value if result.outcome else "?",
                 ", reused analysis" if result.reused else "")
    else:
        log.info("task %s: %s%s", result.key, result.status.value,
                 f": {redact_text(result.reason)}" if result.reason else "")
