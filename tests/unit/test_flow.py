"""FME Flow REST client: each operation routed by the server's build, the engine capacity
verdict behind a background-refreshed cache, bounded answers, no token leaks."""
from __future__ import annotations

import json
import logging
import threading

import pytest
import requests
import responses
from responses import matchers

from fme_ai_resilience.core.errors import ConfigurationError, FlowError
from fme_ai_resilience.services.flow.client import Engine, FlowClient, FlowHealth
from fme_ai_resilience.services.flow.health import NOT_YET, OVERDUE

from helpers import DATA


BASE = "https://flow.example.com"
TOKEN = "fmetoken-secret-4b1d9e"
AUTH = matchers.header_matcher({"Authorization": f"fmetoken token={TOKEN}"})
NEW, MIDDLE, OLD = 26100, 25615, 22300


def v4(rsps, queued=0, running=0, engines=((1, 5), (2, -1))):
    for status, n in (("queued", queued), ("running", running)):
        rsps.get(f"{BASE}/fmeapiv4/jobs", match=[AUTH, matchers.query_param_matcher(
            {"status": status, "limit": "1"})],
            json={"offset": 0, "limit": 1, "totalCount": n, "items": []})
    rsps.get(f"{BASE}/fmeapiv4/engines", match=[AUTH], json={"totalCount": len(engines), "items": [
        {"name": f"engine{i}", "hostname": "h", "currentJobID": job, "state": "active",
         "assignedQueues": ["Default"]} for i, job in engines]})


def client_at(clock, build=NEW, **kwargs):
    return FlowClient(BASE, TOKEN, clock=clock, build=build, **kwargs)


@responses.activate
def test_v4_counts_and_engines(clock):
    """Queued/running counts come from totalCount; an engine with currentJobID -1 is idle;
    the engines are asked for as Safe's CLI asks, with no query (no v3-style limit=-1)."""
    v4(responses, queued=3, running=1)
    client = client_at(clock)
    assert client.job_counts() == (3, 1)
    assert client.engines() == [Engine("engine1", True, ("Default",)),
                                Engine("engine2", False, ("Default",))]
    assert responses.calls[-1].request.url == f"{BASE}/fmeapiv4/engines"
    assert client.api_version == "v4"


@responses.activate
def test_below_build_25208_the_lists_are_read_through_v3(clock):
    """On FME Flow 2025.0 and older the job lists and engines come from /fmerest/v3."""
    responses.get(f"{BASE}/fmerest/v3/transformations/jobs/queued", match=[AUTH],
                  json={"offset": -1, "limit": -1, "totalCount": 4, "items": []})
    responses.get(f"{BASE}/fmerest/v3/transformations/jobs/running", match=[AUTH],
                  json={"totalCount": 2, "items": []})
    responses.get(f"{BASE}/fmerest/v3/transformations/engines", match=[AUTH],
                  json=[{"instanceName": "e1", "currentJobID": 17},
                        {"instanceName": "e2", "currentJobID": 18}])
    client = client_at(clock, build=25207)
    health = client.refresh_health()
    assert client.api_version == "v3"
    assert (health.queued, health.running, health.engines, health.busy_engines) == (4, 2, 2, 2)
    assert health.has_capacity is False  # all busy and 4 >= 2 queued
    assert not any("/fmeapiv4" in c.request.url for c in responses.calls)


@pytest.mark.parametrize("build, expected", [
    (OLD, {"repositories": "v3", "upload": "v3", "schedules": "v3", "submit": "v3",
           "jobs": "v3", "engines": "v3"}),
    (22337, {"repositories": "v4", "upload": "v3", "schedules": "v3", "submit": "v3",
             "jobs": "v3", "engines": "v3"}),
    (MIDDLE, {"repositories": "v4", "upload": "v3", "schedules": "v3", "submit": "v3",
              "jobs": "v4", "engines": "v4"}),
    (26018, {"repositories": "v4", "upload": "v4", "schedules": "v4", "submit": "v4",
             "jobs": "v4", "engines": "v4"}),
])
def test_each_operation_goes_to_the_version_its_build_serves(clock, build, expected):
    """Safe's CLI thresholds: v4 repositories from 22337, lists from 25208, jobs from 26018."""
    assert client_at(clock, build=build).routes() == expected


@responses.activate
def test_the_build_is_read_once_from_fmeinfo_or_the_v3_info(clock):
    """/fmeinfo/version's buildNumber; when it is missing, the build in /fmerest/v3/info."""
    responses.get(f"{BASE}/fmeinfo/version", json={"buildNumber": 25615})
    client = FlowClient(BASE, TOKEN, clock=clock)
    assert client.server_build() == 25615 and client.server_build() == 25615
    assert len(responses.calls) == 1
    responses.replace(responses.GET, f"{BASE}/fmeinfo/version", status=404, json={})
    responses.get(f"{BASE}/fmerest/v3/info",
                  json={"build": "FME Server 2022.0.1.1 - Build 22350 - win64"})
    assert FlowClient(BASE, TOKEN, clock=clock).server_build() == 22350


@responses.activate
@pytest.mark.parametrize("answer", [b"<html>sign in</html>", b'{"buildNumber": "26018"}',
                                    b"[1, 2]"])
def test_an_unusable_fmeinfo_answer_falls_back_to_the_v3_info(clock, answer):
    """/fmeinfo/version answering 200 with a page, a text build or a list: the build comes
    from /fmerest/v3/info, as when it answers 404."""
    responses.get(f"{BASE}/fmeinfo/version", body=answer)
    responses.get(f"{BASE}/fmerest/v3/info",
                  json={"build": "FME Server 2023.1 - Build 23619 - linux-x64"})
    assert FlowClient(BASE, TOKEN, clock=clock).server_build() == 23619


@pytest.mark.parametrize("queued, engines, capacity", [
    (0, ((1, 5), (2, -1)), True),       # one idle engine
    (5, ((1, 5), (2, 6)), False),       # all busy, queue >= engines
    (1, ((1, 5), (2, 6)), True),        # all busy but the queue is short
    (0, (), False),                     # no engine registered
])
@responses.activate
def test_capacity_verdict(clock, queued, engines, capacity):
    """No capacity means no engine, or every engine busy with a queue at least as long."""
    v4(responses, queued=queued, engines=engines)
    health = client_at(clock).refresh_health()
    assert health.reachable and health.has_capacity is capacity
    assert health.idle_engines == sum(1 for _, job in engines if job < 0)


@responses.activate
def test_health_answers_at_once_and_is_refreshed_in_the_background(clock):
    """The first call answers "not known" without waiting and starts the probe; its answer
    is then reused for the TTL, and a stale one is served while the next probe runs."""
    v4(responses)
    client = client_at(clock, cache_ttl_s=5.0, max_stale_s=30.0)
    first = client.health()
    assert (first.reachable, first.has_capacity, first.error) == (False, True, NOT_YET)
    assert client.wait_for_probe(10)
    fresh = client.health()
    assert fresh.reachable and len(responses.calls) == 3
    clock.advance(4.9)
    assert client.health() is fresh and len(responses.calls) == 3
    clock.advance(0.2)
    assert client.health() is fresh  # stale, served while the refresh runs
    assert client.wait_for_probe(10) and len(responses.calls) == 6
    assert client.health() is not fresh


def test_a_probe_in_flight_is_never_waited_for(clock):
    """While a probe hangs, every caller gets an answer at once; past the deadline the
    answer says the probe overran it; one probe runs at a time."""
    gate, entered, hits = threading.Event(), threading.Event(), []

    def hang(request):
        hits.append(request.url)
        entered.set()
        gate.wait(10)
        return 200, {}, json.dumps({"totalCount": 0, "items": []})

    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        rsps.add_callback(responses.GET, f"{BASE}/fmeapiv4/jobs", callback=hang)
        client = client_at(clock, probe_deadline_s=10.0)
        try:
            assert client.health().error == NOT_YET
            assert entered.wait(10)
            assert client.health().error == NOT_YET
            clock.advance(10.5)
            assert client.health().error == OVERDUE
            assert len(hits) == 1
        finally:
            gate.set()
            client.wait_for_probe(10)


@responses.activate
def test_a_closed_client_starts_no_probe_and_closes_its_session(clock):
    """After close() health() still answers at once, says why it knows nothing, and starts
    no background thread; the session the client made is closed."""
    v4(responses)
    client = client_at(clock)
    client.refresh_health()
    closed = []
    client._session.close = lambda: closed.append(True)
    client.close()
    clock.advance(60)
    before = {t.name for t in threading.enumerate()}
    health = client.health()
    assert (health.reachable, health.has_capacity) == (False, True) and "closed" in health.error
    assert "fair-flow-health" not in {t.name for t in threading.enumerate()} - before
    assert client.wait_for_probe(0) and len(responses.calls) == 3
    assert closed == [True]


@pytest.mark.parametrize("body", [
    "[" * 100_000 + "]" * 100_000,
    json.dumps({"totalCount": True, "items": []}),
    json.dumps({"totalCount": 10 ** 30, "items": [{"currentJobID": []}]}),
    "x" * 5000,
    json.dumps({"items": "none"}),
])
def test_health_never_raises_whatever_flow_answers(clock, body):
    """Deep nesting, a boolean count, huge numbers, an oversize or odd body: health()
    answers, reachable or not, and never raises."""
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        rsps.get(f"{BASE}/fmeapiv4/jobs", body=body)
        rsps.get(f"{BASE}/fmeapiv4/engines", body=body)
        client = client_at(clock, max_answer_bytes=4096)
        health = client.refresh_health()
        assert isinstance(health, FlowHealth) and health.has_capacity is True or \
            health.reachable
        assert isinstance(client.health(), FlowHealth)


def test_an_oversize_answer_is_cut_at_the_limit(clock):
    """An answer larger than max_answer_bytes is a FlowError saying so, not a whole read."""
    with responses.RequestsMock() as rsps:
        rsps.get(f"{BASE}/fmeapiv4/repositories", body=b"[" + b" " * 10_000 + b"]")
        with pytest.raises(FlowError, match="larger than 1000 bytes"):
            client_at(clock, max_answer_bytes=1000).repositories()


@responses.activate
def test_unreachable_flow_never_blocks_intake(clock, caplog):
    """A failed probe reports reachable=False, has_capacity=True, and leaks no token."""
    responses.get(f"{BASE}/fmeapiv4/jobs",
                  body=requests.ConnectionError(f"refused fmetoken token={TOKEN}"))
    caplog.set_level(logging.DEBUG)
    client = client_at(clock)
    health = client.refresh_health()
    assert health.reachable is False and health.has_capacity is True
    assert TOKEN not in (health.error or "") and TOKEN not in caplog.text
    assert TOKEN not in repr(client) and TOKEN not in repr(health)


@responses.activate
def test_errors_raise_flow_error_without_token(clock):
    """HTTP errors and non-JSON answers raise FlowError naming the path, not the token."""
    responses.get(f"{BASE}/fmeapiv4/jobs", status=401, json={"message": "no"})
    client = client_at(clock)
    with pytest.raises(FlowError, match="HTTP 401") as info:
        client.job_counts()
    assert TOKEN not in str(info.value)
    responses.replace(responses.GET, f"{BASE}/fmeapiv4/jobs", body="<html>")
    with pytest.raises(FlowError, match="not usable JSON"):
        client.job_counts()


def test_constructor_validates():
    """A bad base URL, an empty token, a negative TTL or an unknown time zone are refused."""
    with pytest.raises(ValueError):
        FlowClient("flow.example.com", TOKEN)
    with pytest.raises(ValueError):
        FlowClient(BASE, "")
    with pytest.raises(ValueError):
        FlowClient(BASE, TOKEN, cache_ttl_s=-1)
    with pytest.raises(ValueError, match="time_zone"):
        FlowClient(BASE, TOKEN, time_zone="Mars/Olympus")
    with pytest.raises(ValueError):
        FlowHealth(reachable=True, has_capacity=True, queued=-1)


def test_max_stale_s_is_validated():
    """A negative max_stale_s is refused."""
    with pytest.raises(ValueError, match="max_stale_s"):
        FlowClient(BASE, TOKEN, max_stale_s=-1)


# --- deployment ------------------------------------------------------------------------------

def _job(**changes):
    from fme_ai_resilience.core.fme.deployment import processor_job
    from fme_ai_resilience.core.config.settings import Settings

    return processor_job("fair", Settings(), db_url="postgresql://u:pw-77@h/ledger", **changes)


@responses.activate
def test_an_existing_repository_is_not_created_again(clock):
    """ensure_repository asks for the repository by name and posts nothing when it is there
    (no listing: FME Flow pages lists, and Safe's CLI asks by name)."""
    responses.get(f"{BASE}/fmeapiv4/repositories/fair", match=[AUTH], json={"name": "fair"})
    assert client_at(clock).ensure_repository("fair") is False
    assert [c.request.method for c in responses.calls] == ["GET"]


@responses.activate
def test_a_repository_created_meanwhile_counts_as_existing(clock):
    """A 409 on creation (another deploy won the race) is not an error."""
    responses.get(f"{BASE}/fmeapiv4/repositories/fair", status=404, json={"message": "none"})
    responses.post(f"{BASE}/fmeapiv4/repositories", status=409, json={"message": "exists"})
    assert client_at(clock).ensure_repository("fair") is False


@responses.activate
def test_upload_quotes_names_and_refuses_odd_files(clock):
    """A repository name is one percent-encoded path segment; a file name must be NAME.fmw
    and the content bytes."""
    responses.get(f"{BASE}/fmeapiv4/repositories", json={"items": []})
    responses.post(f"{BASE}/fmeapiv4/repositories/my%20repo/items", status=201, json={})
    client = client_at(clock)
    assert client.upload_workspace("my repo", "WS-01_intake.fmw", b"x") == "created"
    for name, content in (("../x.fmw", b"x"), ("x.txt", b"x"), ('a".fmw', b"x"),
                          ("x.fmw", "text")):
        with pytest.raises(ConfigurationError):
            client.upload_workspace("fair", name, content)


@responses.activate
def test_schedules_begin_by_the_injected_clock_in_the_servers_zone(clock):
    """A new schedule's begin is the client's clock on the server's wall clock: the zone
    FME Flow reports (Asia/Kolkata, UTC+05:30), not UTC."""
    from fme_ai_resilience.core.fme.deployment import Schedule

    responses.get(f"{BASE}/fmeapiv4/repositories", json={"items": []})
    responses.get(f"{BASE}/fmerest/v3/info", json={"timeZone": "Asia/Kolkata"})
    responses.get(f"{BASE}/fmeapiv4/schedules/c/n", status=404, json={})
    responses.post(f"{BASE}/fmeapiv4/schedules", status=201, json={})
    client = client_at(clock)
    assert client.put_schedule(Schedule("n", "c", "0 * * * * ?", _job())) == "created"
    body = json.loads(responses.calls[-1].request.body)
    assert body["begin"] == "2026-09-21T19:43:20"  # FakeClock's 1_790_000_000 + 5:30
    assert body["maxJobRuntime"] == 2160


@responses.activate
def test_a_job_answer_without_an_id_is_an_error(clock):
    """submit_job returns the id FME Flow gave; an answer without one raises FlowError."""
    responses.get(f"{BASE}/fmeapiv4/repositories", json={"items": []})
    responses.post(f"{BASE}/fmeapiv4/jobs", status=202, json={"id": 7})
    client = client_at(clock)
    assert client.submit_job(_job()) == 7
    responses.replace(responses.POST, f"{BASE}/fmeapiv4/jobs", status=202, json={"x": 1})
    with pytest.raises(FlowError, match="no job id"):
        client.submit_job(_job())
    with pytest.raises(ConfigurationError):
        client.submit_job({"workspace": "x"})


@responses.activate
def test_write_errors_name_the_request_and_hide_the_secrets(clock, caplog):
    """A refused write raises FlowError with method, path, status and FME Flow's message,
    scrubbed of the token and of the job's secret parameter values."""
    responses.get(f"{BASE}/fmeapiv4/repositories", json={"items": []})
    responses.post(f"{BASE}/fmeapiv4/jobs", status=422, json={
        "message": f"FAIR_DB=postgresql://u:pw-77@h/ledger rejected for token {TOKEN}"})
    caplog.set_level(logging.DEBUG)
    with pytest.raises(FlowError) as info:
        client_at(clock).submit_job(_job())
    message = str(info.value)
    assert message.startswith("POST /fmeapiv4/jobs: HTTP 422: FAIR_DB=")
    assert "pw-77" not in message and TOKEN not in message and TOKEN not in caplog.text


@responses.activate
def test_a_network_failure_on_a_write_hides_the_token(clock):
    """A connection error during a write becomes a FlowError without the token."""
    responses.get(f"{BASE}/fmeapiv4/repositories", json={"items": []})
    responses.post(f"{BASE}/fmeapiv4/repositories",
                   body=requests.ConnectionError(f"reset; header fmetoken token={TOKEN}"))
    with pytest.raises(FlowError, match="connection") as info:
        client_at(clock).ensure_repository("fair")
    assert TOKEN not in str(info.value)


@pytest.mark.parametrize("zone, begin", [
    ("+0000", "2026-09-21T14:13:20"), ("-0700", "2026-09-21T07:13:20"),
    ("+05:30", "2026-09-21T19:43:20")])
@responses.activate
def test_a_fixed_offset_as_fme_flow_answers_it_is_a_time_zone(clock, zone, begin):
    """The v3 info's timeZone as Safe's CLI recorded it ("+0000"; fmeflow-cli
    info_v3_test.go) is a fixed offset: the schedule begins at the clock's now in it."""
    import copy

    from fme_ai_resilience.services.flow.client import is_fixed_offset

    recorded = json.loads((DATA / "fmeflow_cli_fixtures.json")
                          .read_text(encoding="utf-8"))["info_v3"]
    assert recorded["timeZone"] == "+0000" and is_fixed_offset(recorded["timeZone"])
    answer = copy.deepcopy(recorded)
    answer["timeZone"] = zone
    responses.get(f"{BASE}/fmeapiv4/repositories", json={"items": []})
    responses.get(f"{BASE}/fmerest/v3/info", json=answer)
    client = client_at(clock)
    assert client.time_zone() == zone and client.schedule_begin() == begin
    with pytest.raises(ConfigurationError):
        FlowClient(BASE, "t", time_zone="+2500")
