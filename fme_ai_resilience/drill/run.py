"""One drill: the scenario played against the library, then against each baseline.

:func:`run_drill` makes a fresh :class:`~fme_ai_resilience.drill.world.World` per subject
(seeded alike, so each meets the same features, photos, faults and deliveries at the same
times), runs the library (:func:`~fme_ai_resilience.drill.library.run_library`) and the
baselines asked for, and returns the :class:`~fme_ai_resilience.drill.report.DrillReport` with
the bounds the figures are judged against.
"""
from __future__ import annotations

import contextlib
import tempfile
import time
from typing import Callable, Dict, Iterator, Optional, Sequence, Tuple

from ..core.resilience.breaker import CircuitState
from ..core.errors import ConfigurationError
from ..core.config.settings import Settings
from .baselines import BASELINES, Progress, run_baseline
from .bounds import (calls_per_analysed_bound, drain_bound_s, drift_call_bound, outage_call_bound,
                     probe_interval_s)
from .judge import judge
from .library import COST_PER_CALL, drill_settings, run_library
from .report import LIBRARY, DrillReport, SubjectResult, Timeline
from .sampling import SAMPLE_STEP_S, Sampler, bin_calls, bin_photos
from .scenarios import SCENARIOS, Plan, Scenario
from .world import World, photo_keys

__all__ = ["run_drill", "judged", "run_baseline_subject", "DEFAULT_SUBMISSIONS", "DEFAULT_ENGINES", "DEFAULT_TIME_SCALE",
           "BASELINE_NAMES"]

DEFAULT_SUBMISSIONS = 120
DEFAULT_ENGINES = 4
#: Real seconds per production second: a 90 s outage lasts 9 s, the default storm about ten
#: seconds for the library, so a job's fixed costs (an engine's start-up, the last
#: reconciliation pass) stay small beside the work, and the whole drill about a minute.
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
    """What every subject is judged against, from the settings and the plan, before the run."""
    settings = Settings().with_values(drill_settings(world, engines=engines,
                                                     time_scale=time_scale))
    f = scenario.faults
    mean = (f.latency_s + f.latency_jitter_s / 2) * time_scale
    last = max((d.at_s for d in plan.deliveries), default=0.0)
    limit = f.rate_limit_per_s / time_scale if f.rate_limit_per_s else None
    facts = len(plan.facts) - len(plan.missing_photos)
    outage = plan.outage
    drift = _drift(scenario, time_scale)
    owed = 0
    if drift is not None:   # the drifted model is an outage that ends at the fix
        outage = drift
    if outage is not None:
        owed = len({k for d in plan.deliveries if d.at_s < outage[1]
                    for k in photo_keys(d.body)})
    probes = outage_call_bound(settings.breaker, (outage[1] - outage[0]) if outage else 0.0,
                               engines=engines, fastest_call_s=f.latency_s * time_scale,
                               facts=facts)
    return {"watermark": settings.intake.capacity.watermark,
            "probe_bound": probes if plan.outage else 0,
            "drift": list(drift) if drift else None,
            "drift_call_bound": drift_call_bound(settings.breaker, drift[1] - drift[0],
                                                 engines=engines, facts=facts)
            if drift else None,
            "probe_interval_s": (round(probe_interval_s(settings.breaker, outage[1] - outage[0]), 3)
                                 if plan.outage else None),
            "calls_per_analysed_bound": round(calls_per_analysed_bound(
                scenario.transient_rate), 3),
            "drain_bound_s": round(drain_bound_s(
                facts, engines=engines, mean_latency_s=mean,
                transient_rate=scenario.transient_rate, last_arrival_s=last,
                rate_limit_per_s=limit, outage=outage, owed_at_return=owed), 3)}


def _drift(scenario: Scenario, time_scale: float) -> Optional[Tuple[float, float]]:
    """The scenario's drift, from its start to the model's fix, in run seconds."""
    if scenario.drift is None:
        return None
    return (scenario.drift[0] * time_scale, scenario.drift[1] * time_scale)


def _live(name: str, show: Optional[Callable[[str], None]], *,
          fix_at_s: Optional[float] = None) -> Optional[Callable[[Timeline], None]]:
    """A sampler's ``on_sample`` that shows ``name``'s state about once a second, and why
    nothing moves while its circuit is open (before ``fix_at_s``, the drifted model's fix,
    the photos wait for the fix)."""
    if show is None:
        return None
    every = max(1, round(1.0 / SAMPLE_STEP_S))

    def on_sample(tl: Timeline) -> None:
        if len(tl.t) % every == 0:
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


def run_baseline_subject(name: str, plan: Plan, world: World, *, engines: int,
                         time_scale: float, seed: int,
                         on_sample: Optional[Callable[[Timeline], None]] = None
                         ) -> SubjectResult:
    """Baseline ``name`` on ``plan`` in ``world`` (fresh, as the library's), judged at its
    stand-ins; its AI spend at the library's price per call and its timeline."""
    chosen = BASELINES[name]
    progress = Progress()
    world.vision.reset()
    with Sampler(lambda: (progress.backlog, progress.busy, None, None), time.monotonic(),
                 on_sample=on_sample) as sampler:
        run = run_baseline(name, plan.deliveries, vision_url=world.vision.endpoint,
                           engines=engines, time_scale=time_scale, seed=seed,
                           layer_url=world.layer.layer_url, table_url=world.table_url,
                           progress=progress)
    if run.skipped is not None:
        return SubjectResult(name=name, skipped=run.skipped, model=chosen.note)
    result = judged(name, world, started=run.started, model=chosen.note,
                    submitted=run.deliveries,
                    concurrency_bound=engines * chosen.transfers_per_job,
                    peak_backlog=run.peak_backlog)
    result.ai_spend = round(result.ai_calls * COST_PER_CALL, 4)
    result.timeline = bin_photos(bin_calls(sampler.timeline, world.vision.snapshot()["log"],
                                           time_scale),
                                 world.histories(), sampler.started)
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
    with _ledger(db_url) as url, World(scenario, seed=seed, time_scale=time_scale,
                                       photos_per_feature=photos_per_feature) as world:
        plan = world.plan(submissions)
        bounds = _bounds(scenario, plan, world, engines=engines, time_scale=time_scale)
        say(f"fme-ai-resilience: {len(plan.deliveries)} deliveries, {engines} engines")
        drift = _drift(scenario, time_scale)
        fix_at = drift[1] if drift else None
        ran = run_library(plan, world, db_url=url, engines=engines, time_scale=time_scale,
                          on_sample=_live(LIBRARY, on_live, fix_at_s=fix_at))
        library = judged(LIBRARY, world, started=ran.started,
                         drift_detection_s=_detected_after(ran.timeline, drift),
                         **ran.extras(world, engines=engines))
        library.ai_spend = round(library.ai_calls * COST_PER_CALL, 4)
        bin_photos(library.timeline, world.histories(),  # type: ignore[arg-type]
                   ran.started)
    report = DrillReport(scenario=scenario.name, seed=seed, submissions=submissions,
                         engines=engines, backend=url.split(":", 1)[0],
                         time_scale=time_scale, outage=list(plan.outage) if plan.outage
                         else None, photos_per_feature=photos_per_feature, library=library, **bounds)  # type: ignore[arg-type]
    for name in compare:
        say(f"{name}: the same deliveries, the same faults")
        with World(scenario, seed=seed, time_scale=time_scale,
                                       photos_per_feature=photos_per_feature) as world:
            plan = world.plan(submissions)
            report.baselines[name] = run_baseline_subject(
                name, plan, world, engines=engines, time_scale=time_scale, seed=seed,
                on_sample=_live(name, on_live))
    return report
