"""The baselines against the real loopback stand-ins: engines, queue, faults and their figures.

Schedules run compressed (``time_scale`` 0.02); what is asserted is what the stand-ins and
the run counted, never how long the wall clock took.
"""
from __future__ import annotations

import threading
from typing import List, Optional

import pytest

from optional_deps import baseline_params, needs_tenacity
from fme_ai_resilience.drill import world as drill_world
from fme_ai_resilience.drill.baselines import (BASELINES, Progress, baseline_result,
                                               run_baseline)
from fme_ai_resilience.drill.scenarios import SCENARIOS, Scheduled
from fme_ai_resilience.drill.standins import (FaultSchedule, FeatureLayerStandIn,
                                              Survey123Sender, VisionStandIn)
from fme_ai_resilience.keys import compose_key, normalise_global_id

pytestmark = pytest.mark.integration

TIME_SCALE = 0.02
NAMES = baseline_params(sorted(BASELINES))
#: Vision calls per photo when every call fails: 3 tries, 5 attempts, 1 + 3 retries.
CALLS_WHEN_ALL_FAIL = {"naive": 3, "tenacity": 5, "httpcaller": 4}


class Stage:
    """A feature layer with the write-back's fields and a Vision stand-in, for one run."""

    def __init__(self, schedule: Optional[FaultSchedule] = None) -> None:
        self.layer = FeatureLayerStandIn(seed=3, fields=drill_world.WRITEBACK_FIELDS)
        self.vision = VisionStandIn(schedule or FaultSchedule(latency_s=0.2), seed=3,
                                    time_scale=TIME_SCALE)
        self.sender = Survey123Sender("http://127.0.0.1:9/unused", seed=3)
        self.facts: List[str] = []

    def __enter__(self) -> "Stage":
        self.layer.start()
        self.vision.start()
        return self

    def __exit__(self, *exc) -> None:
        self.vision.stop()
        self.layer.stop()

    def submit(self, photos: int = 1, record=None):
        record = record or self.layer.add_feature(photos=photos)
        self.facts += [compose_key(normalise_global_id(record.global_id),
                                   normalise_global_id(a.global_id))
                       for a in record.attachments]
        return record, self.sender.body_for(record)

    def run(self, name, deliveries, engines=2, progress=None):
        run = run_baseline(name, deliveries, vision_url=self.vision.endpoint, engines=engines,
                           time_scale=TIME_SCALE, seed=5, progress=progress)
        return run, baseline_result(name, run, vision_snapshot=self.vision.snapshot(),
                                    layer_snapshot=self.layer.snapshot(), facts=self.facts)


@pytest.mark.parametrize("name", NAMES)
def test_on_a_calm_day_every_baseline_succeeds_every_fact_once(name):
    """Calm: each fact analysed once, written once, nothing lost; the answer is the truth."""
    with Stage() as world:
        records = [world.submit()[0] for _ in range(4)]
        deliveries = [Scheduled(0.01 * i, world.sender.body_for(r))
                      for i, r in enumerate(records)]
        run, result = world.run(name, deliveries)
        assert run.skipped is None and run.jobs == 4
        assert all(f.succeeded for f in run.facts.values()) and len(run.facts) == 4
        assert (result.lost, result.succeeded) == (0, {"accepted": 4})
        assert (result.duplicate_analyses, result.duplicate_writes) == (0, 0)
        assert result.ai_calls == 4 and result.ai_calls_per_completed_task == 1.0
        for record in records:
            written = world.layer.attributes_of(record.global_id)
            truth = world.vision.truth(record.attachments[0].data)
            assert (written["ai_condition"], written["ai_confidence"]) == truth
            assert written["ai_status"] == "accepted" and written["ai_trace_id"]


@pytest.mark.parametrize("name", NAMES)
def test_a_redelivery_is_analysed_and_written_again(name):
    """The same body delivered twice is two jobs: two analyses, two writes, both duplicates."""
    with Stage() as world:
        _, body = world.submit(photos=2)
        run, result = world.run(name, [Scheduled(0.0, body), Scheduled(0.05, body)])
        assert run.jobs == 2 and result.submitted == 2 and result.lost == 0
        assert (result.duplicate_analyses, result.duplicate_writes) == (2, 2)
        assert result.ai_calls_per_completed_task == 2.0


@pytest.mark.parametrize("name", NAMES)
def test_a_recreated_feature_is_analysed_again(name):
    """A feature re-created with new GlobalIDs and the same photo is paid for again."""
    with Stage() as world:
        record, body = world.submit()
        _, again = world.submit(record=world.layer.recreate(record))
        run, result = world.run(name, [Scheduled(0.0, body), Scheduled(0.02, again)])
        assert result.lost == 0 and result.distinct_facts == 2
        assert (result.duplicate_analyses, result.duplicate_writes) == (1, 0)


@pytest.mark.parametrize("name", NAMES)
def test_an_outage_longer_than_the_retries_loses_every_fact(name):
    """Vision down for longer than any retry lasts: every fact lost, every call in the outage."""
    with Stage(FaultSchedule(outages=[(0.0, 100_000.0)])) as world:
        deliveries = [Scheduled(0.0, world.submit()[1]) for _ in range(3)]
        run, result = world.run(name, deliveries)
        assert not any(f.succeeded for f in run.facts.values())
        assert all("503" in f.error for f in run.facts.values())
        assert result.lost == 3 and result.succeeded == {"accepted": 0}
        assert result.dead_by_cause == {}
        assert result.ai_calls == result.outage_ai_calls == 3 * CALLS_WHEN_ALL_FAIL[name]
        assert run.vision_calls == result.ai_calls
        assert result.ai_calls_per_completed_task is None


@pytest.mark.parametrize("name", NAMES)
def test_the_engines_never_exceed_n_busy(name):
    """Eight deliveries at once on two engines: the queue holds the rest, never three busy."""
    with Stage(FaultSchedule(latency_s=1.0)) as world:
        deliveries = [Scheduled(0.0, world.submit()[1]) for _ in range(8)]
        progress = Progress()
        seen: List[tuple] = []
        done = threading.Event()

        def sample():
            while not done.is_set():
                seen.append(progress.sample())
                done.wait(0.002)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            run, result = world.run(name, deliveries, engines=2, progress=progress)
        finally:
            done.set()
            sampler.join()
        assert max(busy for _, busy, _ in seen) <= 2
        assert run.peak_busy == result.peak_concurrent_engines == 2
        assert progress.peak_busy == 2 and run.peak_backlog == result.peak_backlog == 8
        assert progress.sample() == (0, 0, 0) and result.lost == 0


@pytest.mark.parametrize("name, most", [("naive", 1), pytest.param("tenacity", 1, marks=needs_tenacity),
                                        ("httpcaller", 25)])
def test_transfers_in_flight_per_job(name, most):
    """A Python job calls one photo at a time; HTTPCaller keeps up to 25 transfers going."""
    with Stage(FaultSchedule(latency_s=2.0)) as world:
        _, body = world.submit(photos=30)
        run, result = world.run(name, [Scheduled(0.0, body)], engines=1)
        assert result.lost == 0 and run.jobs == 1
        assert 1 <= run.peak_in_flight <= most
        if most > 1:
            assert run.peak_in_flight > 1


def test_retry_after_is_ignored_by_every_baseline():
    """A rate limit asking for whole seconds: each baseline waits its own schedule instead."""
    with Stage(FaultSchedule(rate_limit_per_s=0.5, rate_limit_burst=1)) as world:
        deliveries = [Scheduled(0.0, world.submit()[1]) for _ in range(2)]
        for name, first in (("naive", 1.0), ("httpcaller", 0.5)):
            world.vision.reset()
            run, _ = world.run(name, deliveries, engines=2)
            assert run.waits_s and run.waits_s[0] == first
            assert world.vision.snapshot()["by_outcome"]["rate_limited"] >= 1


# --- the drill's own plans -----------------------------------------------------------------------

def _plan_run(scenario, name, submissions, time_scale, seed, engines=2):
    """A drill plan on a fresh world, run by baseline ``name`` as the drill runs a subject."""
    with drill_world.World(SCENARIOS[scenario], seed=seed, time_scale=time_scale) as world:
        plan = world.plan(submissions)
        world.vision.reset()
        run = run_baseline(name, plan.deliveries, vision_url=world.vision.endpoint,
                           engines=engines, time_scale=time_scale, seed=seed)
        snaps = world.snapshots()
        windowed = baseline_result(name, run, vision_snapshot=snaps["vision"],
                                   layer_snapshot=snaps["layer"], facts=plan.facts,
                                   outage=plan.outage)
        result = baseline_result(name, run, vision_snapshot=snaps["vision"],
                                 layer_snapshot=snaps["layer"], facts=plan.facts)
    return plan, run, result, windowed


def _urls(body):
    return [p["url"] for group in body["feature"]["attachments"].values() for p in group]


@pytest.mark.parametrize("name", NAMES)
def test_a_storm_plan_loses_what_nothing_keeps(name):
    """The storm: photos gone and webhooks never sent are lost, redeliveries paid twice."""
    plan, run, result, _ = _plan_run("storm", name, 12, 0.02, seed=3)   # a seed with all three
    redelivered = [d for d in plan.deliveries if d.redelivery]
    assert plan.missing_photos and plan.never_delivered and redelivered
    assert run.jobs == len(plan.deliveries) == result.submitted
    assert result.distinct_facts == len(plan.facts) == 12
    reachable = {plan.key_facts[key] for d in plan.deliveries
                 for key, url in zip(drill_world.photo_keys(d.body), _urls(d.body))
                 if "/photos/gone-" not in url}
    unreachable = set(plan.facts) - reachable
    assert unreachable and result.lost >= len(unreachable)
    assert result.duplicate_analyses >= 1 and result.dead_by_cause == {}
    assert result.peak_concurrent_engines <= 2


@pytest.mark.parametrize("name", NAMES)
def test_an_outage_plan_counts_the_calls_made_into_the_outage(name):
    """The outage: calls during the window counted by the stand-in and by the plan's window."""
    _, run, result, windowed = _plan_run("outage", name, 8, 0.01, seed=3)
    assert result.outage_ai_calls > 0
    assert windowed.outage_ai_calls == result.outage_ai_calls
    assert result.ai_calls == run.vision_calls
