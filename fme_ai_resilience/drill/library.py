"""The library's side of a drill: intake through the gateway, engines, the compensator.

:func:`run_library` plays a :class:`~fme_ai_resilience.drill.scenarios.Plan` against the
pipeline as it is deployed: the Survey123 sender posts each delivery at its time to the intake
gateway (waitress, on loopback), N engine processes run WS-02 jobs back to back, WS-03 runs
on its production schedule (every 10 minutes, scaled, on the cron marks of the run's clock:
:mod:`~fme_ai_resilience.drill.schedule`), reconciling against the layer with backfill as
deployed, and a sampler records the timeline. Nothing the drill sees starts a pass: the run
ends once every task has settled, WS-03 has told people of every dead letter it tells of, and
either the layer shows nothing owed or a WS-03 pass has run after the last delivery; or at
the horizon. A chaos kill SIGKILLs an engine at a stage boundary and FME Flow's job recovery
resubmits its job; the task waits out the lease the deployment configures.
The settings are the library's defaults with every time through the drill's one time scale
(:func:`drill_settings`). In a layer-webhook scenario the app sends nothing: the gateway holds
the webhook's signature key and the layer notifies it on its schedule
(:class:`~fme_ai_resilience.drill.layer_hooks.LayerFeed`); the engines resolve each
notification through ``extractChanges`` as deployed.
"""
from __future__ import annotations

import contextlib
import math
import threading
import time
from dataclasses import dataclass
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple
from urllib.parse import urlsplit

from ..core.resilience.breaker import effective_state
from ..core.resilience.concurrency import ConcurrencySettings
from ..core.errors import FailureClass, ResilienceError
from ..gateway import make_app
from ..services.config.settings import LiveSettings
from ..services.pipeline import build_compensator
from ..core.config.settings import Settings
from ..store import SqlStore, open_store
from .chaos import Kill
from .engines import Engines
from .layer_hooks import HOOK_PATH, SIGNATURE_KEY, LayerFeed
from .report import Timeline
from .sampling import Sample, Sampler
from .scenarios import Plan, Scenario
from .schedule import WS03_PERIOD_S, marks
from .standins import Survey123Sender
from .timescale import TimeScale, scaled_settings, setting_times
from .world import World

__all__ = ["run_library", "LibraryRun", "drill_settings", "refuse_work_not_a_drills",
           "PRODUCTION_WAITS", "PRODUCTION_RATES", "DrillError", "COST_PER_CALL",
           "CALLS_PER_ENGINE", "LIBRARY_MODEL"]


class DrillError(ResilienceError):
    """The drill itself could not run (an engine failed to start)."""

#: The waits and windows of the defaults (production seconds) the drill scales down, and
#: their per-second rates (scaled inversely: a window 10x shorter holds as many events only
#: at a rate 10x higher); every one, and every timeout, through the drill's one time scale
#: (:mod:`~fme_ai_resilience.drill.timescale`).
PRODUCTION_WAITS = {name: value for name, (value, kind) in setting_times().items()
                    if kind == "wait"}
PRODUCTION_RATES = {name: value for name, (value, kind) in setting_times().items()
                    if kind == "rate"}
#: An FME Flow job's start-up between two WS-02 jobs (production seconds).
JOB_START_S = 2.0
#: The dead letters WS-03 tells people of (docs/pipeline.md), and the most looked at.
_TOLD = (FailureClass.NOT_FOUND, FailureClass.CONFIGURATION)
MAX_TOLD = 10_000
COST_PER_CALL = 0.01
#: Vision AI calls one engine's WS-02 job may have in flight at once: its workers
#: (``concurrency.per_engine``), each under the fleet's adaptive limit.
CALLS_PER_ENGINE = ConcurrencySettings().per_engine
LIBRARY_MODEL = ("the library as deployed: the gateway's intake, N engines running WS-02 back "
                 "to back, WS-03 every 10 minutes on its cron marks (reap, requeue, breaker, "
                 "ladder, reconciliation with backfill), its notifications sent as WS-03's "
                 "Emailer sends them; a killed job is resubmitted by FME Flow's job recovery "
                 "and its task waits out its lease")


def drill_settings(world: World, *, engines: int, time_scale: float) -> Dict[str, str]:
    """The settings the drill's ledger holds: the stand-ins, the engines, and every time of
    the defaults through the drill's one :class:`~fme_ai_resilience.drill.timescale.TimeScale`
    (the baselines' waits and timeouts go through the same one)."""
    faults = world.scenario.faults
    mean_latency = faults.latency_s + faults.latency_jitter_s / 2
    values = scaled_settings(TimeScale(time_scale))
    values.update(world.reach())
    values.update({
        "intake.engines": str(engines),
        "intake.mean_processing_s": f"{mean_latency * time_scale:g}",
        "compensation.reconcile_window_s": "86400",
        "compensation.reconcile_backfill": "true",
        "cost.per_call": f"{COST_PER_CALL:g}",
    })
    if world.table_url:     # several photos a feature: one related-table row per photo
        values["writeback.table_url"] = world.table_url
    return values


@contextlib.contextmanager
def _gateway(db_url: str, *, arcgis_signature_key: Optional[str] = None) -> Iterator[str]:
    from ..gateway.server import serving

    store = open_store(db_url)
    app = make_app(LiveSettings(Settings().with_values(store.get_config()), store=store,
                                ttl_s=1.0), store=store,
                   arcgis_signature_key=arcgis_signature_key)
    try:
        with serving(app) as url:
            yield url
    finally:
        store.close()


def _probe(engines: Engines, service: str, *, store: SqlStore) -> Callable[[], Sample]:
    """The library's sample: the ledger's backlog, busy engines, the breaker and the ladder."""
    def probe() -> Sample:
        now = time.time()
        breaker = store.breaker_get(service, now=now)
        return (store.backlog(), engines.busy_count(), effective_state(breaker).value,
                int(store.degrade_get(now=now).effective))
    return probe


def _send(plan: Plan, url: str, started: float, fleet: Engines) -> List[Any]:
    """Each delivery at its time, bursts from eight threads; an accepted one submits a WS-02
    job (the Automation's chained action); the deliveries as answered."""
    sender = Survey123Sender(url, timeout_s=60.0)

    def deliver(item: Any) -> Any:
        delivery = (sender.redeliver if item.redelivery else sender.send)(item.body)
        if delivery.status == 202:
            fleet.kick()
        return delivery

    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="fair-drill-send") as pool:
        futures = []
        for item in plan.deliveries:
            wait = started + item.at_s - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            futures.append(pool.submit(deliver, item))
        return [f.result() for f in futures]


def _notified(world: World, url: str, fleet: Engines, deadline: float) -> LayerFeed:
    """The layer's webhook registered with the gateway at ``url`` (the challenge answered)
    and notifying it on its schedule, each accepted delivery kicking the engines; returned
    once the deliveries covering every arrival were made, or at ``deadline`` (monotonic s).
    Raises DrillError when the gateway did not answer the challenge."""
    feed = LayerFeed(world, url + HOOK_PATH, signature_key=SIGNATURE_KEY,
                     on_accepted=fleet.kick)
    if not feed.open():
        feed.close()
        raise DrillError("the gateway did not answer the layer webhook's challenge")
    feed.wait(deadline)
    return feed


def _settled(requeue_budget: int, *, store: SqlStore) -> bool:
    """Every task of the ledger settled: none in progress, no spent task waiting for WS-03
    to requeue it."""
    return store.backlog(1) == 0 and not store.requeue_candidates(
        FailureClass.BUDGET, requeue_budget, 1)


class _Compensator:
    """WS-03 on its schedule: every mark of it (:func:`~fme_ai_resilience.drill.schedule.marks`,
    every 10 minutes scaled), the compensator's pass as WS-03's PythonCaller runs it (reap
    lapsed leases, requeue, the breaker and the ladder, reconcile against the layer with
    backfill, prune), and its notifications handed to the world's mailbox as its Emailer
    sends them. ``passes`` holds when each pass ended (real s after the start)."""

    def __init__(self, db_url: str, world: World, *, time_scale: float, seed: int) -> None:
        self.db_url, self.world = db_url, world
        self.time_scale, self.seed = time_scale, seed
        self.passes: List[float] = []
        self.started = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fair-drill-ws03", daemon=True)

    def start(self, started: float) -> None:
        self.started = started
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)

    def passed_after(self, at: float) -> bool:
        """Whether a pass ended after ``at`` (real s after the start)."""
        return any(done > at for done in list(self.passes))

    def _run(self) -> None:
        with open_store(self.db_url) as store:
            for mark in marks(WS03_PERIOD_S, seed=self.seed):
                wait = self.started + mark * self.time_scale - time.monotonic()
                if self._stop.wait(max(0.0, wait)):
                    return
                settings = Settings().with_values(store.get_config())
                compensator = build_compensator(settings, store=store,
                                                layer_url=self.world.layer.layer_url)
                try:
                    compensator.run()
                except ResilienceError:    # the layer failed: WS-03's next run tries again
                    continue
                for note in compensator.take_notifications():
                    self.world.mailbox.notify(note.kind, f"{note.subject}: {note.body}",
                                              task_key=note.task_key, at=time.monotonic())
                self.passes.append(time.monotonic() - self.started)


def _told_all(world: World, *, store: SqlStore) -> bool:
    """Whether the people WS-03 tells of a dead letter (a photo gone, a write-back the
    layer's setup refuses) have been told of each: WS-03 tells them at its next pass."""
    told = {m.task_key for m in world.mailbox.snapshot()["messages"]}
    return all(r.key in told for cause in _TOLD
               for r in store.dead_letter_records(cause, limit=MAX_TOLD))


def _until_settled(settings: Settings, engines: Engines, ws03: _Compensator, *,
                   store: SqlStore, answered: float, deadline: float,
                   nothing_owed: Callable[[], bool] = lambda: False,
                   told_all: Callable[[], bool] = lambda: True) -> bool:
    """Wait until every task settled, everyone WS-03 tells of a dead letter was told
    (``told_all``), and either the layer shows nothing owed (``nothing_owed``) or a WS-03
    pass ended after the last delivery was answered (``answered``, real s after the start),
    restarting dead engines meanwhile (FME Flow's job recovery); False at ``deadline``
    (monotonic s)."""
    budget = settings.compensation.requeue_budget
    looked = 0.0
    while time.monotonic() < deadline:
        engines.heal()
        if _settled(budget, store=store) and time.monotonic() - looked >= 0.25:
            looked = time.monotonic()
            if told_all() and (ws03.passed_after(answered) or nothing_owed()):
                return True
        time.sleep(0.05)
    return False


def run_library(plan: Plan, world: World, *, db_url: str, engines: int, time_scale: float,
                horizon_s: float = math.inf, kills: Sequence[Kill] = (),
                on_sample: Optional[Callable[[Timeline], None]] = None) -> LibraryRun:
    """Run ``plan`` through the pipeline, for the judge to read its world, until it settled
    (every task settled, everyone WS-03 tells of a dead letter told, and the layer showing
    nothing owed or a WS-03 pass after the last delivery) or ``horizon_s`` production
    seconds passed; ``kills``: the chaos kills (``on_sample``: see
    :class:`~fme_ai_resilience.drill.sampling.Sampler`)."""
    scenario: Scenario = world.scenario
    with open_store(db_url, init_schema=True, create=True) as store:
        refuse_work_not_a_drills(store=store)
        store.clear()
        store.set_config(drill_settings(world, engines=engines, time_scale=time_scale),
                         now=time.time())
        settings = Settings().with_values(store.get_config())
        fleet = Engines(db_url, engines, idle_s=JOB_START_S * time_scale)
        ws03 = _Compensator(db_url, world, time_scale=time_scale, seed=world.seed)
        try:
            if not fleet.wait_ready():
                raise DrillError("the drill's engines did not start (see their stderr)")
            started = world.begin()
            ws03.start(started)
            hooks = scenario.layer_hooks is not None
            feed: Optional[LayerFeed] = None
            with _gateway(db_url, arcgis_signature_key=SIGNATURE_KEY if hooks else None
                          ) as url, Sampler(
                    _probe(fleet, settings.vision.service, store=store), started,
                    on_sample=on_sample) as sampler:
                chaos = threading.Thread(target=_chaos, args=(
                    scenario, kills, fleet, db_url, started, time_scale), daemon=True)
                chaos.start()
                deadline = started + horizon_s * time_scale
                if hooks:
                    feed = _notified(world, url, fleet, deadline)
                    sent = 0
                else:
                    sent = len(_send(plan, url, started, fleet))
                if scenario.drift is not None:
                    chaos.join()   # the operator's fix and requeue come before settling
                try:
                    complete = _until_settled(settings, fleet, ws03, store=store,
                                              answered=time.monotonic() - started,
                                              deadline=deadline,
                                              nothing_owed=lambda: world.nothing_owed(started),
                                              told_all=lambda: _told_all(world, store=store))
                finally:
                    if feed is not None:    # the notifications the layer made
                        sent = feed.close()
                chaos.join(1)
        finally:
            ws03.stop()
            busy_s = fleet.busy_seconds()
            fleet.stop()
            world.deaths.extend(fleet.deaths())
        return LibraryRun(started, sampler.timeline, complete, fleet.killed, sent, busy_s)


def refuse_work_not_a_drills(*, store: SqlStore) -> None:
    """The drill empties its ledger: never one holding tasks whose Vision AI is not on
    loopback (a real pipeline's ledger, given to ``--db`` by mistake)."""
    held = sum(store.counts().values())
    endpoint = store.get_config().get("vision.endpoint", "")
    if held and urlsplit(endpoint).hostname != "127.0.0.1":
        raise DrillError(f"{store.describe()} holds {held} task(s) that are not a drill's, and "
                         "the drill empties its ledger: give it a new or a drill's own")


def _chaos(scenario: Scenario, kills: Sequence[Kill], fleet: Engines, db_url: str,
           started: float, time_scale: float) -> None:
    """The chaos scenario's kills (each engine and stage boundary drawn from the seed, the
    same for every subject: :func:`~fme_ai_resilience.drill.chaos.kill_plan`) and
    connection cut, at their times; and the operator's step after a drifted model's fix
    (``dlq requeue --cause FORMAT``), at the fix."""
    events: List[Tuple[float, Callable[[], None]]] = []
    for kill in kills:
        events.append((kill.at_s * time_scale,
                       lambda i=kill.engine, p=kill.point: fleet.doom(i % fleet.count, p)))
    if scenario.terminate_connections_at_s is not None and db_url.startswith("postgres"):
        events.append((scenario.terminate_connections_at_s * time_scale,
                       lambda: _terminate_backends(db_url)))
    if scenario.drift is not None:
        events.append((scenario.drift[1] * time_scale, lambda: _requeue_format(db_url)))
    for at_s, act in sorted(events, key=lambda e: e[0]):
        wait = started + at_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        act()


def _requeue_format(db_url: str) -> None:
    """What the operator does once the model is fixed: ``dlq requeue --cause FORMAT``."""
    with open_store(db_url) as store:
        store.requeue(failure_class=FailureClass.FORMAT, now=time.time())


def _terminate_backends(db_url: str) -> None:
    with open_store(db_url) as store:
        store.terminate_other_sessions()


@dataclass(frozen=True)
class LibraryRun:
    """What the library's run was, for the report beside the judge's figures: when it began
    (monotonic s), its sampled timeline, whether every task settled before the horizon, the
    engines killed, the deliveries sent and the real seconds its engines' jobs held them."""

    started: float
    timeline: Timeline
    complete: bool
    killed: int
    submitted: int
    busy_s: float = 0.0

    def extras(self, world: World, *, engines: int) -> Dict[str, Any]:
        """The report's fields beside the judge's figures (never judged themselves)."""
        tl = self.timeline
        return {"model": LIBRARY_MODEL, "submitted": self.submitted,
                # the adaptive limit's ceiling, or every engine's workers when fewer; the
                # calls in flight are counted at the Vision stand-in
                "concurrency_bound": min(ConcurrencySettings().ceiling,
                                         engines * CALLS_PER_ENGINE),
                "peak_backlog": max(tl.backlog, default=0),
                "breaker_transitions": sum(1 for a, b in zip(tl.breaker, tl.breaker[1:])
                                           if a != b),
                "degradation_levels": sorted({f"L{lv}" for lv in tl.level if lv is not None}),
                "timeline": tl,
                "settled": self.complete,
                "notes": ([] if self.complete else
                          ["still unsettled at the horizon, when the drill stopped watching"])
                + ([f"{self.killed} engine(s) SIGKILLed at a stage boundary and restarted"]
                   if self.killed else [])}
