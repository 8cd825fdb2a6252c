"""ProcessorCaller (WS-02) and CompensatorCaller (WS-03) driven like FME drives them, over a
SQLite ledger, the plugin's fake Vision service (``responses``) and a fake clock: one feature
per task, parked failures through Output, dead letters nobody requeues through <Rejected>,
the compensation report and its notifications."""
from __future__ import annotations

import math
import time

import responses

from fme_ai_resilience.fme import CompensatorCaller, IntakeCaller, ProcessorCaller
from fme_ai_resilience.core.intake.keys import trace_id_for
from fme_ai_resilience.core.ledger import Status
from fme_ai_resilience.store import open_store
from fme_ai_resilience.testing import Fault, run_caller

from helpers.fme_fixtures import (ATTACHMENT, FEATURE, JPEG, KEY, PHOTO, SERVICE,
                                assert_no_secret, body, intake_macros, processor_macros, texts)


def registered(fair_db, clock, photo=PHOTO, **changes):
    run = run_caller(IntakeCaller, [{"message": body(photo, **changes)}],
                     intake_macros(fair_db), clock=clock)
    assert run.rejected == []
    return run.output[0].getAttribute("fair_key")


def serve_photo(vision, status=200):
    vision.mock.add(responses.GET, PHOTO, body=JPEG, content_type="image/jpeg", status=status)


def test_a_task_succeeds_and_carries_its_conclusion_for_the_writers(fair_db, fake_clock,
                                                                   fake_vision):
    """One Creator feature, one batch: the task's feature through Output, attribute by
    attribute, with the conclusion (GlobalIDs, model, the write-back fields) for FME's
    writers; one Vision call; the ledger says SUCCEEDED; no secret anywhere."""
    registered(fair_db, fake_clock)
    serve_photo(fake_vision)
    run = run_caller(ProcessorCaller, [{}], processor_macros(fair_db, fake_vision.endpoint),
                     clock=fake_clock)
    assert run.rejected == []
    (out,) = run.output
    stamp = time.strftime("%Y%m%d%H%M%S+00:00", time.gmtime(fake_clock.now()))
    assert out.as_dict() == {
        "fair_kind": "task", "fair_key": KEY, "fair_status": "SUCCEEDED",
        "fair_outcome": "ACCEPTED", "fair_condition": "good", "fair_confidence": 0.9,
        "fair_error_class": None, "fair_failure_class": None, "fair_retry_at": None,
        "fair_retry_after_s": None, "fair_trace_id": trace_id_for(KEY), "fair_reused": "false",
        "fair_reason": None, "fair_feature_globalid": FEATURE,
        "fair_attachment_globalid": ATTACHMENT, "fair_layer_url": f"{SERVICE}/0",
        "fair_asset_type": "hydrant", "fair_model_version": "fake-vision-1",
        "fair_labels": "utility asset", "fair_assessed_at": stamp, "ai_condition": "good",
        "ai_confidence": 0.9, "ai_status": "ACCEPTED", "ai_model": "fake-vision-1",
        "ai_trace_id": trace_id_for(KEY), "ai_assessed_at": stamp}
    assert fake_vision.calls == [(200, "ok")]
    with open_store(fair_db) as store:
        assert store.get(KEY).status is Status.SUCCEEDED
    assert run.messages("INFORM")[-1].endswith("batch: 1 task(s): 1 SUCCEEDED "
                                               "(stopped: no due task)")
    assert_no_secret(texts(run.output), run.messages(), [repr(run.caller)])


def test_a_vision_outage_spending_the_attempts_leaves_through_output(fair_db, fake_clock,
                                                                      fake_vision):
    """Every call a 503 and short backoffs: four attempts inline, the last one parked
    (FAILED) until its backoff is over, then DEAD of a spent budget (a cause WS-03 requeues
    by itself) through Output, never <Rejected>; the Vision client's warnings reach FME's
    log, without the key."""
    registered(fair_db, fake_clock)
    serve_photo(fake_vision)
    fake_vision.fail(503, times=40)
    macros = processor_macros(fair_db, fake_vision.endpoint)
    first = run_caller(ProcessorCaller, [{}], macros, clock=fake_clock)
    (parked,) = first.output
    assert (parked.getAttribute("fair_status"), len(fake_vision.calls)) == ("FAILED", 4)
    fake_clock.advance(parked.getAttribute("fair_retry_after_s") + 1)
    run = run_caller(ProcessorCaller, [{}], macros, clock=fake_clock)
    assert run.rejected == [] and first.rejected == []
    (out,) = run.output
    values = out.as_dict()
    assert (values["fair_status"], values["fair_failure_class"], values["fair_error_class"],
            values["fair_condition"], values["fair_reason"]) == (
        "DEAD", "BUDGET", "SERVER_ERROR", None, "analysis: HTTP 503: scripted HTTP 503")
    assert len(fake_vision.calls) == 5
    assert sum("vision generic failed" in m and "status=503" in m
               for m in first.messages("WARN") + run.messages("WARN")) == 5
    assert_no_secret(texts(first.output), first.messages())
    assert_no_secret(texts(run.output), run.messages())


def test_a_vision_outage_is_parked_in_the_ledger_not_rejected(fair_db, fake_clock,
                                                             fake_vision):
    """No wait allowed inside the engine: the first 503 parks the task FAILED with its retry
    time, through Output; the next run after that time succeeds."""
    registered(fair_db, fake_clock)
    serve_photo(fake_vision)
    fake_vision.fail(503)
    macros = processor_macros(fair_db, fake_vision.endpoint, FAIR_RETRY_MAX_INLINE_WAIT_S="0")
    run = run_caller(ProcessorCaller, [{}], macros, clock=fake_clock)
    assert run.rejected == []
    (out,) = run.output
    wait = out.getAttribute("fair_retry_after_s")
    assert (out.getAttribute("fair_status"), out.getAttribute("fair_error_class")) == (
        "FAILED", "SERVER_ERROR")
    assert 0 <= wait <= 1 and out.getAttribute("fair_retry_at").endswith("+00:00")
    fake_clock.advance(wait + 1)
    after = run_caller(ProcessorCaller, [{}], macros, clock=fake_clock)
    assert [f.getAttribute("fair_status") for f in after.output] == ["SUCCEEDED"]


def test_a_long_retry_after_parks_the_task_until_then(fair_db, fake_clock, fake_vision):
    """A 429 asking for 600 s, beyond the task's deadline: parked at once, FAILED, due again
    in 600 s, through Output."""
    registered(fair_db, fake_clock)
    serve_photo(fake_vision)
    fake_vision.script(Fault(429, retry_after=600))
    run = run_caller(ProcessorCaller, [{}], processor_macros(fair_db, fake_vision.endpoint),
                     clock=fake_clock)
    (out,) = run.output
    assert (out.getAttribute("fair_status"), out.getAttribute("fair_error_class")) == (
        "FAILED", "RATE_LIMITED")
    assert out.getAttribute("fair_retry_after_s") == 600
    with open_store(fair_db) as store:
        assert math.isclose(store.get(KEY).next_attempt_at, fake_clock.now() + 600)


def test_format_drift_ends_in_a_rejected_dead_letter(fair_db, fake_clock, fake_vision):
    """Answers whose JSON changed (twice: one retry, parked until its backoff is over): DEAD
    with FORMAT, which no automatic requeue fixes, through <Rejected> with
    fme_rejection_code FORMAT."""
    registered(fair_db, fake_clock)
    serve_photo(fake_vision)
    fake_vision.script("drift", "drift")
    macros = processor_macros(fair_db, fake_vision.endpoint)
    first = run_caller(ProcessorCaller, [{}], macros, clock=fake_clock)
    (parked,) = first.output
    assert parked.getAttribute("fair_status") == "FAILED" and first.rejected == []
    fake_clock.advance(parked.getAttribute("fair_retry_after_s") + 1)
    run = run_caller(ProcessorCaller, [{}], macros, clock=fake_clock)
    assert run.output == []
    (out,) = run.rejected
    assert (out.getAttribute("fair_status"), out.getAttribute("fair_failure_class"),
            out.getAttribute("fme_rejection_code")) == ("DEAD", "FORMAT", "FORMAT")
    assert out.getAttribute("fme_rejection_message") == out.getAttribute("fair_reason") != ""


def test_a_missing_photo_is_rejected_then_notified_once_by_the_compensator(
        fair_db, fake_clock, fake_vision):
    """The photo answers 404: NOT_FOUND through <Rejected>; WS-03's pass then emits its
    report (notified 1, the new dead-letter cause paged) and one notification feature for an
    Emailer, handed over once."""
    registered(fair_db, fake_clock)
    serve_photo(fake_vision, status=404)
    run = run_caller(ProcessorCaller, [{}], processor_macros(fair_db, fake_vision.endpoint),
                     clock=fake_clock)
    assert [f.getAttribute("fme_rejection_code") for f in run.rejected] == ["NOT_FOUND"]
    assert fake_vision.calls == []
    comp = run_caller(CompensatorCaller, [{}], {"FAIR_DB": fair_db}, clock=fake_clock)
    assert comp.rejected == []
    report, note = comp.output
    values = report.as_dict()
    assert {k: values[k] for k in ("fair_kind", "fair_status", "fair_reaped", "fair_buried",
                                   "fair_requeued", "fair_notified", "fair_breakers",
                                   "fair_ladder", "fair_reconciled", "fair_alert_level",
                                   "fair_backlog", "fair_error_class")} == {
        "fair_kind": "report", "fair_status": "DONE", "fair_reaped": 0, "fair_buried": 0,
        "fair_requeued": 0, "fair_notified": 1, "fair_breakers": "vision=CLOSED",
        "fair_ladder": "L0", "fair_reconciled": None, "fair_alert_level": "ALERT",
        "fair_backlog": 0, "fair_error_class": None}
    assert "a new dead-letter cause: NOT_FOUND" in values["fair_alerts"]
    note_values = note.as_dict()
    assert note_values["fair_kind"] == "notification" and note_values["fair_key"] == KEY
    assert isinstance(note_values["fair_notification_id"], str)   # a sequence: text
    assert note_values["fair_notification_kind"] == "photo-not-found"
    assert note_values["fair_subject"] == "Survey123 photo not found"
    assert KEY in note_values["fair_body"]
    assert note_values["fair_created_at"].endswith("+00:00")
    again = run_caller(CompensatorCaller, [{}], {"FAIR_DB": fair_db}, clock=fake_clock)
    assert [f.getAttribute("fair_kind") for f in again.output] == ["report"]


def test_an_expired_lease_is_reaped_by_the_compensator(fair_db, fake_clock):
    """A task an engine died with: after its lease, WS-03's report counts it reaped and the
    task is due again."""
    registered(fair_db, fake_clock)
    with open_store(fair_db) as store:
        store.claim("crashed-engine", 1, 30, now=fake_clock.now())
    fake_clock.advance(31)
    run = run_caller(CompensatorCaller, [{}], {"FAIR_DB": fair_db}, clock=fake_clock)
    assert run.output[0].getAttribute("fair_reaped") == 1
    with open_store(fair_db) as store:
        assert store.get(KEY).status is Status.PENDING


def test_the_compensator_reports_a_failed_reconciliation_and_tries_again(fair_db, fake_clock):
    """The layer to reconcile against answers 500: a FAILED report through Output (the next
    run tries again), never <Rejected>, and an ERROR line."""
    layer = "https://93.184.216.34/abc/arcgis/rest/services/inspection/FeatureServer/0"
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add(responses.GET, f"{layer}/query", status=500, json={"error": "down"})
        mock.add(responses.POST, f"{layer}/query", status=500, json={"error": "down"})
        run = run_caller(CompensatorCaller, [{}], {"FAIR_DB": fair_db,
                                                  "FAIR_WRITEBACK_LAYER_URL": layer},
                         clock=fake_clock)
    assert run.rejected == []
    (out,) = run.output
    assert out.getAttribute("fair_status") == "FAILED"
    assert out.getAttribute("fair_error_class") == "SERVER_ERROR"
    assert run.log[-1].severity == "ERROR"


def test_one_batch_per_input_feature_over_one_ledger_connection(fair_db, fake_clock,
                                                                fake_vision, monkeypatch):
    """Two schedule features make two batches; the ledger is opened once for the instance and
    closed by close()."""
    import fme_ai_resilience.fme.caller_base as base

    opened = []

    def recording(url, **kwargs):
        store = open_store(url, **kwargs)
        opened.append(store)
        return store

    monkeypatch.setattr(base, "open_store", recording)
    registered(fair_db, fake_clock)
    registered(fair_db, fake_clock, feature="{22222222-2222-4222-8222-222222222222}")
    opened.clear()
    serve_photo(fake_vision)
    run = run_caller(ProcessorCaller, [{}, {}], processor_macros(
        fair_db, fake_vision.endpoint, FAIR_PROCESSING_CLAIM_LIMIT="1"), clock=fake_clock)
    assert [f.getAttribute("fair_status") for f in run.output] == ["SUCCEEDED", "SUCCEEDED"]
    assert len(opened) == 1
    assert run.caller._store is None
