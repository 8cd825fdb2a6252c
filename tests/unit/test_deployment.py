"""The deployment plan: the processor's runtime limit, the two schedules and the REST bodies."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings as hsettings
from hypothesis import strategies as st

from fme_ai_resilience.core.fme.deployment import (COMPENSATOR_CRON, PROCESSOR_CRON, V3, V4,
                                                   JobDirectives, JobRequest, Schedule, describe,
                                                   job_body, processor_job,
                                                   processor_job_runtime_s, schedule_body,
                                                   schedules)
from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.core.resilience.retry import RetryPolicy
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.core.resilience.task_budget import check_budget, task_budget_s

DB = "postgresql://fair:pw-in-url@db/ledger"


def test_runtime_limit_by_default():
    """10 tasks x (180 s task budget + 30 s per call) + 60 s start: 2160 s."""
    assert processor_job_runtime_s(Settings()) == 2160


@hsettings(max_examples=200, deadline=None)
@given(latency=st.floats(1, 3600), claim=st.integers(1, 500), ttfb=st.floats(0.5, 120))
def test_runtime_limit_is_above_the_task_budget_of_every_claimed_task(latency, claim, ttfb):
    """Whatever the promise, claim limit and time limits, the job may run longer than all of
    its tasks' budgets together, by at least the start margin."""
    s = Settings().with_values({"intake.latency_promise_s": latency,
                                "processing.claim_limit": claim, "timeouts.ttfb_s": ttfb})
    runtime = processor_job_runtime_s(s)
    assert runtime >= claim * task_budget_s(latency) + 60
    assert runtime == math.ceil(claim * (task_budget_s(latency) + s.timeouts.total_s) + 60)


def test_default_runtime_limit_fits_the_worst_case_of_the_retry_policy():
    """With the default settings the limit also exceeds claim_limit x the policy's worst
    case, the check `plan --job-limit-seconds` makes."""
    s = Settings()
    check = check_budget(RetryPolicy.from_settings(s), s.timeouts, s.intake.latency_promise_s,
                         processor_job_runtime_s(s), s.processing.claim_limit)
    assert check.fits_job_limit is True


def test_the_two_schedules():
    """WS-02 every minute on its own queue with the runtime limit; WS-03 every 10 minutes on
    the default queue, never running or waiting longer than its interval."""
    processor, compensator = schedules("fair", Settings(), db_url=DB, queue="q1")
    assert (processor.name, processor.cron, processor.job.workspace) == (
        "WS-02_processor", PROCESSOR_CRON, "WS-02_processor.fmw")
    assert processor.job.directives == JobDirectives("q1", 2160, 60)
    assert (compensator.name, compensator.cron, compensator.job.workspace) == (
        "WS-03_compensator", COMPENSATOR_CRON, "WS-03_compensator.fmw")
    assert compensator.job.directives == JobDirectives(None, 600, 600)
    assert processor.category == compensator.category == "fme-ai-resilience"
    arcgis = {"FAIR_ARCGIS_TOKEN", "FAIR_ARCGIS_CLIENT_SECRET", "FAIR_ARCGIS_PASSWORD"}
    assert processor.job.secrets == {"FAIR_DB", "FAIR_VISION_KEY", "FAIR_DOWNLOAD_HOST_HEADERS",
                                     *arcgis}
    assert compensator.job.secrets == {"FAIR_DB", *arcgis}
    for schedule in (processor, compensator):
        assert schedule.job.parameters == {"FAIR_DB": DB}


def test_changed_settings_travel_with_the_workspace_that_publishes_them():
    """A setting away from its default goes to the schedules of the workspaces publishing it,
    as text Settings reads back; the runtime limit follows it."""
    s = Settings().with_values({"processing.claim_limit": 4, "retry.task_attempts": 3,
                                "intake.overload_mode": "reject"})
    processor, compensator = schedules("fair", s, db_url=DB)
    assert processor.job.parameters == {"FAIR_DB": DB, "FAIR_PROCESSING_CLAIM_LIMIT": "4",
                                        "FAIR_RETRY_TASK_ATTEMPTS": "3"}
    assert compensator.job.parameters == {"FAIR_DB": DB, "FAIR_RETRY_TASK_ATTEMPTS": "3"}
    assert processor.job.directives.max_runtime_s == 4 * 210 + 60
    assert Settings.from_mapping(processor.job.parameters, prefix="FAIR_").processing \
        == s.processing


def test_nothing_shown_carries_the_ledger_url():
    """The reprs and summaries of jobs and schedules name parameters, never their values."""
    processor, compensator = schedules("fair", Settings(), db_url=DB)
    job = processor_job("fair", Settings(), db_url=DB)
    for value in (processor, compensator, job):
        assert "pw-in-url" not in repr(value)
    assert "pw-in-url" not in " ".join(describe(job))
    assert job.secret_values == (DB,)


def test_v4_bodies():
    """v4: the job body of fme.md; the schedule flattens the same job fields."""
    job = processor_job("fair", Settings(), db_url=DB)
    assert job_body(job, V4) == {
        "repository": "fair", "workspace": "WS-02_processor.fmw",
        "publishedParameters": {"FAIR_DB": DB}, "queue": "fair_processor",
        "maxJobRuntime": 2160, "maxTimeInQueue": 60}
    processor, _ = schedules("fair", Settings(), db_url=DB)
    body = schedule_body(processor, V4, begin="2026-01-02T03:04:05")
    assert body == {
        "name": "WS-02_processor", "category": "fme-ai-resilience",
        "description": processor.description, "enabled": True, "begin": "2026-01-02T03:04:05",
        "recurrence": "cron", "cron": "0 * * * * ?", "repository": "fair",
        "workspace": "WS-02_processor.fmw", "publishedParameters": {"FAIR_DB": DB},
        "queue": "fair_processor", "maxJobRuntime": 2160, "maxTimeInQueue": 60}


def test_v3_bodies():
    """v3: published parameters as a name/value list and the directives as TMDirectives;
    a directive not set is left out."""
    _, compensator = schedules("fair", Settings(), db_url=DB)
    request = {"publishedParameters": [{"name": "FAIR_DB", "value": DB}],
               "TMDirectives": {"ttc": 600, "ttl": 600}}
    assert job_body(compensator.job, V3) == request
    body = schedule_body(compensator, V3, begin="2026-01-02T03:04:05")
    assert body["request"] == request and "publishedParameters" not in body
    bare = JobRequest("r", "w.fmw")
    assert job_body(bare, V3) == {"publishedParameters": []}
    assert job_body(bare, V4) == {"repository": "r", "workspace": "w.fmw",
                                  "publishedParameters": {}}


@pytest.mark.parametrize("build", [
    lambda: JobDirectives(queue=""),
    lambda: JobDirectives(max_runtime_s=0),
    lambda: JobDirectives(max_queued_s=1.5),
    lambda: JobRequest("", "w.fmw"),
    lambda: JobRequest("r", "w.fmw", {"A": 1}),
    lambda: Schedule("n", "c", "", JobRequest("r", "w.fmw")),
    lambda: job_body(JobRequest("r", "w.fmw"), "v5"),
    lambda: schedule_body(Schedule("n", "c", "0 * * * * ?", JobRequest("r", "w.fmw")), "v5",
                          begin="2026-01-01T00:00:00"),
    lambda: processor_job("fair", Settings(), db_url=""),
])
def test_bad_values_are_refused(build):
    """Empty names, non-whole seconds, non-text parameters, an unknown API version or an
    empty ledger URL raise ConfigurationError."""
    with pytest.raises(ConfigurationError):
        build()


@pytest.mark.parametrize("operation, threshold", [
    ("repositories", 22337), ("jobs", 25208), ("engines", 25208), ("submit", 26018),
    ("upload", 26018), ("schedules", 26018)])
def test_api_for_switches_to_v4_at_the_threshold_build(operation, threshold):
    """Each operation is v3 one build below its threshold and v4 from it on."""
    from fme_ai_resilience.core.fme.deployment import api_for

    assert api_for(operation, threshold - 1) == V3 and api_for(operation, threshold) == V4


def test_api_for_refuses_an_unknown_operation_or_build():
    """An operation outside the table or a build that is no whole number is a usage error."""
    from fme_ai_resilience.core.fme.deployment import api_for

    with pytest.raises(ConfigurationError):
        api_for("backups", 26000)
    with pytest.raises(ConfigurationError):
        api_for("jobs", True)
