"""FME Flow REST client: v4 with v3 fallback, engine capacity verdict, cache, no token leaks."""
from __future__ import annotations

import json
import logging
import threading

import pytest
import requests
import responses
from responses import matchers

from fme_ai_resilience.services.flow import Engine, FlowClient, FlowHealth
from fme_ai_resilience.errors import ConfigurationError, FlowError

BASE = "https://flow.example.com"
TOKEN = "fmetoken-secret-4b1d9e"
AUTH = matchers.header_matcher({"Authorization": f"fmetoken token={TOKEN}"})


def v4(rsps, queued=0, running=0, engines=((1, 5), (2, -1))):
    for status, n in (("queued", queued), ("running", running)):
        rsps.get(f"{BASE}/fmeapiv4/jobs", match=[AUTH, matchers.query_param_matcher(
            {"status": status, "limit": "1"})],
            json={"offset": 0, "limit": 1, "totalCount": n, "items": []})
    rsps.get(f"{BASE}/fmeapiv4/engines", match=[AUTH], json={"totalCount": len(engines), "items": [
        {"name": f"engine{i}", "hostname": "h", "currentJobID": job, "state": "active",
         "assignedQueues": ["Default"]} for i, job in engines]})


@responses.activate
def test_v4_counts_and_engines(clock):
    """Queued/running counts come from totalCount; an engine with currentJobID -1 is idle."""
    v4(responses, queued=3, running=1)
    client = FlowClient(BASE, TOKEN, clock=clock)
    assert client.job_counts() == (3, 1)
    assert client.engines() == [Engine("engine1", True, ("Default",)),
                                Engine("engine2", False, ("Default",))]
    assert client.api_version == "v4"


@responses.activate
def test_falls_back_to_v3_when_v4_is_missing(clock):
    """A Flow without /fmeapiv4 (404) is read through /fmerest/v3 from then on."""
    responses.get(f"{BASE}/fmeapiv4/jobs", status=404)
    responses.get(f"{BASE}/fmerest/v3/transformations/jobs/queued", match=[AUTH],
                  json={"offset": -1, "limit": -1, "totalCount": 4, "items": []})
    responses.get(f"{BASE}/fmerest/v3/transformations/jobs/running", match=[AUTH],
                  json={"totalCount": 2, "items": []})
    responses.get(f"{BASE}/fmerest/v3/transformations/engines", match=[AUTH],
                  json=[{"instanceName": "e1", "currentJobID": 17},
                        {"instanceName": "e2", "currentJobID": 18}])
    client = FlowClient(BASE, TOKEN, clock=clock)
    health = client.health()
    assert client.api_version == "v3"
    assert (health.queued, health.running, health.engines, health.busy_engines) == (4, 2, 2, 2)
    assert health.has_capacity is False  # all busy and 4 >= 2 queued
    assert sum(c.request.url.startswith(f"{BASE}/fmeapiv4") for c in responses.calls) == 1


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
    health = FlowClient(BASE, TOKEN, clock=clock).health()
    assert health.reachable and health.has_capacity is capacity
    assert health.idle_engines == sum(1 for _, job in engines if job < 0)


@responses.activate
def test_health_is_cached_for_the_ttl(clock):
    """Within cache_ttl_s the probe is not repeated; after it, it is."""
    v4(responses)
    client = FlowClient(BASE, TOKEN, clock=clock, cache_ttl_s=5.0)
    first = client.health()
    clock.advance(4.9)
    assert client.health() is first
    assert len(responses.calls) == 3
    clock.advance(0.2)
    client.health()
    assert len(responses.calls) == 6


@responses.activate
def test_unreachable_flow_never_blocks_intake(clock, caplog):
    """A failed probe reports reachable=False, has_capacity=True, and leaks no token."""
    responses.get(f"{BASE}/fmeapiv4/jobs",
                  body=requests.ConnectionError(f"refused fmetoken token={TOKEN}"))
    caplog.set_level(logging.DEBUG)
    client = FlowClient(BASE, TOKEN, clock=clock)
    health = client.health()
    assert health.reachable is False and health.has_capacity is True
    assert TOKEN not in (health.error or "") and TOKEN not in caplog.text
    assert TOKEN not in repr(client) and TOKEN not in repr(health)


@responses.activate
def test_errors_raise_flow_error_without_token(clock):
    """HTTP errors and non-JSON answers raise FlowError naming the path, not the token."""
    responses.get(f"{BASE}/fmeapiv4/jobs", status=401, json={"message": "no"})
    client = FlowClient(BASE, TOKEN, clock=clock)
    with pytest.raises(FlowError, match="HTTP 401") as info:
        client.job_counts()
    assert TOKEN not in str(info.value)
    responses.replace(responses.GET, f"{BASE}/fmeapiv4/jobs", body="<html>")
    with pytest.raises(FlowError, match="not JSON"):
        client.job_counts()


def test_constructor_validates():
    """A bad base URL, an empty token or a negative TTL are refused up front."""
    with pytest.raises(ValueError):
        FlowClient("flow.example.com", TOKEN)
    with pytest.raises(ValueError):
        FlowClient(BASE, "")
    with pytest.raises(ValueError):
        FlowClient(BASE, TOKEN, cache_ttl_s=-1)
    with pytest.raises(ValueError):
        FlowHealth(reachable=True, has_capacity=True, queued=-1)


class _SlowFlow:
    """A fake session: each GET takes ``step_s`` of fake time; while ``gate`` is set, GETs
    first signal ``entered`` and wait for the gate to open."""

    def __init__(self, clock, step_s: float) -> None:
        self.clock, self.step_s, self.calls = clock, step_s, 0
        self.gate = None
        self.entered = threading.Event()

    def get(self, url, **kwargs):
        self.calls += 1
        if self.gate is not None:
            self.entered.set()
            self.gate.wait(10)
        self.clock.advance(self.step_s)
        response = requests.Response()
        response.status_code = 200
        body = {"items": [{"name": "e1", "currentJobID": -1}]} if "engines" in url \
            else {"totalCount": 0, "items": []}
        response._content = json.dumps(body).encode()
        return response


def test_health_is_stamped_when_the_probe_finished(clock):
    """A slow probe's answer is fresh for the whole TTL after it finished, not after it began."""
    session = _SlowFlow(clock, step_s=2.0)  # one probe = 3 GETs = 6 s > the 5 s TTL
    client = FlowClient(BASE, TOKEN, clock=clock, session=session, cache_ttl_s=5.0)
    first = client.health()
    assert first.checked_at == clock.monotonic()
    clock.advance(4.9)
    assert client.health() is first and session.calls == 3


def test_a_stale_answer_is_served_while_one_caller_refreshes(clock):
    """Past the TTL one thread probes while others get the previous answer without waiting."""
    session = _SlowFlow(clock, step_s=0.0)
    client = FlowClient(BASE, TOKEN, clock=clock, session=session, cache_ttl_s=5.0,
                        max_stale_s=30.0)
    first = client.health()
    clock.advance(6.0)
    session.gate = threading.Event()
    results = []
    refresher = threading.Thread(target=lambda: results.append(client.health()))
    refresher.start()
    assert session.entered.wait(10)
    try:
        assert client.health() is first and client.health() is first
        assert session.calls == 4  # only the refresher's first GET so far
    finally:
        session.gate.set()
        refresher.join(10)
    (fresh,) = results
    assert fresh is not first and fresh.checked_at == clock.monotonic()
    assert client.health() is fresh and session.calls == 6


def test_max_stale_s_is_validated():
    """A negative max_stale_s is refused."""
    with pytest.raises(ValueError, match="max_stale_s"):
        FlowClient(BASE, TOKEN, max_stale_s=-1)


# --- deployment ------------------------------------------------------------------------------

def _job(**changes):
    from fme_ai_resilience.fme.deployment import processor_job
    from fme_ai_resilience.settings import Settings

    return processor_job("fair", Settings(), db_url="postgresql://u:pw-77@h/ledger", **changes)


@responses.activate
def test_an_existing_repository_is_not_created_again(clock):
    """ensure_repository lists first and posts nothing when the repository is there."""
    responses.get(f"{BASE}/fmeapiv4/repositories", match=[AUTH],
                  json={"items": [{"name": "fair"}], "totalCount": 1})
    assert FlowClient(BASE, TOKEN, clock=clock).ensure_repository("fair") is False
    assert [c.request.method for c in responses.calls] == ["GET"]


@responses.activate
def test_a_repository_created_meanwhile_counts_as_existing(clock):
    """A 409 on creation (another deploy won the race) is not an error."""
    responses.get(f"{BASE}/fmeapiv4/repositories", json={"items": []})
    responses.post(f"{BASE}/fmeapiv4/repositories", status=409, json={"message": "exists"})
    assert FlowClient(BASE, TOKEN, clock=clock).ensure_repository("fair") is False


@responses.activate
def test_upload_quotes_names_and_refuses_odd_files(clock):
    """A repository name is one percent-encoded path segment; a file name must be NAME.fmw
    and the content bytes."""
    responses.get(f"{BASE}/fmeapiv4/repositories", json={"items": []})
    responses.post(f"{BASE}/fmeapiv4/repositories/my%20repo/items", status=201, json={})
    client = FlowClient(BASE, TOKEN, clock=clock)
    assert client.upload_workspace("my repo", "WS-01_intake.fmw", b"x") == "created"
    for name, content in (("../x.fmw", b"x"), ("x.txt", b"x"), ('a".fmw', b"x"),
                          ("x.fmw", "text")):
        with pytest.raises(ConfigurationError):
            client.upload_workspace("fair", name, content)


@responses.activate
def test_schedules_begin_by_the_injected_clock(clock):
    """A new schedule's begin is the client's clock, in UTC."""
    from fme_ai_resilience.fme.deployment import Schedule

    responses.get(f"{BASE}/fmeapiv4/repositories", json={"items": []})
    responses.get(f"{BASE}/fmeapiv4/schedules/c/n", status=404, json={})
    responses.post(f"{BASE}/fmeapiv4/schedules", status=201, json={})
    client = FlowClient(BASE, TOKEN, clock=clock)
    assert client.put_schedule(Schedule("n", "c", "0 * * * * ?", _job())) == "created"
    body = json.loads(responses.calls[-1].request.body)
    assert body["begin"] == "2026-09-21T14:13:20"  # FakeClock's 1_790_000_000


@responses.activate
def test_a_job_answer_without_an_id_is_an_error(clock):
    """submit_job returns the id FME Flow gave; an answer without one raises FlowError."""
    responses.get(f"{BASE}/fmeapiv4/repositories", json={"items": []})
    responses.post(f"{BASE}/fmeapiv4/jobs", status=202, json={"id": 7})
    client = FlowClient(BASE, TOKEN, clock=clock)
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
        FlowClient(BASE, TOKEN, clock=clock).submit_job(_job())
    message = str(info.value)
    assert message.startswith("POST /fmeapiv4/jobs: HTTP 422: FAIR_DB=")
    assert "pw-77" not in message and TOKEN not in message and TOKEN not in caplog.text


@responses.activate
def test_a_network_failure_on_a_write_hides_the_token(clock):
    """A connection error during a write becomes a FlowError without the token."""
    responses.get(f"{BASE}/fmeapiv4/repositories", json={"items": []})
    responses.post(f"{BASE}/fmeapiv4/repositories",
                   body=requests.ConnectionError(f"reset; header fmetoken token={TOKEN}"))
    with pytest.raises(FlowError, match="ConnectionError") as info:
        FlowClient(BASE, TOKEN, clock=clock).ensure_repository("fair")
    assert TOKEN not in str(info.value)
