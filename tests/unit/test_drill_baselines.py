"""The drill's baselines, one job at a time over mocked HTTP: how each calls, waits and writes.

Every exchange goes through ``responses``; the clock is a FakeClock, so a wait is recorded,
never slept. The engine pool and the real stand-ins are in
tests/system/test_drill_baselines_loopback.py.
"""
from __future__ import annotations

import json
import random
import sys
from types import SimpleNamespace
from urllib.parse import parse_qs

import pytest
import requests
import responses

from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.drill.baselines import (BASELINES, TENACITY_MISSING, BaselineError,
                                               Progress, pool, run_baseline, run_job,
                                               tenacity_wait)
from fme_ai_resilience.drill.scenarios import Scheduled
from fme_ai_resilience.drill.standins import (AttachmentRecord, FeatureRecord, Survey123Sender,
                                              fake_jpeg)
from fme_ai_resilience.drill.world import WRITEBACK_FIELDS
from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.core.intake.keys import compose_key, normalise_global_id

from helpers.optional_deps import baseline_params, needs_tenacity


SERVICE = "http://127.0.0.1:9/arcgis/rest/services/inspection/FeatureServer"
LAYER = f"{SERVICE}/0"
APPLY_EDITS = f"{LAYER}/applyEdits"
VISION = "http://127.0.0.1:9/analyze"
GID = "{5C1E0A2B-9D3F-4E61-8A7B-0F2C3D4E5A6B}"
OK = {"condition": "fair", "confidence": 0.81, "labels": [{"name": "fair", "confidence": 0.81}],
      "model_version": "standin-vision-1.0"}
WRITTEN = {"updateResults": [{"objectId": 1, "globalId": GID, "success": True}]}


def feature(photos: int = 1, gid: str = GID) -> FeatureRecord:
    attachments = tuple(
        AttachmentRecord(id=i + 1, global_id=f"{{0A0A0A0A-0000-4000-8000-00000000000{i + 1}}}",
                         parent_global_id=gid, parent_object_id=1, name=f"photo-1-{i + 1}.jpg",
                         content_type="image/jpeg", keywords="photo",
                         url=f"{LAYER}/1/attachments/{i + 1}", data=fake_jpeg(f"p{i}"))
        for i in range(photos))
    return FeatureRecord(1, gid, {"objectid": 1, "globalid": gid, "asset_type": "hydrant"},
                         1_790_000_000_000, {"x": 116.3, "y": 39.9}, attachments, SERVICE)


def body_of(record: FeatureRecord) -> dict:
    return Survey123Sender("http://127.0.0.1:9/unused").body_for(record)


def key_of(record: FeatureRecord, i: int = 0) -> str:
    return compose_key(normalise_global_id(record.global_id),
                       normalise_global_id(record.attachments[i].global_id))


@pytest.fixture
def mocked():
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield rsps


def serve(rsps, record, *answers, written=WRITTEN):
    """The photos, the Vision answers in order (the last repeats) and the write-back."""
    for photo in record.attachments:
        rsps.add(responses.GET, photo.url, body=photo.data, content_type="image/jpeg")
    for answer in answers:
        if isinstance(answer, Exception):
            rsps.add(responses.POST, VISION, body=answer)
        elif isinstance(answer, tuple):
            status, headers = answer
            rsps.add(responses.POST, VISION, status=status, headers=headers,
                     json={"error": {"code": status, "message": "no"}})
        elif isinstance(answer, int):
            rsps.add(responses.POST, VISION, status=answer,
                     json={"error": {"code": answer, "message": "no"}})
        else:
            rsps.add(responses.POST, VISION, json=answer)
    rsps.add(responses.POST, APPLY_EDITS, json=written)


def run(name, body, clock=None, seed=1, time_scale=1.0):
    return run_job(name, body, vision_url=VISION, time_scale=time_scale,
                   clock=clock or FakeClock(), rng=random.Random(seed),
                   session=requests.Session())


def calls_to(rsps, url):
    return [c for c in rsps.calls if c.request.url.split("?")[0] == url]


# --- naive ---------------------------------------------------------------------------------------

def test_naive_tries_three_times_with_a_fixed_one_second_wait(mocked):
    """naive: three tries, one second between them, then the photo is simply failed."""
    record = feature()
    serve(mocked, record, 503)
    job = run("naive", body_of(record))
    [photo] = job.photos
    assert (photo.key, photo.succeeded) == (key_of(record), False)
    assert "503" in photo.error
    assert job.vision_calls == 3 and len(calls_to(mocked, VISION)) == 3
    assert job.waits_s == (1.0, 1.0)
    assert calls_to(mocked, APPLY_EDITS) == []


def test_naive_retries_even_what_no_retry_can_fix(mocked):
    """naive retries every failure, a 400 included."""
    record = feature()
    serve(mocked, record, 400)
    job = run("naive", body_of(record))
    assert job.vision_calls == 3 and not job.photos[0].succeeded


def test_naive_ignores_retry_after(mocked):
    """A 429 asking for two minutes gets naive's one second all the same."""
    record = feature()
    serve(mocked, record, (429, {"Retry-After": "120"}), OK)
    job = run("naive", body_of(record))
    assert job.waits_s == (1.0,) and job.photos[0].succeeded


def test_waits_are_production_seconds_slept_times_the_time_scale(mocked):
    """With time_scale 0.05 naive's one-second wait sleeps 50 ms of real time."""
    record = feature()
    serve(mocked, record, 503)
    clock = FakeClock()
    job = run("naive", body_of(record), clock=clock, time_scale=0.05)
    assert job.waits_s == (1.0, 1.0)
    assert clock.sleeps == pytest.approx([0.05, 0.05])


# --- tenacity ------------------------------------------------------------------------------------

@needs_tenacity
def test_tenacity_stops_after_five_attempts_with_random_exponential_waits(mocked):
    """tenacity: five attempts, the n-th wait drawn from [0, 2**(n-1)], from the seed."""
    record = feature()
    serve(mocked, record, 503)
    job = run("tenacity", body_of(record), seed=3)
    assert job.vision_calls == 5 and not job.photos[0].succeeded
    assert len(job.waits_s) == 4
    assert all(0 <= w <= 2 ** n for n, w in enumerate(job.waits_s))
    assert run("tenacity", body_of(record), seed=3).waits_s == job.waits_s
    assert run("tenacity", body_of(record), seed=4).waits_s != job.waits_s


@needs_tenacity
def test_tenacity_waits_grow_but_never_pass_their_max():
    """wait_random_exponential(multiplier=1, max=60): the window doubles up to 60 s."""
    wait = tenacity_wait(rng=random.Random(7))
    draws = {n: [wait(SimpleNamespace(attempt_number=n)) for _ in range(200)]
             for n in range(1, 16)}
    assert all(0 <= w <= min(60, 2 ** (n - 1)) for n, ws in draws.items() for w in ws)
    assert max(draws[15]) > 50 and max(draws[1]) <= 1


@needs_tenacity
@pytest.mark.parametrize("failure", [requests.ConnectionError("refused"),
                                     requests.ReadTimeout("slow"),
                                     requests.exceptions.ChunkedEncodingError("cut short"),
                                     429, 500, 502, 503, 504])
def test_tenacity_retries_connection_errors_timeouts_cut_bodies_429_and_5xx(mocked, failure):
    """What the careful author retries: every RequestException (a body cut short too), 429
    and every 5xx."""
    record = feature()
    serve(mocked, record, failure)
    assert run("tenacity", body_of(record)).vision_calls == 5


@needs_tenacity
def test_tenacity_retries_a_body_that_is_not_json(mocked):
    """A truncated answer (JSONDecodeError) is asked again, and the next answer is written."""
    record = feature()
    for photo in record.attachments:
        mocked.add(responses.GET, photo.url, body=photo.data, content_type="image/jpeg")
    mocked.add(responses.POST, VISION, body='{"condition": "fa', content_type="application/json")
    mocked.add(responses.POST, VISION, json=OK)
    mocked.add(responses.POST, APPLY_EDITS, json=WRITTEN)
    job = run("tenacity", body_of(record))
    assert job.vision_calls == 2 and job.photos[0].succeeded


@needs_tenacity
@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_tenacity_does_not_retry_a_client_error(mocked, status):
    """A 4xx other than 429 fails the photo on the first attempt."""
    record = feature()
    serve(mocked, record, status)
    job = run("tenacity", body_of(record))
    assert job.vision_calls == 1 and job.waits_s == () and not job.photos[0].succeeded


@needs_tenacity
def test_tenacity_ignores_retry_after(mocked):
    """tenacity's wait knows nothing of Retry-After: a 429 asking 120 s waits at most 1 s."""
    record = feature()
    serve(mocked, record, (429, {"Retry-After": "120"}), OK)
    job = run("tenacity", body_of(record))
    assert len(job.waits_s) == 1 and 0 <= job.waits_s[0] <= 1 and job.photos[0].succeeded


def test_the_tenacity_baseline_is_skipped_when_tenacity_is_missing(monkeypatch):
    """Without tenacity installed the baseline does not run and says how to install it."""
    monkeypatch.setitem(sys.modules, "tenacity", None)
    run_ = run_baseline("tenacity", [Scheduled(0.0, body_of(feature()))], vision_url=VISION,
                        engines=2, time_scale=0.02, seed=1)
    assert run_.skipped == TENACITY_MISSING
    assert TENACITY_MISSING == ("tenacity is not installed "
                                "(pip install 'fme-ai-resilience[drill]')")
    assert run_.jobs == 0 and run_.deliveries == 0
    with pytest.raises(ConfigurationError):
        run("tenacity", body_of(feature()))


# --- httpcaller ----------------------------------------------------------------------------------

def test_httpcaller_follows_its_documented_defaults(mocked):
    """HTTPCaller: 3 retries after the first try, waits doubling from 500 ms, 60 s / 90 s."""
    record = feature()
    serve(mocked, record, 503)
    job = run("httpcaller", body_of(record))
    assert job.vision_calls == 4 and job.waits_s == (0.5, 1.0, 2.0)
    vision = calls_to(mocked, VISION)
    assert {c.request.req_kwargs["timeout"] for c in vision} == {(60.0, 90.0)}


@pytest.mark.parametrize("failure, calls", [
    (requests.ConnectionError("refused"), 4), (requests.ConnectTimeout("no answer"), 4),
    (429, 4), (500, 4), (503, 4), (511, 4), (400, 1), (404, 1), (512, 1)])
def test_httpcaller_retries_connection_errors_429_and_500_to_511(mocked, failure, calls):
    """What HTTPCaller's retry covers: connection errors, 429 and 500-511, nothing else."""
    record = feature()
    serve(mocked, record, failure)
    assert run("httpcaller", body_of(record)).vision_calls == calls


def test_httpcaller_does_not_read_retry_after(mocked):
    """The model's assumption: a 429's Retry-After is not read; the backoff goes on doubling."""
    record = feature()
    serve(mocked, record, (429, {"Retry-After": "120"}), OK)
    job = run("httpcaller", body_of(record))
    assert job.waits_s == (0.5,) and job.photos[0].succeeded


def test_the_httpcaller_model_says_what_it_assumes():
    """Its note says the model comes from the documentation and what it assumes."""
    note = BASELINES["httpcaller"].note
    assert "modelled from the documentation, not run in FME" in note
    assert "Retry-After is not read" in note and "doubling from 500 ms" in note


# --- what every baseline does alike --------------------------------------------------------------

@pytest.mark.parametrize("name", baseline_params(sorted(BASELINES)))
def test_every_baseline_posts_the_photo_and_writes_the_answer_by_global_id(mocked, name):
    """The photo's bytes go to Vision as octet-stream; the answer goes back with applyEdits."""
    record = feature()
    serve(mocked, record, OK)
    clock = FakeClock(start=1_790_000_123.5)
    job = run(name, body_of(record), clock=clock)
    assert job.photos[0].succeeded and job.vision_calls == 1
    [vision] = calls_to(mocked, VISION)
    assert vision.request.headers["Content-Type"] == "application/octet-stream"
    assert vision.request.body == record.attachments[0].data
    [write] = calls_to(mocked, APPLY_EDITS)
    form = {k: v[0] for k, v in parse_qs(write.request.body).items()}
    assert form["useGlobalIds"] == "true" and form["f"] == "json"
    [update] = json.loads(form["updates"])
    assert update["attributes"] == {
        "globalid": GID, "ai_condition": "fair", "ai_confidence": 0.81, "ai_status": "ACCEPTED",
        "ai_model": "standin-vision-1.0", "ai_trace_id": job.photos[0].trace_id,
        "ai_assessed_at": 1_790_000_123_500}
    assert set(WRITEBACK_FIELDS) == set(update["attributes"]) - {"globalid"}
    assert job.photos[0].sha256 == record.attachments[0].sha256


@pytest.mark.parametrize("name", baseline_params(sorted(BASELINES)))
def test_a_drifted_answer_fails_the_photo_and_writes_nothing(mocked, name):
    """An answer whose confidence was renamed cannot be read: the photo fails, no retry."""
    record = feature()
    serve(mocked, record, {"condition": "fair", "score": 0.8, "labels": []})
    job = run(name, body_of(record))
    assert not job.photos[0].succeeded and "confidence" in job.photos[0].error
    assert job.vision_calls == 1 and calls_to(mocked, APPLY_EDITS) == []


@pytest.mark.parametrize("name", baseline_params(sorted(BASELINES)))
def test_a_photo_that_cannot_be_downloaded_fails_without_a_vision_call(mocked, name):
    """A 404 photo fails at the download; Vision is never called."""
    record = feature()
    mocked.add(responses.GET, record.attachments[0].url, status=404)
    job = run(name, body_of(record))
    assert not job.photos[0].succeeded and "404" in job.photos[0].error
    assert job.vision_calls == 0


@pytest.mark.parametrize("name", baseline_params(sorted(BASELINES)))
@pytest.mark.parametrize("answer, code", [
    ({"updateResults": [{"success": False, "error": {"code": 1019,
                                                     "description": "Object is missing."}}]},
     "1019"),
    ({"error": {"code": 498, "message": "Invalid token."}}, "498"),
    ({"updateResults": []}, "refused the row"),
    ([], "JSON object")])
def test_a_refused_write_back_fails_the_photo(mocked, name, answer, code):
    """applyEdits refusing the row, or answering an error in HTTP 200, fails the photo."""
    record = feature()
    serve(mocked, record, OK, written=answer)
    job = run(name, body_of(record))
    assert not job.photos[0].succeeded and code in job.photos[0].error


@pytest.mark.parametrize("name", baseline_params(sorted(BASELINES)))
def test_an_unreadable_body_fails_the_job_and_keeps_nothing(mocked, name):
    """A body parse_webhook refuses is a failed job with no photo: nothing keeps it."""
    job = run(name, {"eventType": "addData"})
    assert job.photos == () and "feature" in job.error and job.vision_calls == 0


@pytest.mark.parametrize("name", baseline_params(sorted(BASELINES)))
def test_a_body_without_its_photo_list_has_nothing_to_analyse(mocked, name):
    """No attachments in the body: the job does not list the feature's photos itself."""
    body = Survey123Sender("http://127.0.0.1:9/unused").body_for(feature(), attachments="null")
    job = run(name, body)
    assert job.photos == () and job.error == "the body lists no photo"
    assert len(mocked.calls) == 0


def test_every_photo_of_a_job_is_taken_in_turn(mocked):
    """A job handles each photo its body lists, each under its own fact key."""
    record = feature(photos=3)
    serve(mocked, record, OK)
    job = run("naive", body_of(record))
    assert [p.key for p in job.photos] == [key_of(record, i) for i in range(3)]
    assert all(p.succeeded for p in job.photos) and job.vision_calls == 3


# --- the run's figures ---------------------------------------------------------------------------

def test_run_baseline_refuses_unknown_names_and_bad_sizes():
    """An unknown baseline, no engine or a time scale of 0 is a ConfigurationError."""
    for kwargs, field in [({"name": "stamina"}, "name"), ({"engines": 0}, "engines"),
                          ({"time_scale": 0}, "time_scale")]:
        args = {"name": "naive", "engines": 1, "time_scale": 0.02, **kwargs}
        with pytest.raises(ConfigurationError) as info:
            run_baseline(args.pop("name"), [], vision_url=VISION, seed=1, **args)
        assert info.value.field == field


def test_progress_counts_queued_busy_and_in_flight_with_their_peaks():
    """Progress is what the sampler reads: gauges now, and the highest each reached."""
    progress = Progress()
    progress.change(queued=3)
    progress.change(queued=-1, busy=1)
    progress.change(in_flight=2)
    assert progress.sample() == (2, 1, 2)
    assert (progress.queued, progress.busy, progress.in_flight, progress.backlog) == (2, 1, 2, 3)
    progress.change(queued=-2, busy=-1, in_flight=-2)
    assert progress.sample() == (0, 0, 0)
    assert (progress.peak_queued, progress.peak_busy, progress.peak_in_flight,
            progress.peak_backlog) == (3, 1, 2, 3)


@pytest.mark.parametrize("name", baseline_params(sorted(BASELINES)))
def test_every_baseline_writes_an_answer_under_the_threshold_as_review(mocked, name):
    """The Tester on the confidence: under the library's threshold the answer is REVIEW."""
    record = feature()
    serve(mocked, record, {**OK, "confidence": 0.6})
    run(name, body_of(record))
    [write] = calls_to(mocked, APPLY_EDITS)
    [update] = json.loads(parse_qs(write.request.body)["updates"][0])
    assert update["attributes"]["ai_status"] == "REVIEW"


@pytest.mark.parametrize("name", baseline_params(sorted(BASELINES)))
def test_every_baseline_refuses_a_condition_outside_the_domain(mocked, name):
    """The Tester on the condition: an answer the library would refuse writes nothing."""
    record = feature()
    serve(mocked, record, {**OK, "condition": "exploded"})
    job = run(name, body_of(record))
    assert not job.photos[0].succeeded and calls_to(mocked, APPLY_EDITS) == []


def test_a_sweep_needs_the_layer_it_queries():
    """The sweep baseline without a layer URL is refused before anything runs."""
    with pytest.raises(BaselineError, match="layer"):
        run_baseline("sweep", [], vision_url=VISION, engines=1, time_scale=0.02, seed=1)


def test_a_fault_of_the_model_itself_is_raised_not_counted_as_lost(monkeypatch):
    """An engine that crashes is the drill's bug: the run raises instead of reporting losses."""
    def broken(*args, **kwargs):
        raise ZeroDivisionError("model bug")

    monkeypatch.setattr(pool, "run_job", broken)
    with pytest.raises(BaselineError, match="ZeroDivisionError"):
        run_baseline("naive", [Scheduled(0.0, body_of(feature()))], vision_url=VISION,
                     engines=1, time_scale=0.02, seed=1)
