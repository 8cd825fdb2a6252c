"""The gateway and ArcGIS layer webhooks: the x-esriHook-Signature check, the crc_token
challenge, the form and CloudEvents bodies, and what the ledger keeps for each notification
(a real SQLite ledger). Signatures are computed here, from Esri's documented recipe, never by
the library under test."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
from urllib.parse import quote, urlencode

import pytest

from fme_ai_resilience.core.config.settings import IntakeSettings, Settings
from fme_ai_resilience.core.errors import ConfigurationError, FailureClass
from fme_ai_resilience.core.ledger import Status
from fme_ai_resilience.gateway import DEFAULT_SECRET_HEADER, make_app
from fme_ai_resilience.store import open_store

from helpers import DATA
from test_gateway_app import UntouchedStore, call


KEY = "hook-signature-key-5d21"
SECRET = "shared-s3cret-value"
SERVICE = "https://services.arcgis.com/AbC123xYz/arcgis/rest/services/inspection/FeatureServer"
SURVEY123 = (DATA / "survey123_add.json").read_bytes()
FORM = "application/x-www-form-urlencoded"


def esri_hmac(key: str, message: bytes) -> str:
    """``sha256=<base64 HMAC-SHA256>``, as Esri's documentation and samples compute it."""
    digest = hmac.new(key.encode("utf-8"), message, hashlib.sha256).digest()
    return "sha256=" + base64.b64encode(digest).decode("ascii")


def notification(layer: int = 0, low: int = 1, high: int = 5, events=("FeaturesCreated",),
                 service: str = SERVICE) -> dict:
    url = f"{service}/extractChanges?serverGens=[{low},{high}]&async=true&returnUpdates=true"
    return {"name": "inspection-hook", "layerId": layer, "orgId": "AbC123xYz",
            "serviceName": "inspection", "lastUpdatedTime": 1732954500000,
            "changesUrl": quote(url, safe=""), "events": list(events)}


def online(*notifications: dict) -> bytes:
    return json.dumps(list(notifications) or [notification()]).encode("utf-8")


@pytest.fixture
def store(tmp_path):
    s = open_store(f"sqlite:///{tmp_path / 'ledger.db'}", init_schema=True)
    yield s
    s.close()


def app_for(store, clock, **options):
    return make_app(Settings(intake=IntakeSettings(**options.pop("intake", {}))), store=store,
                    clock=clock, **options)


def signed(body: bytes, key: str = KEY) -> dict:
    return {"x-esriHook-Signature": esri_hmac(key, body)}


def tasks(store) -> int:
    counts = store.counts()
    return counts["PENDING"] + counts["DEFERRED"] + counts["PROCESSING"]


# -- the signature -------------------------------------------------------------------------------

def test_a_valid_signature_is_accepted(store, clock):
    """A notification signed with the configured key is kept: 202, one task."""
    body = online()
    status, _, answer = call(app_for(store, clock, arcgis_signature_key=KEY), body=body,
                             headers=signed(body))
    assert status == 202 and answer["status"] == "accepted", answer
    assert answer["sender"] == "arcgis_online" and tasks(store) == 1


def test_esris_percent_encoded_signature_header_is_accepted(store, clock):
    """The header value as Esri sends it, percent-encoded (``sha256%3D...``), is accepted."""
    body = online()
    value = quote(esri_hmac(KEY, body), safe="")
    assert value.startswith("sha256%3D")
    status, _, answer = call(app_for(store, clock, arcgis_signature_key=KEY), body=body,
                             headers={"x-esriHook-Signature": value})
    assert status == 202, answer


@pytest.mark.parametrize("over", ["raw-body", "payload"])
def test_a_form_body_signed_over_the_raw_body_or_the_payload_is_accepted(store, clock, over):
    """``payload=<json>`` signed over the form as sent, or over the payload value as Esri's
    Python sample computes it: both accepted."""
    payload = online()
    form = urlencode({"payload": payload.decode()}).encode()
    signature = esri_hmac(KEY, form if over == "raw-body" else payload)
    status, _, answer = call(app_for(store, clock, arcgis_signature_key=KEY), body=form,
                             content_type=FORM, headers={"x-esriHook-Signature": signature})
    assert status == 202 and answer["sender"] == "arcgis_online", answer
    assert tasks(store) == 1


def test_a_signature_sent_as_a_form_field_is_accepted(store, clock):
    """The signature in the form's ``x-esriHook-Signature`` field, over the payload."""
    payload = online()
    form = urlencode({"payload": payload.decode(),
                      "x-esriHook-Signature": esri_hmac(KEY, payload)}).encode()
    status, _, answer = call(app_for(store, clock, arcgis_signature_key=KEY), body=form,
                             content_type=FORM)
    assert status == 202, answer


@pytest.mark.parametrize("case", ["tampered", "other-key", "missing", "hex", "form-field"])
def test_a_bad_signature_is_401_and_counted(store, clock, case):
    """A tampered body, another key, no signature, a hex digest of another body: 401, nothing
    kept, one ``bad_signature`` counted for the sender."""
    body = online()
    tampered = online(notification(low=1, high=6))
    if case == "tampered":
        sent, headers, ctype = tampered, signed(body), "application/json"
    elif case == "other-key":
        sent, headers, ctype = body, signed(body, "another-key"), "application/json"
    elif case == "missing":
        sent, headers, ctype = body, {}, "application/json"
    elif case == "hex":
        digest = hmac.new(KEY.encode(), body, hashlib.sha256).hexdigest()
        sent, headers, ctype = tampered, {"x-esriHook-Signature": f"sha256={digest}"}, \
            "application/json"
    else:
        sent = urlencode({"payload": tampered.decode(),
                          "x-esriHook-Signature": esri_hmac(KEY, body)}).encode()
        headers, ctype = {}, FORM
    app = app_for(store, clock, arcgis_signature_key=KEY)
    status, _, answer = call(app, body=sent, headers=headers, content_type=ctype)
    assert status == 401 and answer["status"] == "unauthorized", answer
    assert tasks(store) == 0
    [count] = store.sender_counts()
    assert (count.sender, count.event, count.n) == ("arcgis_online", "bad_signature", 1)


def test_bad_signatures_are_counted_per_sender(store, clock):
    """Two refused Online deliveries and one Enterprise one are counted apart; a good one
    is counted as delivered."""
    app = app_for(store, clock, arcgis_signature_key=KEY)
    enterprise = json.dumps({"serviceType": "FeatureServer", "id": "hook-1", "name": "h",
                             "changesUrl": json.loads(online())[0]["changesUrl"],
                             "events": [{"eventType": "FeaturesCreated", "when": 1}]}).encode()
    for body in (online(), online(notification(low=2, high=3)), enterprise):
        assert call(app, body=body, headers={"x-esriHook-Signature": "sha256=AAAA"})[0] == 401
    assert call(app, body=online(), headers=signed(online()))[0] == 202
    counts = {(c.sender, c.event): c.n for c in store.sender_counts()}
    assert counts == {("arcgis_enterprise", "bad_signature"): 1,
                      ("arcgis_online", "bad_signature"): 2,
                      ("arcgis_online", "delivered"): 1}
    assert store.intake_counters() == {"invalid_not_kept": 0, "refusals_not_recorded": 0}


# -- the challenge -------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/", "/hooks/arcgis"])
def test_the_challenge_is_answered_with_the_keyed_hmac_of_the_token(store, clock, path):
    """``GET <hook>?crc_token=T`` answers 200 ``{"response_token": "sha256=<b64 HMAC(T)>"}``
    on any webhook path."""
    token = "Zm9vYmFyLWNyYy10b2tlbi0xMjM0"
    status, headers, answer = call(app_for(store, clock, arcgis_signature_key=KEY),
                                   method="GET", path=path, body=b"", length=None,
                                   environ_extra={"QUERY_STRING": f"crc_token={token}"})
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert answer == {"response_token": esri_hmac(KEY, token.encode())}


def test_a_percent_encoded_challenge_token_is_decoded_before_signing(store, clock):
    """A token's characters may arrive percent-encoded; its decoded value is signed."""
    token = "a.b~c-d_e"
    _, _, answer = call(app_for(store, clock, arcgis_signature_key=KEY), method="GET",
                        body=b"", length=None,
                        environ_extra={"QUERY_STRING": "crc_token=" + quote(token, safe="")
                                       .replace(".", "%2E").replace("~", "%7E")})
    assert answer == {"response_token": esri_hmac(KEY, token.encode())}


def test_a_hex_signature_is_accepted_too(store, clock):
    """One of Esri's pages describes the signature as a hex digest: it is read as well."""
    body = online()
    digest = hmac.new(KEY.encode(), body, hashlib.sha256).hexdigest()
    status, _, answer = call(app_for(store, clock, arcgis_signature_key=KEY), body=body,
                             headers={"x-esriHook-Signature": f"sha256={digest.upper()}"})
    assert status == 202 and tasks(store) == 1, answer


@pytest.mark.parametrize("token", [
    '[{"changesUrl":"x"}]', "payload=x", "a b", "a/b", "x" * 257, ""])
def test_a_challenge_token_that_could_be_a_body_is_never_signed(store, clock, token):
    """The challenge signs with the deliveries' key: a token holding what a JSON or form body
    needs (brackets, quotes, '=', '/', spaces), or over 256 characters, is refused 400, so no
    one can have a forged delivery signed through it."""
    status, _, answer = call(app_for(store, clock, arcgis_signature_key=KEY), method="GET",
                             body=b"", length=None,
                             environ_extra={"QUERY_STRING": "crc_token=" + quote(token)})
    assert status == 400 and "response_token" not in answer


def test_a_challenge_without_a_configured_key_is_400(clock):
    """Without a key the challenge cannot be answered: 400 saying why."""
    status, _, answer = call(make_app(store=UntouchedStore(), clock=clock), method="GET",
                             body=b"", length=None,
                             environ_extra={"QUERY_STRING": "crc_token=abc"})
    assert status == 400 and "signature key" in answer["reason"]


@pytest.mark.parametrize("query", ["crc_token=", "x=1&crc_token="])
def test_a_challenge_without_a_token_is_400(clock, query):
    """An empty crc_token is 400."""
    app = make_app(store=UntouchedStore(), clock=clock, arcgis_signature_key=KEY)
    status, _, answer = call(app, method="GET", body=b"", length=None,
                             environ_extra={"QUERY_STRING": query})
    assert status == 400 and "crc_token" in answer["reason"]


def test_an_empty_key_is_refused(clock):
    """An empty signature key is a configuration error, not an open door."""
    with pytest.raises(ConfigurationError):
        make_app(store=UntouchedStore(), clock=clock, arcgis_signature_key="")


# -- what the ledger keeps -----------------------------------------------------------------------

def test_a_redelivery_is_a_duplicate_with_one_task(store, clock):
    """The same notification twice: 202 accepted, then 202 duplicate_in_progress; one task."""
    app = app_for(store, clock)
    body = online()
    first = call(app, body=body)
    again = call(app, body=online(dict(notification(), lastUpdatedTime=1732954560000)))
    assert first[0] == 202 and first[2]["status"] == "accepted"
    assert again[0] == 202 and again[2]["status"] == "duplicate_in_progress", again
    assert tasks(store) == 1
    [key] = [s["key"] for s in first[2]["submissions"]]
    record = store.get(key)
    assert record.status is Status.PENDING and key.endswith("/0/gens-1-5")


def test_each_notification_of_an_array_is_a_task(store, clock):
    """Two layers in one delivery are two tasks; a deletion-only one among them adds none."""
    body = online(notification(0), notification(1),
                  notification(2, events=["FeaturesDeleted"]))
    status, _, answer = call(app_for(store, clock), body=body)
    assert status == 202 and answer["submission_count"] == 2 and tasks(store) == 2


def test_deletions_only_are_ignored_and_keep_no_task(store, clock):
    """A notification of deletions only is answered 200 ignored, and nothing is kept."""
    status, _, answer = call(app_for(store, clock),
                             body=online(notification(events=["FeaturesDeleted"])))
    assert status == 200 and answer["status"] == "ignored", answer
    assert answer["events"] == ["FeaturesDeleted"]
    assert sum(store.counts().values()) == 0


@pytest.mark.parametrize("content_type", ["application/json", FORM])
def test_an_invalid_arcgis_body_is_200_with_a_dead_letter(store, clock, content_type):
    """A notification whose changesUrl is no extractChanges URL is kept as a dead letter and
    answered 200 (ArcGIS deactivates a webhook after failures), saying it was refused."""
    item = notification()
    item["changesUrl"] = quote(f"{SERVICE}/0/query?where=1=1", safe="")
    body = online(item)
    if content_type == FORM:
        body = urlencode({"payload": body.decode()}).encode()
    status, _, answer = call(app_for(store, clock), body=body, content_type=content_type)
    assert status == 200 and answer["refused"] == 400 and answer["status"] == "invalid"
    record = store.get(answer["dead_letter"])
    assert record is not None and record.status is Status.DEAD
    assert tasks(store) == 0


def test_a_foreign_service_is_200_with_a_dead_letter(store, clock):
    """With ``intake.feature_services`` naming another service, the notification is an
    UNKNOWN_SERVICE dead letter answered 200."""
    other = "https://services.arcgis.com/OtherOrg/arcgis/rest/services/x/FeatureServer"
    app = app_for(store, clock, intake={"feature_services": (other,)})
    status, _, answer = call(app, body=online())
    assert status == 200 and answer["refused"] == 422, answer
    assert answer["status"] == "unknown_service"
    record = store.get(answer["dead_letter"])
    assert record.status is Status.DEAD
    assert record.failure_class is FailureClass.UNKNOWN_SERVICE
    assert tasks(store) == 0


def test_a_served_service_is_accepted(store, clock):
    """The same notification for a configured service (other case, trailing slash) is kept."""
    app = app_for(store, clock, intake={"feature_services": (SERVICE.upper()
                                                             .replace("HTTPS", "https") + "/",)})
    assert call(app, body=online())[0] == 202 and tasks(store) == 1


def test_a_structured_cloudevent_is_accepted_and_a_batch_is_415(store, clock):
    """application/cloudevents+json around a Survey123 body is kept; the batch mode is 415."""
    app = app_for(store, clock)
    envelope = {"specversion": "1.0", "id": "evt-1", "source": "/survey", "type": "submitted",
                "data": json.loads(SURVEY123)}
    status, _, answer = call(app, body=json.dumps(envelope).encode(),
                             content_type="application/cloudevents+json")
    assert status == 202 and answer["status"] == "accepted", answer
    status, _, answer = call(app, body=json.dumps([envelope]).encode(),
                             content_type="application/cloudevents-batch+json")
    assert status == 415 and "batch" in answer["reason"]


def test_a_cloudevent_without_an_id_is_a_400_dead_letter(store, clock):
    """A structured CloudEvent without id is a broken delivery: 400 and a dead letter."""
    envelope = {"specversion": "1.0", "source": "/survey", "type": "submitted",
                "data": json.loads(SURVEY123)}
    status, _, answer = call(app_for(store, clock), body=json.dumps(envelope).encode(),
                             content_type="application/cloudevents+json")
    assert status == 400 and answer["status"] == "invalid", answer
    assert store.get(answer["dead_letter"]).status is Status.DEAD


# -- the shared secret beside the ArcGIS key -----------------------------------------------------

@pytest.fixture
def guarded(store, clock):
    """A gateway with both a shared secret and the ArcGIS signature key."""
    return make_app(Settings(), store=store, clock=clock, shared_secret=SECRET,
                    arcgis_signature_key=KEY)


def test_an_arcgis_delivery_needs_its_signature_not_the_shared_secret(guarded, store):
    """ArcGIS cannot send the shared secret: a valid signature alone is enough."""
    body = online()
    status, _, answer = call(guarded, body=body, headers=signed(body))
    assert status == 202, answer
    assert tasks(store) == 1


def test_an_arcgis_delivery_with_the_shared_secret_but_no_signature_is_401(guarded, store):
    """With the key configured, the shared secret does not stand in for the signature."""
    status, _, _ = call(guarded, body=online(), headers={DEFAULT_SECRET_HEADER: SECRET})
    assert status == 401 and tasks(store) == 0


def test_a_survey123_delivery_still_needs_the_shared_secret(guarded, store):
    """A Survey123 body without the shared secret is 401; with it, 202."""
    assert call(guarded, body=SURVEY123)[0] == 401
    assert call(guarded, body=SURVEY123, headers=signed(SURVEY123))[0] == 401
    assert tasks(store) == 0
    status, _, answer = call(guarded, body=SURVEY123, headers={DEFAULT_SECRET_HEADER: SECRET})
    assert status == 202, answer


def test_without_the_key_an_arcgis_delivery_needs_the_shared_secret(store, clock):
    """No ArcGIS key configured: an ArcGIS body is held to the shared secret like any other."""
    app = make_app(Settings(), store=store, clock=clock, shared_secret=SECRET)
    body = online()
    assert call(app, body=body, headers=signed(body))[0] == 401
    assert call(app, body=body, headers={DEFAULT_SECRET_HEADER: SECRET})[0] == 202


# -- the ledger unreachable ----------------------------------------------------------------------

@pytest.fixture
def down():
    s = open_store("sqlite:////nonexistent-dir/ledger.db")
    yield s
    s.close()


@pytest.mark.parametrize("body", [online(), b'[{"changesUrl": "nowhere", "events": []}]'],
                         ids=["notification", "invalid"])
def test_an_unreachable_ledger_is_the_only_503(down, clock, body):
    """While the ledger cannot answer, an ArcGIS delivery that must be kept (a notification,
    or an invalid one's evidence) is 503 with Retry-After: the one answer that is not 2xx."""
    status, headers, answer = call(app_for(down, clock, arcgis_signature_key=KEY), body=body,
                                   headers=signed(body))
    assert status == 503 and int(headers["Retry-After"]) >= 1, answer


def test_a_bad_signature_is_401_even_when_it_cannot_be_counted(down, clock):
    """Counting a refused signature needs the ledger; without it the answer is still 401."""
    status, _, _ = call(app_for(down, clock, arcgis_signature_key=KEY), body=online(),
                        headers={"x-esriHook-Signature": "sha256=AAAA"})
    assert status == 401


def test_a_notification_with_nothing_to_keep_is_200_even_while_the_ledger_is_down(down, clock):
    """Deletions only: nothing is stored, so nothing is lost by answering 200; the sender's
    count is skipped (logged) rather than turned into a refusal."""
    body = online(notification(events=["FeaturesDeleted"]))
    status, _, answer = call(app_for(down, clock, arcgis_signature_key=KEY), body=body,
                             headers=signed(body))
    assert (status, answer["status"]) == (200, "ignored")


@pytest.mark.parametrize("secret", [None, "shared-secret-5e1"])
def test_an_array_with_items_it_cannot_read_keeps_the_others_and_answers_202(
        store, clock, secret):
    """One item without changesUrl and one without a range beside a good notification: the
    good one is kept, the body is a dead letter with the reason, and ArcGIS gets 202 (never a
    400 or 401 that would count toward deactivating its webhook)."""
    odd = {"name": "inspection-hook", "layerId": 0, "events": ["LayerSchemaChanged"]}
    broken = dict(notification(1), changesUrl=quote(f"{SERVICE}/extractChanges?async=true"))
    body = online(notification(), odd, broken)
    status, _, answer = call(app_for(store, clock, arcgis_signature_key=KEY,
                                     shared_secret=secret), body=body, headers=signed(body))
    assert (status, answer["status"], answer["unread"]) == (202, "accepted", 2), answer
    assert tasks(store) == 1
    dead = store.get(answer["dead_letter"])
    assert dead.status is Status.DEAD and "2 of the delivery's notifications" in dead.last_error
