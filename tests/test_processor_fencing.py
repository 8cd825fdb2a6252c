"""Lapsed leases never buy a second Vision AI call: the analysis claim is fenced by the lease."""
from __future__ import annotations

import json
import random

import requests
import responses

from fme_ai_resilience.clock import FakeClock
from fme_ai_resilience.keys import trace_id_for
from fme_ai_resilience.ledger import Status
from fme_ai_resilience.services.processor import Processor, VisionRoute
from fme_ai_resilience.services.sinks import CollectingSink
from fme_ai_resilience.services.vision import Photo, VisionClient
from fme_ai_resilience.settings import Settings
from fme_ai_resilience.store import open_store
from fme_ai_resilience.submission import Submission

VISION = "http://vision.test/analyze"
T0 = 1_790_000_000.0
ANSWER = {"condition": "damaged", "confidence": 0.9, "labels": [], "model_version": "m-1"}


def photo(url, token):
    return Photo(b"\xff\xd8\xff" + url.encode(), "image/jpeg", url)


def processor(store, clock, owner, settings):
    client = VisionClient(VISION, "generic", "sk-test-0123456789abcdef",
                          session=requests.Session(), clock=clock, rng=random.Random(1))
    return Processor(settings, VisionRoute.of(client, "vision"), CollectingSink(),
                     store=store, download=photo, clock=clock, rng=random.Random(2),
                     owner=owner)


@responses.activate
def test_a_new_lease_holder_waits_for_the_answer_in_flight_instead_of_paying_again(tmp_path):
    """Holder A's Vision call outlives its lease; the task is reaped and holder B claims it
    while A's call is in flight: B pays no second call, waits, and reuses A's answer."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    clock = FakeClock(T0)
    settings = Settings().with_values({"processing.lease_s": "10"})
    calls = []
    with open_store(url, init_schema=True) as store_a, open_store(url) as store_b:
        key = "k"
        store_a.register(Submission(idempotency_key=key, feature_global_id="F-k",
                                    trace_id=trace_id_for(key),
                                    attachment_url="https://photos.test/1",
                                    attachment_global_id="A-k", asset_type="hydrant"),
                         1000, now=T0)
        a = processor(store_a, clock, "a", settings)
        b = processor(store_b, clock, "b", settings)
        during = []

        def vision(request):
            calls.append(clock.now())
            if len(calls) == 1:                 # A's call hangs past its lease
                clock.advance(11.0)
                store_b.reap_expired(5, now=clock.now())
                during.append(b.run_batch())
            return 200, {"Content-Type": "application/json"}, json.dumps(ANSWER)

        responses.add_callback(responses.POST, VISION, callback=vision)
        first = a.run_batch()
        clock.advance(settings.retry.max_inline_wait_s + 1)
        later = b.run_batch()
        record = store_a.get(key)
    assert len(calls) == 1, "a second paid call for the same photo"
    (in_flight,) = during[0].results
    assert in_flight.status is Status.DEFERRED
    assert first.results[0].status is Status.PROCESSING       # A lost its lease
    assert later.results[0].status is Status.SUCCEEDED and later.results[0].reused
    assert record.status is Status.SUCCEEDED
