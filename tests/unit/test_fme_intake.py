"""IntakeCaller (WS-01) driven like FME drives it: FakeFeatures in, one feature per photo out
through Output, invalid bodies and foreign services through <Rejected>, over a SQLite ledger."""
from __future__ import annotations

import json

import pytest

from fme_ai_resilience.fme import IntakeCaller
from fme_ai_resilience.core.intake.keys import body_key, trace_id_for
from fme_ai_resilience.core.ledger import Status
from fme_ai_resilience.store import open_store
from fme_ai_resilience.testing import FakeFeature, run_caller

from helpers.fme_fixtures import (ATTACHMENT, FEATURE, KEY, PORTAL_TOKEN, SERVICE,
                                assert_no_secret, body, intake_macros, texts)


TRACE = trace_id_for(KEY)
HEADERS = json.dumps({"X-Survey123-Delivery": "d-7", "X-Survey123-Event": "addData"})


def registration(**changes):
    """The attributes of a registration feature for the body's one photo, first delivery."""
    out = {"fair_kind": "registration", "fair_key": KEY, "fair_status": "PENDING",
           "fair_registration": "NEW", "fair_outcome": None, "fair_answer": "accepted",
           "fair_http_status": 202, "fair_retry_after_s": None, "fair_trace_id": TRACE,
           "fair_feature_globalid": FEATURE, "fair_attachment_globalid": ATTACHMENT,
           "fair_asset_type": "hydrant", "fair_event_type": "addData",
           "fair_delivery_id": "d-7", "fair_reason": None}
    out.update(changes)
    return out


def test_a_webhook_feature_registers_its_photo_and_says_so_attribute_by_attribute(
        fair_db, fake_clock):
    """The Automation's message and webhook.headers attributes: one Output feature with the
    key, PENDING, NEW, 202 and the trace id; attributes that do not apply are real nulls; the
    ledger holds the task; one INFORM line; nothing rejected."""
    run = run_caller(IntakeCaller, [{"message": body(), "webhook.headers": HEADERS}],
                     intake_macros(fair_db), clock=fake_clock)
    (out,) = run.output
    assert run.rejected == []
    assert out.as_dict() == registration()
    assert out.isAttributeNull("fair_outcome") and not out.isAttributeMissing("fair_outcome")
    assert run.messages()[1:] == [f"fme-ai-resilience WS-01_intake: 202 accepted: 1 "
                                  f"photo(s) of {FEATURE}"]
    with open_store(fair_db) as store:
        record = store.get(KEY)
    assert (record.status, record.trace_id, record.created_at) == (
        Status.PENDING, TRACE, fake_clock.now())
    assert_no_secret(texts(run.output), run.messages(), [repr(run.caller)])


def test_the_body_and_headers_may_come_from_published_parameters(fair_db, fake_clock):
    """A Creator feature carries nothing: FAIR_WEBHOOK_BODY and FAIR_WEBHOOK_HEADERS, as the
    Automation maps the trigger's message and headers, are read instead."""
    run = run_caller(IntakeCaller, [{}], intake_macros(
        fair_db, FAIR_WEBHOOK_BODY=body(), FAIR_WEBHOOK_HEADERS=HEADERS), clock=fake_clock)
    assert [f.as_dict() for f in run.output] == [registration()]


def test_a_redelivery_is_a_duplicate_in_progress_then_done(fair_db, fake_clock):
    """The same body again answers 202 duplicate_in_progress while the task waits, 200
    duplicate_done with its outcome once it succeeded; never a second task."""
    feature = {"message": body(), "webhook.headers": HEADERS}
    run_caller(IntakeCaller, [feature], intake_macros(fair_db), clock=fake_clock)
    again = run_caller(IntakeCaller, [feature], intake_macros(fair_db), clock=fake_clock)
    assert again.output[0].as_dict() == registration(
        fair_registration="DUPLICATE_IN_PROGRESS", fair_answer="duplicate_in_progress")
    with open_store(fair_db) as store:
        (task,) = store.claim("t", 1, 60, now=fake_clock.now())
        store.complete(KEY, task.lease_token, "ACCEPTED", {}, now=fake_clock.now())
    done = run_caller(IntakeCaller, [feature], intake_macros(fair_db), clock=fake_clock)
    assert done.output[0].as_dict() == registration(
        fair_status="SUCCEEDED", fair_registration="DUPLICATE_DONE", fair_outcome="ACCEPTED",
        fair_answer="duplicate_done", fair_http_status=200)


def test_an_invalid_body_is_rejected_and_kept_as_a_redacted_dead_letter(fair_db, fake_clock):
    """Not JSON (with the portal token in it): one <Rejected> feature, INVALID_PAYLOAD, the
    dead letter's key and trace id, 400; the ledger keeps it; the token shows nowhere."""
    bad = '{"portalInfo": {"token": "' + PORTAL_TOKEN + '"}, "feature": '
    run = run_caller(IntakeCaller, [{"message": bad}], intake_macros(fair_db),
                     clock=fake_clock)
    assert run.output == []
    (out,) = run.rejected
    values = out.as_dict()
    key = values["fair_key"]
    assert key == body_key(bad.encode("utf-8")) and values["fair_trace_id"] == trace_id_for(key)
    assert {k: v for k, v in values.items() if k not in ("fair_key", "fair_trace_id",
                                                         "fair_reason",
                                                         "fme_rejection_message")} == {
        "fair_kind": "dead_letter", "fair_status": "DEAD",
        "fair_failure_class": "INVALID_PAYLOAD", "fair_answer": "invalid",
        "fair_http_status": 400, "fair_delivery_id": None,
        "fme_rejection_code": "INVALID_PAYLOAD"}
    assert values["fme_rejection_message"] == values["fair_reason"] != ""
    with open_store(fair_db) as store:
        dead = store.get(key)
    assert dead.status is Status.DEAD and dead.trace_id == values["fair_trace_id"]
    assert run.log[0].severity == "INFORM" and run.log[1].severity == "WARN"
    assert_no_secret(texts(run.rejected), run.messages())


def test_a_body_for_a_foreign_feature_service_is_rejected_422(fair_db, fake_clock):
    """intake.feature_services names another service: UNKNOWN_SERVICE through <Rejected>,
    no task for the photo's key."""
    run = run_caller(IntakeCaller, [{"message": body()}], intake_macros(
        fair_db, FAIR_INTAKE_FEATURE_SERVICES="https://other.example.com/arcgis/rest/services/"
                                              "x/FeatureServer"), clock=fake_clock)
    (out,) = run.rejected
    assert (out.getAttribute("fme_rejection_code"), out.getAttribute("fair_http_status"),
            out.getAttribute("fair_failure_class")) == (
        "UNKNOWN_SERVICE", 422, "UNKNOWN_SERVICE")
    with open_store(fair_db) as store:
        assert store.get(KEY) is None


def test_a_served_feature_service_is_registered(fair_db, fake_clock):
    """The same body with its own service configured is a plain registration."""
    run = run_caller(IntakeCaller, [{"message": body()}], intake_macros(
        fair_db, FAIR_INTAKE_FEATURE_SERVICES=SERVICE), clock=fake_clock)
    assert run.rejected == [] and run.output[0].getAttribute("fair_status") == "PENDING"


def test_no_body_anywhere_is_a_configuration_rejection_naming_the_parameter(fair_db,
                                                                             fake_clock):
    """Neither a message attribute (missing or null) nor FAIR_WEBHOOK_BODY: CONFIGURATION,
    naming FAIR_WEBHOOK_BODY; no dead letter is made of nothing."""
    null_message = FakeFeature()
    null_message.setAttributeNullWithType("message", 11)
    run = run_caller(IntakeCaller, [{}, null_message], intake_macros(fair_db),
                     clock=fake_clock)
    assert len(run.rejected) == 2
    for out in run.rejected:
        assert out.as_dict()["fme_rejection_code"] == "CONFIGURATION"
        assert out.getAttribute("fair_parameter") == "FAIR_WEBHOOK_BODY"
        assert out.getAttribute("fme_rejection_message").startswith("FAIR_WEBHOOK_BODY=''")
    with open_store(fair_db) as store:
        assert set(store.counts().values()) == {0}


def test_over_the_watermark_in_reject_mode_leaves_through_output_with_429(fair_db, fake_clock):
    """A full backlog refuses the photo (retryable: the sender may send again): status 429,
    Retry-After, not stored, no <Rejected> feature, a WARN line."""
    macros = intake_macros(fair_db, FAIR_INTAKE_OVERLOAD_MODE="reject",
                           FAIR_INTAKE_WATERMARK="1")
    first = body(feature="{11111111-1111-4111-8111-111111111111}")
    run_caller(IntakeCaller, [{"message": first}], macros, clock=fake_clock)
    run = run_caller(IntakeCaller, [{"message": body()}], macros, clock=fake_clock)
    assert run.rejected == []
    (out,) = run.output
    values = out.as_dict()
    assert values["fair_http_status"] == 429 and values["fair_retry_after_s"] >= 1
    assert (values["fair_status"], values["fair_registration"], values["fair_answer"]) == (
        None, "OVER_BACKLOG", "over_backlog")
    assert run.log[-1].severity == "WARN" and "retry after" in run.log[-1].message


def test_headers_that_are_not_a_json_object_are_ignored_with_a_warning(fair_db, fake_clock):
    """webhook.headers holding garbage: the body is still registered, one WARN line."""
    run = run_caller(IntakeCaller, [{"message": body(), "webhook.headers": "not json"}],
                     intake_macros(fair_db), clock=fake_clock)
    assert run.output[0].getAttribute("fair_status") == "PENDING"
    assert run.output[0].isAttributeNull("fair_delivery_id")
    assert [line.severity for line in run.log[1:]] == ["WARN", "INFORM"]


@pytest.mark.parametrize("feature", [{"message": body().encode("utf-8")}])
def test_a_binary_message_attribute_is_read_as_utf8(fair_db, fake_clock, feature):
    """A reader handing the body as bytes: the same registration."""
    run = run_caller(IntakeCaller, [feature], intake_macros(fair_db), clock=fake_clock)
    assert run.output[0].getAttribute("fair_key") == KEY


def test_a_portal_token_in_the_published_parameter_is_warned_about_once(fair_db, fake_clock):
    """A body carrying the submitter's portal token through FAIR_WEBHOOK_BODY (which FME
    writes into the job log) is registered with one WARN naming the fix, without the token;
    the same body as the feature's message attribute gets no such warning."""
    macros = intake_macros(fair_db, FAIR_WEBHOOK_BODY=body(), FAIR_WEBHOOK_HEADERS=HEADERS)
    run = run_caller(IntakeCaller, [{}, {}], macros, clock=fake_clock)
    warnings = [m for m in run.messages("WARN") if "portal token" in m]
    assert len(warnings) == 1 and "turn off the portal info" in warnings[0]
    assert_no_secret(run.messages())
    attribute = run_caller(IntakeCaller, [{"message": body(), "webhook.headers": HEADERS}],
                           intake_macros(fair_db), clock=fake_clock)
    assert not [m for m in attribute.messages("WARN") if "portal token" in m]


def test_the_native_transformer_reads_its_parameters_off_the_feature(fair_db, fake_clock):
    """FairIntake's class takes ___XF_FAIR_DB and the body from the feature (removing them),
    registers the photo, and sends an invalid body out of its one port with
    fme_rejection_code set, for the template to route."""
    from fme_ai_resilience.fme.transformers import IntakeTransformer

    feature = {"___XF_FAIR_DB": fair_db, "___XF_FAIR_WEBHOOK_BODY": body(),
               "___XF_FAIR_WEBHOOK_HEADERS": HEADERS, "___XF_FAIR_INTAKE_ENGINES": "",
               "___XF_FAIR_INTAKE_FEATURE_SERVICES": SERVICE}
    run = run_caller(IntakeTransformer, [feature], {}, clock=fake_clock)
    (out,) = run.output
    assert out.as_dict() == registration()
    assert not [n for n in out.getAllAttributeNames() if n.startswith("___XF_")]
    bad = run_caller(IntakeTransformer, [{"___XF_FAIR_DB": fair_db,
                                          "___XF_FAIR_WEBHOOK_BODY": "{not json",
                                          "___XF_FAIR_INTAKE_FEATURE_SERVICES": SERVICE}], {},
                     clock=fake_clock)
    assert bad.rejected == [] and [f.getAttribute("fme_rejection_code")
                                   for f in bad.output] == ["INVALID_PAYLOAD"]


def _layer_notification(service: str = SERVICE, gens: str = "[4,9]") -> str:
    """An ArcGIS Online layer webhook's body, its changesUrl percent-encoded as Online sends it."""
    from urllib.parse import quote
    changes = f"{service}/extractChanges?serverGens={gens}&async=true&layers=[0]"
    return json.dumps([{"name": "inspections", "layerId": 0, "orgId": "AbC123",
                        "serviceName": "inspection", "lastUpdatedTime": 1_790_000_000_000,
                        "changesUrl": quote(changes, safe="").lower(),
                        "events": ["FeaturesCreated", "AttachmentsCreated"]}])


def test_an_arcgis_layer_notification_is_one_registration_feature_per_notification(
        fair_db, fake_clock):
    """WS-01 reads an ArcGIS layer webhook's body as the gateway does: one Output feature per
    notification kept (its photos become tasks when WS-02 reads the layer's changes), and a
    redelivery is a duplicate."""
    first = run_caller(IntakeCaller, [{"message": _layer_notification()}],
                       intake_macros(fair_db), clock=fake_clock)
    again = run_caller(IntakeCaller, [{"message": _layer_notification()}],
                       intake_macros(fair_db), clock=fake_clock)
    key = "changes:" + SERVICE.lower() + "/0/gens-4-9"
    assert [(f.getAttribute("fair_key"), f.getAttribute("fair_registration"),
             f.getAttribute("fair_http_status")) for f in first.output + again.output] == [
        (key, "NEW", 202), (key, "DUPLICATE_IN_PROGRESS", 202)]
    assert first.rejected == again.rejected == []
    with open_store(fair_db) as store:
        assert store.get(key).status is Status.PENDING


def test_an_arcgis_notification_for_a_foreign_service_is_rejected_as_unknown_service(
        fair_db, fake_clock):
    """ArcGIS is answered 200 (it deactivates webhooks after failures), yet the feature still
    leaves through <Rejected> as UNKNOWN_SERVICE: the answer's body says it was refused."""
    other = "https://other.example.com/arcgis/rest/services/x/FeatureServer"
    run = run_caller(IntakeCaller, [{"message": _layer_notification(other)}],
                     intake_macros(fair_db), clock=fake_clock)
    (out,) = run.rejected
    assert (out.getAttribute("fme_rejection_code"), out.getAttribute("fair_http_status")) == (
        "UNKNOWN_SERVICE", 200)
    assert run.output == []
