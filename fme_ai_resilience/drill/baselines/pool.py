"""A baseline's run: FME Flow's engines taking one job per webhook delivery from one queue.

:func:`run_baseline` models an FME Flow deployment with no ledger: every delivery queues one
job (an Automation webhook trigger never refuses one) and ``engines`` engine threads, each
with its own ``requests`` session, take the jobs in order (:func:`~.job.run_job`). A
``sweep`` baseline also queues its scheduled workspace on every mark of its schedule
(:mod:`~fme_ai_resilience.drill.schedule`), for the whole run, as an FME Flow schedule does
(:func:`~.sweep.sweep_pass`). A chaos kill (:mod:`~fme_ai_resilience.drill.chaos`) stops an
engine's job at a stage boundary, and FME Flow's job recovery resubmits it, as for every
subject. Every wait and timeout is in production seconds, through the drill's one time scale.
With a :class:`Feed` (a layer webhook's deliveries, arriving while the run goes on) each
delivery it hands over queues one notification job (:mod:`.notification`) instead.

The run ends once every job has ended, and, for a sweep, once the layer shows nothing owed
or a pass queued after the last delivery left nothing owed (it found nothing, or wrote all
it found); or at the ``horizon_s``, the same for every subject (queued jobs still run, no
new pass is queued).
What the run did is :class:`BaselineRun`: its jobs, kills, engine time and its gauges'
peaks, never read for a judged figure.
"""
from __future__ import annotations

import math
import queue
import random
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Protocol, Sequence, Tuple

import requests
from requests.adapters import HTTPAdapter

from ...core.checks import count, finite
from ...core.clock import SystemClock
from ..chaos import JOB_RECOVERIES, EngineKilled, Kill, baseline_point
from ..scenarios import Scheduled
from ..schedule import SWEEP_PERIOD_S, marks
from .gauges import Both, Progress
from .job import Job, run_job
from .models import Baseline, BaselineError, Sweep, baseline
from .notification import run_notification_job
from .sweep import Pass, sweep_pass

__all__ = ["BaselineRun", "run_baseline", "Feed"]

#: How often the run looks at its queue, its schedule and its kills (real seconds).
_TICK_S = 0.02


@dataclass(frozen=True)
class BaselineRun:
    """What a baseline's run did: its deliveries, jobs (sweeps and recovered jobs included),
    ``started`` (monotonic s), the engine-seconds its jobs held (``busy_s``, real), the jobs
    a kill stopped and those FME Flow's job recovery resubmitted, whether it settled before
    its horizon, and the peaks of its :class:`~.gauges.Progress`. ``skipped`` says why it
    did not run; ``note`` is what the baseline models and assumes."""

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
    busy_s: float = 0.0
    killed: int = 0
    recovered: int = 0
    settled: bool = True
    deaths: Tuple[float, ...] = ()      # when a kill stopped a job (monotonic s)


class Feed(Protocol):
    """Deliveries that arrive while a run goes on (a layer webhook's notifications)."""

    def open(self, submit: Callable[[bytes], None]) -> None:
        """Start: each delivery's body goes to ``submit`` as it arrives."""

    def last_at(self) -> Optional[float]:
        """When (monotonic s) the deliveries covering every arrival of the plan had all been
        made; None while some are still to come."""

    def close(self) -> int:
        """Stop; the deliveries made."""


def _session(chosen: Baseline) -> requests.Session:
    session = requests.Session()
    # No hidden retries below the baseline's own (max_retries=0), and room for its transfers.
    adapter = HTTPAdapter(pool_maxsize=max(10, chosen.transfers_per_job), max_retries=0)
    session.mount("http://", adapter)
    return session


@dataclass(frozen=True)
class _Item:
    """One queued job: a delivery's body or a sweep pass (queued at ``mark``, real s after
    the start), and how often job recovery resubmitted it."""

    kind: str
    body: Any = None
    mark: float = 0.0
    recoveries: int = 0


class _Pool:
    """The engines and their queue, the chaos kills armed on them, the sweep's passes."""

    def __init__(self, name: str, chosen: Baseline, *, engines: int, vision_url: str,
                 layer_url: Optional[str], time_scale: float, seed: int,
                 gauges: Progress, table_url: str = "") -> None:
        self.name, self.chosen = name, chosen
        self.table_url = table_url
        self.vision_url, self.layer_url = vision_url, layer_url
        self.time_scale, self.seed, self.gauges = time_scale, seed, gauges
        self.jobs: "queue.Queue[Optional[_Item]]" = queue.Queue()
        self.clock = SystemClock()
        self.start = self.clock.monotonic()
        self.lock = threading.Condition()
        self.outstanding = 0
        self.ran = 0
        self.killed = 0
        self.recovered = 0
        self.deaths: List[float] = []
        self.armed: List[Optional[str]] = [None] * engines
        self.passes: List[Tuple[float, Pass]] = []
        self.crashed: List[BaseException] = []
        self.threads = [threading.Thread(target=self._engine, args=(i,), daemon=True,
                                         name=f"baseline-{name}-engine-{i}")
                        for i in range(engines)]

    def submit(self, item: _Item) -> None:
        with self.lock:
            self.outstanding += 1
        self.gauges.change(queued=1)
        self.jobs.put(item)

    def arm(self, kill: Kill) -> None:
        """Engine ``kill.engine`` dies at ``kill.point`` of its next task."""
        with self.lock:
            self.armed[kill.engine % len(self.armed)] = baseline_point(kill.point)

    def _boundary(self, index: int) -> Any:
        def at(point: str) -> None:
            with self.lock:
                if self.armed[index] != point:
                    return
                self.armed[index] = None
                self.deaths.append(self.clock.monotonic())
            raise EngineKilled(point)
        return at

    def _engine(self, index: int) -> None:
        rng = random.Random(f"{self.name}:{self.seed}:{index}")
        session = _session(self.chosen)
        try:
            while True:
                item = self.jobs.get()
                if item is None:
                    return
                self.gauges.change(queued=-1, busy=1)
                try:
                    self._run(item, index, rng=rng, session=session)
                except EngineKilled:
                    # The engine's process died: its sockets closed with it (the Vision AI
                    # sees its client close them), and FME Flow's job recovery resubmits
                    # the job.
                    session.close()
                    session = _session(self.chosen)
                    with self.lock:
                        self.killed += 1
                    if item.recoveries < JOB_RECOVERIES:
                        with self.lock:
                            self.recovered += 1
                        self.submit(_Item(item.kind, item.body, item.mark,
                                          item.recoveries + 1))
                except BaseException as exc:  # a fault of the model itself, raised below
                    self.crashed.append(exc)
                    return
                finally:
                    self.gauges.change(busy=-1)
                    with self.lock:
                        self.outstanding -= 1
                        self.ran += 1
                        self.lock.notify_all()
        finally:
            session.close()

    def _run(self, item: _Item, index: int, *, rng: random.Random,
             session: requests.Session) -> None:
        if item.kind == "notification":
            run_notification_job(
                self.name, item.body, vision_url=self.vision_url, rng=rng,
                time_scale=self.time_scale, clock=self.clock, session=session,
                progress=self.gauges, table_url=self.table_url, boundary=self._boundary(index))
            return
        if item.kind == "delivery":
            run_job(self.name, item.body, vision_url=self.vision_url, rng=rng,
                    time_scale=self.time_scale, clock=self.clock, session=session,
                    progress=self.gauges, table_url=self.table_url,
                    boundary=self._boundary(index))
            return
        chosen = self.chosen
        assert isinstance(chosen, Sweep) and self.layer_url
        job = Job(chosen, vision_url=self.vision_url, time_scale=self.time_scale,
                  clock=self.clock, rng=rng, session=session, progress=self.gauges,
                  table_url=self.table_url, boundary=self._boundary(index))
        done = sweep_pass(job, self.layer_url, chosen.sweep_limit)
        with self.lock:
            self.passes.append((item.mark, done))

    def settled(self, last_delivery: float, sweeping: bool) -> bool:
        """Every job ended and, for a sweep, a pass queued after the last delivery left
        nothing owed."""
        with self.lock:
            if self.outstanding:
                return False
            return not sweeping or any(mark >= last_delivery and done.left_nothing
                                       for mark, done in self.passes)

    def quiet(self) -> bool:
        """Every job ended."""
        with self.lock:
            return not self.outstanding


def run_baseline(name: str, deliveries: Sequence[Scheduled], *, vision_url: str, engines: int,
                 time_scale: float, seed: int, layer_url: Optional[str] = None,
                 table_url: str = "", progress: Optional[Progress] = None,
                 kills: Sequence[Kill] = (), horizon_s: float = math.inf,
                 nothing_owed: Optional[Callable[[], bool]] = None,
                 feed: Optional[Feed] = None) -> BaselineRun:
    """Run baseline ``name`` on ``deliveries``: each one queued as a job at its ``at_s``
    (real seconds after the start), ``engines`` engine threads taking them in order, until
    the run has settled (see the module) or ``horizon_s`` production seconds have passed.

    ``vision_url`` is the Vision AI stand-in's endpoint; ``layer_url`` the layer a sweep
    queries (required for it); the photos and layers of a job come from its body;
    ``table_url`` the related table a photo's row is written to when features carry several
    photos (empty: the feature's own fields); ``kills`` the chaos kills (production
    seconds); ``nothing_owed``, when given, says the layer shows every photo analysed or
    flagged: a sweep's run ends then too, its jobs ended. ``progress`` (optional) is
    updated as the run goes. ``feed``: deliveries arriving while the run goes on, each
    queued as a notification job; the run waits for its last (:meth:`Feed.last_at`) as for
    the last of ``deliveries``. A baseline that cannot run here comes back with ``skipped``
    set and nothing run. Raises ConfigurationError for an unknown name, ``engines`` < 1 or a
    ``time_scale`` not above 0; BaselineError when the model crashes.
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
    for thread in pool.threads:
        thread.start()
    if feed is not None:
        feed.open(lambda body: pool.submit(_Item("notification", body)))
    events = sorted([(d.at_s, 0, _Item("delivery", d.body)) for d in deliveries]
                    + [(k.at_s * time_scale, 1, k) for k in kills], key=lambda e: e[:2])
    last_delivery = max((d.at_s for d in deliveries), default=0.0)
    period = chosen.sweep_every_s if isinstance(chosen, Sweep) else SWEEP_PERIOD_S
    sweeps: Iterator[float] = (m * time_scale for m in marks(period, seed=seed))
    next_sweep = next(sweeps) if sweeping else math.inf
    horizon = horizon_s * time_scale
    settled, passes, looked = False, 0, 0.0
    fed_at = None if feed is not None else 0.0
    try:
        while not pool.crashed:
            now = pool.clock.monotonic() - pool.start
            if fed_at is None and feed is not None:
                last = feed.last_at()
                if last is not None:
                    fed_at = last - pool.start
                    last_delivery = max(last_delivery, fed_at)
            while events and events[0][0] <= now:
                _, kind, what = events.pop(0)
                if kind == 0:
                    pool.submit(what)
                else:
                    pool.arm(what)
            if now >= horizon:
                break
            if now >= next_sweep:
                pool.submit(_Item("sweep", mark=next_sweep))
                passes += 1
                next_sweep = next(sweeps)
            waiting = fed_at is None or any(e[1] == 0 for e in events)
            if not waiting and pool.settled(last_delivery, sweeping):
                settled = True
                break
            if (sweeping and nothing_owed is not None and now - looked >= 0.5
                    and not waiting and pool.quiet()):
                looked = now
                if nothing_owed():
                    settled = True
                    break
            due = events[0][0] if events else math.inf
            pool.clock.sleep(max(0.0, min(_TICK_S, due - now, next_sweep - now)))
        if feed is not None:   # nothing new is delivered once the run has ended
            feed.close()
        with pool.lock:   # what is queued still runs; nothing new is queued after the horizon
            while pool.outstanding and not pool.crashed:
                pool.lock.wait(0.1)
    finally:
        delivered = feed.close() if feed is not None else 0
        for _ in pool.threads:
            pool.jobs.put(None)
        for thread in pool.threads:
            thread.join()
    if pool.crashed:
        raise BaselineError(f"a {name} engine failed: {pool.crashed[0]!r}") from pool.crashed[0]
    return BaselineRun(name, chosen.note, time_scale, engines,
                       deliveries=len(deliveries) + delivered,
                       jobs=pool.ran, sweeps=passes, started=pool.start,
                       peak_busy=own.peak_busy, peak_backlog=own.peak_backlog,
                       busy_s=own.busy_s, killed=pool.killed, recovered=pool.recovered,
                       settled=settled, deaths=tuple(pool.deaths))
