"""One drill: the scenario played against the library, then against each baseline.

:func:`run_drill` makes a fresh :class:`~fme_ai_resilience.drill.world.World` per subject
(seeded alike, so each meets the same features, photos, faults, deliveries and chaos kills
at the same times, and its scheduled jobs fire on the same clock), runs the library
(:func:`~fme_ai_resilience.drill.library.run_library`) and the baselines asked for, each
watched until it settles or the same horizon, and returns the
:class:`~fme_ai_resilience.drill.report.DrillReport` with the bounds the figures are judged
against and the physical limit the speed is compared with. Every time of every subject goes
through one :class:`~fme_ai_resilience.drill.timescale.TimeScale`; the report notes the
timeouts a machine could not honour at it.
"""
from __future__ import annotations

import contextlib
import math
import tempfile
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..core.resilience.breaker import CircuitState
from ..core.errors import ConfigurationError
from ..core.config.settings import Settings
from .baselines import BASELINES, Progress, run_baseline
from .baselines.notification import NOTIFICATION_NOTE
from .bounds import calls_per_analysed_bound, drift_call_bound, outage_call_bound, probe_interval_s
from .chaos import Kill, kill_plan
from .judge import judge
from .layer_hooks import TriggerFeed
from .library import COST_PER_CALL, drill_settings, run_library
from .report import LIBRARY, DrillReport, SubjectResult, Timeline
from .sampling import SAMPLE_STEP_S, Sampler, bin_calls, bin_photos
from .scenarios import SCENARIOS, Plan, Scenario
from .schedule import SWEEP_PERIOD_S, WS03_PERIOD_S, first_mark_after, horizon_s
from .speed import physical_limit_s, schedule_waits
from .timescale import TimeScale, setting_times
from .world import World

__all__ = ["run_drill", "judged", "run_baseline_subject", "floored_timeouts",
           "DEFAULT_SUBMISSIONS", "DEFAULT_ENGINES", "DEFAULT_TIME_SCALE", "BASELINE_NAMES"]

DEFAULT_SUBMISSIONS = 120
DEFAULT_ENGINES = 4
#: Real seconds per production second: a 90 s outage lasts 9 s, the default storm about ten
#: to fifteen seconds for each subject, so a job's fixed costs (an engine's start-up) stay
#: small beside the work, every timeout but the shortest few is honoured as it is, and the
#: whole drill takes about a minute.
DEFAULT_TIME_SCALE = 0.1
BASELINE_NAMES = ("naive", "tenacity", "httpcaller", "sweep")

@contextlib.contextmanager
def _ledger(db_url: Optional[str]) -> Iterator[str]:
    if db_url:
        yield db_url
        return
    with tempfile.TemporaryDirectory(prefix="fair-drill-") as tmp:
        yield f"sqlite:///{tmp}/ledger.db"


def _bounds(scenario: Scenario, plan: Plan, world: World, *, engines: int,
            time_scale: float) -> Dict[str, object]:
    """What every subject is judged against, from the settings and the plan, before the run;
    and the physical limit its drain is compared with."""
    settings = Settings().with_values(drill_settings(world, engines=engines,
                                                     time_scale=time_scale))
    f = scenario.faults
    facts = len(plan.facts) - len(plan.missing_photos)
    outage = plan.outage
    drift = _drift(scenario, time_scale)
    if drift is not None:   # the drifted model is an outage that ends at the fix
        outage = drift
    probes = outage_call_bound(settings.breaker, (outage[1] - outage[0]) if outage else 0.0,
                               engines=engines, fastest_call_s=f.latency_s * time_scale,
                               concurrency=settings.concurrency)
    limit, why = physical_limit_s(scenario, plan, facts=facts, time_scale=time_scale)
    return {"watermark": settings.intake.capacity.watermark,
            "probe_bound": probes if plan.outage else 0,
            "drift": list(drift) if drift else None,
            "drift_call_bound": drift_call_bound(settings.breaker, drift[1] - drift[0],
                                                 engines=engines,
                                                 concurrency=settings.concurrency)
            if drift else None,
            "probe_interval_s": (round(probe_interval_s(settings.breaker, outage[1] - outage[0]), 3)
                                 if plan.outage else None),
            "calls_per_analysed_bound": round(calls_per_analysed_bound(
                scenario.transient_rate), 3),
            "drain_limit_s": limit, "limit_why": why}


def floored_timeouts(time_scale: float, compare: Sequence[str]) -> List[str]:
    """The timeouts of every subject a machine cannot honour at ``time_scale``: each raised
    to the same floor (:class:`~fme_ai_resilience.drill.timescale.TimeScale`)."""
    scale = TimeScale(time_scale)
    timeouts = [(f"{LIBRARY} {name}", value) for name, (value, kind) in setting_times().items()
                if kind == "timeout"]
    for name in compare:
        chosen = BASELINES[name]
        timeouts += [(f"{name} connect", chosen.connect_timeout_s),
                     (f"{name} transfer", chosen.transfer_timeout_s)]
    return scale.floored(timeouts)


def _run_notes(scenario: Scenario, plan: Plan, *, seed: int, time_scale: float,
               compare: Sequence[str], horizon: float) -> List[str]:
    """What the reader should know of the run as a whole."""
    last = max((d.at_s for d in plan.deliveries), default=0.0) / time_scale
    notes = [f"WS-03 runs every {WS03_PERIOD_S / 60:g} min and the sweep every "
             f"{SWEEP_PERIOD_S / 60:g} min on their cron marks; the run begins "
             f"{first_mark_after(WS03_PERIOD_S, 0.0, seed=seed):.0f} s before WS-03's next "
             f"mark (production seconds); every subject is watched until it settles, at most "
             f"until {horizon:.0f} s ({horizon - max(last, scenario.faults_end_s):.0f} s after "
             "the last delivery and fault)"]
    hooks = scenario.layer_hooks
    if hooks is not None:
        notes.append(
            f"no app webhook: the layer notifies every subject every {hooks.interval_s:g} s "
            f"(production), one notification per layer of the form "
            f"({', '.join(map(str, hooks.notify_layers))}), each naming the same changes; "
            f"the first {hooks.changes_failures} extractChanges job(s) of each run fail; the "
            "library's gateway holds the signature key and answers the challenge, the "
            "baselines' FME Flow webhook trigger can do neither, so theirs is registered "
            "without one; the library polls an extractChanges job from "
            "arcgis.changes_poll_s (0.5 s production, growing), the baselines every 2 s "
            "production, both through the one time scale")
    floored = floored_timeouts(time_scale, compare)
    if floored:
        notes.append(f"time scale {time_scale:g}: timeouts under {TimeScale(time_scale).floor_s:g}"
                     " s real are raised to it for every subject alike: " + "; ".join(floored))
    return notes


def _drift(scenario: Scenario, time_scale: float) -> Optional[Tuple[float, float]]:
    """The scenario's drift, from its start to the model's fix, in run seconds."""
    if scenario.drift is None:
        return None
    return (scenario.drift[0] * time_scale, scenario.drift[1] * time_scale)


def _live(name: str, show: Optional[Callable[[str], None]], *,
          fix_at_s: Optional[float] = None) -> Optional[Callable[[Timeline], None]]:
    """A sampler's ``on_sample`` that shows ``name``'s state at its first sample, then about
    once a second, and why nothing moves while its circuit is open (before ``fix_at_s``, the
    drifted model's fix, the photos wait for the fix)."""
    if show is None:
        return None
    every = max(1, round(1.0 / SAMPLE_STEP_S))

    def on_sample(tl: Timeline) -> None:
        if (len(tl.t) - 1) % every == 0:
            show(f"{name}: {tl.t[-1]:5.1f} s, backlog {tl.backlog[-1]}, "
                 f"engines busy {tl.in_flight[-1]}{_why_waiting(tl, fix_at_s)}")
    return on_sample


def _why_waiting(tl: Timeline, fix_at_s: Optional[float]) -> str:
    """Why the photos wait, while the circuit is not closed: for the next probe, or for the
    drifted model's fix."""
    state = tl.breaker[-1] if tl.breaker else None
    if state not in (CircuitState.OPEN.value, CircuitState.HALF_OPEN.value):
        return ""
    if fix_at_s is not None and tl.t[-1] < fix_at_s:
        return f", circuit {state.lower()}: the model answers out of schema, waiting for the fix"
    return f", circuit {state.lower()}: the photos wait for the next probe"


def _detected_after(tl: Timeline, drift: Optional[Tuple[float, float]]) -> Optional[float]:
    """The drift's start to the first sample with the circuit open (None: never opened)."""
    if drift is None:
        return None
    for at, state in zip(tl.t, tl.breaker):
        if at >= drift[0] and state in (CircuitState.OPEN.value, CircuitState.HALF_OPEN.value):
            return round(at - drift[0], 3)
    return None


def judged(name: str, world: World, *, started: float, **extra: object) -> SubjectResult:
    """Subject ``name``'s result: :func:`~fme_ai_resilience.drill.judge.judge` on what
    ``world``'s stand-ins saw since ``started``, the one judge of every subject, with the
    answers out of schema the Vision AI stand-in gave it (calls into a drifted model)."""
    return SubjectResult.judged(name, judge(world.observe(started=started)),
                                drift_ai_calls=world.vision.snapshot()["by_outcome"].get(
                                    "drift", 0), **extra)


def _timeline(result: SubjectResult, world: World, timeline: Timeline,
              started: float) -> None:
    """``result``'s timeline: the sampled one, with the Vision AI's calls and the photos in
    each of the judge's states at each step."""
    result.timeline = bin_photos(bin_calls(timeline, world.vision.snapshot()["log"],
                                           world.time_scale),
                                 world.observe(started=started))


def run_baseline_subject(name: str, plan: Plan, world: World, *, engines: int,
                         time_scale: float, seed: int,
                         on_sample: Optional[Callable[[Timeline], None]] = None,
                         kills: Sequence[Kill] = (), horizon: float = math.inf
                         ) -> SubjectResult:
    """Baseline ``name`` on ``plan`` in ``world`` (fresh, as the library's), judged at its
    stand-ins; its AI spend at the library's price per call, its engine time and its
    timeline. ``kills`` and ``horizon`` (production s) as the library's."""
    chosen = BASELINES[name]
    hooks = world.scenario.layer_hooks is not None
    model = f"{chosen.note}; {NOTIFICATION_NOTE}" if hooks else chosen.note
    progress = Progress()
    started = world.begin()
    with Sampler(lambda: (progress.backlog, progress.busy, None, None), started,
                 on_sample=on_sample) as sampler:
        # In a layer-webhook scenario the app sends nothing: the layer notifies the
        # baseline's webhook trigger on its schedule.
        run = run_baseline(name, () if hooks else plan.deliveries,
                           vision_url=world.vision.endpoint,
                           engines=engines, time_scale=time_scale, seed=seed,
                           layer_url=world.layer.layer_url, table_url=world.table_url,
                           progress=progress, kills=kills, horizon_s=horizon,
                           nothing_owed=lambda: world.nothing_owed(started),
                           feed=TriggerFeed(world) if hooks else None)
    if run.skipped is not None:
        return SubjectResult(name=name, skipped=run.skipped, model=model)
    notes = [] if run.settled else ["still unsettled at the horizon, when the drill stopped "
                                    "watching"]
    world.deaths.extend(run.deaths)
    if run.killed:
        notes.append(f"{run.killed} job(s) stopped by a kill at a stage boundary, "
                     f"{run.recovered} resubmitted by FME Flow's job recovery")
    result = judged(name, world, started=run.started, model=model,
                    submitted=run.deliveries,
                    concurrency_bound=engines * chosen.transfers_per_job,
                    peak_backlog=run.peak_backlog, settled=run.settled, notes=notes)
    result.ai_spend = round(result.ai_calls * COST_PER_CALL, 4)
    result.held_engines(run.busy_s, time_scale)
    _timeline(result, world, sampler.timeline, run.started)
    return result


def run_drill(scenario_name: str = "storm", *, submissions: int = DEFAULT_SUBMISSIONS,
              engines: int = DEFAULT_ENGINES, db_url: Optional[str] = None, seed: int = 1,
              time_scale: float = DEFAULT_TIME_SCALE,
              compare: Sequence[str] = BASELINE_NAMES, photos_per_feature: int = 1,
              on_progress: Optional[Callable[[str], None]] = None,
              on_live: Optional[Callable[[str], None]] = None) -> DrillReport:
    """Run one scenario for the library and each baseline in ``compare``
    (:func:`run_baseline_subject`).

    ``photos_per_feature``: the photos of each submitted feature; above one, every subject
    writes one related-table row per photo (:class:`~fme_ai_resilience.drill.world.World`).
    ``on_progress`` hears each phase as it starts; ``on_live``, about once a second, a line
    on the subject running (its time, backlog and busy engines)."""
    if scenario_name not in SCENARIOS:
        raise ConfigurationError("scenario", scenario_name, f"must be one of {list(SCENARIOS)}")
    unknown = [b for b in compare if b not in BASELINE_NAMES]
    if unknown:
        raise ConfigurationError("compare", ",".join(unknown),
                                 f"must name baselines among {list(BASELINE_NAMES)}")
    scenario = SCENARIOS[scenario_name]
    say = on_progress or (lambda _text: None)
    say(f"{scenario.name}: {scenario.summary}")
    kills = kill_plan(scenario.kills_at_s, scenario=scenario.name, seed=seed, engines=engines)
    with _ledger(db_url) as url, World(scenario, seed=seed, time_scale=time_scale,
                                       photos_per_feature=photos_per_feature) as world:
        plan = world.plan(submissions)
        bounds = _bounds(scenario, plan, world, engines=engines, time_scale=time_scale)
        last = max((d.at_s for d in plan.deliveries), default=0.0) / time_scale
        horizon = horizon_s(last, scenario.faults_end_s)
        say(f"{LIBRARY}: {len(plan.deliveries)} deliveries, {engines} engines"
            if scenario.layer_hooks is None else
            f"{LIBRARY}: {plan.features} features, announced by the layer's webhook, "
            f"{engines} engines")
        drift = _drift(scenario, time_scale)
        fix_at = drift[1] if drift else None
        ran = run_library(plan, world, db_url=url, engines=engines, time_scale=time_scale,
                          horizon_s=horizon, kills=kills,
                          on_sample=_live(LIBRARY, on_live, fix_at_s=fix_at))
        library = judged(LIBRARY, world, started=ran.started,
                         drift_detection_s=_detected_after(ran.timeline, drift),
                         **ran.extras(world, engines=engines))
        library.ai_spend = round(library.ai_calls * COST_PER_CALL, 4)
        library.held_engines(ran.busy_s, time_scale)
        _timeline(library, world, library.timeline, ran.started)  # type: ignore[arg-type]
    report = DrillReport(scenario=scenario.name, seed=seed, submissions=submissions,
                         engines=engines, backend=url.split(":", 1)[0],
                         time_scale=time_scale, outage=list(plan.outage) if plan.outage
                         else None, photos_per_feature=photos_per_feature, library=library,
                         notes=_run_notes(scenario, plan, seed=seed, time_scale=time_scale,
                                          compare=compare, horizon=horizon),
                         waits=schedule_waits(scenario, plan, kills=kills, seed=seed,
                                              time_scale=time_scale,
                                              lease_s=Settings().processing.lease_s),
                         **bounds)  # type: ignore[arg-type]
    for name in compare:
        say(f"{name}: the same deliveries, the same faults")
        with World(scenario, seed=seed, time_scale=time_scale,
                   photos_per_feature=photos_per_feature) as world:
            plan = world.plan(submissions)
            report.baselines[name] = run_baseline_subject(
                name, plan, world, engines=engines, time_scale=time_scale, seed=seed,
                on_sample=_live(name, on_live), kills=kills, horizon=horizon)
    return report
