"""The baselines against the real loopback stand-ins: engines, queue, faults, judged as the
library is (``run.judged``, at the stand-ins).

Schedules run compressed (``time_scale`` 0.01); what is asserted is what the stand-ins saw,
never how long the wall clock took, and never that a baseline loses.
"""
from __future__ import annotations

import threading
from typing import List, Optional

import pytest

from fme_ai_resilience.drill.baselines import BASELINES, Progress, run_baseline
from fme_ai_resilience.drill.chaos import Kill
from fme_ai_resilience.drill.run import judged, run_baseline_subject
from fme_ai_resilience.drill.scenarios import SCENARIOS, Scenario, Scheduled
from fme_ai_resilience.drill.standins import FaultSchedule
from fme_ai_resilience.drill.world import World

from helpers.optional_deps import baseline_params, needs_tenacity


TIME_SCALE = 0.01
#: The scale of the tests that count paid answers exactly. A busy 2-core machine can stand a
#: thread still for a second or more of real time, and at 0.01 that is 100 production
#: seconds: a client gives up on an answer already paid for (every baseline's shortest
#: timeout, 30 s, is 0.5 s real there) and asks again, or the sweep's first pass (51.6 s
#: after the start for the runs' seed 5) finds a photo whose webhook job is still under way
#: and pays for it again. Both are what these baselines do when a job is that late; neither
#: is a calm day. At 0.05 that timeout is 1.5 s real and that pass 2.6 s.
EXACT_SCALE = 0.05
NAMES = baseline_params(sorted(BASELINES))
#: Vision calls per photo when every call fails: 3 tries, 5 attempts, 1 + 3 retries.
CALLS_WHEN_ALL_FAIL = {"naive": 3, "tenacity": 5, "httpcaller": 4, "sweep": 4}


class Stage(World):
    """A world of features made one by one (not a plan), for one baseline run."""

    def __init__(self, schedule: Optional[FaultSchedule] = None,
                 photos_per_feature: int = 1, time_scale: float = TIME_SCALE) -> None:
        super().__init__(Scenario("stage", "a test's own", schedule or FaultSchedule(
            latency_s=0.2)), seed=3, time_scale=time_scale,
            photos_per_feature=photos_per_feature)
        from fme_ai_resilience.drill.standins import Survey123Sender
        self.sender = Survey123Sender("http://127.0.0.1:9/unused", seed=3)

    def submit(self, photos: int = 1, record=None):
        record = record or self.layer.add_feature(photos=photos)
        return record, self.sender.body_for(record)

    def run(self, name, deliveries, engines=2, progress=None, kills=(), horizon_s=1200.0):
        self.begin()
        run = run_baseline(name, deliveries, vision_url=self.vision.endpoint, engines=engines,
                           time_scale=self.time_scale, seed=5, layer_url=self.layer.layer_url,
                           table_url=self.table_url, progress=progress, kills=kills,
                           horizon_s=horizon_s)
        bound = engines * BASELINES[name].transfers_per_job
        return run, judged(name, self, started=run.started, concurrency_bound=bound)


@pytest.mark.parametrize("name", NAMES)
def test_on_a_calm_day_every_baseline_analyses_every_fact_once(name):
    """A healthy Vision AI: each photo analysed once, written once, the Tester's outcome."""
    with Stage(time_scale=EXACT_SCALE) as world:
        deliveries = [Scheduled(0.0, world.submit()[1]) for _ in range(4)]
        run, result = world.run(name, deliveries)
        assert (result.facts, result.analysed, result.lost) == (4, 4, 0)
        assert result.accepted + result.review == 4
        assert (result.duplicate_analyses, result.conflicting_writes) == (0, 0)
        assert result.ai_calls == 4 and run.jobs >= 4


@pytest.mark.parametrize("name", NAMES)
def test_a_redelivery_is_analysed_again_and_its_identical_write_is_no_conflict(name):
    """The same body twice: a second paid answer, the same values written again."""
    with Stage(time_scale=EXACT_SCALE) as world:
        _, body = world.submit()
        _, result = world.run(name, [Scheduled(0.0, body), Scheduled(0.02, body)])
        assert result.analysed == 1 and result.duplicate_analyses == 1
        assert result.conflicting_writes == 0 and result.layer_edits == 2


@pytest.mark.parametrize("name", NAMES)
def test_a_recreated_feature_is_one_fact_analysed_on_both(name):
    """New GlobalIDs, the same photo: one fact, paid twice, analysed on both features."""
    with Stage(time_scale=EXACT_SCALE) as world:
        record, body = world.submit()
        _, again = world.submit(record=world.layer.recreate(record))
        _, result = world.run(name, [Scheduled(0.0, body), Scheduled(0.02, again)])
        assert (result.facts, result.analysed, result.duplicate_analyses) == (1, 1, 1)


@pytest.mark.parametrize("name", NAMES)
def test_an_outage_longer_than_the_retries_takes_each_retry_into_it(name):
    """Vision down for good: every call the baseline's retry makes lands in the outage, the
    sweep's every pass too until the horizon (it never settles)."""
    with Stage(FaultSchedule(outages=[(0.0, 100_000.0)])) as world:
        deliveries = [Scheduled(0.0, world.submit()[1]) for _ in range(3)]
        run, result = world.run(name, deliveries, horizon_s=600.0)
        per_photo = CALLS_WHEN_ALL_FAIL[name] * (1 + run.sweeps)
        assert result.ai_calls == result.outage_ai_calls == 3 * per_photo
        assert result.analysed == 0 and result.ai_calls_per_analysed is None
        assert run.settled is (name != "sweep") and (run.sweeps >= 4) is (name == "sweep")


@pytest.mark.parametrize("name", NAMES)
def test_the_engines_never_exceed_n_busy(name):
    """Eight deliveries at once on two engines: the queue holds the rest, never three busy,
    and the Vision AI never sees more calls at once than the engines can make."""
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
        assert max(busy for _, busy, _ in seen) <= 2 and run.peak_busy == 2
        assert run.peak_backlog == 8 and progress.sample() == (0, 0, 0)
        assert 1 <= result.peak_concurrent_calls <= 2


@pytest.mark.parametrize("name, most", [("naive", 1),
                                        pytest.param("tenacity", 1, marks=needs_tenacity),
                                        ("httpcaller", 25)])
def test_calls_in_flight_per_job_are_measured_at_the_vision_ai(name, most):
    """A Python job calls one photo at a time; HTTPCaller keeps up to 25 transfers going."""
    with Stage(FaultSchedule(latency_s=2.0)) as world:
        _, body = world.submit(photos=30)
        run, result = world.run(name, [Scheduled(0.0, body)], engines=1)
        assert run.jobs == 1
        assert 1 <= result.peak_concurrent_calls <= most
        if most > 1:
            assert result.peak_concurrent_calls > 1


def test_the_sweep_finds_what_no_webhook_brought_and_ends_once_a_pass_leaves_nothing():
    """A feature only the layer holds: a sweep pass after the last delivery analyses it
    and leaves nothing owed, and the run ends there."""
    with Stage(time_scale=EXACT_SCALE) as world:
        deliveries = [Scheduled(0.0, world.submit()[1]) for _ in range(2)]
        world.layer.add_feature(photos=1)            # its webhook never came
        run, result = world.run("sweep", deliveries)
        assert (result.facts, result.analysed, result.lost) == (3, 3, 0)
        assert run.settled and run.sweeps >= 1 and run.jobs == 2 + run.sweeps
        assert result.duplicate_analyses == 0


def test_the_sweep_keeps_its_schedule_through_an_outage_longer_than_a_pass():
    """A Vision AI down for 300 s, two and a half sweep periods: the passes during it write
    nothing, and the schedule goes on, as FME Flow's does, until a pass after the outage
    analyses every photo."""
    with Stage(FaultSchedule(latency_s=0.2, outages=[(0.0, 300.0)])) as world:
        deliveries = [Scheduled(0.0, world.submit()[1]) for _ in range(3)]
        run, result = world.run("sweep", deliveries)
        assert (result.facts, result.analysed, result.lost) == (3, 3, 0)
        assert run.settled and run.sweeps >= 3
        assert result.outage_ai_calls >= 3 * 4      # every webhook job's retries, in vain


def test_a_sweep_pass_keeps_httpcallers_transfers_in_flight():
    """Thirty features no webhook brought, a 2 s Vision AI: one pass calls for many of them
    at once, as HTTPCaller's 25 concurrent transfers do, not one photo at a time."""
    with Stage(FaultSchedule(latency_s=2.0)) as world:
        for _ in range(30):
            world.layer.add_feature(photos=1)
        run, result = world.run("sweep", [], engines=1)
        assert (result.analysed, result.lost) == (30, 0)
        assert 1 < result.peak_concurrent_calls <= 25


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("point, paid_twice", [("analyzed", 1), ("written", 1),
                                                ("claimed", 0)])
def test_a_killed_job_is_resubmitted_by_job_recovery_for_every_baseline(name, point,
                                                                       paid_twice):
    """A kill at a stage boundary stops the job there (nothing after it happens); FME Flow's
    job recovery resubmits it, which analyses the photo from the start: a photo killed after
    its paid answer is paid again; the identical write is no conflict. Counted exactly, so
    at :data:`EXACT_SCALE` (a call a client gave up on is paid again too)."""
    with Stage(time_scale=EXACT_SCALE) as world:
        deliveries = [Scheduled(0.0, world.submit()[1])]
        run, result = world.run(name, deliveries, engines=1,
                                kills=[Kill(0.0, 0, point)])
        assert (run.killed, run.recovered) == (1, 1)
        assert (result.analysed, result.lost, result.conflicting_writes) == (1, 0, 0)
        assert result.duplicate_analyses == paid_twice
        assert result.layer_edits == (2 if point == "written" else 1)


@pytest.mark.parametrize("name", NAMES)
def test_with_a_photo_repeat_each_photo_gets_one_row_and_a_redelivery_updates_it(name):
    """Three photos a feature: a row each in the related table, none on the feature; the
    body delivered again after the first job finds the rows and updates them, no row twice."""
    with Stage(photos_per_feature=3, time_scale=EXACT_SCALE) as world:
        _, body = world.submit(photos=3)
        _, result = world.run(name, [Scheduled(0.0, body), Scheduled(0.3, body)], engines=1)
        table = world.layer.snapshot()
        assert (result.facts, result.analysed, result.lost) == (3, 3, 0)
        assert (result.duplicate_rows, result.conflicting_writes) == (0, 0)
        assert len(table["table_rows"]) == 3 and table["history"] == {}
        assert result.layer_edits == 6


def test_the_sweep_over_a_related_table_analyses_the_photos_no_row_names():
    """A feature whose webhook never came, with three photos: the sweep's pass finds the
    photos without a row and adds one each."""
    with Stage(photos_per_feature=3, time_scale=EXACT_SCALE) as world:
        deliveries = [Scheduled(0.0, world.submit(photos=3)[1])]
        world.layer.add_feature(photos=3)            # its webhook never came
        run, result = world.run("sweep", deliveries)
        assert (result.facts, result.analysed, result.lost, result.duplicate_rows) == (
            6, 6, 0, 0)
        assert run.sweeps >= 1 and len(world.layer.snapshot()["table_rows"]) == 6


def _plan_run(scenario, name, submissions, time_scale, seed, engines=2):
    """A drill plan on a fresh world, run and judged as the drill runs a baseline."""
    with World(SCENARIOS[scenario], seed=seed, time_scale=time_scale) as world:
        plan = world.plan(submissions)
        result = run_baseline_subject(name, plan, world, engines=engines,
                                      time_scale=time_scale, seed=seed)
    return plan, result


@pytest.mark.parametrize("name", NAMES)
def test_a_storm_plan_is_judged_at_the_stand_ins(name):
    """The storm's photos gone from the layer are apart; every fact is analysed, flagged or
    lost; deliveries are the plan's."""
    plan, result = _plan_run("storm", name, 12, 0.02, seed=3)   # a seed with all three
    assert plan.missing_photos and plan.never_delivered
    assert any(d.redelivery for d in plan.deliveries)
    assert result.submitted == len(plan.deliveries) and result.facts == len(plan.facts) == 12
    assert result.unanalysable == len(plan.missing_photos)
    assert result.analysed + result.flagged + result.lost == result.analysable
    assert result.peak_concurrent_calls <= result.concurrency_bound
    assert result.model == BASELINES[name].note and result.timeline.photos


@pytest.mark.parametrize("name", NAMES)
def test_an_outage_plan_counts_the_calls_made_into_the_outage(name):
    """The outage: calls during the window counted by the stand-in."""
    _, result = _plan_run("outage", name, 8, 0.01, seed=3)
    assert 0 < result.outage_ai_calls <= result.ai_calls
