"""The library's side of a drill: intake through the gateway, engines, the compensator.

:func:`run_library` plays a :class:`~fme_ai_resilience.drill.scenarios.Plan` against the
pipeline as it is deployed: the Survey123 sender posts each delivery at its time to the intake
gateway (waitress, on loopback), N engine processes run WS-02 jobs back to back, the
compensator runs on its schedule (every minute, scaled; WS-03's production period is ten), and
a sampler records the timeline. Reconciliation with backfill runs once the engines have taken
up every delivered task, and a last time when all has settled (:func:`_drain`); the tasks it
registers are awaited too.
The settings are the library's defaults with every wait and window scaled by ``time_scale``
(:func:`drill_settings`).
"""
from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple
from urllib.parse import urlsplit

from ..core.resilience.breaker import effective_state
from ..core.resilience.concurrency import ConcurrencySettings
from ..core.errors import FailureClass, ResilienceError
from ..gateway import make_app
from ..core.ledger import Status, TaskRecord
from ..services.config.settings import LiveSettings
from ..services.pipeline import build_compensator
from ..core.config.settings import Settings
from ..store import SqlStore, open_store
from .engines import KILL_POINTS, Engines
from .report import Timeline
from .sampling import Sample, Sampler, bin_calls
from .scenarios import Plan, Scenario
from .standins import Survey123Sender
from .world import World, photo_keys

__all__ = ["run_library", "LibraryRun", "drill_settings", "PRODUCTION_WAITS", "PRODUCTION_RATES",
           "DrillError", "COST_PER_CALL", "CALLS_PER_ENGINE", "LIBRARY_MODEL"]


class DrillError(ResilienceError):
    """The drill itself could not run (an engine failed to start)."""

#: The waits and windows of the defaults (production seconds) the drill scales down; the
#: timeouts are scaled too, but never below what a loaded 2-core machine needs to connect.
PRODUCTION_WAITS = {
    "retry.backoff_base_s": 1.0, "retry.backoff_cap_s": 60.0, "retry.max_inline_wait_s": 5.0,
    "retry.fleet_window_s": 60.0, "breaker.window_s": 60.0, "breaker.cooldown_s": 5.0,
    "breaker.cooldown_max_s": 30.0, "breaker.probe_timeout_s": 60.0,
    "breaker.cache_ttl_s": 1.0, "degrade.hold_s": 300.0, "intake.drain_window_s": 300.0,
    "intake.latency_promise_s": 120.0, "processing.lease_s": 300.0, "alerts.window_s": 900.0,
    "compensation.requeue_backoff_s": 300.0, "compensation.requeue_backoff_cap_s": 21600.0,
}
#: The per-second rates of the defaults, scaled inversely (a window 10x shorter holds as
#: many events only at a rate 10x higher).
PRODUCTION_RATES = {"retry.fleet_retry_floor_per_s": 0.2}
_TIMEOUT_FLOORS = {"timeouts.connect_s": (3.0, 1.0), "timeouts.tls_s": (3.0, 1.0),
                   "timeouts.ttfb_s": (20.0, 5.0), "timeouts.body_s": (4.0, 1.0),
                   "breaker.slow_call_s": (20.0, 2.0)}
#: Production times: an FME Flow job's start-up between two WS-02 jobs, and the compensator's
#: period in the drill.
JOB_START_S = 2.0
COMPENSATOR_TICK_S = 60.0
COST_PER_CALL = 0.01
#: Vision AI calls one engine's WS-02 job may have in flight at once: its workers
#: (``concurrency.per_engine``), each under the fleet's adaptive limit.
CALLS_PER_ENGINE = ConcurrencySettings().per_engine
LIBRARY_MODEL = ("the library as deployed: the gateway's intake, N engines running WS-02 back "
                 "to back, WS-03 on its schedule, a last reconciliation with backfill, its "
                 "notifications forwarded as WS-03's Emailer sends them")


def drill_settings(world: World, *, engines: int, time_scale: float) -> Dict[str, str]:
    """The settings the drill's ledger holds: the stand-ins, the engines, scaled waits."""
    faults = world.scenario.faults
    mean_latency = faults.latency_s + faults.latency_jitter_s / 2
    values = {name: f"{v * time_scale:g}" for name, v in PRODUCTION_WAITS.items()}
    values.update({name: f"{max(v * time_scale, floor):g}"
                   for name, (v, floor) in _TIMEOUT_FLOORS.items()})
    # Rates run faster as time shrinks: the fleet's retries per window stay the defaults'.
    values.update({name: f"{v / time_scale:g}" for name, v in PRODUCTION_RATES.items()})
    values.update({
        "vision.endpoint": world.vision.endpoint,
        "intake.feature_services": world.layer.service_url,
        "download.allowed_hosts": world.photo_host,
        "download.allow_http_hosts": "127.0.0.1",
        "download.allow_private_hosts": "127.0.0.1",
        "intake.engines": str(engines),
        "intake.mean_processing_s": f"{mean_latency * time_scale:g}",
        "compensation.reconcile_window_s": "86400",
        "cost.per_call": f"{COST_PER_CALL:g}",
    })
    if world.table_url:     # several photos a feature: one related-table row per photo
        values["writeback.table_url"] = world.table_url
    return values


@contextlib.contextmanager
def _gateway(db_url: str) -> Iterator[str]:
    from ..gateway.server import GatewayServer

    store = open_store(db_url)
    app = make_app(LiveSettings(Settings().with_values(store.get_config()), store=store,
                                ttl_s=1.0), store=store)
    server = GatewayServer(app, "127.0.0.1", 0, threads=8)
    thread = threading.Thread(target=server.serve, name="fair-drill-gateway", daemon=True)
    thread.start()
    try:
        host, port = server.address
        yield f"http://{host}:{port}/"
    finally:
        server.stop()
        thread.join(30)
        server.close()
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


def _started(record: Optional[TaskRecord], requeue_budget: int) -> bool:
    """An engine has taken the task up (it no longer waits as PENDING)."""
    return record is not None and record.status is not Status.PENDING


def _settled(record: Optional[TaskRecord], requeue_budget: int) -> bool:
    if record is None:
        return False
    if record.status is Status.SUCCEEDED:
        return True
    return record.status is Status.DEAD and not (
        record.failure_class is FailureClass.BUDGET and record.requeue_count < requeue_budget)


def _wait_settled(keys: Sequence[str], settings: Settings, engines: Engines, *,
                  store: SqlStore, timeout_s: float,
                  done: Callable[[Optional[TaskRecord], int], bool] = _settled) -> bool:
    """Wait until every task of ``keys`` is ``done`` (default: settled), restarting dead
    engines meanwhile; False after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    budget = settings.compensation.requeue_budget
    left = list(keys)
    while time.monotonic() < deadline:
        engines.heal()
        left = [k for k in left if not done(store.get(k), budget)]
        if not left:
            return True
        time.sleep(0.2)
    return False


def _reconcile(settings: Settings, world: World, engines: Engines, *,
               store: SqlStore) -> List[str]:
    """The reconciliation with backfill; the tasks it registered start a WS-02 job at once,
    as a delivery's do. Their keys."""
    reconciled = build_compensator(settings, store=store, layer_url=world.layer.layer_url
                                   ).reconcile(since=0.0, until=time.time() + 60,
                                               backfill=True)
    keys = [g.key for g in reconciled.missing]
    if keys:
        engines.kick()
    return keys


def _drain(keys: Sequence[str], settings: Settings, world: World, engines: Engines, *,
           store: SqlStore, timeout_s: float) -> bool:
    """Drain the delivered ``keys`` and what reconciliation finds missing. It first runs once
    engines have taken up every delivered task (they run out of new work while the last
    tasks are in flight or wait for a retry), so idle engines take what Survey123 never
    delivered; the last reconciliation runs once all settled, and what it finds is drained
    too."""
    taken = _wait_settled(keys, settings, engines, store=store, timeout_s=timeout_s,
                          done=_started)
    owed = list(keys) + _reconcile(settings, world, engines, store=store)
    complete = _wait_settled(owed, settings, engines, store=store, timeout_s=timeout_s)
    late = _reconcile(settings, world, engines, store=store)
    return _wait_settled(late, settings, engines, store=store,
                         timeout_s=timeout_s) and complete and taken


def _compensate(db_url: str, tick_s: float, stop: threading.Event) -> None:
    store = open_store(db_url)
    try:
        while not stop.wait(tick_s):
            settings = Settings().with_values(store.get_config())
            build_compensator(settings, store=store).run(reconcile=False)
    finally:
        store.close()


def run_library(plan: Plan, world: World, *, db_url: str, engines: int, time_scale: float,
                timeout_s: float = 600.0,
                on_sample: Optional[Callable[[Timeline], None]] = None) -> LibraryRun:
    """Run ``plan`` through the pipeline, for the judge to read its world (``on_sample``: see
    :class:`~fme_ai_resilience.drill.sampling.Sampler`)."""
    scenario: Scenario = world.scenario
    with open_store(db_url, init_schema=True, create=True) as store:
        _refuse_work_not_a_drills(store=store)
        store.clear()
        store.set_config(drill_settings(world, engines=engines, time_scale=time_scale),
                         now=time.time())
        settings = Settings().with_values(store.get_config())
        fleet = Engines(db_url, engines, idle_s=JOB_START_S * time_scale)
        stop_compensating = threading.Event()
        compensator = threading.Thread(target=_compensate, name="fair-drill-compensator",
                                       args=(db_url, COMPENSATOR_TICK_S * time_scale,
                                             stop_compensating), daemon=True)
        try:
            if not fleet.wait_ready():
                raise DrillError("the drill's engines did not start (see their stderr)")
            world.vision.reset()
            started = time.monotonic()
            compensator.start()
            with _gateway(db_url) as url, Sampler(
                    _probe(fleet, settings.vision.service, store=store), started,
                    on_sample=on_sample) as sampler:
                chaos = threading.Thread(target=_chaos, args=(
                    scenario, fleet, db_url, started, time_scale, world.seed), daemon=True)
                chaos.start()
                deliveries = _send(plan, url, started, fleet)
                if scenario.drift is not None:
                    chaos.join()   # the operator's fix and requeue come before settling
                delivered = [k for item, d in zip(plan.deliveries, deliveries) if d.delivered
                             for k in photo_keys(item.body)]
                complete = _drain(list(dict.fromkeys(delivered)), settings, world, fleet,
                                  store=store, timeout_s=timeout_s)
                chaos.join(1)
        finally:
            stop_compensating.set()
            fleet.stop()
            compensator.join(30)
        _forward_notifications(settings, world, store=store)
        return LibraryRun(started, sampler.timeline, complete, fleet.killed, len(deliveries))


def _refuse_work_not_a_drills(*, store: SqlStore) -> None:
    """The drill empties its ledger: never one holding tasks whose Vision AI is not on
    loopback (a real pipeline's ledger, given to ``--db`` by mistake)."""
    held = sum(store.counts().values())
    endpoint = store.get_config().get("vision.endpoint", "")
    if held and urlsplit(endpoint).hostname != "127.0.0.1":
        raise DrillError(f"{store.describe()} holds {held} task(s) that are not a drill's, and "
                         "the drill empties its ledger: give it a new or a drill's own")


def _chaos(scenario: Scenario, fleet: Engines, db_url: str, started: float,
           time_scale: float, seed: int) -> None:
    """The chaos scenario's kills and connection cut, at their times; each kill's engine and
    stage boundary drawn from the seed; and the operator's step after a drifted model's fix
    (``dlq requeue --cause FORMAT``), at the fix."""
    rng = random.Random(f"chaos:{seed}:{scenario.name}")
    events: List[Tuple[float, Callable[[], None]]] = []
    for at_s in scenario.kills_at_s:
        index, point = rng.randrange(fleet.count), rng.choice(KILL_POINTS)
        events.append((at_s * time_scale, lambda i=index, p=point: fleet.doom(i, p)))
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


def _forward_notifications(settings: Settings, world: World, *, store: SqlStore) -> None:
    """WS-03's last pass, and what it hands FME's Emailer handed to the world's mailbox."""
    compensator = build_compensator(settings, store=store)
    compensator.run(reconcile=False)
    while True:
        batch = compensator.take_notifications()
        if not batch:
            return
        for note in batch:
            # sent when WS-03 raised it, not when the drill hands it on
            at = time.monotonic() - max(0.0, time.time() - note.created_at)
            world.mailbox.notify(note.kind, f"{note.subject}: {note.body}",
                                 task_key=note.task_key, at=at)


@dataclass(frozen=True)
class LibraryRun:
    """What the library's run was, for the report beside the judge's figures: when it began
    (monotonic s), its sampled timeline, whether every task settled in time, the engines
    killed and the deliveries sent."""

    started: float
    timeline: Timeline
    complete: bool
    killed: int
    submitted: int

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
                "timeline": bin_calls(tl, world.vision.snapshot()["log"], world.time_scale),
                "notes": ([] if self.complete else
                          ["the run timed out before every task settled"])
                + ([f"{self.killed} engine(s) SIGKILLed at a stage boundary and restarted"]
                   if self.killed else [])}
