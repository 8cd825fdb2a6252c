"""A write-back the layer refuses for the deployment's reasons is a configuration dead letter:
it keeps its paid analysis, says what to fix and is written back after the fix without a
second Vision AI call."""
from __future__ import annotations

import random

import pytest
import requests
import responses

from fme_ai_resilience.clock import FakeClock
from fme_ai_resilience.errors import FailureClass
from fme_ai_resilience.keys import compose_key, trace_id_for
from fme_ai_resilience.ledger import Status
from fme_ai_resilience.services.compensator import Compensator
from fme_ai_resilience.services.processor import Processor, VisionRoute
from fme_ai_resilience.services.vision import Photo, VisionClient
from fme_ai_resilience.services.writeback import (FeatureLayerSink, Layers, braced,
                                                  trusted_layers)
from fme_ai_resilience.settings import Settings
from fme_ai_resilience.store import open_store
from fme_ai_resilience.submission import Submission

SERVICE = "https://gis.example.com/arcgis/rest/services/Inspections/FeatureServer"
LAYER = f"{SERVICE}/0"
VISION = "http://vision.test/analyze"
FEATURE = "1f0c6a52-3b1e-4a53-9d2e-6e1d7f1b2c3d"
PHOTO = "a9d6e0b1-7c2f-4e8a-b5d4-3c2b1a0f9e8d"
T0 = 1_790_000_000.0
ANSWER = {"condition": "damaged", "confidence": 0.9, "labels": [], "model_version": "m-1"}
FIELD_MISSING = {"updateResults": [{"objectId": -1, "success": False, "error": {
    "code": 1000, "description": "Invalid column name 'ai_status'."}}]}
NO_PERMISSION = {"error": {"code": 403, "message": "You do not have permissions to access "
                           "this resource or perform this operation.", "details": []}}
NO_LAYER = {"error": {"code": 400, "message": "Invalid URL", "details": ["Invalid URL"]}}
WRITTEN = {"updateResults": [{"objectId": 7, "globalId": braced(FEATURE), "success": True}]}


@pytest.fixture
def ledger(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True)
    yield store
    store.close()


def processor(ledger, clock, s):
    client = VisionClient(VISION, "generic", "sk-test-0123456789abcdef",
                          session=requests.Session(), clock=clock, rng=random.Random(1))
    sink = FeatureLayerSink(s.writeback, Layers(trusted=trusted_layers(s)))
    return Processor(s, VisionRoute.of(client, "vision"), sink, store=ledger,
                     download=lambda url, tok: Photo(b"\xff\xd8\xffphoto", "image/jpeg", url),
                     clock=clock, rng=random.Random(2))


@pytest.mark.parametrize("refusal, status", [(FIELD_MISSING, 200), (NO_PERMISSION, 200),
                                             (NO_LAYER, 200)])
@responses.activate
def test_a_write_back_refused_for_the_setup_is_requeued_after_the_fix_without_a_second_call(
        ledger, refusal, status):
    """The layer refuses the write (a field that does not exist, no edit permission, a URL
    that is no layer): CONFIGURATION dead letter with its analysis kept, a notification
    saying what to fix and how to requeue; requeued by cause after the fix, it is written
    back with the answer already paid for."""
    clock = FakeClock(T0)
    responses.post(VISION, json=ANSWER)
    refused = responses.post(f"{LAYER}/applyEdits", json=refusal, status=status)
    s = Settings().with_values({"intake.feature_services": SERVICE})
    key = compose_key(FEATURE, PHOTO)
    ledger.register(Submission(key, FEATURE, trace_id_for(key), attachment_global_id=PHOTO,
                               attachment_url="https://photos.test/1", layer_url=LAYER,
                               service_url=SERVICE,
                               attributes={"GlobalID": braced(FEATURE)}), 100, now=T0)
    (first,) = processor(ledger, clock, s).run_batch().results
    record = ledger.get(key)
    assert (first.status, first.failure_class) == (Status.DEAD, FailureClass.CONFIGURATION)
    assert "analyzed" in record.checkpoints
    Compensator(s, store=ledger, clock=clock).run(reconcile=False)
    (note,) = [n for n in ledger.pending_notifications() if n.task_key == key]
    body = note.body
    assert "requeue --cause CONFIGURATION" in body and "not analysed again" in body
    assert "no longer on the layer" not in body
    assert ledger.get(key).status is Status.DEAD       # never requeued before the fix
    responses.remove(refused)
    responses.post(f"{LAYER}/applyEdits", json=WRITTEN)
    assert ledger.requeue(failure_class=FailureClass.CONFIGURATION, now=clock.now()) == 1
    (second,) = processor(ledger, clock, s).run_batch().results
    assert second.status is Status.SUCCEEDED and second.condition == "damaged"
    vision_calls = [c for c in responses.calls if c.request.url == VISION]
    assert len(vision_calls) == 1
