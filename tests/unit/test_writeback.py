"""The write-back sinks, the photo lister and the pipeline factory, against ArcGIS behind
``responses`` and a real SQLite ledger."""
from __future__ import annotations

import json
import urllib.parse

import pytest
import responses

from fme_ai_resilience.core.errors import ArcGISError, ConfigurationError, ErrorClass
from fme_ai_resilience.core.intake.keys import compose_key, trace_id_for
from fme_ai_resilience.core.ledger import LayerStatus, Stage, TaskOutcome
from fme_ai_resilience.services.pipeline import build_compensator, build_processor
from fme_ai_resilience.services.processing.sinks import (CollectingSink, Conclusion,
                                                         PostgresTableSink)
from fme_ai_resilience.services.processing.writeback import (FeatureLayerSink, Layers, braced,
                                                             layer_photo_lister, row_global_id,
                                                             trusted_layers)
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission

SERVICE = "https://gis.example.com/arcgis/rest/services/Inspections/FeatureServer"
LAYER = f"{SERVICE}/0"
TABLE = f"{SERVICE}/1"
FEATURE = "1f0c6a52-3b1e-4a53-9d2e-6e1d7f1b2c3d"
PHOTO = "a9d6e0b1-7c2f-4e8a-b5d4-3c2b1a0f9e8d"
T0 = 1_790_000_000.0


@pytest.fixture
def ledger(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True)
    yield store
    store.close()


def settings(**values):
    return Settings().with_values({"intake.feature_services": SERVICE, **values})


def claimed(ledger, **payload):
    key = compose_key(FEATURE, PHOTO)
    ledger.register(Submission(key, FEATURE, trace_id_for(key), attachment_global_id=PHOTO,
                               layer_url=LAYER, service_url=SERVICE,
                               attributes={"GlobalID": braced(FEATURE), "objectid": 7},
                               **payload), 100, now=T0)
    (task,) = ledger.claim("w", 1, 60, now=T0)
    return task


def conclusion(task):
    return Conclusion(task, TaskOutcome.ACCEPTED, {"condition": "damaged", "confidence": 0.91,
                                                   "model_version": "m-1", "reused": False})


def form(call):
    body = call.request.body
    text = body.decode() if isinstance(body, bytes) else body
    return {k: v[0] for k, v in urllib.parse.parse_qs(text).items()}


def layers(s):
    return Layers(trusted=trusted_layers(s))


@responses.activate
def test_the_feature_sink_updates_the_feature_by_globalid_then_completes(ledger):
    """One applyEdits update carrying the conclusion, the GlobalID field as the webhook spells
    it; the written checkpoint before the completion."""
    responses.post(f"{LAYER}/applyEdits", json={"updateResults": [
        {"objectId": 7, "globalId": braced(FEATURE), "success": True}]})
    s = settings()
    task = claimed(ledger)
    assert FeatureLayerSink(s.writeback, layers(s)).finish(conclusion(task), store=ledger,
                                                           now=T0 + 1)
    sent = form(responses.calls[0])
    (row,) = json.loads(sent["updates"])
    assert row["attributes"] == {"GlobalID": braced(FEATURE), "ai_condition": "damaged",
                                 "ai_confidence": 0.91, "ai_status": "ACCEPTED",
                                 "ai_model": "m-1", "ai_trace_id": task.trace_id,
                                 "ai_assessed_at": int((T0 + 1) * 1000)}
    assert sent["useGlobalIds"] == "true" and sent["rollbackOnFailure"] == "true"
    record = ledger.get(task.key)
    assert record.status.value == "SUCCEEDED"
    assert record.checkpoints["written"] == {"sink": "feature_layer", "layer": LAYER,
                                             "global_id": braced(FEATURE)}


@responses.activate
def test_a_task_already_written_is_only_completed(ledger):
    """After ``written`` no second applyEdits, whatever happened to the completion."""
    s = settings()
    task = claimed(ledger)
    ledger.checkpoint(task.key, task.lease_token, Stage.WRITTEN, {"sink": "feature_layer"},
                      now=T0)
    resumed = ledger.reap_expired(6, now=T0 + 120)
    assert resumed.requeued == 1
    (task,) = ledger.claim("w2", 1, 60, now=T0 + 121)
    assert FeatureLayerSink(s.writeback, layers(s)).finish(conclusion(task), store=ledger,
                                                           now=T0 + 122)
    assert len(responses.calls) == 0 and ledger.get(task.key).status.value == "SUCCEEDED"


@responses.activate
@pytest.mark.parametrize("found, expected", [([], "adds"), ([{"objectid": 42}], "updates")])
def test_the_related_table_gets_one_row_per_photo_added_once_then_updated(
        ledger, found, expected):
    """With writeback.table_url the photo's row is looked up by its GlobalID: added the
    first time (with the parent GlobalID, under a GlobalID derived from the photo's),
    updated in place after."""
    responses.get(f"{TABLE}/query", json={"features": [{"attributes": a} for a in found]})
    responses.post(f"{TABLE}/applyEdits", json={
        f"{expected[:-1]}Results": [{"objectId": 42, "success": True}]})
    s = settings(**{"writeback.table_url": TABLE})
    task = claimed(ledger)
    assert FeatureLayerSink(s.writeback, layers(s)).finish(conclusion(task), store=ledger,
                                                           now=T0 + 1)
    where = urllib.parse.parse_qs(urllib.parse.urlsplit(responses.calls[0].request.url).query)
    assert where["where"] == [f"ai_photo_globalid = '{braced(PHOTO)}'"]
    sent = form(responses.calls[1])
    (row,) = json.loads(sent[expected])
    assert row["attributes"]["ai_condition"] == "damaged"
    if expected == "adds":
        assert sent["useGlobalIds"] == "true"
        assert row["attributes"]["globalid"] == row_global_id(PHOTO) == row_global_id(
            braced(PHOTO).lower())
        assert row["attributes"]["parentglobalid"] == braced(FEATURE)
        assert row["attributes"]["ai_photo_globalid"] == braced(PHOTO)
    else:
        assert sent["useGlobalIds"] == "false" and row["attributes"]["objectid"] == 42


@responses.activate
@pytest.mark.parametrize("code, error_class", [(1019, ErrorClass.NOT_FOUND),
                                               (1000, ErrorClass.CONFIGURATION),
                                               (1018, ErrorClass.CONFIGURATION)])
def test_a_refused_row_is_an_error_of_its_class_and_nothing_is_recorded(
        ledger, code, error_class):
    """applyEdits answering 200 with a failed row: no written checkpoint, no completion."""
    responses.post(f"{LAYER}/applyEdits", json={"updateResults": [
        {"objectId": -1, "success": False, "error": {"code": code, "description": "refused"}}]})
    s = settings()
    task = claimed(ledger)
    with pytest.raises(ArcGISError) as info:
        FeatureLayerSink(s.writeback, layers(s)).finish(conclusion(task), store=ledger,
                                                        now=T0 + 1)
    assert info.value.error_class is error_class and str(code) in str(info.value)
    record = ledger.get(task.key)
    assert record.status.value == "PROCESSING" and "written" not in record.checkpoints


@responses.activate
def test_a_layer_no_configuration_names_is_refused_before_any_request(ledger):
    """A webhook naming some other layer gets nothing sent there: no token, no write; the
    refusal is the setup's (CONFIGURATION), for a person to fix."""
    s = Settings()      # no intake.feature_services, no writeback.layer_url
    task = claimed(ledger)
    with pytest.raises(ArcGISError) as info:
        FeatureLayerSink(s.writeback, layers(s)).finish(conclusion(task), store=ledger,
                                                        now=T0 + 1)
    assert info.value.error_class is ErrorClass.CONFIGURATION
    assert "no configured feature service" in str(info.value) and len(responses.calls) == 0


@pytest.mark.parametrize("url, trusted", [
    (LAYER, True), (f"{SERVICE}/3/", True), (SERVICE.upper() + "/0", True),
    ("https://evil.example.com/arcgis/rest/services/Inspections/FeatureServer/0", False),
    (f"{SERVICE}/query", False), (SERVICE, False)])
def test_trusted_layers_are_the_configured_services_layers(url, trusted):
    assert trusted_layers(settings())(url) is trusted


def test_the_writeback_layer_is_trusted_even_without_feature_services():
    other = "https://other.example.com/arcgis/rest/services/Assets/FeatureServer/2"
    assert trusted_layers(Settings().with_values({"writeback.layer_url": other}))(other)


@responses.activate
def test_the_photo_lister_makes_one_submission_per_photo_keyed_as_intake_keys_them(ledger):
    """queryAttachments of the feature (by object id) gives the photos; keys, trace ids,
    URLs and the edit marker follow intake's rules."""
    responses.get(f"{LAYER}/queryAttachments", json={"attachmentGroups": [{
        "parentObjectId": 7, "parentGlobalId": braced(FEATURE), "attachmentInfos": [
            {"id": 1, "globalId": braced(PHOTO), "name": "a.jpg", "contentType": "image/jpeg",
             "size": 10},
            {"id": 2, "globalId": None, "name": "b.jpg", "contentType": "image/jpeg"}]}]})
    key = compose_key(FEATURE, None)
    ledger.register(Submission(key, FEATURE, trace_id_for(key), object_id=7, layer_url=LAYER,
                               attachments_unknown=True), 100, now=T0)
    (task,) = ledger.claim("w", 1, 60, now=T0)
    (sub,) = layer_photo_lister(layers(settings()))(task)
    assert sub.idempotency_key == compose_key(FEATURE, PHOTO)
    assert sub.trace_id == trace_id_for(sub.idempotency_key)
    assert sub.attachment_url == f"{LAYER}/7/attachments/1" and not sub.attachments_unknown
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(responses.calls[0].request.url).query)
    assert query["objectIds"] == ["7"]


def test_the_processor_needs_the_vision_endpoint(ledger):
    with pytest.raises(ConfigurationError) as info:
        build_processor(Settings(), store=ledger)
    assert info.value.field == "vision.endpoint"


@pytest.mark.parametrize("name, kind", [("feature_layer", FeatureLayerSink),
                                        ("table", PostgresTableSink),
                                        ("collect", CollectingSink)])
def test_the_processor_writes_back_through_the_sink_the_settings_name(ledger, name, kind):
    s = settings(**{"vision.endpoint": "https://vision.example.com/analyze",
                    "writeback.sink": name})
    assert isinstance(build_processor(s, store=ledger).sink, kind)


def test_a_fallback_endpoint_makes_a_second_route_with_its_own_breaker(ledger):
    s = settings(**{"vision.endpoint": "https://vision.example.com/analyze",
                    "vision.fallback_endpoint": "https://small.example.com/analyze",
                    "vision.fallback_model": "tiny"})
    processor = build_processor(s, store=ledger)
    assert set(processor.breakers) == {"vision", "vision-fallback"}
    routes = {r.service: r for r in processor.routes.values()}
    assert routes["vision"].model != routes["vision-fallback"].model
    assert "sk-" not in repr(processor)


def test_the_compensator_reconciles_only_the_layer_it_is_given(ledger):
    assert build_compensator(Settings(), store=ledger).layer is None
    compensator = build_compensator(Settings(), store=ledger, layer_url=LAYER)
    assert compensator.layer.url == LAYER


@responses.activate
def test_the_feature_sink_flags_a_photo_owed_and_a_skipped_one_for_manual_review(ledger):
    """AWAITING_ANALYSIS with empty assessment fields, the task left PROCESSING; a SKIPPED
    conclusion shows MANUAL_REVIEW, never SKIPPED."""
    responses.post(f"{LAYER}/applyEdits", json={"updateResults": [
        {"objectId": 7, "globalId": braced(FEATURE), "success": True}]})
    s = settings()
    task = claimed(ledger)
    sink = FeatureLayerSink(s.writeback, layers(s))
    sink.flag(Conclusion(task, None, layer=LayerStatus.AWAITING_ANALYSIS), store=ledger,
              now=T0 + 1)
    (row,) = json.loads(form(responses.calls[0])["updates"])
    assert (row["attributes"]["ai_status"], row["attributes"]["ai_condition"],
            row["attributes"]["ai_confidence"]) == ("AWAITING_ANALYSIS", None, None)
    assert ledger.get(task.key).status.value == "PROCESSING"
    assert sink.finish(Conclusion(task, TaskOutcome.SKIPPED, {"reason": "policy"}),
                       store=ledger, now=T0 + 2)
    (row,) = json.loads(form(responses.calls[1])["updates"])
    assert row["attributes"]["ai_status"] == "MANUAL_REVIEW"
    assert ledger.get(task.key).review_state.value == "OPEN"


class Table:
    """A related table behind ``responses``: rows by GlobalID, unique, as ArcGIS keeps them
    (an add with ``useGlobalIds=true`` keeps the GlobalID it carries, else gets a new one)."""

    def __init__(self):
        self.rows = {}
        self.on_query = None

    def query(self, request):
        where = urllib.parse.parse_qs(urllib.parse.urlsplit(request.url).query)["where"][0]
        wanted = where.split("'")[1]
        found = [{"objectid": oid, "globalid": gid} for gid, (oid, attrs) in self.rows.items()
                 if attrs.get("ai_photo_globalid") == wanted]
        if self.on_query is not None:     # another holder writes after this answer was read
            hook, self.on_query = self.on_query, None
            hook()
        return 200, {}, json.dumps({"features": [{"attributes": a} for a in found]})

    def apply(self, request):
        body = request.body.decode() if isinstance(request.body, bytes) else request.body
        sent = {k: v[0] for k, v in urllib.parse.parse_qs(body).items()}
        by_gid = sent.get("useGlobalIds") == "true"
        out = {"addResults": [], "updateResults": []}
        for row in json.loads(sent.get("adds", "[]")):
            attrs = row["attributes"]
            gid = attrs.get("globalid") if by_gid else "{%08d}" % len(self.rows)
            if gid in self.rows:
                out["addResults"].append({"success": False, "error": {
                    "code": 1000, "description": "duplicate GlobalID"}})
                continue
            self.rows[gid] = (len(self.rows) + 1, attrs)
            out["addResults"].append({"objectId": len(self.rows), "success": True})
        for row in json.loads(sent.get("updates", "[]")):
            attrs = row["attributes"]
            match = [g for g, (oid, _) in self.rows.items()
                     if (g == attrs.get("globalid") if by_gid
                         else oid == attrs.get("objectid"))]
            if match:
                self.rows[match[0]][1].update(attrs)
            out["updateResults"].append({"success": bool(match)} if match else {
                "success": False, "error": {"code": 1019, "description": "not found"}})
        return 200, {}, json.dumps(out)


@responses.activate
def test_two_lease_holders_of_one_photo_leave_one_related_row(ledger):
    """Holder A looks the photo's row up and finds none; before A adds it, holder B (the task
    reclaimed after A's lease lapsed) writes the row: A's add finds it taken and updates it,
    so the table holds one row for the photo, not two."""
    table = Table()
    responses.add_callback(responses.GET, f"{TABLE}/query", callback=table.query)
    responses.add_callback(responses.POST, f"{TABLE}/applyEdits", callback=table.apply)
    s = settings(**{"writeback.table_url": TABLE})
    first = claimed(ledger)
    ledger.reap_expired(5, now=T0 + 61)
    (second,) = ledger.claim("w2", 1, 60, now=T0 + 61)
    sink = FeatureLayerSink(s.writeback, layers(s))
    table.on_query = lambda: sink.finish(conclusion(second), store=ledger, now=T0 + 62)
    sink.finish(conclusion(first), store=ledger, now=T0 + 63)
    rows = [attrs for _, attrs in table.rows.values()
            if attrs["ai_photo_globalid"] == braced(PHOTO)]
    assert len(rows) == 1 and rows[0]["ai_condition"] == "damaged"
    assert ledger.get(first.key).status.value == "SUCCEEDED"
