"""extractChanges: a synchronous answer, an asynchronous job polled to its result, a job that
fails or takes too long (each with the class the retry engine retries by), and no request to a
server but the layer's own; the sender-health warnings check raises."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
import responses

from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.errors import ArcGISError, ErrorClass
from fme_ai_resilience.core.ledger import BAD_SIGNATURE, DELIVERED, SenderCount
from fme_ai_resilience.core.observe.alerts import SENDER_SILENCE_S, AlertLevel, sender_alerts
from fme_ai_resilience.services.arcgis.changes import extract_changes
from fme_ai_resilience.services.arcgis.credentials import StaticToken
from fme_ai_resilience.services.arcgis.layer import FeatureLayer

SERVICE = "https://services.example.com/arcgis/rest/services/Assets/FeatureServer"
CHANGES = f"{SERVICE}/extractChanges?serverGens=[3,9]&async=true&layers=[0]"
STATUS = f"{SERVICE}/jobs/j1"
RESULT = f"{SERVICE}/replicafiles/j1.json"
TOKEN = "changes-token-81c2"
EDITS = {"layerServerGens": [{"id": 0, "serverGen": 9}],
         "responseType": "esriDataChangesResponseTypeEdits",
         "edits": [{"id": 0, "features": {"adds": [{"attributes": {"objectid": 4}}],
                                          "updates": [], "deleteIds": []}}]}


def layer(clock) -> FeatureLayer:
    return FeatureLayer(f"{SERVICE}/0", token=StaticToken(TOKEN), clock=clock)


@responses.activate
def test_a_synchronous_answer_is_the_result_and_the_token_rides_in_the_header():
    responses.get(f"{SERVICE}/extractChanges", json=EDITS)
    clock = FakeClock()
    assert extract_changes(layer(clock), CHANGES, clock=clock)["edits"] == EDITS["edits"]
    sent = responses.calls[0].request
    query = parse_qs(urlsplit(sent.url).query)
    assert query["serverGens"] == ["[3,9]"] and query["f"] == ["json"]
    assert "token" not in query and sent.headers["X-Esri-Authorization"] == f"Bearer {TOKEN}"


@responses.activate
def test_an_asynchronous_job_is_polled_until_complete_then_its_result_read():
    responses.get(f"{SERVICE}/extractChanges", json={"statusUrl": STATUS})
    responses.get(STATUS, json={"status": "Pending"})
    responses.get(STATUS, json={"status": "InProgress"})
    responses.get(STATUS, json={"status": "Completed", "resultUrl": RESULT})
    responses.get(RESULT, json=EDITS)
    clock = FakeClock()
    started = clock.monotonic()
    assert extract_changes(layer(clock), CHANGES, clock=clock)["edits"] == EDITS["edits"]
    assert [c.request.url.split("?")[0] for c in responses.calls] == [
        f"{SERVICE}/extractChanges", STATUS, STATUS, STATUS, RESULT]
    assert clock.monotonic() - started == pytest.approx(0.5 + 0.75)   # growing pauses


@responses.activate
@pytest.mark.parametrize("state", ["Failed", "Cancelled"])
def test_a_job_that_ends_without_a_result_is_a_server_error_retried_later(state):
    responses.get(f"{SERVICE}/extractChanges", json={"statusUrl": STATUS})
    responses.get(STATUS, json={"status": state})
    clock = FakeClock()
    with pytest.raises(ArcGISError) as caught:
        extract_changes(layer(clock), CHANGES, clock=clock)
    assert caught.value.error_class is ErrorClass.SERVER_ERROR and state in str(caught.value)


@responses.activate
def test_a_job_that_takes_longer_than_the_wait_times_out():
    responses.get(f"{SERVICE}/extractChanges", json={"statusUrl": STATUS})
    responses.get(STATUS, json={"status": "InProgress"})
    clock = FakeClock()
    with pytest.raises(ArcGISError) as caught:
        extract_changes(layer(clock), CHANGES, clock=clock, wait_s=10)
    assert caught.value.error_class is ErrorClass.TTFB_TIMEOUT
    polls = sum(1 for c in responses.calls if c.request.url.startswith(STATUS))
    assert 3 <= polls <= 10


@responses.activate
@pytest.mark.parametrize("status_url", [
    "https://elsewhere.example.net/jobs/j1",
    "https://services.example.com@elsewhere.example.net/jobs/j1",
    "http://services.example.com/arcgis/rest/services/Assets/FeatureServer/jobs/j1"])
def test_a_status_url_on_another_server_gets_no_request(status_url):
    responses.get(f"{SERVICE}/extractChanges", json={"statusUrl": status_url})
    clock = FakeClock()
    with pytest.raises(ArcGISError) as caught:
        extract_changes(layer(clock), CHANGES, clock=clock)
    assert caught.value.error_class is ErrorClass.BAD_REQUEST
    assert len(responses.calls) == 1


@responses.activate
def test_a_status_url_spelling_the_layer_s_server_otherwise_is_polled():
    """The same origin, written with its default port and in capitals, is the layer's own."""
    status_url = STATUS.replace("services.example.com", "SERVICES.example.com:443")
    responses.get(f"{SERVICE}/extractChanges", json={"statusUrl": status_url})
    responses.get(status_url, json={"status": "Completed", "resultUrl": RESULT})
    responses.get(RESULT, json=EDITS)
    clock = FakeClock()
    assert extract_changes(layer(clock), CHANGES, clock=clock)["edits"] == EDITS["edits"]
    assert len(responses.calls) == 3


@responses.activate
def test_an_answer_that_is_neither_result_nor_job_is_a_bad_format():
    responses.get(f"{SERVICE}/extractChanges", json={"hello": 1})
    clock = FakeClock()
    with pytest.raises(ArcGISError) as caught:
        extract_changes(layer(clock), CHANGES, clock=clock)
    assert caught.value.error_class is ErrorClass.BAD_FORMAT


@responses.activate
def test_the_services_own_error_keeps_its_class():
    responses.get(f"{SERVICE}/extractChanges",
                  json={"error": {"code": 400, "message": "Change tracking is not enabled"}})
    clock = FakeClock()
    with pytest.raises(ArcGISError) as caught:
        extract_changes(layer(clock), CHANGES, clock=clock)
    assert caught.value.error_class is ErrorClass.BAD_REQUEST


def test_a_sender_silent_for_over_a_day_warns_and_a_recent_one_does_not():
    now = 1_800_000_000.0
    quiet = SenderCount("arcgis_online", DELIVERED, 40, now - 86400 * 3, now - SENDER_SILENCE_S - 1)
    busy = SenderCount("arcgis_enterprise", DELIVERED, 40, now - 86400 * 3, now - 60)
    alerts = sender_alerts([quiet, busy], now=now, window_s=900)
    assert [(a.level, a.signal) for a in alerts] == [(AlertLevel.WARN, "sender_silent")]
    assert "arcgis_online" in alerts[0].message and "notificationStatus" in alerts[0].message


def test_signatures_refused_in_the_window_warn_and_older_ones_do_not():
    now = 1_800_000_000.0
    recent = SenderCount("arcgis_online", BAD_SIGNATURE, 3, now - 5000, now - 100)
    old = SenderCount("arcgis_enterprise", BAD_SIGNATURE, 9, now - 9000, now - 5000)
    alerts = sender_alerts([recent, old], now=now, window_s=900)
    assert [(a.signal, "arcgis_online" in a.message) for a in alerts] == [
        ("sender_signatures", True)]


@responses.activate
@pytest.mark.parametrize("status_url", ["https://[services.example.com/jobs/1",
                                        "https://services.example.com:99999/jobs/1", 42])
def test_a_status_url_that_is_no_url_is_refused_not_raised(status_url):
    """A statusUrl that does not parse (or is no text) is the service's bad answer, refused
    with a class the retry engine reads, never a ValueError that would crash the batch."""
    responses.get(f"{SERVICE}/extractChanges", json={"statusUrl": status_url})
    clock = FakeClock()
    with pytest.raises(ArcGISError) as caught:
        extract_changes(layer(clock), CHANGES, clock=clock)
    assert caught.value.error_class in (ErrorClass.BAD_REQUEST, ErrorClass.BAD_FORMAT)
    assert len(responses.calls) == 1


@responses.activate
def test_a_status_url_with_its_own_query_keeps_it_and_a_job_with_errors_is_read():
    """``statusUrl?token-free=1``: its own query travels with ``f=json``; a job that completed
    with errors is read as far as it goes (with a warning)."""
    responses.get(f"{SERVICE}/extractChanges", json={"statusUrl": f"{STATUS}?jobKind=changes"})
    responses.get(STATUS, json={"status": "CompletedWithErrors", "resultUrl": RESULT})
    responses.get(RESULT, json=dict(EDITS, exceededTransferLimit=True))
    clock = FakeClock()
    assert extract_changes(layer(clock), CHANGES, clock=clock)["edits"] == EDITS["edits"]
    polled = parse_qs(urlsplit(responses.calls[1].request.url).query)
    assert polled == {"jobKind": ["changes"], "f": ["json"]}


@responses.activate
def test_the_first_poll_wait_is_a_setting_and_grows_to_ten_times_it():
    """``poll_s`` (``arcgis.changes_poll_s``): the waits are poll_s, 1.5 times, ... capped at
    ten times poll_s, all within ``wait_s``."""
    responses.get(f"{SERVICE}/extractChanges", json={"statusUrl": STATUS})
    responses.get(STATUS, json={"status": "InProgress"})
    clock = FakeClock()
    sleeps = []
    original = clock.sleep

    def recorded(seconds):
        sleeps.append(round(seconds, 6))
        original(seconds)

    clock.sleep = recorded
    with pytest.raises(ArcGISError):
        extract_changes(layer(clock), CHANGES, clock=clock, wait_s=60, poll_s=0.2)
    assert sleeps[:3] == [0.2, 0.3, 0.45] and max(sleeps) == pytest.approx(2.0)
    assert sum(sleeps) == pytest.approx(60)
