"""``flow deploy --automation``: the plan it writes references deployment parameters, so a
deploy that will not create them is refused before anything reaches FME Flow, and a plan
that cannot be written stops the deploy before anything is uploaded."""
from __future__ import annotations

import pytest

from fme_ai_resilience.cli import main

from helpers import REPO
from helpers.flow_standin import BUILD_V3, BUILD_V4, flow, flow_environment  # noqa: F401

pytestmark = pytest.mark.usefixtures("flow_environment")


def deploy(server, *extra):
    return main(["flow", "deploy", "--url", server.url, "--token-env", "FLOW_TOKEN_TEST",
                 "--repository", "fair", "--dir", str(REPO / "workspaces"), "--db-env",
                 "LEDGER_URL_TEST", *extra])


def writes(server):
    return [(m, p) for m, p in server.state.calls() if m != "GET"]


@pytest.mark.parametrize("build, extra", [
    (BUILD_V4, ("--secrets", "schedules")),
    (BUILD_V3, ()),              # before FME Flow 2023: no deployment parameters at all
])
def test_an_automation_whose_deployment_parameters_would_not_exist_is_refused_first(
        flow, tmp_path, capsys, build, extra):
    """The Automation's actions pass FAIR_DB as $(fair_db): when this deploy would not create
    that deployment parameter, it stops with a usage error naming it, nothing written to FME
    Flow, no plan on disk."""
    server = flow(build)
    target = tmp_path / "auto"
    assert deploy(server, "--no-schedules", "--automation", str(target), *extra) == 2
    assert writes(server) == [] and server.state.parameters == {}
    assert not target.exists()
    err = capsys.readouterr().err
    assert "fair_db" in err and "ledger-pw-77" not in err


def test_a_plan_that_cannot_be_written_stops_the_deploy_before_any_upload(flow, tmp_path,
                                                                          capsys):
    """--automation naming a path that is a file: the deploy fails before it stores a
    deployment parameter, uploads a workspace or makes a schedule."""
    server = flow()
    blocker = tmp_path / "auto"
    blocker.write_text("not a directory")
    assert deploy(server, "--automation", str(blocker)) != 0
    assert writes(server) == []
    assert server.state.repositories == {} and server.state.schedules == {}


def test_the_automation_steps_say_to_keep_the_portal_token_out_of_the_job_log(flow,
                                                                             tmp_path):
    """The plan passes the webhook body as a published parameter, which FME writes into the
    job log: the steps say to turn off the Survey123 webhook's portal info, so the body holds
    no submitter token there."""
    target = tmp_path / "auto"
    assert deploy(flow(), "--no-schedules", "--automation", str(target)) == 0
    steps = (target / "fme-ai-resilience-automation.md").read_text(encoding="utf-8")
    assert "includePortalInfo" in steps and "job log" in steps
