"""A baseline's run: FME Flow's engines taking one job per webhook delivery from one queue.

:func:`run_baseline` models an FME Flow deployment with no ledger: every delivery queues one
job (an Automation webhook trigger never refuses one) and ``engines`` engine threads, each
with its own ``requests`` session, take the jobs in order (:func:`~.job.run_job`). A
``sweep`` baseline also queues its scheduled sweep job every ``sweep_every_s``
(:func:`~.sweep.sweep_pass`) until, after the last delivery's job, a pass writes nothing.
Every wait and timeout is in production seconds, slept x ``time_scale``. What the run did is
:class:`BaselineRun`: its jobs and its gauges' peaks, never read for a judged figure.
"""
from __future__ import annotations

import queue
import random
import threading
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import requests
from requests.adapters import HTTPAdapter

from ...core.checks import count, finite
from ...core.clock import SystemClock
from ..scenarios import Scheduled
from .gauges import Both, Progress
from .job import Body, Job, run_job
from .models import Baseline, BaselineError, Sweep, baseline
from .sweep import sweep_pass

__all__ = ["BaselineRun", "run_baseline"]

#: The most sweep passes one run schedules (a guard: each pass that writes nothing ends it).
_MAX_SWEEPS = 200


@dataclass(frozen=True)
class BaselineRun:
    """What a baseline's run did: its deliveries, jobs (sweeps included) and Vision AI calls
    it made, ``started`` (monotonic s), and the peaks of its :class:`~.gauges.Progress`.
    ``skipped`` says why it did not run; ``note`` is what the baseline models and assumes."""

    name: str
    note: str
    time_scale: float
    engines: int
    skipped: Optional[str] = None
    deliveries: int = 0
    jobs: int = 0
    sweeps: int = 0
    started: float = 0.0
    peak_busy: int = 0
    peak_backlog: int = 0


def _session(chosen: Baseline) -> requests.Session:
    session = requests.Session()
    # No hidden retries below the baseline's own (max_retries=0), and room for its transfers.
    adapter = HTTPAdapter(pool_maxsize=max(10, chosen.transfers_per_job), max_retries=0)
    session.mount("http://", adapter)
    return session


class _Pool:
    """The engines and their queue; ``done`` hears each job's photos written."""

    def __init__(self, name: str, chosen: Baseline, *, engines: int, vision_url: str,
                 layer_url: Optional[str], time_scale: float, seed: int,
                 gauges: Progress, table_url: str = "") -> None:
        self.name, self.chosen = name, chosen
        self.table_url = table_url
        self.vision_url, self.layer_url = vision_url, layer_url
        self.time_scale, self.seed, self.gauges = time_scale, seed, gauges
        self.jobs: "queue.Queue[Optional[Tuple[str, Any]]]" = queue.Queue()
        self.clock = SystemClock()
        self.lock = threading.Condition()
        self.outstanding = 0
        self.ran = 0
        self.crashed: List[BaseException] = []
        self.threads = [threading.Thread(target=self._engine, args=(i,), daemon=True,
                                         name=f"baseline-{name}-engine-{i}")
                        for i in range(engines)]

    def submit(self, kind: str, item: Any, answer: "Optional[queue.Queue[int]]" = None) -> None:
        with self.lock:
            self.outstanding += 1
        self.gauges.change(queued=1)
        self.jobs.put((kind, (item, answer)))

    def idle(self) -> None:
        """Wait until every queued job has ended."""
        with self.lock:
            while self.outstanding and not self.crashed:
                self.lock.wait(0.1)

    def _engine(self, index: int) -> None:
        rng = random.Random(f"{self.name}:{self.seed}:{index}")
        with _session(self.chosen) as session:
            while True:
                item = self.jobs.get()
                if item is None:
                    return
                kind, (payload, answer) = item
                self.gauges.change(queued=-1, busy=1)
                try:
                    written = self._run(kind, payload, rng=rng, session=session)
                    if answer is not None:
                        answer.put(written)
                except BaseException as exc:  # a fault of the model itself, raised below
                    self.crashed.append(exc)
                    return
                finally:
                    self.gauges.change(busy=-1)
                    with self.lock:
                        self.outstanding -= 1
                        self.ran += 1
                        self.lock.notify_all()

    def _run(self, kind: str, payload: Any, *, rng: random.Random,
             session: requests.Session) -> int:
        if kind == "delivery":
            result = run_job(self.name, payload, vision_url=self.vision_url, rng=rng,
                             time_scale=self.time_scale, clock=self.clock, session=session,
                             progress=self.gauges, table_url=self.table_url)
            return sum(p.succeeded for p in result.photos)
        chosen = self.chosen
        assert isinstance(chosen, Sweep) and self.layer_url
        job = Job(chosen, vision_url=self.vision_url, time_scale=self.time_scale,
                  clock=self.clock, rng=rng, session=session, progress=self.gauges,
                  table_url=self.table_url)
        return sweep_pass(job, self.layer_url, chosen.sweep_limit)


def run_baseline(name: str, deliveries: Sequence[Scheduled], *, vision_url: str, engines: int,
                 time_scale: float, seed: int, layer_url: Optional[str] = None,
                 table_url: str = "", progress: Optional[Progress] = None) -> BaselineRun:
    """Run baseline ``name`` on ``deliveries``: each one queued as a job at its ``at_s``,
    ``engines`` engine threads taking them in order, until every job has ended (and, for a
    sweep, until a pass after the last delivery writes nothing).

    ``vision_url`` is the Vision AI stand-in's endpoint; ``layer_url`` the layer a sweep
    queries (required for it); the photos and layers of a job come from its body;
    ``table_url`` the related table a photo's row is written to when features carry several
    photos (empty: the feature's own fields).
    ``progress`` (optional) is updated as the run goes. A baseline that cannot run here comes
    back with ``skipped`` set and nothing run. Raises ConfigurationError for an unknown name,
    ``engines`` < 1 or a ``time_scale`` not above 0; BaselineError when the model crashes.
    """
    chosen = baseline(name)
    count("engines", engines, minimum=1)
    finite("time_scale", time_scale, above=0)
    missing = chosen.missing()
    if missing is not None:
        return BaselineRun(name, chosen.note, time_scale, engines, skipped=missing)
    sweeping = isinstance(chosen, Sweep)
    if sweeping and not layer_url:
        raise BaselineError("a sweep needs the layer it queries (layer_url)")
    own = Progress()
    gauges = own if progress is None else Both(own, progress)
    pool = _Pool(name, chosen, engines=engines, vision_url=vision_url, layer_url=layer_url,
                 time_scale=time_scale, seed=seed, gauges=gauges, table_url=table_url)
    start = pool.clock.monotonic()
    period = chosen.sweep_every_s * time_scale if isinstance(chosen, Sweep) else None
    for thread in pool.threads:
        thread.start()
    sweeps = 0
    try:
        pending: List[Tuple[float, Body]] = [(d.at_s, d.body) for d in
                                             sorted(deliveries, key=lambda d: d.at_s)]
        next_sweep = period if period is not None else None
        while pending and not pool.crashed:
            if next_sweep is not None and next_sweep <= pending[0][0]:
                _sleep_until(pool, start + next_sweep)
                pool.submit("sweep", None)
                sweeps += 1
                next_sweep += period  # type: ignore[operator]
                continue
            at_s, body = pending.pop(0)
            _sleep_until(pool, start + at_s)
            pool.submit("delivery", body)
        pool.idle()
        while next_sweep is not None and sweeps < _MAX_SWEEPS and not pool.crashed:
            _sleep_until(pool, start + next_sweep)
            answer: "queue.Queue[int]" = queue.Queue()
            pool.submit("sweep", None, answer)
            sweeps += 1
            next_sweep += period  # type: ignore[operator]
            pool.idle()
            if pool.crashed or answer.get() == 0:
                break
    finally:
        for _ in pool.threads:
            pool.jobs.put(None)
        for thread in pool.threads:
            thread.join()
    if pool.crashed:
        raise BaselineError(f"a {name} engine failed: {pool.crashed[0]!r}") from pool.crashed[0]
    return BaselineRun(name, chosen.note, time_scale, engines, deliveries=len(deliveries),
                       jobs=pool.ran, sweeps=sweeps, started=start, peak_busy=own.peak_busy,
                       peak_backlog=own.peak_backlog)


def _sleep_until(pool: _Pool, at: float) -> None:
    wait = at - pool.clock.monotonic()
    if wait > 0:
        pool.clock.sleep(wait)
