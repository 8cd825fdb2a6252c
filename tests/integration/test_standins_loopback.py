"""The loopback stand-ins over real HTTP: answers, faults and counters, and clean stops.

Schedules run compressed (a small ``time_scale``); what is asserted is the stand-in's own
schedule time (its log), never how long the wall clock took.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import threading
import time
from typing import List
from urllib.parse import urlsplit

import pytest
import requests

from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.drill.standins import (FaultSchedule, FeatureLayerStandIn, PhotoHost,
                                              Reply, Request, StandInServer, Survey123Sender,
                                              VisionStandIn, fake_jpeg)
from fme_ai_resilience.drill.standins.server import THREAD_PREFIX
from fme_ai_resilience.drill.standins.vision import (CONSTANT_CONFIDENCE,
                                                     DRIFTED_MODEL_VERSION, OUTCOMES)
from fme_ai_resilience.core.errors import DownloadError, ErrorClass, FormatError
from fme_ai_resilience.core.intake.keys import compose_key, normalise_global_id
from fme_ai_resilience.services.vision import DownloadPolicy, fetch_photo
from fme_ai_resilience.services.vision.builders import Credentials, build_request
from fme_ai_resilience.services.vision.client import VisionClient
from fme_ai_resilience.core.vision.providers import normalize
from fme_ai_resilience.core.intake.survey123 import parse_webhook
from fme_ai_resilience.core.resilience.timeouts import TimeoutBudget

def policy_for(url):
    """Loopback allowed (plain http, private addresses) on the stand-in's port only."""
    return DownloadPolicy(allowed_hosts=(f"127.0.0.1:{urlsplit(url).port}",),
                          allow_http_hosts=("127.0.0.1",), allow_private_hosts=("127.0.0.1",),
                          connect_s=2.0, ttfb_s=2.0, body_s=2.0)
PHOTOS = [fake_jpeg(f"photo-{i}") for i in range(6)]


def post_image(vision: VisionStandIn, image: bytes, **kwargs) -> requests.Response:
    return requests.post(vision.endpoint, data=image,
                         headers={"Content-Type": "application/octet-stream"}, timeout=5,
                         **kwargs)


def post_until_stopped(vision: VisionStandIn, image: bytes) -> None:
    """Post ``image`` and wait for an answer that stop() cuts short."""
    try:
        post_image(vision, image)
    except requests.ConnectionError:
        pass


def standin_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]


class Receiver(StandInServer):
    """A webhook receiver that keeps every request and answers ``statuses[i]`` to the i-th."""

    kind = "receiver"

    def __init__(self, statuses=(202,)) -> None:
        super().__init__()
        self.statuses = list(statuses)
        self.requests: List[Request] = []

    def handle(self, request: Request) -> Reply:
        with self.lock:
            self.requests.append(request)
            status = self.statuses[(len(self.requests) - 1) % len(self.statuses)]
        return Reply.json(status, {"status": status})


# --- the Vision AI stand-in ----------------------------------------------------------------------

def test_vision_answers_each_photo_with_its_ground_truth_every_time():
    """The same photo always gets the same answer, the truth, readable by normalize("generic")."""
    with VisionStandIn(seed=7) as vision, VisionStandIn(seed=7) as twin:
        answers = [post_image(vision, p).json() for p in PHOTOS + PHOTOS]
        assert answers[:6] == answers[6:]
        assert answers[:6] == [post_image(twin, p).json() for p in PHOTOS]
        for photo, payload in zip(PHOTOS, answers):
            assessment = normalize("generic", payload)
            assert (assessment.condition, assessment.confidence) == vision.truth(photo)
            assert len(assessment.labels) == 3
        counters = vision.snapshot()
    assert counters["total"] == 12 and counters["by_outcome"]["ok"] == 12
    assert set(counters["by_outcome"]) == set(OUTCOMES)
    assert sorted(counters["analysed_by_sha256"].values()) == [2] * 6


def test_vision_fetches_an_image_url_on_loopback_and_answers_as_for_the_bytes():
    """A JSON ``image_url`` body is fetched and answered like the bytes, counted by their hash."""
    with PhotoHost(seed=2) as photos, VisionStandIn() as vision:
        url = photos.add("pole.jpg")
        by_url = requests.post(vision.endpoint, json={"image_url": url}, timeout=5)
        by_bytes = post_image(vision, photos.data("pole.jpg"))
        assert by_url.status_code == 200 and by_url.json() == by_bytes.json()
        assert photos.snapshot()["downloads"] == {"pole.jpg": 1}
        missing = requests.post(vision.endpoint, json={"image_url": url + "x"}, timeout=5)
        remote = requests.post(vision.endpoint, json={"image_url": "http://example.com/a.jpg"},
                               timeout=5)
        counters = vision.snapshot()
    assert missing.status_code == 400 and remote.status_code == 400
    assert missing.json()["error"]["code"] == "InvalidImageUrl"
    assert list(counters["by_sha256"].values()) == [2]
    assert counters["by_outcome"]["bad_request"] == 2


def test_vision_takes_the_request_the_library_builds_and_checks_its_token():
    """``build_request("generic", ...)`` is understood; a wrong bearer token is a 401."""
    with VisionStandIn(token="vision-key") as vision:
        good = build_request("generic", vision.endpoint, PHOTOS[0],
                             Credentials(token="vision-key"))
        bad = build_request("generic", vision.endpoint, PHOTOS[0], Credentials(token="nope"))
        answers = [requests.post(r.url, data=r.body, headers=dict(r.headers), timeout=5)
                   for r in (good, bad)]
        counters = vision.snapshot()["by_outcome"]
    assert [a.status_code for a in answers] == [200, 401]
    assert normalize("generic", answers[0].json()).condition == vision.truth(PHOTOS[0])[0]
    assert (counters["ok"], counters["unauthorized"]) == (1, 1)


def test_vision_reads_chunked_bodies_and_keep_alive_connections():
    """A chunked upload and several calls on one pooled connection are read like any other."""
    with VisionStandIn() as vision, requests.Session() as session:
        headers = {"Content-Type": "application/octet-stream"}
        chunked = session.post(vision.endpoint, data=iter([PHOTOS[0][:100], PHOTOS[0][100:]]),
                               headers=headers, timeout=5)
        plain = [session.post(vision.endpoint, data=p, headers=headers, timeout=5)
                 for p in PHOTOS[:3]]
        connections = {t.name for t in standin_threads() if "-conn-" in t.name}
    assert chunked.json() == plain[0].json()
    assert [normalize("generic", a.json()).condition for a in plain] == [
        vision.truth(p)[0] for p in PHOTOS[:3]]
    assert len(connections) == 1


def test_vision_refuses_what_is_not_an_image():
    """Non-image bytes, an empty body and a GET are 400/405 answers counted as bad requests."""
    with VisionStandIn() as vision:
        statuses = [post_image(vision, b'{"error": {"code": 498}}').status_code,
                    post_image(vision, b"").status_code,
                    requests.get(vision.endpoint, timeout=5).status_code]
        counters = vision.snapshot()
    assert statuses == [400, 400, 405]
    assert counters["by_outcome"]["bad_request"] == 3
    assert counters["analysed_by_sha256"] == {}


def test_transient_server_errors_are_json_500_or_503():
    """At error_rate 1 every call is a 500 or 503 with a JSON error body."""
    with VisionStandIn(FaultSchedule(error_rate=1.0)) as vision:
        answers = [post_image(vision, p) for p in PHOTOS]
        counters = vision.snapshot()
    assert {a.status_code for a in answers} <= {500, 503}
    assert all("message" in a.json()["error"] for a in answers)
    assert counters["by_outcome"]["server_error"] == 6
    assert counters["analysed_by_sha256"] == {}


def test_a_proxy_502_is_an_html_page():
    """At html_502_rate 1 every call is a text/html 502 page, not JSON."""
    with VisionStandIn(FaultSchedule(html_502_rate=1.0)) as vision:
        answer = post_image(vision, PHOTOS[0])
        assert vision.snapshot()["by_outcome"]["html_502"] == 1
    assert answer.status_code == 502
    assert answer.headers["Content-Type"].startswith("text/html")
    assert b"<title>502 Bad Gateway</title>" in answer.content
    with pytest.raises(ValueError):
        answer.json()


def test_a_short_truncated_answer_is_half_a_json_body_with_a_matching_length():
    """``short`` truncation: HTTP 200, a Content-Length that matches, JSON cut mid-way."""
    with VisionStandIn(FaultSchedule(truncated_rate=1.0, truncated_mode="short")) as vision:
        answer = post_image(vision, PHOTOS[0])
        assert vision.snapshot()["by_outcome"]["truncated"] == 1
    assert answer.status_code == 200
    assert int(answer.headers["Content-Length"]) == len(answer.content)
    assert answer.content.startswith(b'{"condition":')
    with pytest.raises(ValueError):
        json.loads(answer.content)


def test_a_closed_truncated_answer_promises_more_than_it_sends():
    """``close`` truncation: the connection closes before the Content-Length it announced."""
    with VisionStandIn(FaultSchedule(truncated_rate=1.0, truncated_mode="close")) as vision:
        conn = http.client.HTTPConnection("127.0.0.1", vision.port, timeout=5)
        conn.request("POST", "/analyze", PHOTOS[0], {"Content-Type": "application/octet-stream"})
        answer = conn.getresponse()
        with pytest.raises(http.client.IncompleteRead) as info:
            answer.read()
        conn.close()
    assert answer.status == 200
    assert 0 < len(info.value.partial) < int(answer.getheader("Content-Length"))


def test_the_fault_mix_repeats_per_photo_whatever_the_interleaving():
    """Each photo's n-th call gets the same fault in every run, in whatever order photos come."""
    schedule = FaultSchedule(error_rate=0.3, html_502_rate=0.2, truncated_rate=0.2,
                             truncated_mode="short")

    def outcomes(order):
        with VisionStandIn(schedule, seed=11) as vision:
            for photo in order:
                post_image(vision, photo)
            log = vision.snapshot()["log"]
        by_photo = {}
        for _, sha, outcome in log:
            by_photo.setdefault(sha, []).append(outcome)
        return by_photo, log

    first, log = outcomes(PHOTOS * 4)
    second, _ = outcomes(list(reversed(PHOTOS)) * 4)
    assert first == second
    seen = {o for _, _, o in log}
    assert {"ok", "server_error"} <= seen and len(seen) >= 3
    assert [t for t, _, _ in log] == sorted(t for t, _, _ in log)


def test_over_the_rate_limit_is_a_429_with_retry_after_in_whole_seconds():
    """Past the token bucket the answer is 429 with Retry-After as whole seconds, at least 1."""
    with VisionStandIn(FaultSchedule(rate_limit_per_s=0.5, rate_limit_burst=2)) as vision:
        answers = [post_image(vision, p) for p in PHOTOS[:4]]
        counters = vision.snapshot()["by_outcome"]
    assert [a.status_code for a in answers] == [200, 200, 429, 429]
    for refused in answers[2:]:
        assert refused.headers["Retry-After"] in ("1", "2")
        assert "error" in refused.json()
    assert (counters["ok"], counters["rate_limited"]) == (2, 2)


def test_retry_after_ms_gives_the_wait_in_real_milliseconds():
    """With retry_after_ms the 429 says retry-after-ms, scaled to real time, which the
    library's header reader takes; no Retry-After in schedule seconds beside it."""
    from fme_ai_resilience.core.resilience.backoff import retry_after_from_headers

    # One call per 1000 schedule seconds (10 real seconds): the second call comes before the
    # bucket refills even on a busy machine.
    with VisionStandIn(FaultSchedule(rate_limit_per_s=0.001, rate_limit_burst=1),
                       time_scale=0.01, retry_after_ms=True) as vision:
        answers = [post_image(vision, p) for p in PHOTOS[:2]]
    refused = answers[1]
    assert refused.status_code == 429 and "Retry-After" not in refused.headers
    wait_s = retry_after_from_headers(refused.headers, None, now=0.0)
    assert 0.001 <= wait_s <= 10.01                 # up to 1000 schedule seconds x 0.01


def test_the_peak_of_calls_answered_at_once_is_counted():
    """Three slow calls at once: the peak says 3, and nothing is in flight afterwards. The
    calls start together and last 2 s, so a thread that starts late on a busy machine still
    overlaps the others."""
    with VisionStandIn(FaultSchedule(latency_s=2.0)) as vision:
        together = threading.Barrier(3)

        def call(image):
            together.wait()
            post_image(vision, image)

        threads = [threading.Thread(target=call, args=(p,)) for p in PHOTOS[:3]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        peak = vision.snapshot()["peak_in_flight"]
        after = vision.concurrency()["in_flight"]
        vision.reset()
        reset = vision.snapshot()["peak_in_flight"]
    assert (peak, after, reset) == (3, 0, 0)


def test_a_service_at_capacity_queues_the_calls_past_it():
    """Capacity 2, three calls of 2 s at once: two are computed at once, the third waits for
    a place (its answer comes after about two latencies), and all three count in flight. The
    margins are half a latency (1 s) either way, for a thread that starts late on a busy
    machine."""
    with VisionStandIn(FaultSchedule(latency_s=2.0, capacity=2)) as vision:
        took = []
        together = threading.Barrier(3)

        def timed(image):
            together.wait()
            began = time.monotonic()
            assert post_image(vision, image).status_code == 200
            took.append(time.monotonic() - began)

        threads = [threading.Thread(target=timed, args=(p,)) for p in PHOTOS[:3]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        peak = vision.snapshot()["peak_in_flight"]
    assert peak == 3
    assert sorted(took)[-1] >= 3.0 and sorted(took)[1] < 3.0


def test_slow_photos_and_a_latency_profile_set_the_time_to_the_first_byte():
    """A slow photo takes ``slow_photo_latency_s``; the others follow the latency profile
    (the bounds 1.5 s apart and wider, for a busy machine)."""
    schedule = FaultSchedule(latency_profile=[(0, 0.05), (1000, 0.05)], slow_photo_rate=0.5,
                             slow_photo_latency_s=4.0)
    with VisionStandIn(schedule, seed=3) as vision:
        slow = [p for p in PHOTOS if vision.slow(p)]
        fast = [p for p in PHOTOS if not vision.slow(p)]
        assert slow and fast
        for photo, least, most in ((slow[0], 3.98, 8.0), (fast[0], 0.0, 2.5)):
            began = time.monotonic()
            assert post_image(vision, photo).status_code == 200
            assert least <= time.monotonic() - began <= most


def test_a_photo_s_first_answers_are_cut_then_it_is_answered():
    """A photo drawn for cuts gets its first ``cut_count`` answers cut short (200 and half a
    JSON body), then whole answers."""
    schedule = FaultSchedule(cut_photo_rate=1.0, cut_answers=3, truncated_mode="short")
    with VisionStandIn(schedule, seed=5) as vision:
        photo = PHOTOS[0]
        cuts = vision.cut_count(photo)
        bodies = [post_image(vision, photo).content for _ in range(cuts + 2)]
        counted = vision.snapshot()["by_outcome"]
    assert 1 <= cuts <= 3
    for body in bodies[:cuts]:
        with pytest.raises(ValueError):
            json.loads(body)
    assert all(json.loads(body)["condition"] for body in bodies[cuts:])
    assert (counted["truncated"], counted["ok"]) == (cuts, 2)


def test_an_outage_window_answers_503_by_schedule_time():
    """Every call that arrives inside the outage (by schedule time) is a 503, none outside.
    Two real seconds before it and two inside it, whatever a busy machine's stall."""
    schedule = FaultSchedule(outages=[(100.0, 200.0)])
    with VisionStandIn(schedule, time_scale=0.02) as vision:
        answers = []
        vision.restart_schedule()
        while vision.schedule_time() < 230:
            answers.append(post_image(vision, PHOTOS[0]).status_code)
            time.sleep(0.01)
        counters = vision.snapshot()
    log = counters["log"]
    inside = [outcome for at_s, _, outcome in log if 100.0 <= at_s < 200.0]
    outside = [outcome for at_s, _, outcome in log if not 100.0 <= at_s < 200.0]
    assert inside and set(inside) == {"outage"}
    assert any(at_s < 100.0 for at_s, _, _ in log) and any(at_s >= 200.0 for at_s, _, _ in log)
    assert set(outside) == {"ok"}
    assert counters["outages"] == [{"start_s": 100.0, "end_s": 200.0, "calls": len(inside)}]
    assert answers.count(503) == len(inside) == counters["by_outcome"]["outage"]


def test_drift_renames_confidence_and_the_generic_mapping_refuses_it():
    """From drift_from_s on the answer says ``score``: normalize("generic") raises FormatError."""
    with VisionStandIn(FaultSchedule(drift_from_s=40.0), time_scale=0.05) as vision:
        vision.restart_schedule()                                     # 2 real s before it
        before = post_image(vision, PHOTOS[0]).json()
        while vision.schedule_time() < 42.0:
            time.sleep(0.02)
        after = post_image(vision, PHOTOS[0]).json()
        log = vision.snapshot()["log"]
    assert [o for _, _, o in log] == ["ok", "drift"] and log[0][0] < 40.0 <= log[1][0]
    normalize("generic", before)
    assert "score" in after and "confidence" not in after
    assert after["model_version"] == DRIFTED_MODEL_VERSION
    with pytest.raises(FormatError):
        normalize("generic", after)


def test_a_drift_rate_drifts_a_stable_share_of_the_photos():
    """Under drift_rate the same photos drift on every call, the others never do."""
    photos = [fake_jpeg(f"drift/{i}", seed=3) for i in range(40)]
    with VisionStandIn(FaultSchedule(drift_rate=0.25), seed=3) as vision:
        first = ["score" in post_image(vision, p).json() for p in photos]
        again = ["score" in post_image(vision, p).json() for p in photos]
    assert first == again == [vision.drifts(p) for p in photos]
    assert 4 <= sum(first) <= 16


def test_constant_confidence_is_caught_by_the_label_check():
    """From constant_confidence_from_s on every label has one confidence: a FormatError."""
    with VisionStandIn(FaultSchedule(constant_confidence_from_s=0.0)) as vision:
        payload = post_image(vision, PHOTOS[0]).json()
        assert vision.snapshot()["by_outcome"]["constant"] == 1
    assert {lab["confidence"] for lab in payload["labels"]} == {CONSTANT_CONFIDENCE}
    assert payload["confidence"] == CONSTANT_CONFIDENCE
    with pytest.raises(FormatError) as info:
        normalize("generic", payload)
    assert any("(constant)" in e for e in info.value.errors)


def test_the_library_client_classifies_every_fault_of_the_stand_in():
    """VisionClient reads each stand-in fault as the class the pipeline must act on."""
    cases = [(FaultSchedule(), None), (FaultSchedule(error_rate=1.0), ErrorClass.SERVER_ERROR),
             (FaultSchedule(html_502_rate=1.0), ErrorClass.SERVER_ERROR),
             (FaultSchedule(truncated_rate=1.0, truncated_mode="short"), ErrorClass.TRUNCATED),
             (FaultSchedule(truncated_rate=1.0, truncated_mode="close"), ErrorClass.TRUNCATED),
             (FaultSchedule(drift_from_s=0.0), ErrorClass.BAD_FORMAT),
             (FaultSchedule(constant_confidence_from_s=0.0), ErrorClass.BAD_FORMAT),
             (FaultSchedule(outages=[(0.0, 1e6)]), ErrorClass.SERVER_ERROR)]
    budget = TimeoutBudget(connect_s=2.0, ttfb_s=2.0, body_s=2.0)
    for schedule, expected in cases:
        with VisionStandIn(schedule) as vision:
            outcome = VisionClient(vision.endpoint, "generic", timeouts=budget).analyze(
                PHOTOS[1], "0af7651916cd43dd8448eb211c80319c")
        assert outcome.error_class is expected, schedule
        if expected is None:
            assert outcome.assessment.condition == vision.truth(PHOTOS[1])[0]
    with VisionStandIn(FaultSchedule(rate_limit_per_s=0.2, rate_limit_burst=1)) as vision:
        client = VisionClient(vision.endpoint, "generic", timeouts=budget)
        client.analyze(PHOTOS[1], "0af7651916cd43dd8448eb211c80319c")
        limited = client.analyze(PHOTOS[1], "0af7651916cd43dd8448eb211c80319c")
    assert limited.error_class is ErrorClass.RATE_LIMITED
    assert limited.retry_after_s in (4.0, 5.0)
    with VisionStandIn(FaultSchedule(latency_s=30.0)) as vision:
        slow = VisionClient(vision.endpoint, "generic", timeouts=TimeoutBudget(
            connect_s=2.0, ttfb_s=0.2, body_s=2.0)).analyze(
                PHOTOS[1], "0af7651916cd43dd8448eb211c80319c")
    assert slow.error_class is ErrorClass.TTFB_TIMEOUT


def test_latency_outlasts_a_short_read_timeout_and_stop_cuts_it_short():
    """A slow model trips the client's read timeout; stop() does not wait for the sleep."""
    vision = VisionStandIn(FaultSchedule(latency_s=30.0, latency_jitter_s=5.0)).start()
    try:
        with pytest.raises(requests.exceptions.ReadTimeout):
            requests.post(vision.endpoint, data=PHOTOS[0], timeout=(2, 0.2),
                          headers={"Content-Type": "application/octet-stream"})
    finally:
        vision.stop()
    assert vision.snapshot()["by_outcome"]["ok"] == 1
    assert standin_threads() == []


def test_an_answer_whose_client_left_is_noted_at_once_and_one_sent_whole_too():
    """A client that closes its connection while the model thinks (a process killed mid-call
    closes every socket it held) is seen leaving at once, never at the answer's end; an
    answer read whole is noted as sent; stop() cutting a wait short is neither."""
    vision = VisionStandIn(FaultSchedule(latency_s=30.0)).start()
    try:
        with pytest.raises(requests.exceptions.ReadTimeout):
            requests.post(vision.endpoint, data=PHOTOS[0], timeout=(2, 0.2),
                          headers={"Content-Type": "application/octet-stream"})
        deadline = time.monotonic() + 10
        while not vision.snapshot()["left"] and time.monotonic() < deadline:
            time.sleep(0.02)
        (left,) = vision.snapshot()["left"]
        assert left[1:] == (hashlib.sha256(PHOTOS[0]).hexdigest(), "ok")
        assert vision.snapshot()["sent"] == []
        threading.Thread(target=post_until_stopped, args=(vision, PHOTOS[1]),
                         daemon=True).start()
        while vision.concurrency()["in_flight"] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        vision.stop()
    assert len(vision.snapshot()["left"]) == 1          # the stop is not a client leaving
    fast = VisionStandIn().start()
    try:
        assert post_image(fast, PHOTOS[2]).status_code == 200
    finally:
        fast.stop()
    (sent,) = fast.snapshot()["sent"]
    assert sent[1:] == (hashlib.sha256(PHOTOS[2]).hexdigest(), "ok") and not fast.snapshot()["left"]


def test_answers_are_noted_when_the_client_closes_their_connection_never_at_a_stop():
    """A client that keeps its connection (a living engine) leaves its answers unmarked; when
    it closes it (a killed process closes every socket it held), every answer that went out
    whole on it is noted, at the close; stop() ending a kept connection is not a client's."""
    headers = {"Content-Type": "application/octet-stream"}
    vision = VisionStandIn().start()
    kept = requests.Session()
    try:
        with requests.Session() as engine:
            for photo in PHOTOS[:2]:
                assert engine.post(vision.endpoint, data=photo, headers=headers,
                                   timeout=5).status_code == 200
            deadline = time.monotonic() + 10      # an answer is noted sent once it left
            while len(vision.snapshot()["sent"]) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.3)
            assert vision.snapshot()["closed"] == [] and len(vision.snapshot()["sent"]) == 2
            closing = time.monotonic()
        deadline = time.monotonic() + 10
        while len(vision.snapshot()["closed"]) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        closed = vision.snapshot()["closed"]
        assert sorted(sha for _, sha, _ in closed) == sorted(
            hashlib.sha256(p).hexdigest() for p in PHOTOS[:2])
        assert all(at >= closing and outcome == "ok" for at, _, outcome in closed)
        assert kept.post(vision.endpoint, data=PHOTOS[2], headers=headers,
                         timeout=5).status_code == 200
    finally:
        vision.stop()
        kept.close()
    assert len(vision.snapshot()["closed"]) == 2


def test_reset_zeroes_the_counters_and_replays_the_same_answers():
    """After reset() the counters are empty and the same calls get the same faults again."""
    with VisionStandIn(FaultSchedule(error_rate=0.5), seed=3) as vision:
        first = [post_image(vision, p).status_code for p in PHOTOS]
        vision.reset()
        assert vision.snapshot()["total"] == 0 and vision.snapshot()["log"] == []
        again = [post_image(vision, p).status_code for p in PHOTOS]
    assert first == again and {200, 500, 503} & set(first)


# --- the photo host ------------------------------------------------------------------------------

def test_the_photo_host_serves_deterministic_jpegs():
    """Each name serves the same JPEG-looking bytes on every host with the seed, distinct names."""
    with PhotoHost(seed=4) as host, PhotoHost(seed=4) as twin:
        urls = [host.add(f"p{i}.jpg") for i in range(3)]
        twin_urls = [twin.add(f"p{i}.jpg") for i in range(3)]
        got = [requests.get(u, timeout=5) for u in urls]
        assert [g.content for g in got] == [requests.get(u, timeout=5).content for u in twin_urls]
        given = host.add("given.jpg", b"\xff\xd8\xff\xe0given")
        assert requests.get(given, timeout=5).content == b"\xff\xd8\xff\xe0given"
        counters = host.snapshot()
    assert len({g.content for g in got}) == 3
    assert all(g.content.startswith(b"\xff\xd8\xff") for g in got)
    assert all(g.headers["Content-Type"] == "image/jpeg" for g in got)
    assert counters["downloads"] == {"p0.jpg": 1, "p1.jpg": 1, "p2.jpg": 1, "given.jpg": 1}


def test_missing_photos_are_404_and_token_errors_are_http_200_with_498():
    """missing() answers 404, token_error() ArcGIS's HTTP-200 498 JSON; each is counted."""
    with PhotoHost() as host:
        gone, expired = host.add("gone.jpg"), host.add("expired.jpg")
        host.missing("gone.jpg")
        host.token_error("expired.jpg")
        answers = [requests.get(u, timeout=5) for u in (gone, expired, host.url_for("never"))]
        with pytest.raises(DownloadError) as info:
            fetch_photo(expired, "portal-token", policy_for(expired))
        host.restore("expired.jpg")
        assert fetch_photo(expired, None, policy_for(expired)).content == host.data("expired.jpg")
        counters = host.snapshot()
    assert [a.status_code for a in answers] == [404, 200, 404]
    assert answers[1].json()["error"]["code"] == 498
    assert info.value.error_class is ErrorClass.AUTH
    assert counters["by_name"]["expired.jpg"] == {"token_error": 2, "ok": 1}
    assert counters["by_outcome"]["not_found"] == 2


def test_a_photo_host_with_a_token_wants_it_in_the_header():
    """Only ``X-Esri-Authorization: Bearer`` opens the photos; a token in the URL is counted."""
    with PhotoHost(token="tok-1") as host:
        url = host.add("a.jpg")
        bare = requests.get(url, timeout=5)
        in_query = requests.get(url + "?token=tok-1", timeout=5)
        photo = fetch_photo(url, "tok-1", policy_for(url))
        counters = host.snapshot()
    assert bare.json()["error"]["code"] == 498 and in_query.json()["error"]["code"] == 498
    assert photo.content.startswith(b"\xff\xd8\xff")
    assert counters["by_outcome"]["unauthorized"] == 2 and counters["by_outcome"]["ok"] == 1
    assert counters["token_in_query"] == 1


# --- the feature layer ---------------------------------------------------------------------------

def query(layer: FeatureLayerStandIn, **params) -> dict:
    params.setdefault("f", "json")
    return requests.get(layer.layer_url + "/query", params=params, timeout=5).json()


def test_queries_page_with_exceeded_transfer_limit():
    """Pages of max_record_count features say exceededTransferLimit until the last one."""
    with FeatureLayerStandIn(max_record_count=2) as layer:
        records = [layer.add_feature() for _ in range(5)]
        pages, offset = [], 0
        while True:
            page = query(layer, where="1=1", outFields="objectid,globalid",
                         returnGeometry="false", resultOffset=offset, resultRecordCount=10)
            pages.append(page)
            offset += len(page["features"])
            if not page.get("exceededTransferLimit"):
                break
        count = query(layer, where="1=1", returnCountOnly="true")
        ids = query(layer, where="1=1", returnIdsOnly="true")
        assert layer.snapshot()["queries"] == 5
    assert [len(p["features"]) for p in pages] == [2, 2, 1]
    assert [p.get("exceededTransferLimit") for p in pages] == [True, True, None]
    got = [f["attributes"]["globalid"] for p in pages for f in p["features"]]
    assert got == [r.global_id for r in records]
    assert "geometry" not in pages[0]["features"][0]
    assert count == {"count": 5}
    assert ids == {"objectIdFieldName": "objectid", "objectIds": [1, 2, 3, 4, 5]}


def test_a_creation_date_window_selects_the_features_submitted_in_it():
    """``CreationDate >= timestamp .. AND < timestamp ..`` (GET or POST form) on epoch ms, UTC."""
    day = 1_795_996_800_000   # 2026-11-30 00:00:00 UTC
    with FeatureLayerStandIn() as layer:
        for offset_h in (-1, 0, 5, 24):
            layer.add_feature(created_at_ms=day + offset_h * 3_600_000)
        where = ("CreationDate >= timestamp '2026-11-30 00:00:00' AND "
                 "CreationDate < timestamp '2026-12-01 00:00:00'")
        by_get = query(layer, where=where, outFields="*", orderByFields="CreationDate DESC")
        by_post = requests.post(layer.layer_url + "/query", timeout=5, data={
            "where": where, "outFields": "objectid", "f": "json"}).json()
    assert [f["attributes"]["CreationDate"] for f in by_get["features"]] == [
        day + 5 * 3_600_000, day]
    assert [f["attributes"]["objectid"] for f in by_post["features"]] == [2, 3]
    assert by_get["features"][0]["geometry"]["spatialReference"] == {"wkid": 4326}


def test_a_globalid_list_matches_in_any_case_and_braces():
    """``globalid IN ('{..}', ..)`` finds features however the GlobalIDs are spelt."""
    with FeatureLayerStandIn() as layer:
        records = [layer.add_feature() for _ in range(3)]
        wanted = [records[0].global_id.lower(), records[2].global_id.strip("{}")]
        where = "globalid IN (" + ", ".join(f"'{g}'" for g in wanted) + ")"
        found = query(layer, where=where, outFields="globalid")
    assert [f["attributes"]["globalid"] for f in found["features"]] == [
        records[0].global_id, records[2].global_id]


def test_errors_are_http_200_with_an_arcgis_error_object():
    """An unreadable where is code 400 and a missing or wrong token 498, both in HTTP 200."""
    with FeatureLayerStandIn(token="layer-token") as layer:
        headers = {"X-Esri-Authorization": "Bearer layer-token"}
        unreadable = requests.get(layer.layer_url + "/query", headers=headers, timeout=5,
                                  params={"where": "CreationDate >> 3", "f": "json"})
        unknown = requests.get(layer.layer_url + "/query", headers=headers, timeout=5,
                               params={"where": "1=1", "outFields": "nope", "f": "json"})
        no_token = requests.get(layer.layer_url + "/query", params={"where": "1=1"}, timeout=5)
        wrong = requests.get(layer.layer_url + "/query", params={"where": "1=1"}, timeout=5,
                             headers={"X-Esri-Authorization": "Bearer other"})
        fine = requests.get(layer.layer_url + "/query", params={"where": "1=1"}, timeout=5,
                            headers=headers)
        counters = layer.snapshot()
    assert {a.status_code for a in (unreadable, unknown, no_token, wrong)} == {200}
    assert [a.json()["error"]["code"] for a in (unreadable, unknown, no_token, wrong)] == [
        400, 400, 498, 498]
    assert fine.json()["features"] == []
    assert counters["unauthorized"] == 2


def test_query_attachments_groups_photos_by_feature():
    """queryAttachments by object ids, parent GlobalIDs or an expression; urls on returnUrl."""
    with FeatureLayerStandIn() as layer:
        one, two, none = (layer.add_feature(photos=n) for n in (1, 2, 0))
        url = layer.layer_url + "/queryAttachments"
        by_oid = requests.get(url, params={"objectIds": "1,2,3", "returnUrl": "true",
                                           "f": "json"}, timeout=5).json()
        by_gid = requests.post(url, data={"globalIds": two.global_id.lower(), "f": "json"},
                               timeout=5).json()
        by_expr = requests.get(url, params={"definitionExpression": "objectid < 2",
                                            "attachmentTypes": "image/jpeg", "f": "json"},
                               timeout=5).json()
        neither = requests.get(url, params={"f": "json"}, timeout=5).json()
        assert layer.snapshot()["query_attachments"] == 4
    assert [g["parentObjectId"] for g in by_oid["attachmentGroups"]] == [1, 2]
    infos = by_oid["attachmentGroups"][1]["attachmentInfos"]
    assert [i["globalId"] for i in infos] == [a.global_id for a in two.attachments]
    assert [i["url"] for i in infos] == [a.url for a in two.attachments]
    assert infos[0]["size"] == two.attachments[0].size
    assert by_gid["attachmentGroups"][0]["parentGlobalId"] == two.global_id
    assert "url" not in by_gid["attachmentGroups"][0]["attachmentInfos"][0]
    assert [g["parentGlobalId"] for g in by_expr["attachmentGroups"]] == [one.global_id]
    assert neither["error"]["code"] == 400
    assert none.attachments == ()


def test_attachments_are_listed_and_downloaded_as_jpeg():
    """``/<oid>/attachments`` lists infos, ``/<oid>/attachments/<id>`` serves the bytes."""
    with FeatureLayerStandIn(token="t") as layer:
        record = layer.add_feature(photos=[PHOTOS[0], PHOTOS[1]])
        headers = {"X-Esri-Authorization": "Bearer t"}
        infos = requests.get(f"{record.layer_url}/{record.object_id}/attachments",
                             headers=headers, params={"f": "json"}, timeout=5).json()
        photo = fetch_photo(record.attachments[1].url, "t", policy_for(record.attachments[1].url))
        unknown = requests.get(f"{record.layer_url}/{record.object_id}/attachments/999",
                               headers=headers, timeout=5).json()
        with pytest.raises(DownloadError) as info:
            fetch_photo(record.attachments[0].url, "expired", policy_for(record.attachments[0].url))
        counters = layer.snapshot()
    assert [i["id"] for i in infos["attachmentInfos"]] == [a.id for a in record.attachments]
    assert photo.content == PHOTOS[1] and photo.content_type == "image/jpeg"
    assert unknown["error"]["code"] == 404
    assert info.value.error_class is ErrorClass.AUTH
    assert counters["attachment_downloads"] == {record.attachments[1].id: 1}


def apply_edits(layer, updates, **params) -> dict:
    data = {"updates": json.dumps(updates), "useGlobalIds": "true", "f": "json", **params}
    return requests.post(layer.layer_url + "/applyEdits", data=data, timeout=5).json()


def test_apply_edits_counts_the_writes_per_globalid():
    """Each written row counts for its feature's GlobalID; the last attributes are kept."""
    clock = FakeClock(start=1_796_000_000.0)
    with FeatureLayerStandIn(fields=("ai_condition", "ai_confidence"), clock=clock) as layer:
        first, second = layer.add_feature(), layer.add_feature()
        clock.advance(60)
        answer = apply_edits(layer, [
            {"attributes": {"globalid": first.global_id.lower(), "ai_condition": "fair"}},
            {"attributes": {"GlobalID": second.global_id, "ai_condition": "good",
                            "ai_confidence": 0.91}}])
        again = apply_edits(layer, [{"attributes": {"globalid": first.global_id,
                                                    "ai_condition": "damaged"}}])
        counters = layer.snapshot()
        now = layer.attributes_of(first.global_id)
        shown = query(layer, where=f"globalid = '{first.global_id}'", outFields="ai_condition")
    assert [r["success"] for r in answer["updateResults"] + again["updateResults"]] == [True] * 3
    assert answer["updateResults"][0]["globalId"] == first.global_id
    assert counters["apply_edits"] == 2
    assert counters["writes"] == {first.global_id: 2, second.global_id: 1}
    assert counters["last_written"][first.global_id] == {"globalid": first.global_id,
                                                         "ai_condition": "damaged"}
    assert now["ai_condition"] == "damaged" and now["EditDate"] == 1_796_000_060_000
    assert now["CreationDate"] == 1_796_000_000_000
    assert shown["features"][0]["attributes"] == {"ai_condition": "damaged"}


def test_apply_edits_fails_an_unknown_globalid_and_rolls_back_by_default():
    """An unknown GlobalID fails its row (1019); with rollbackOnFailure nothing is written."""
    unknown = "{0A0A0A0A-0000-4000-8000-00000000FFFF}"
    with FeatureLayerStandIn(fields=("ai_condition",)) as layer:
        known = layer.add_feature()
        rows = [{"attributes": {"globalid": known.global_id, "ai_condition": "good"}},
                {"attributes": {"globalid": unknown, "ai_condition": "good"}}]
        rolled = apply_edits(layer, rows)
        assert layer.snapshot()["writes"] == {}
        partial = apply_edits(layer, rows, rollbackOnFailure="false")
        field = apply_edits(layer, [{"attributes": {"globalid": known.global_id,
                                                    "ai_conditon": "good"}}])
        counters = layer.snapshot()
    assert [r["success"] for r in rolled["updateResults"]] == [False, False]
    assert [r["error"]["code"] for r in rolled["updateResults"]] == [1003, 1019]
    assert [r["success"] for r in partial["updateResults"]] == [True, False]
    assert field["updateResults"][0]["error"]["code"] == 1000
    assert counters["writes"] == {known.global_id: 1}
    assert counters["failed_rows"] == 3


def test_recreate_makes_new_globalids_with_the_same_photo_bytes():
    """Survey123 re-creating a feature: new feature and attachment GlobalIDs, the same bytes."""
    with FeatureLayerStandIn() as layer:
        original = layer.add_feature(photos=2)
        copy = layer.recreate(original)
    assert copy.global_id != original.global_id and copy.object_id != original.object_id
    assert {a.global_id for a in copy.attachments}.isdisjoint(
        a.global_id for a in original.attachments)
    assert [a.sha256 for a in copy.attachments] == [a.sha256 for a in original.attachments]
    assert {k: v for k, v in copy.attributes.items() if k not in ("objectid", "globalid")} == \
        {k: v for k, v in original.attributes.items() if k not in ("objectid", "globalid")}


def test_the_same_seed_builds_the_same_layer():
    """GlobalIDs, attributes and photos repeat exactly for a seed."""
    def build(seed):
        with FeatureLayerStandIn(seed=seed, clock=FakeClock()) as layer:
            return [(r.global_id, dict(r.attributes), [a.data for a in r.attachments])
                    for r in (layer.add_feature() for _ in range(3))]
    assert build(1) == build(1)
    assert build(1) != build(2)


# --- the Survey123 sender ------------------------------------------------------------------------

def test_webhook_bodies_parse_into_one_submission_per_photo():
    """parse_webhook reads the sender's body: keys from the GlobalIDs, urls at the layer."""
    with FeatureLayerStandIn(token="portal-secret") as layer:
        record = layer.add_feature(photos=2)
        body = Survey123Sender("http://127.0.0.1:9/hook", token="portal-secret").body_for(record)
    submissions = parse_webhook(json.dumps(body))
    feature = normalise_global_id(record.global_id)
    assert [s.idempotency_key for s in submissions] == [
        compose_key(feature, normalise_global_id(a.global_id)) for a in record.attachments]
    assert [s.attachment_url for s in submissions] == [a.url for a in record.attachments]
    assert all(s.portal_token == "portal-secret" and s.question == "photo" for s in submissions)
    assert submissions[0].service_url == record.service_url
    assert submissions[0].layer_url == record.layer_url
    assert submissions[0].asset_type == record.attributes["asset_type"]
    assert body["surveyInfo"]["serviceUrl"] == layer.service_url


@pytest.mark.parametrize("mode", ["null", "absent"])
def test_a_body_without_the_attachment_list_is_one_unknown_submission(mode):
    """With attachments null or absent the body is one ``attachments_unknown`` submission."""
    with FeatureLayerStandIn() as layer:
        record = layer.add_feature(photos=3)
        body = Survey123Sender("http://127.0.0.1:9/hook").body_for(record, attachments=mode)
    assert ("attachments" in body["feature"]) is (mode == "null")
    [submission] = parse_webhook(body)
    assert submission.attachments_unknown
    assert submission.feature_global_id == normalise_global_id(record.global_id)
    assert submission.layer_url == record.layer_url


def test_the_sender_posts_once_per_delivery_with_a_new_delivery_id():
    """Each send and redelivery is one POST with the event header and a fresh delivery UUID."""
    with FeatureLayerStandIn() as layer, Receiver([500]) as receiver:
        record = layer.add_feature()
        sender = Survey123Sender(receiver.url + "/webhook")
        body = sender.body_for(record, event_type="editData", attributes={"crew": "south-9"})
        first = sender.send(body)
        second = sender.redeliver(body)
        seen = list(receiver.requests)
    assert len(seen) == 2   # a 500 is not retried
    assert [r.header("x-survey123-event") for r in seen] == ["editData", "editData"]
    ids = [r.header("x-survey123-delivery") for r in seen]
    assert ids == [first.delivery_id, second.delivery_id] and ids[0] != ids[1]
    assert seen[0].body == seen[1].body and seen[0].path == "/webhook"
    assert seen[0].content_type == "application/json"
    keys = [parse_webhook(r.body, r.headers)[0] for r in seen]
    assert keys[0].idempotency_key == keys[1].idempotency_key
    assert [k.delivery_id for k in keys] == ids
    assert (first.status, second.redelivery, first.lost) == (500, True, True)
    assert first.feature_global_id == record.global_id


def test_a_burst_records_every_status_and_the_lost_deliveries():
    """A concurrent burst delivers every body once; refused ones are counted as lost."""
    with FeatureLayerStandIn() as layer, Receiver([202, 202, 429]) as receiver:
        bodies = [Survey123Sender(receiver.url).body_for(layer.add_feature())
                  for _ in range(12)]
        sender = Survey123Sender(receiver.url, seed=5)
        deliveries = sender.burst(bodies, concurrency=6)
        arrived = len(receiver.requests)
    assert arrived == 12
    assert [d.feature_global_id for d in deliveries] == [
        b["feature"]["attributes"]["globalid"] for b in bodies]
    assert len({d.delivery_id for d in deliveries}) == 12
    snapshot = sender.snapshot()
    assert snapshot["by_status"] == {202: 8, 429: 4}
    assert (snapshot["sent"], snapshot["delivered"], snapshot["lost"]) == (12, 8, 4)


def test_delivery_ids_repeat_for_a_seed():
    """The same seed gives the same sequence of delivery ids, burst or not."""
    with Receiver() as receiver:
        runs = []
        for _ in range(2):
            sender = Survey123Sender(receiver.url, seed=9)
            runs.append([d.delivery_id for d in sender.burst([b"{}"] * 5, concurrency=5)]
                        + [sender.send(b"{}").delivery_id])
    assert runs[0] == runs[1] and len(set(runs[0])) == 6


def test_a_delivery_to_a_receiver_that_is_down_is_lost_not_retried():
    """Connection refused: the delivery has no status, an error, and counts as lost."""
    receiver = Receiver().start()
    url = receiver.url
    receiver.stop()
    sender = Survey123Sender(url, timeout_s=2)
    delivery = sender.send(b'{"eventType": "addData"}')
    assert delivery.status is None and "Connection" in delivery.error
    assert sender.snapshot() == {"sent": 1, "delivered": 0, "lost": 1, "errors": 1,
                                 "redeliveries": 0, "by_status": {}}


# --- lifecycle -----------------------------------------------------------------------------------

def test_stop_leaves_no_thread_behind_even_with_open_keep_alive_connections():
    """stop() ends every connection (a pooled keep-alive one too) and joins every thread."""
    session = requests.Session()
    with VisionStandIn() as vision, PhotoHost() as photos, FeatureLayerStandIn() as layer, \
            Receiver() as receiver:
        session.post(vision.endpoint, data=PHOTOS[0],
                     headers={"Content-Type": "application/octet-stream"})
        session.get(photos.add("a.jpg"))
        session.get(layer.layer_url + "/query", params={"where": "1=1"})
        Survey123Sender(receiver.url).burst([b"{}"] * 4, concurrency=4)
        assert standin_threads()
    session.close()
    assert standin_threads() == []


def test_a_stopped_stand_in_refuses_connections_and_restarts_on_the_same_port():
    """Between stop() and start() connections are refused; the url stays the same."""
    photos = PhotoHost().start()
    try:
        url = photos.add("a.jpg")
        photos.stop()
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(url, timeout=2)
        photos.start()
        assert requests.get(url, timeout=2).status_code == 200
        assert photos.url_for("a.jpg") == url
    finally:
        photos.stop()
    assert standin_threads() == []
