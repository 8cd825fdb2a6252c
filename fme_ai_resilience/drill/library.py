"""The library's side of a drill: intake through the gateway, engines, the compensator.

:func:`run_library` plays a :class:`~fme_ai_resilience.drill.scenarios.Plan` against the
pipeline as it is deployed: the Survey123 sender posts each delivery at its time to the intake
gateway (waitress, on loopback), N engine processes run WS-02 jobs on their schedule, the
compensator runs on its schedule (every minute, scaled; WS-03's production period is ten), and
a sampler records the timeline. When every delivered photo's task has settled, one last
compensation pass reconciles the layer with backfill and the backfilled tasks are awaited too.
The settings are the library's defaults with every wait and window scaled by ``time_scale``
(:func:`drill_settings`).
"""
from __future__ import annotations

import contextlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterator, List, Optional, Sequence

from ..breaker import effective_state
from ..calibrate import percentile
from ..errors import FailureClass
from ..gateway import make_app
from ..ledger import Status, TaskRecord
from ..services.live_settings import LiveSettings
from ..services.pipeline import build_compensator
from ..settings import Settings
from ..store import SqlStore, open_store
from .engines import Engines
from .report import LIBRARY, SubjectResult, Timeline
from .scenarios import Plan, Scenario
from .standins import Survey123Sender
from .world import World, photo_keys

__all__ = ["run_library", "drill_settings", "PRODUCTION_WAITS"]

#: The waits and windows of the defaults (production seconds) the drill scales down; the
#: timeouts are scaled too, but never below what a loaded 2-core machine needs to connect.
PRODUCTION_WAITS = {
    "retry.backoff_base_s": 1.0, "retry.backoff_cap_s": 60.0, "retry.max_inline_wait_s": 5.0,
    "retry.fleet_window_s": 60.0, "breaker.window_s": 60.0, "breaker.cooldown_s": 60.0,
    "breaker.cooldown_max_s": 600.0, "breaker.probe_timeout_s": 60.0,
    "breaker.cache_ttl_s": 1.0, "degrade.hold_s": 300.0, "intake.drain_window_s": 300.0,
    "intake.latency_promise_s": 120.0, "processing.lease_s": 300.0, "alerts.window_s": 900.0,
    "compensation.requeue_backoff_s": 300.0, "compensation.requeue_backoff_cap_s": 21600.0,
}
_TIMEOUT_FLOORS = {"timeouts.connect_s": (3.0, 1.0), "timeouts.tls_s": (3.0, 1.0),
                   "timeouts.ttfb_s": (20.0, 5.0), "timeouts.body_s": (4.0, 1.0),
                   "breaker.slow_call_s": (20.0, 2.0)}
#: Production periods: FME Flow's WS-02 schedule, and the compensator's in the drill.
WS02_TICK_S = 60.0
COMPENSATOR_TICK_S = 60.0
SAMPLE_STEP_S = 0.25
COST_PER_CALL = 0.01


def drill_settings(world: World, *, engines: int, time_scale: float) -> Dict[str, str]:
    """The settings the drill's ledger holds: the stand-ins, the engines, scaled waits."""
    faults = world.scenario.faults
    mean_latency = faults.latency_s + faults.latency_jitter_s / 2
    values = {name: f"{v * time_scale:g}" for name, v in PRODUCTION_WAITS.items()}
    values.update({name: f"{max(v * time_scale, floor):g}"
                   for name, (v, floor) in _TIMEOUT_FLOORS.items()})
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
    return values


@contextlib.contextmanager
def _gateway(db_url: str) -> Iterator[str]:
    from ..cli.httpserver import GatewayServer

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


class _Sampler:
    """Records the timeline every step while the run goes on."""

    def __init__(self, world: World, engines: Engines, service: str, started: float, *,
                 store: SqlStore) -> None:
        self.timeline = Timeline(step_s=SAMPLE_STEP_S)
        self._store, self._world, self._engines = store, world, engines
        self._service, self._started = service, started
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fair-drill-sampler",
                                        daemon=True)

    def __enter__(self) -> "_Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        tl = self.timeline
        while not self._stop.wait(SAMPLE_STEP_S):
            now = time.time()
            breaker = self._store.breaker_get(self._service, now=now)
            ladder = self._store.degrade_get(now=now)
            tl.t.append(round(time.monotonic() - self._started, 3))
            tl.backlog.append(self._store.backlog())
            tl.in_flight.append(self._engines.busy_count())
            tl.breaker.append(effective_state(breaker).value)
            tl.level.append(int(ladder.effective))


def _send(plan: Plan, url: str, started: float) -> List[Any]:
    """Each delivery at its time, bursts from eight threads; the deliveries as answered."""
    sender = Survey123Sender(url, timeout_s=60.0)
    done: List[Any] = []
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="fair-drill-send") as pool:
        futures = []
        for item in plan.deliveries:
            wait = started + item.at_s - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            send = sender.redeliver if item.redelivery else sender.send
            futures.append(pool.submit(send, item.body))
        done = [f.result() for f in futures]
    return done


def _settled(record: Optional[TaskRecord], requeue_budget: int) -> bool:
    if record is None:
        return False
    if record.status is Status.SUCCEEDED:
        return True
    return record.status is Status.DEAD and not (
        record.failure_class is FailureClass.BUDGET and record.requeue_count < requeue_budget)


def _wait_settled(keys: Sequence[str], settings: Settings, engines: Engines, *,
                  store: SqlStore, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    budget = settings.compensation.requeue_budget
    left = list(keys)
    while time.monotonic() < deadline:
        engines.heal()
        left = [k for k in left if not _settled(store.get(k), budget)]
        if not left:
            return True
        time.sleep(0.2)
    return False


def _compensate(db_url: str, tick_s: float, stop: threading.Event) -> None:
    store = open_store(db_url)
    try:
        while not stop.wait(tick_s):
            settings = Settings().with_values(store.get_config())
            build_compensator(settings, store=store).run(reconcile=False)
    finally:
        store.close()


def run_library(plan: Plan, world: World, *, db_url: str, engines: int, time_scale: float,
                timeout_s: float = 600.0) -> SubjectResult:
    """Run ``plan`` through the pipeline; the library's figures."""
    scenario: Scenario = world.scenario
    with open_store(db_url, init_schema=True, create=True) as store:
        store.clear()
        store.set_config(drill_settings(world, engines=engines, time_scale=time_scale),
                         now=time.time())
        settings = Settings().with_values(store.get_config())
        fleet = Engines(db_url, engines, tick_s=WS02_TICK_S * time_scale)
        stop_compensating = threading.Event()
        compensator = threading.Thread(target=_compensate, name="fair-drill-compensator",
                                       args=(db_url, COMPENSATOR_TICK_S * time_scale,
                                             stop_compensating), daemon=True)
        try:
            time.sleep(1.0)                          # the engines imported and connected
            world.vision.reset()
            started = time.monotonic()
            compensator.start()
            with _gateway(db_url) as url, _Sampler(world, fleet, settings.vision.service,
                                                   started, store=store) as sampler:
                chaos = threading.Thread(target=_chaos, args=(scenario, fleet, db_url,
                                                              started, time_scale), daemon=True)
                chaos.start()
                deliveries = _send(plan, url, started)
                delivered = [k for item, d in zip(plan.deliveries, deliveries) if d.delivered
                             for k in photo_keys(item.body)]
                complete = _wait_settled(list(dict.fromkeys(delivered)), settings, fleet,
                                         store=store, timeout_s=timeout_s)
                drained = time.monotonic() - started
                reconciled = build_compensator(
                    settings, store=store, layer_url=world.layer.layer_url).reconcile(
                        since=0.0, until=time.time() + 60, backfill=True)
                complete = _wait_settled([g.key for g in reconciled.missing], settings, fleet,
                                         store=store, timeout_s=timeout_s) and complete
                chaos.join(1)
        finally:
            stop_compensating.set()
            fleet.stop()
            compensator.join(30)
        records = [store.get(k) for k in _all_keys(plan, deliveries, reconciled)]
        return _result(plan, world, deliveries, [r for r in records if r is not None],
                       sampler.timeline, drained=drained, backfilled=reconciled.backfilled,
                       complete=complete, killed=fleet.killed)


def _all_keys(plan: Plan, deliveries: Sequence[Any], reconciled: Any) -> List[str]:
    keys = [k for item in plan.deliveries for k in photo_keys(item.body)]
    keys += [g.key for g in reconciled.missing]
    return list(dict.fromkeys(keys))


def _chaos(scenario: Scenario, fleet: Engines, db_url: str, started: float,
           time_scale: float) -> None:
    """The chaos scenario's kill and connection cut, at their times."""
    events = []
    if scenario.kill_engine_at_s is not None:
        events.append((scenario.kill_engine_at_s * time_scale, lambda: fleet.doom(0)))
    if scenario.terminate_connections_at_s is not None and db_url.startswith("postgres"):
        events.append((scenario.terminate_connections_at_s * time_scale,
                       lambda: _terminate_backends(db_url)))
    for at_s, act in sorted(events, key=lambda e: e[0]):
        wait = started + at_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        act()


def _terminate_backends(db_url: str) -> None:
    with open_store(db_url) as store:
        store.terminate_other_sessions()


def _result(plan: Plan, world: World, deliveries: Sequence[Any], records: Sequence[TaskRecord],
            timeline: Timeline, *, drained: float, backfilled: int, complete: bool,
            killed: int) -> SubjectResult:
    snaps = world.snapshots()
    vision, layer = snaps["vision"], snaps["layer"]
    by_fact: Dict[str, List[TaskRecord]] = {}
    for record in records:
        fact = plan.key_facts.get(record.key)
        if fact is not None:
            by_fact.setdefault(fact, []).append(record)
    succeeded: Dict[str, int] = {}
    dead: Dict[str, int] = {}
    for fact in plan.facts:
        tasks = by_fact.get(fact, [])
        done = [r for r in tasks if r.status is Status.SUCCEEDED]
        if done:
            outcome = done[0].outcome.value.lower() if done[0].outcome else "accepted"
            succeeded[outcome] = succeeded.get(outcome, 0) + 1
        elif tasks and all(r.status is Status.DEAD for r in tasks):
            cause = tasks[0].failure_class.value if tasks[0].failure_class else "UNKNOWN"
            dead[cause] = dead.get(cause, 0) + 1
    ok = {}
    for _, sha, outcome in vision["log"]:
        if outcome == "ok":
            ok[sha] = ok.get(sha, 0) + 1
    answers = [json.loads(d.answer or b"{}").get("status") for d in deliveries if d.answer]
    ends = [r.completed_at - r.created_at for r in records
            if r.status is Status.SUCCEEDED and r.completed_at is not None]
    total_ok = sum(succeeded.values())
    outage_calls = vision["outages"][0]["calls"] if vision["outages"] else 0
    return SubjectResult(
        name=LIBRARY, submitted=len(deliveries), distinct_facts=len(plan.facts),
        duplicates_collapsed=sum(a in ("duplicate_done", "duplicate_in_progress")
                                 for a in answers),
        succeeded=succeeded, dead_by_cause=dead,
        lost=len(plan.facts) - total_ok - sum(dead.values()),
        duplicate_analyses=sum(n - 1 for n in ok.values() if n > 1),
        duplicate_writes=sum(n - 1 for n in layer["writes"].values() if n > 1),
        ai_calls=vision["total"],
        ai_calls_per_completed_task=round(vision["total"] / total_ok, 3) if total_ok else None,
        analyses_reused=sum(1 for r in records if r.result and r.result.get("reused")),
        outage_ai_calls=outage_calls,
        peak_backlog=max(timeline.backlog, default=0),
        peak_concurrent_engines=max(timeline.in_flight, default=0),
        breaker_transitions=sum(1 for a, b in zip(timeline.breaker, timeline.breaker[1:])
                                if a != b),
        degradation_levels=sorted({f"L{lv}" for lv in timeline.level if lv is not None}),
        p95_end_to_end_s=round(percentile(ends, 95), 3) if ends else None,
        drain_s=round(drained, 3), backfilled=backfilled,
        ai_spend=round(vision["total"] * COST_PER_CALL, 4), timeline=_with_calls(
            timeline, vision["log"], world.time_scale),
        notes=([] if complete else ["the run timed out before every task settled"])
        + ([f"{killed} engine(s) SIGKILLed mid-task and restarted"] if killed else []))


def _with_calls(timeline: Timeline, log: Sequence[Any], time_scale: float) -> Timeline:
    """Bin the stand-in's calls (schedule seconds) into the timeline's real-time steps."""
    steps = len(timeline.t)
    calls: Dict[str, List[int]] = {}
    for at_s, _, outcome in log:
        i = int(at_s * time_scale / timeline.step_s)
        if 0 <= i < steps:
            calls.setdefault(outcome, [0] * steps)[i] += 1
    timeline.ai_calls = calls
    return timeline
