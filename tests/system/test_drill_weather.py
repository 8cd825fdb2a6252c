"""The new weather at the stand-ins themselves, on loopback: a layer refusing edits for a
while, a quota whose 429 says to come back at the minute's end, a service that slows down,
and the usable answers the judge credits (never one out of schema or cut short)."""
from __future__ import annotations

import json
import time

import pytest
import requests

from fme_ai_resilience.drill.standins import FaultSchedule, FeatureLayerStandIn, VisionStandIn
from fme_ai_resilience.drill.standins.photos import fake_jpeg

pytestmark = pytest.mark.integration

SCALE = 0.01


def _post(vision, image):
    return requests.post(vision.endpoint, data=image, timeout=10,
                         headers={"Content-Type": "application/octet-stream"})


def _edit(layer, gid):
    answer = requests.post(f"{layer.layer_url}/applyEdits", data={
        "f": "json", "useGlobalIds": "true", "updates": json.dumps(
            [{"attributes": {"globalid": gid, "ai_condition": "fair"}}])}, timeout=10)
    return answer.status_code, answer.json()


def test_the_layer_refuses_every_edit_in_its_window_and_takes_them_after():
    """Inside the refusal window applyEdits answers ArcGIS's error 503 (HTTP 200) and writes
    nothing, queries still answer; after it the same edit is written. The window lasts 3
    real seconds, so the first edit lands in it however loaded the machine."""
    with FeatureLayerStandIn(seed=1, fields=("ai_condition",), time_scale=SCALE,
                             edit_refusals=[(0.0, 300.0)]) as layer:
        feature = layer.add_feature(photos=1)
        layer.restart_schedule()
        status, answer = _edit(layer, feature.global_id)
        assert status == 200 and answer["error"]["code"] == 503
        query = requests.get(f"{layer.layer_url}/query", params={
            "where": "1=1", "f": "json"}, timeout=10).json()
        assert len(query["features"]) == 1
        assert layer.snapshot()["history"] == {} and layer.snapshot()["refused_edits"] == 1
        time.sleep(300.0 * SCALE + 0.05)
        status, answer = _edit(layer, feature.global_id)
        assert answer["updateResults"][0]["success"] is True
        assert len(layer.snapshot()["history"]) == 1


def test_a_quota_answers_429_until_its_minute_ends_and_says_so():
    """Three calls a minute: the fourth is refused with a wait to the minute's end (in real
    milliseconds for a compressed schedule), then the next minute answers again. The minute
    lasts 3 real seconds, so the four calls land in it however loaded the machine."""
    scale = 0.05
    schedule = FaultSchedule(rate_limit_per_s=0.05, rate_window_s=60.0)
    with VisionStandIn(schedule, seed=1, time_scale=scale, retry_after_ms=True) as vision:
        image = fake_jpeg("quota", seed=1)
        assert [_post(vision, image).status_code for _ in range(3)] == [200, 200, 200]
        refused = _post(vision, image)
        wait_ms = int(refused.headers["retry-after-ms"])
        assert refused.status_code == 429 and 0 < wait_ms <= 60_000 * scale   # its end
        time.sleep(wait_ms / 1000 + 0.05)
        assert _post(vision, image).status_code == 200
        assert vision.snapshot()["by_outcome"]["rate_limited"] == 1


def test_a_slowdown_answers_later_as_its_profile_climbs():
    """The latency follows the profile's line: a call at its slow end takes far longer than
    one at its fast start (real time, at the stand-in's scale). The fast start lasts 2 real
    seconds, so the first call, a fresh connection, lands in it, and the slow end's 3 real
    seconds stand 1.5 s above a fast call, however loaded the machine."""
    schedule = FaultSchedule(latency_profile=((0.0, 1.0), (200.0, 1.0), (210.0, 300.0)))
    with VisionStandIn(schedule, seed=1, time_scale=SCALE) as vision:
        image = fake_jpeg("slow", seed=1)
        began = time.monotonic()
        _post(vision, image)
        fast = time.monotonic() - began
        time.sleep(210.0 * SCALE)
        began = time.monotonic()
        _post(vision, image)
        slow = time.monotonic() - began
        assert slow >= 300.0 * SCALE * 0.9 and fast < slow - 1.5


def test_only_a_whole_answer_in_schema_is_a_usable_answer():
    """The answers the judge credits are those of ``ok`` calls: a photo answered out of
    schema or cut short has none."""
    with VisionStandIn(FaultSchedule(drift_rate=0.5, truncated_rate=0.0), seed=1,
                       time_scale=SCALE) as vision:
        images = [fake_jpeg(f"photo-{i}", seed=1) for i in range(12)]
        outcomes = {}
        for image in images:
            answer = _post(vision, image).json()
            outcomes[vision.truth(image)] = "score" in answer
        answers = vision.snapshot()["answers"]
        assert 0 < len(answers) < len(images)
        assert set(tuple(a) for a in answers.values()) == {
            truth for truth, drifted in outcomes.items() if not drifted}
    with VisionStandIn(FaultSchedule(truncated_rate=1.0), seed=1, time_scale=SCALE) as cut:
        with pytest.raises((requests.RequestException, ValueError)):
            _post(cut, images[0]).json()
        assert cut.snapshot()["answers"] == {}


def test_a_feature_reaches_the_layer_when_its_crew_sends_it():
    """A plan's features are on the layer from their submission on, not before: queries and
    attachment lists (what a reconciliation or a sweep reads) see only those sent by now."""
    from fme_ai_resilience.drill.scenarios import SCENARIOS
    from fme_ai_resilience.drill.world import World

    scale = 0.05                                   # a second of real time between two
    with World(SCENARIOS["calm"], seed=1, time_scale=scale) as world:
        plan = world.plan(6)                       # one every 20 s of the two minutes
        world.begin()

        def visible():
            answer = requests.get(f"{world.layer.layer_url}/query", params={
                "where": "1=1", "f": "json"}, timeout=10).json()
            listed = requests.get(f"{world.layer.layer_url}/queryAttachments", params={
                "definitionExpression": "1=1", "f": "json"}, timeout=10).json()
            return len(answer["features"]), len(listed["attachmentGroups"])

        assert visible() == (1, 1)
        time.sleep(plan.deliveries[2].at_s + 0.2)
        assert visible() == (3, 3)
        time.sleep(120 * scale)
        assert visible() == (6, 6) and len(world.layer.photos()) == 6
