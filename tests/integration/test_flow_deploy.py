"""``fme-ai-resilience flow deploy`` against a stand-in of FME Flow's REST API on 127.0.0.1
that answers in the shapes Safe's CLI recorded: the exact requests it makes on v4 and on the
v3 fallback, everything read before anything is written, the secrets kept in deployment
parameters, and no token or ledger URL shown."""
from __future__ import annotations

import re
import shutil

import pytest

from fme_ai_resilience.cli import main

from helpers import REPO
from helpers.flow_standin import (BUILD_2023, BUILD_2024, BUILD_MIDDLE, BUILD_V3,
                                   BUILD_V4, DB, TOKEN, flow, flow_environment)  # noqa: F401

pytestmark = pytest.mark.usefixtures("flow_environment")


ROOT = REPO
WORKSPACES = ROOT / "workspaces"
FILES = ("WS-01_intake.fmw", "WS-02_processor.fmw", "WS-03_compensator.fmw")
BEGIN = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
V4_JOB = {"FAIR_DB": "$(fair_db)"}
V4_TEMPLATES = WORKSPACES / "fme2023-2024"


def deploy(server, *extra, directory=WORKSPACES):
    return main(["flow", "deploy", "--url", server.url, "--token-env", "FLOW_TOKEN_TEST",
                 "--repository", "fair", "--dir", str(directory), "--db-env",
                 "LEDGER_URL_TEST", *extra])


def assert_nothing_secret(*texts):
    for text in texts:
        assert TOKEN not in text and "ledger-pw-77" not in text


def schedule_v4(name, cron, extra):
    return {"name": name, "category": "fme-ai-resilience", "enabled": True,
            "recurrence": "cron", "cron": cron, "repository": "fair",
            "workspace": f"{name}.fmw", "publishedParameters": V4_JOB, **extra}


def test_first_deploy_on_v4_makes_exactly_these_requests(flow, capsys):
    """Everything read first (the build, the time zone), then the ledger URL into a
    deployment parameter, the repository listed then created, three uploads, two schedules
    looked up then created, every request with the fmetoken header; the schedules name the
    deployment parameter, never the URL."""
    server = flow()
    assert deploy(server) == 0
    state = server.state
    assert state.calls() == [
        ("GET", "/fmeinfo/version"),
        ("GET", "/fmerest/v3/info"),
        ("GET", "/fmeapiv4/deploymentparameters/fair_db"),
        ("POST", "/fmeapiv4/deploymentparameters"),
        ("GET", "/fmeapiv4/repositories/fair"),
        ("POST", "/fmeapiv4/repositories"),
        ("POST", "/fmeapiv4/repositories/fair/items"),
        ("POST", "/fmeapiv4/repositories/fair/items"),
        ("POST", "/fmeapiv4/repositories/fair/items"),
        ("GET", "/fmeapiv4/schedules/fme-ai-resilience/WS-02_processor"),
        ("POST", "/fmeapiv4/schedules"),
        ("GET", "/fmeapiv4/schedules/fme-ai-resilience/WS-03_compensator"),
        ("POST", "/fmeapiv4/schedules"),
    ]
    requests = state.requests
    assert all(r.headers["authorization"] == f"fmetoken token={TOKEN}" for r in requests)
    assert requests[3].json() == {"name": "fair_db", "type": "text", "value": DB}
    assert state.parameters["fair_db"]["value"] == DB
    assert requests[5].json() == {"name": "fair", "description": "fme-ai-resilience workspaces"}
    for upload, name in zip(requests[6:9], FILES):
        assert upload.headers["content-type"] == "application/octet-stream"
        assert upload.headers["content-disposition"] == f'attachment; filename="{name}"'
        assert upload.body == (WORKSPACES / name).read_bytes()
    processor, compensator = requests[10].json(), requests[12].json()
    assert BEGIN.fullmatch(processor.pop("begin")) and BEGIN.fullmatch(compensator.pop("begin"))
    assert processor.pop("description") and compensator.pop("description")
    assert processor == schedule_v4("WS-02_processor", "0 * * * * ?", {
        "queue": "fair_processor", "maxJobRuntime": 2160, "maxTimeInQueue": 60})
    assert compensator == schedule_v4("WS-03_compensator", "0 0/10 * * * ?", {
        "maxJobRuntime": 600, "maxTimeInQueue": 600})
    assert not [r for r in requests if b"ledger-pw-77" in r.body and "deploymentparameters"
                not in r.path]
    out = capsys.readouterr()
    assert f"build {BUILD_V4}, REST repositories v4" in out.out
    assert "deployment parameter fair_db: created" in out.out
    assert "time zone: +0000 (a fixed offset" in out.out
    assert "repository fair: created" in out.out
    assert_nothing_secret(out.out, out.err)


def test_a_second_deploy_replaces_the_files_and_updates_the_schedules(flow, capsys):
    """Run again, nothing is created twice: the deployment parameter is replaced, uploads
    answer 409 and are replaced with PUT, the schedules are found and replaced with PUT."""
    server = flow()
    assert deploy(server) == 0
    first = len(server.state.requests)
    assert deploy(server) == 0
    assert server.state.calls()[first:] == [
        ("GET", "/fmeinfo/version"),
        ("GET", "/fmerest/v3/info"),
        ("GET", "/fmeapiv4/deploymentparameters/fair_db"),
        ("PUT", "/fmeapiv4/deploymentparameters/fair_db"),
        ("GET", "/fmeapiv4/repositories/fair"),
        *[c for name in FILES for c in (
            ("POST", "/fmeapiv4/repositories/fair/items"),
            ("PUT", f"/fmeapiv4/repositories/fair/items/{name}"))],
        ("GET", "/fmeapiv4/schedules/fme-ai-resilience/WS-02_processor"),
        ("PUT", "/fmeapiv4/schedules/fme-ai-resilience/WS-02_processor"),
        ("GET", "/fmeapiv4/schedules/fme-ai-resilience/WS-03_compensator"),
        ("PUT", "/fmeapiv4/schedules/fme-ai-resilience/WS-03_compensator"),
    ]
    assert len(server.state.schedules) == 2 and list(server.state.parameters) == ["fair_db"]
    out = capsys.readouterr().out
    assert "repository fair: exists" in out and "deployment parameter fair_db: updated" in out


@pytest.mark.parametrize("build", [BUILD_2023, BUILD_2024, BUILD_MIDDLE])
def test_fme_flow_2023_to_2025_answering_a_fixed_offset_gets_its_schedules(flow, build,
                                                                          capsys):
    """FME Flow 2022-2025 answer the v3 info's timeZone as an offset (+0000 in Safe's
    recorded fixture): the deploy goes through to the schedules, which begin at now in that
    offset; before 2025 the version-4 templates are the ones uploaded."""
    import datetime

    server = flow(build, time_zone="-0700")
    zone = datetime.timezone(datetime.timedelta(hours=-7))
    before = datetime.datetime.now(zone).replace(tzinfo=None, microsecond=0)
    assert deploy(server) == 0
    after = datetime.datetime.now(zone).replace(tzinfo=None)
    assert len(server.state.schedules) == 2
    body = next(iter(server.state.schedules.values()))
    assert before <= datetime.datetime.strptime(body["begin"], "%Y-%m-%dT%H:%M:%S") <= after
    source = V4_TEMPLATES if build < 25000 else WORKSPACES
    assert server.state.repositories["fair"] == {
        name: (source / name).read_bytes() for name in FILES}
    out = capsys.readouterr().out
    assert ("templates: fme2023-2024" in out) == (build < 25000)


def test_a_server_that_gives_no_time_zone_stops_the_deploy_before_any_write(flow, capsys):
    """No v3 info (404): deploy exits 1 asking for --time-zone after reading only, with
    nothing uploaded, scheduled or stored."""
    server = flow(fail={("GET", "/fmerest/v3/info"): (404, {"message": "gone"})})
    assert deploy(server) == 1
    assert [m for m, _ in server.state.calls()] == ["GET", "GET"]
    assert server.state.repositories == {} and server.state.parameters == {}
    assert "--time-zone" in capsys.readouterr().err
    assert deploy(server, "--time-zone", "+0100") == 0
    assert len(server.state.schedules) == 2


def test_secrets_in_schedules_on_request_and_an_automation_for_the_administrator(
        flow, tmp_path, capsys):
    """--secrets schedules keeps no deployment parameter (the URL in the schedules, as
    before); --no-schedules makes none; --automation writes the Automation's plan and its
    steps, with the webhook's values and references to deployment parameters only."""
    import json

    server = flow()
    assert deploy(server, "--secrets", "schedules") == 0
    assert server.state.parameters == {}
    assert {s["publishedParameters"]["FAIR_DB"] for s in server.state.schedules.values()} == {
        DB}
    other = flow()
    assert deploy(other, "--no-schedules", "--automation", str(tmp_path / "auto")) == 0
    assert other.state.schedules == {} and "fair_db" in other.state.parameters
    plan = json.loads((tmp_path / "auto" / "fme-ai-resilience-automation.json").read_text())
    steps = (tmp_path / "auto" / "fme-ai-resilience-automation.md").read_text()
    intake, processor, compensator = plan["actions"]
    assert intake["publishedParameters"] == {"FAIR_DB": "$(fair_db)",
                                             "FAIR_WEBHOOK_BODY": "{message}",
                                             "FAIR_WEBHOOK_HEADERS": "{webhook.headers}"}
    assert [t["type"] for t in plan["triggers"]] == ["Webhook", "Schedule", "Schedule"]
    assert processor["directives"] == {"queue": "fair_processor", "maxJobRuntime": 2160,
                                       "maxTimeInQueue": 60}
    assert {a["onFailure"]["topic"] for a in plan["actions"]} == {"FAIR_JOB_FAILURE"}
    assert compensator["after"] == "every-10-minutes"
    assert "0 * * * * ?" in steps and "FAIR_JOB_SUCCESS" in steps
    for text in (json.dumps(plan), steps):
        assert_nothing_secret(text)
    assert_nothing_secret(*capsys.readouterr())


def test_submit_sends_the_processor_job_with_its_directives(flow, capsys):
    """--submit starts one WS-02 job: v4 body with the queue and limits; a setting changed
    with --set travels as a published parameter and raises the runtime limit."""
    server = flow()
    assert deploy(server, "--submit", "--set", "processing.claim_limit=20",
                  "--queue", "ai_queue") == 0
    method, path = server.state.calls()[-1]
    assert (method, path) == ("POST", "/fmeapiv4/jobs")
    assert server.state.requests[-1].json() == {
        "repository": "fair", "workspace": "WS-02_processor.fmw",
        "publishedParameters": {"FAIR_DB": "$(fair_db)", "FAIR_PROCESSING_CLAIM_LIMIT": "20"},
        "queue": "ai_queue", "maxJobRuntime": 20 * (180 + 30) + 60, "maxTimeInQueue": 60}
    out = capsys.readouterr().out
    assert "job 42: WS-02_processor.fmw submitted" in out
    assert_nothing_secret(out)


def test_a_vision_key_reaches_the_processor_schedule_and_no_output(flow, capsys,
                                                                     monkeypatch):
    """FAIR_VISION_KEY where deploy runs goes into a deployment parameter of its own as the
    key itself (not "[REDACTED]"), WS-02's schedule names it, no other schedule does, and no
    line deploy prints holds it."""
    key = "sk-vision-live-7f3a9c2b1d"
    monkeypatch.setenv("FAIR_VISION_KEY", key)
    server = flow()
    assert deploy(server) == 0
    assert server.state.parameters["fair_vision_key"]["value"] == key
    processor, compensator = (server.state.schedules[("fme-ai-resilience", n)]
                              for n in ("WS-02_processor", "WS-03_compensator"))
    assert processor["publishedParameters"] == {"FAIR_DB": "$(fair_db)",
                                                "FAIR_VISION_KEY": "$(fair_vision_key)"}
    assert compensator["publishedParameters"] == V4_JOB
    out = capsys.readouterr()
    assert key not in out.out + out.err
    assert_nothing_secret(out.out, out.err)


def test_below_build_22337_every_request_goes_to_v3(flow, capsys):
    """On a build before v4 repositories (and before deployment parameters) every request
    goes to /fmerest/v3: a form to create the repository, the version-4 templates uploaded
    and registered with the job submitter, v3 schedule and submit bodies with the URL."""
    server = flow(BUILD_V3)
    assert deploy(server, "--submit") == 0
    state = server.state
    assert state.calls() == [
        ("GET", "/fmeinfo/version"),
        ("GET", "/fmerest/v3/info"),
        ("GET", "/fmerest/v3/repositories/fair"),
        ("POST", "/fmerest/v3/repositories"),
        *[c for name in FILES for c in (
            ("POST", "/fmerest/v3/repositories/fair/items"),
            ("PUT", f"/fmerest/v3/repositories/fair/items/{name}/services"))],
        ("GET", "/fmerest/v3/schedules/fme-ai-resilience/WS-02_processor"),
        ("POST", "/fmerest/v3/schedules"),
        ("GET", "/fmerest/v3/schedules/fme-ai-resilience/WS-03_compensator"),
        ("POST", "/fmerest/v3/schedules"),
        ("POST", "/fmerest/v3/transformations/submit/fair/WS-02_processor.fmw"),
    ]
    requests = state.requests
    assert all(r.headers["authorization"] == f"fmetoken token={TOKEN}" for r in requests)
    assert requests[3].form() == {"name": ["fair"], "description": ["fme-ai-resilience workspaces"]}
    assert requests[5].form() == {"services": ["fmejobsubmitter"]}
    assert requests[4].body == (V4_TEMPLATES / FILES[0]).read_bytes()
    schedule = next(r for r in requests if r.path == "/fmerest/v3/schedules").json()
    assert schedule["request"] == {
        "publishedParameters": [{"name": "FAIR_DB", "value": DB}],
        "TMDirectives": {"tag": "fair_processor", "ttc": 2160, "ttl": 60}}
    assert (schedule["recurrence"], schedule["cron"], schedule["workspace"]) == (
        "cron", "0 * * * * ?", "WS-02_processor.fmw")
    assert requests[-1].json() == schedule["request"]
    assert set(state.services) == {("fair", name) for name in FILES}
    out = capsys.readouterr()
    assert "REST repositories v3" in out.out and "submit v3" in out.out
    assert "predates deployment parameters" in out.out
    assert_nothing_secret(out.out, out.err)


def test_between_25208_and_26018_repositories_on_v4_and_the_job_through_v3(flow, capsys):
    """On FME Flow 2025 (build 25615) repositories go to v4, while the uploads, schedules and
    the job submission go to v3 with TMDirectives (v4 job submission starts at build 26018);
    the scheduled job carries the processor's runtime limit as ttc."""
    server = flow(BUILD_MIDDLE)
    assert deploy(server, "--submit") == 0
    calls = server.state.calls()
    assert calls[:2] == [("GET", "/fmeinfo/version"), ("GET", "/fmerest/v3/info")]
    assert calls[4:6] == [("GET", "/fmeapiv4/repositories/fair"),
                          ("POST", "/fmeapiv4/repositories")]
    assert ("POST", "/fmerest/v3/repositories/fair/items") in calls
    assert ("POST", "/fmerest/v3/schedules") in calls
    assert calls[-1] == ("POST", "/fmerest/v3/transformations/submit/fair/WS-02_processor.fmw")
    assert not any(path.startswith("/fmeapiv4/jobs") for _, path in calls)
    schedule = next(r for r in server.state.requests if r.path == "/fmerest/v3/schedules")
    assert schedule.json()["request"]["TMDirectives"]["ttc"] == 2160
    assert_nothing_secret(*capsys.readouterr())


def test_schedules_begin_on_the_servers_wall_clock(flow, capsys):
    """A schedule's begin is now in the time zone FME Flow reports, not in UTC."""
    import datetime
    import zoneinfo

    server = flow(time_zone="Asia/Kolkata")
    before = datetime.datetime.now(zoneinfo.ZoneInfo("Asia/Kolkata")).replace(tzinfo=None)
    assert deploy(server) == 0
    after = datetime.datetime.now(zoneinfo.ZoneInfo("Asia/Kolkata")).replace(tzinfo=None)
    body = next(r for r in server.state.requests if r.path == "/fmeapiv4/schedules").json()
    begin = datetime.datetime.strptime(body["begin"], "%Y-%m-%dT%H:%M:%S")
    assert before.replace(microsecond=0) <= begin <= after
    assert "(a fixed offset" not in capsys.readouterr().out


def test_a_refused_token_is_never_shown(flow, capsys):
    """A 401 whose message repeats the token exits 1 naming the path and status, without it."""
    server = flow(token="another-token")
    assert deploy(server) == 1
    out = capsys.readouterr()
    assert "GET /fmeinfo/version: HTTP 401: Authorization fmetoken token=[REDACTED]" \
        in out.err
    assert_nothing_secret(out.out, out.err)


def test_a_server_that_repeats_the_ledger_url_does_not_leak_it(flow, capsys):
    """A schedule refused with a message quoting the ledger URL exits 1 with FME Flow's
    message scrubbed of the URL."""
    server = flow(fail={("POST", "/fmeapiv4/schedules"): (
        400, {"message": f"Invalid published parameter FAIR_DB={DB}"})})
    assert deploy(server) == 1
    out = capsys.readouterr()
    assert "POST /fmeapiv4/schedules: HTTP 400: Invalid published parameter" in out.err
    assert_nothing_secret(out.out, out.err)


def test_nothing_is_sent_when_a_workspace_fails_its_check(flow, tmp_path, capsys):
    """A workspace that fails 'workspaces check' stops the deployment before any request."""
    for name in FILES:
        shutil.copy(WORKSPACES / name, tmp_path / name)
        shutil.copy(WORKSPACES / name.replace(".fmw", ".py"), tmp_path / name.replace(".fmw",
                                                                                     ".py"))
    broken = tmp_path / "WS-02_processor.fmw"
    broken.write_text(broken.read_text(encoding="utf-8").replace(
        'FME_BUILD_NUM="25241"', 'FME_BUILD_NUM="25835"'), encoding="utf-8")
    server = flow()
    assert deploy(server, directory=tmp_path) == 1
    assert server.state.requests == []
    out = capsys.readouterr()
    assert "WS-02_processor.fmw: build: " in out.out and "nothing was deployed" in out.err


@pytest.mark.parametrize("unset", ["FLOW_TOKEN_TEST", "LEDGER_URL_TEST"])
def test_a_missing_secret_variable_is_a_usage_error(flow, monkeypatch, capsys, unset):
    """Without the token or the ledger URL in the environment, deploy exits 2 and sends
    nothing."""
    monkeypatch.delenv(unset)
    server = flow()
    assert deploy(server) == 2
    assert server.state.requests == []
    assert unset in capsys.readouterr().err


@pytest.mark.parametrize("build, lists", [
    (BUILD_V3, ["/fmerest/v3/transformations/jobs/queued",
                "/fmerest/v3/transformations/jobs/running",
                "/fmerest/v3/transformations/engines"]),
    (BUILD_MIDDLE, ["/fmeapiv4/jobs", "/fmeapiv4/jobs", "/fmeapiv4/engines"]),
    (BUILD_V4, ["/fmeapiv4/jobs", "/fmeapiv4/jobs", "/fmeapiv4/engines"]),
])
def test_the_health_probe_reads_the_lists_on_the_version_its_build_serves(flow, build, lists):
    """Below 25208 the job lists and engines come from v3, from it on from v4; the counts
    and the busy engines reach the verdict."""
    from fme_ai_resilience.services.flow.client import FlowClient

    server = flow(build, queued=3, running=1, engines=[
        {"name": "e1", "currentJobID": 7}, {"name": "e2", "currentJobID": -1}])
    health = FlowClient(server.url, TOKEN).refresh_health()
    assert (health.reachable, health.queued, health.running, health.engines,
            health.busy_engines) == (True, 3, 1, 2, 1)
    assert [path for _, path in server.state.calls()] == ["/fmeinfo/version", *lists]
