"""The layer webhook sender: ArcGIS's challenge, thin signed notifications whose changesUrl the
layer answers, the three body styles, and deactivation after failures in a row."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from urllib.parse import parse_qsl, unquote

import pytest
import requests

from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.drill.standins import (FeatureLayerStandIn, LayerWebhookSender, Reply,
                                              StandInServer)
from fme_ai_resilience.drill.standins.server import THREAD_PREFIX

KEY = "hook-secret"
TOKEN = "layer-token"
AUTH = {"X-Esri-Authorization": f"Bearer {TOKEN}"}


class Receiver(StandInServer):
    """A webhook receiver on loopback: answers the challenge with ``key`` and each delivery
    with the next of ``statuses`` (then 200), after ``delay_s`` real seconds."""

    kind = "hook-receiver"

    def __init__(self, key=KEY, statuses=(), delay_s=0.0):
        super().__init__()
        self.key = key
        self.statuses = list(statuses)
        self.delay_s = delay_s
        self.challenges = []
        self.requests = []

    def handle(self, request):
        if request.method == "GET" and "crc_token" in request.query:
            token = request.query["crc_token"]
            with self.lock:
                self.challenges.append(token)
            digest = hmac.new(self.key.encode(), token.encode(), hashlib.sha256).digest()
            return Reply.json(200, {"response_token": "sha256="
                                    + base64.b64encode(digest).decode()})
        with self.lock:
            self.requests.append(request)
            status = self.statuses.pop(0) if self.statuses else 200
        return Reply.json(status, {"success": "true"}, delay_s=self.delay_s)

    def received(self):
        with self.lock:
            return list(self.requests)


def _signed_right(request, key=KEY):
    digest = hmac.new(key.encode(), request.body, hashlib.sha256).digest()
    return request.header("x-esrihook-signature") == "sha256=" + base64.b64encode(
        digest).decode()


@pytest.fixture
def layer():
    with FeatureLayerStandIn(seed=5, token=TOKEN, time_scale=0.01) as stand_in:
        yield stand_in


@pytest.fixture
def receiver():
    with Receiver() as hook:
        yield hook


#: The delivery timeout of the senders here, in schedule seconds: 5 real seconds at the layer's
#: scale, so a loaded machine's pause on loopback is never a failed delivery (ArcGIS's own 10 s
#: is 0.1 real s here; the timeout test sets its own).
TIMEOUT_S = 500.0


def _sender(layer, receiver, **options):
    options.setdefault("timeout_s", TIMEOUT_S)
    return LayerWebhookSender(layer, f"{receiver.url}/hook", signature_key=KEY, **options)


def _follow(changes_url, seconds=20.0):
    """Decode a notification's changesUrl, submit the job and fetch its result."""
    url = unquote(changes_url)
    submitted = requests.get(url, headers=AUTH, timeout=10).json()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = requests.get(submitted["statusUrl"], params={"f": "json"}, headers=AUTH,
                              timeout=10).json()
        if status["status"] == "Completed":
            return requests.get(status["resultUrl"], headers=AUTH, timeout=10).json()
        assert status["status"] in ("Pending", "InProgress")
        time.sleep(0.01)
    pytest.fail("the extractChanges job never completed")


def test_registration_answers_the_challenge_with_the_keyed_hmac(layer, receiver):
    """A receiver that answers the crc_token right registers the sender."""
    sender = _sender(layer, receiver)
    assert sender.register() is True
    assert len(receiver.challenges) == 1
    assert sender.snapshot()["registered"] is True


def test_a_wrong_challenge_answer_leaves_the_sender_inactive(layer):
    """Answered with another key, the sender is not registered and never sends."""
    with Receiver(key="another-key") as hook:
        sender = _sender(layer, hook)
        assert sender.register() is False
        layer.add_feature()
        assert sender.send_due() is None
        assert hook.received() == []
        assert sender.snapshot()["registered"] is False


def test_a_signed_json_notification_whose_changes_url_the_layer_answers(layer, receiver):
    """online-json: an array of one notification, signed over the raw body; its
    percent-encoded changesUrl decodes to an extractChanges the layer answers with the feature."""
    sender = _sender(layer, receiver, name="inspections-hook")
    assert sender.register()
    start = layer.changes.current()
    assert sender.send_due() is None                  # nothing changed yet
    feature = layer.add_feature(photos=2)
    assert sender.send_due() is True
    (request,) = receiver.received()
    assert request.content_type == "application/json"
    assert _signed_right(request)
    (note,) = json.loads(request.body)
    assert note["name"] == "inspections-hook" and note["layerId"] == 0
    assert note["serviceName"] == layer.service_name and note["orgId"]
    assert isinstance(note["lastUpdatedTime"], int)
    assert note["events"] == ["FeaturesCreated", "AttachmentsCreated"]
    assert note["changesUrl"].startswith("http%3a%2f%2f127.0.0.1")
    decoded = unquote(note["changesUrl"])
    assert f"serverGens=[{start},{start + 1}]" in decoded and "layers=[0]" in decoded
    result = _follow(note["changesUrl"])
    adds = result["edits"][0]["features"]["adds"]
    assert [a["attributes"]["globalid"] for a in adds] == [feature.global_id]
    assert sender.send_due() is None                  # covered: nothing new
    snap = sender.snapshot()
    assert [(status, gens) for _, status, gens in snap["deliveries"]] == [
        (200, (start, start + 1))]
    assert snap["notified_gen"] == start + 1


def test_the_write_back_s_own_edits_are_notified_as_updates(layer, receiver):
    """An applyEdits update is a change too: FeaturesUpdated for the next range."""
    sender = _sender(layer, receiver)
    sender.register()
    feature = layer.add_feature()
    sender.send_due()
    requests.post(f"{layer.layer_url}/applyEdits", data={
        "f": "json", "useGlobalIds": "true",
        "updates": json.dumps([{"attributes": {"globalid": feature.global_id}}])},
        headers=AUTH, timeout=10)
    assert sender.send_due() is True
    assert json.loads(receiver.received()[-1].body)[0]["events"] == ["FeaturesUpdated"]


def test_the_form_style_sends_the_payload_form_encoded_and_signs_the_raw_body(layer, receiver):
    """online-form: ``payload=<json>``, form-encoded; the signature is over the bytes sent."""
    sender = _sender(layer, receiver, style="online-form")
    sender.register()
    layer.add_feature()
    assert sender.send_due() is True
    (request,) = receiver.received()
    assert request.content_type == "application/x-www-form-urlencoded"
    assert request.body.startswith(b"payload=")
    assert _signed_right(request)
    (note,) = json.loads(dict(parse_qsl(request.body.decode()))["payload"])
    assert "adds" in _follow(note["changesUrl"])["edits"][0]["features"]


def test_the_enterprise_style_sends_one_object_with_timed_events(layer, receiver):
    """enterprise: one JSON object with serviceType, the webhook id and events with when."""
    sender = _sender(layer, receiver, style="enterprise")
    sender.register()
    feature = layer.add_feature(photos=0)
    assert sender.send_due() is True
    (request,) = receiver.received()
    assert _signed_right(request)
    body = json.loads(request.body)
    assert body["serviceType"] == "FeatureServer" and body["id"] == sender.webhook_id
    assert body["folderName"] == "" and body["serviceName"] == layer.service_name
    assert [e["eventType"] for e in body["events"]] == ["FeaturesCreated"]
    assert all(isinstance(e["when"], int) for e in body["events"])
    adds = _follow(body["changesUrl"])["edits"][0]["features"]["adds"]
    assert [a["attributes"]["globalid"] for a in adds] == [feature.global_id]


def test_per_layer_sends_one_notification_per_layer_with_the_same_range(layer, receiver):
    """notify_layers=(0, 1): two deliveries per batch, layerId 0 and 1, one changesUrl."""
    sender = _sender(layer, receiver, per_layer=True, notify_layers=(0, 1))
    sender.register()
    layer.add_feature()
    assert sender.send_due() is True
    notes = [json.loads(r.body)[0] for r in receiver.received()]
    assert [n["layerId"] for n in notes] == [0, 1]
    assert notes[0]["changesUrl"] == notes[1]["changesUrl"]
    assert "layers=[0]" in unquote(notes[1]["changesUrl"])


def test_failures_in_a_row_deactivate_the_sender_and_repeat_the_range(layer):
    """Three 500s with number_of_failures=3: the same range each time, then deactivated."""
    with Receiver(statuses=[500, 503, 500]) as hook:
        sender = _sender(layer, hook, number_of_failures=3)
        sender.register()
        layer.add_feature()
        assert [sender.send_due() for _ in range(3)] == [False, False, False]
        snap = sender.snapshot()
        assert snap["deactivated"] is True and snap["failures_in_a_row"] == 3
        assert len({gens for _, _, gens in snap["deliveries"]}) == 1
        layer.add_feature()
        assert sender.send_due() is None
        assert len(hook.received()) == 3


def test_one_success_resets_the_failure_count(layer):
    """Two failures, then a success: the count is back to 0 and the range is notified."""
    with Receiver(statuses=[500, 500, 200]) as hook:
        sender = _sender(layer, hook, number_of_failures=3)
        sender.register()
        layer.add_feature()
        assert [sender.send_due() for _ in range(3)] == [False, False, True]
        snap = sender.snapshot()
        assert snap["failures_in_a_row"] == 0 and snap["deactivated"] is False
        assert [s for _, s, _ in snap["deliveries"]] == [500, 500, 200]
        assert snap["notified_gen"] == layer.changes.current()


def test_no_answer_within_the_timeout_is_a_failure(layer):
    """timeout_s is schedule time: 150 s at time_scale 0.01 is 1.5 real s; an answer 3 real
    seconds late is a failure recorded with no status. The challenge, answered at once, is
    within the same timeout with as wide a margin."""
    with Receiver(delay_s=3.0) as hook:
        sender = _sender(layer, hook, timeout_s=150.0)
        assert sender.register() is True
        layer.add_feature()
        assert sender.send_due() is False
        (delivery,) = sender.snapshot()["deliveries"]
        assert delivery[1] is None
        assert sender.snapshot()["failures_in_a_row"] == 1


def test_without_a_key_there_is_no_challenge_and_no_signature(layer, receiver):
    """No signature key: registered at once, bodies unsigned."""
    sender = LayerWebhookSender(layer, f"{receiver.url}/hook", timeout_s=TIMEOUT_S)
    assert sender.register() is True and receiver.challenges == []
    layer.add_feature()
    assert sender.send_due() is True
    assert receiver.received()[0].header("x-esrihook-signature") is None


def test_the_schedule_sends_on_its_own_and_stops_cleanly(layer, receiver):
    """start(): notifications every interval (schedule seconds); stop() joins the thread."""
    sender = _sender(layer, receiver, interval_s=5.0)     # 0.05 real seconds
    sender.register()
    with sender:
        layer.add_feature()
        deadline = time.monotonic() + 20
        while not receiver.received() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(receiver.received()) == 1
    assert not [t for t in threading.enumerate()
                if t.name == f"{THREAD_PREFIX}layer-webhook" and t.is_alive()]


def test_the_schedule_keeps_its_ticks_whenever_it_was_started(layer, receiver):
    """Started half into an interval of the layer's schedule, the sender notifies at the
    interval's end, not a whole interval after it started: every subject is notified at the
    same schedule times, however long its receiver took to come up. Seen at 400, never 600
    (a whole interval after the start), with 2 real seconds either way."""
    sender = _sender(layer, receiver, interval_s=400.0)     # 4 real seconds
    assert sender.register() is True
    layer.add_feature()
    layer.restart_schedule()
    time.sleep(2.0)                                        # 200 schedule seconds in
    with sender:
        deadline = time.monotonic() + 20
        while not receiver.received() and time.monotonic() < deadline:
            time.sleep(0.01)
        notified_at = layer.schedule_time()
    assert receiver.received() and 399.0 <= notified_at < 600.0, notified_at


@pytest.mark.parametrize("options", [
    {"hook_url": "http://example.com/hook"}, {"hook_url": "https://127.0.0.1/hook"},
    {"style": "cloudevents"}, {"number_of_failures": 0}, {"interval_s": 0},
    {"signature_key": ""}, {"notify_layers": ()}])
def test_bad_settings_and_urls_off_loopback_are_refused(layer, options):
    """Anything off loopback, an unknown style or a bad number is a ConfigurationError."""
    arguments = {"hook_url": "http://127.0.0.1:9/hook", **options}
    with pytest.raises(ConfigurationError):
        LayerWebhookSender(layer, arguments.pop("hook_url"), **arguments)
