"""Subjects that lie, on the loopback stand-ins: the judge sees each lie and the drill fails it.

Each subject below plays a small plan against a real :class:`World` (layer, photo host and
Vision AI on 127.0.0.1) and is judged as every subject is (``run.judged``): nothing it says
of itself is read, only what the stand-ins saw.
"""
from __future__ import annotations

import json
import random
import threading

import pytest
import requests

from fme_ai_resilience.drill.baselines import run_job
from fme_ai_resilience.drill.invariants import checks
from fme_ai_resilience.drill.report import DrillReport
from fme_ai_resilience.drill.run import judged
from fme_ai_resilience.drill.scenarios import SCENARIOS, Scenario
from fme_ai_resilience.drill.standins import FaultSchedule
from fme_ai_resilience.drill.world import World
from fme_ai_resilience.core.intake.survey123 import parse_webhook

#: Real seconds per production second: naive's 30 s timeout is 3 real seconds, beyond a busy
#: machine's stall, so the honest subject never pays again for a call it gave up on, and a
#: calm day's call lasts 0.2-0.4 real seconds, long enough for calls made at once to overlap.
SCALE = 0.1


def _write(world, gid, condition, confidence, outcome="ACCEPTED"):
    attributes = {"globalid": gid, "ai_condition": condition, "ai_confidence": confidence,
                  "ai_status": outcome}
    answer = requests.post(f"{world.layer.layer_url}/applyEdits", data={
        "f": "json", "updates": json.dumps([{"attributes": attributes}]),
        "useGlobalIds": "true"}, timeout=10)
    assert answer.json()["updateResults"][0]["success"]


def _honest(world, plan):
    for item in plan.deliveries:
        run_job("naive", item.body, vision_url=world.vision.endpoint, rng=random.Random(1),
                time_scale=SCALE)


def _done_without_analysis(world, plan):
    for item in plan.deliveries:
        for photo in parse_webhook(item.body):
            _write(world, "{%s}" % photo.feature_global_id.upper(), "good", 0.99)


def _two_assessments(world, plan):
    _honest(world, plan)
    photo = parse_webhook(plan.deliveries[0].body)[0]
    _write(world, "{%s}" % photo.feature_global_id.upper(), "damaged", 0.5)


def _row_twice(world, plan):
    _honest(world, plan)
    photo = parse_webhook(plan.deliveries[0].body)[0]
    row = {"attributes": {"parentglobalid": photo.feature_global_id,
                          "ai_photo_globalid": photo.attachment_global_id,
                          "ai_condition": "fair"}}
    for _ in range(2):
        requests.post(f"{world.layer.service_url}/1/applyEdits",
                      data={"f": "json", "adds": json.dumps([row])}, timeout=10)


def _truth_without_calling(world, plan):
    """Never calls the Vision AI: writes each photo's true condition and confidence, read
    off the world itself."""
    for item in plan.deliveries:
        for photo in parse_webhook(item.body):
            condition, confidence = world.vision.truth(requests.get(
                photo.attachment_url, timeout=10).content)
            _write(world, "{%s}" % photo.feature_global_id.upper(), condition, confidence)


def _score_out_of_schema(world, plan):
    """Calls the Vision AI, whose model answers out of schema (``score`` for
    ``confidence``), and writes the score anyway."""
    for item in plan.deliveries:
        for photo in parse_webhook(item.body):
            image = requests.get(photo.attachment_url, timeout=10).content
            answer = requests.post(world.vision.endpoint, data=image, timeout=10, headers={
                "Content-Type": "application/octet-stream"}).json()
            _write(world, "{%s}" % photo.feature_global_id.upper(), answer["condition"],
                   answer["score"])


def _not_the_answer(world, plan):
    """Calls the Vision AI and writes an assessment other than its answer (its confidence
    rounded up)."""
    for item in plan.deliveries:
        for photo in parse_webhook(item.body):
            image = requests.get(photo.attachment_url, timeout=10).content
            answer = requests.post(world.vision.endpoint, data=image, timeout=10, headers={
                "Content-Type": "application/octet-stream"}).json()
            _write(world, "{%s}" % photo.feature_global_id.upper(), answer["condition"],
                   round(answer["confidence"] + 0.05, 4))


def _too_wide(world, plan):
    """Every photo's job at once, past the one engine it has."""
    threads = [threading.Thread(target=run_job, args=("naive", item.body), kwargs={
        "vision_url": world.vision.endpoint, "rng": random.Random(1), "time_scale": SCALE})
        for item in plan.deliveries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


#: A model that answers out of schema from the start, otherwise calm.
DRIFTED = Scenario("drifted", "out of schema throughout", FaultSchedule(drift_from_s=0.0),
                   burst=False)


def _judge(play, scenario=SCENARIOS["calm"], name="liar"):
    with World(scenario, seed=3, time_scale=SCALE) as world:
        plan = world.plan(4)
        started = world.begin()
        play(world, plan)
        subject = judged(name, world, started=started, concurrency_bound=1)
    report = DrillReport(scenario=scenario.name, seed=3, submissions=4, engines=1,
                         backend="none", time_scale=SCALE, watermark=10, probe_bound=0,
                         drain_limit_s=1.0, outage=None, library=subject,
                         calls_per_analysed_bound=1.1)
    return subject, {c.key for c in checks(report, subject) if not c.met}


def test_an_honest_subject_passes_every_check_the_liars_fail():
    """One engine analysing every photo once and writing it once meets every target."""
    subject, failed = _judge(_honest)
    assert failed == set() and subject.analysed == subject.facts == 4


@pytest.mark.parametrize("play, lie", [
    (_done_without_analysis, {"lost", "analysed"}),
    (_truth_without_calling, {"lost", "analysed"}),
    (_not_the_answer, {"lost", "analysed"}),
    (_two_assessments, {"conflicting_writes"}),
    (_row_twice, {"duplicate_rows"}),
    (_too_wide, {"peak_concurrent_calls"}),
], ids=["done-without-analysis", "truth-without-calling", "not-the-answer",
        "two-assessments", "row-twice", "too-wide"])
def test_each_lie_is_seen_at_the_stand_ins_and_fails_the_drill(play, lie):
    """A subject marking photos done unanalysed, writing a different assessment, adding a row
    twice or calling past its concurrency misses exactly the target its lie breaks."""
    _, failed = _judge(play)
    assert lie <= failed, failed


@pytest.mark.parametrize("name", ["fme-ai-resilience", "naive", "sweep"])
def test_a_score_read_out_of_schema_is_no_analysis_whichever_subject_wrote_it(name):
    """Every answer out of schema, the score written as the confidence: nothing analysed,
    every photo lost, judged the same under the library's name or a baseline's."""
    subject, failed = _judge(_score_out_of_schema, DRIFTED, name)
    assert (subject.analysed, subject.lost, subject.ai_calls) == (0, 4, 4)
    assert {"lost", "analysed"} <= failed


@pytest.mark.parametrize("name", ["fme-ai-resilience", "naive", "sweep"])
def test_the_truth_without_a_call_is_no_analysis_whichever_subject_wrote_it(name):
    """No call to the Vision AI, the true answers written: nothing analysed, for any name."""
    subject, failed = _judge(_truth_without_calling, name=name)
    assert (subject.analysed, subject.lost, subject.ai_calls) == (0, 4, 0)
    assert {"lost", "analysed"} <= failed
