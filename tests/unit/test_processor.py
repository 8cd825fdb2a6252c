"""The processor (WS-02) on a real ledger, a Vision service behind ``responses`` and a fake clock:
stages, checkpoints, the analysis cache, retries, parking, dead letters and the job limit."""
from __future__ import annotations

import hashlib

import responses

from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.resilience.breaker import BreakerState, CircuitState, Manual
from fme_ai_resilience.core.errors import DownloadError, ErrorClass, FailureClass, StoreUnavailable
from fme_ai_resilience.core.intake.keys import trace_id_for
from fme_ai_resilience.core.ledger import DeferCause, Stage, Status, TaskOutcome
from fme_ai_resilience.core.resilience.degrade import Model
from fme_ai_resilience.services.processing.processor import Stop, analysis_fingerprint
from fme_ai_resilience.services.resilience.breaker import CircuitBreaker
from fme_ai_resilience.services.resilience.degrade import Degradation
from fme_ai_resilience.services.processing.sinks import CollectingSink, PostgresTableSink
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.core.intake.submission import Submission

from helpers.processing import (T0, VISION, Photos, answer, clock, ledger, make,  # noqa: F401
                                register, submission)


@responses.activate
def test_a_task_goes_through_every_stage_and_succeeds(ledger, clock):
    """Download, one Vision call, checkpoints, ACCEPTED, calls logged for photos and vision."""
    responses.add(responses.POST, VISION, json=answer())
    register(ledger, submission("k"))
    sink = CollectingSink()
    report = make(ledger, clock, sink=sink).run_batch()
    (result,) = report.results
    assert (result.status, result.outcome, result.condition) == (
        Status.SUCCEEDED, TaskOutcome.ACCEPTED, "damaged")
    record = ledger.get("k")
    assert record.status is Status.SUCCEEDED and record.result["reused"] is False
    assert set(record.checkpoints) == {"downloaded", "analyzed"}
    assert record.checkpoints["downloaded"]["sha256"] == hashlib.sha256(
        b"\xff\xd8\xffhttps://photos.test/p").hexdigest()
    assert [c.task.key for c in sink.take()] == ["k"]
    assert ledger.call_window("vision", 0, 20).calls == 1
    assert ledger.call_window("photos", 0, 20).calls == 1


@responses.activate
def test_an_analyzed_task_never_calls_the_vision_service_again(ledger, clock):
    """A task resumed after its analysis only writes back: no download, no Vision call."""
    register(ledger, submission("k"))
    (task,) = ledger.claim("crashed", 1, 1, now=T0)
    ledger.checkpoint("k", task.lease_token, Stage.ANALYZED, {
        "assessment": answer("fair", 0.8) | {"provider": "generic"}, "verdict": "ACCEPTED",
        "reasons": [], "fingerprint": "x|y", "sha256": "x", "reused": False,
        "service": "vision"}, now=T0)
    ledger.reap_expired(6, now=T0 + 2)
    photos = Photos()
    clock.advance(3)
    (result,) = make(ledger, clock, photos=photos).run_batch().results
    assert result.status is Status.SUCCEEDED and result.condition == "fair"
    assert len(responses.calls) == 0 and photos.calls == []


@responses.activate
def test_the_same_photo_under_two_globalids_costs_one_call(ledger, clock):
    """Survey123 re-created the feature: the second task reuses the first one's analysis."""
    responses.add(responses.POST, VISION, json=answer())
    register(ledger, submission("a", photo="same"), submission("b", photo="same"))
    results = make(ledger, clock).run_batch().results
    assert [r.status for r in results] == [Status.SUCCEEDED, Status.SUCCEEDED]
    assert [r.reused for r in results] == [False, True]
    assert len(responses.calls) == 1
    assert ledger.get("b").result["reused"] is True


@responses.activate
def test_a_transient_error_is_retried_inline_then_succeeds(ledger, clock):
    """A 503 is retried after a short jittered wait on the clock, within the deadline."""
    responses.add(responses.POST, VISION, status=503, json={"error": {"message": "busy"}})
    responses.add(responses.POST, VISION, json=answer())
    register(ledger, submission("k"))
    (result,) = make(ledger, clock).run_batch().results
    assert result.status is Status.SUCCEEDED and len(responses.calls) == 2
    assert len(clock.sleeps) == 1 and clock.sleeps[0] <= 5
    window = ledger.call_window("vision", 0, 20)
    assert (window.calls, window.failures, window.retries) == (2, 1, 1)


@responses.activate
def test_a_long_retry_after_parks_the_task_instead_of_sleeping(ledger, clock):
    """429 with Retry-After 120 s: FAILED until then, one attempt counted, no sleep."""
    responses.add(responses.POST, VISION, status=429, headers={"Retry-After": "120"},
                  json={"error": {"message": "slow down"}})
    register(ledger, submission("k"))
    (result,) = make(ledger, clock).run_batch().results
    assert (result.status, result.error_class, result.retry_at) == (
        Status.FAILED, ErrorClass.RATE_LIMITED, T0 + 120)
    record = ledger.get("k")
    assert (record.attempt_count, record.next_attempt_at) == (1, T0 + 120)
    assert clock.sleeps == []


@responses.activate
def test_an_auth_error_is_a_dead_letter_at_once(ledger, clock):
    """401: never retried, DEAD with failure class AUTH."""
    responses.add(responses.POST, VISION, status=401, json={"error": {"message": "bad key"}})
    register(ledger, submission("k"))
    (result,) = make(ledger, clock).run_batch().results
    assert (result.status, result.failure_class) == (Status.DEAD, FailureClass.AUTH)
    assert ledger.get("k").failure_class is FailureClass.AUTH and len(responses.calls) == 1


@responses.activate
def test_drift_is_retried_once_then_buried_as_format_with_anomalies(ledger, clock):
    """A renamed confidence field: one retry, made after its backoff (parked, so answers about
    other photos could show a drifted model first), then DEAD/FORMAT and a format anomaly per
    answer."""
    drifted = {"condition": "good", "score": 0.9, "labels": []}
    responses.add(responses.POST, VISION, json=drifted)
    responses.add(responses.POST, VISION, json=drifted)
    register(ledger, submission("k"))
    processor = make(ledger, clock)
    (parked,) = processor.run_batch().results
    assert parked.status is Status.FAILED and len(responses.calls) == 1
    clock.advance(parked.retry_at - clock.now() + 0.1)
    (result,) = processor.run_batch().results
    assert (result.status, result.failure_class) == (Status.DEAD, FailureClass.FORMAT)
    assert len(responses.calls) == 2
    assert len(ledger.recent_anomalies(0)) == 2


@responses.activate
def test_an_answer_out_of_the_configured_domain_is_a_format_anomaly(ledger, clock):
    """A condition the deployment does not know fails validation like drift."""
    responses.add(responses.POST, VISION, json=answer("excellent"))
    responses.add(responses.POST, VISION, json=answer("excellent"))
    register(ledger, submission("k"))
    processor = make(ledger, clock)
    (parked,) = processor.run_batch().results
    clock.advance(parked.retry_at - clock.now() + 0.1)
    (result,) = processor.run_batch().results
    assert result.failure_class is FailureClass.FORMAT
    assert "excellent" in ledger.recent_anomalies(0)[0].errors[0]


@responses.activate
def test_an_open_circuit_defers_without_counting_an_attempt(ledger, clock):
    """Breaker forced open: DEFERRED, attempt count unchanged, no call."""
    register(ledger, submission("k"))
    CircuitBreaker("vision", store=ledger, clock=clock).command(Manual.FORCE_OPEN)
    (result,) = make(ledger, clock).run_batch().results
    assert result.status is Status.DEFERRED and ledger.get("k").attempt_count == 0
    assert len(responses.calls) == 0


@responses.activate
def test_a_half_open_circuit_closes_on_its_probes_and_no_slot_goes_silent(ledger, clock):
    """After an outage: each task claims a probe slot only for its own call, so the round's
    five probes all report, the circuit closes, and every due task succeeds in one batch."""
    responses.add(responses.POST, VISION, json=answer())
    register(ledger, *(submission(f"k{i}", photo=f"p{i}") for i in range(8)))
    breaker = CircuitBreaker("vision", store=ledger, clock=clock)
    closed = breaker.state(fresh=True)
    assert ledger.breaker_swap("vision", closed.generation, BreakerState(
        CircuitState.OPEN, generation=closed.generation + 1, changed_at=T0 - 120,
        open_until=T0 - 1, trips=1))
    results = make(ledger, clock).run_batch().results
    assert [r.status for r in results] == [Status.SUCCEEDED] * 8
    assert len(responses.calls) == 8
    after = breaker.state(fresh=True)
    assert (after.state, after.trips) == (CircuitState.CLOSED, 0)


@responses.activate
def test_a_paused_ladder_and_a_critical_only_one_hold_photos_back_as_owed(ledger, clock):
    """L4 and L3 leave a non-critical photo DEFERRED (cause degraded), never SUCCEEDED."""
    register(ledger, submission("held", asset_type="bench"))
    ladder = Degradation(store=ledger, clock=clock)
    ladder.set_override("L4")
    (paused,) = make(ledger, clock).run_batch().results
    assert paused.status is Status.DEFERRED and paused.outcome is None
    ladder.set_override("L3")
    clock.advance(3600)
    (held,) = make(ledger, clock).run_batch().results
    assert (held.status, held.outcome) == (Status.DEFERRED, None)
    record = ledger.get("held")
    assert record.defer_cause is DeferCause.DEGRADED and record.next_attempt_at > clock.now()
    assert len(responses.calls) == 0


@responses.activate
def test_a_missing_photo_is_a_not_found_dead_letter(ledger, clock):
    """The photo host answers 404: DEAD/NOT_FOUND, no Vision call."""
    register(ledger, submission("k", photo="gone"))
    photos = Photos(**{"https://photos.test/gone": DownloadError(ErrorClass.NOT_FOUND, "404",
                                                                 status_code=404)})
    (result,) = make(ledger, clock, photos=photos).run_batch().results
    assert (result.status, result.failure_class) == (Status.DEAD, FailureClass.NOT_FOUND)
    assert len(responses.calls) == 0
    assert ledger.call_window("photos", 0, 20).failures == 1


@responses.activate
def test_a_webhook_without_photo_list_registers_one_task_per_listed_photo(ledger, clock):
    """The layer's photos become their own tasks; the listing task ends SKIPPED, idempotently."""
    register(ledger, Submission("F/attachments-unknown", "F", trace_id_for("F"),
                                attachments_unknown=True))
    listed = [submission("F/a1", photo="a1"), submission("F/a2", photo="a2")]
    lister_calls = []

    def lister(task):
        lister_calls.append(task.key)
        return listed

    settings = Settings().with_values({"processing.claim_limit": "1"})
    (result,) = make(ledger, clock, settings=settings, lister=lister).run_batch().results
    assert (result.status, result.outcome) == (Status.SUCCEEDED, TaskOutcome.SKIPPED)
    assert ledger.get("F/attachments-unknown").result["expanded"] == ["F/a1", "F/a2"]
    assert {ledger.get(k).status for k in ("F/a1", "F/a2")} == {Status.PENDING}


@responses.activate
def test_a_photo_list_registered_as_tasks_is_never_written_to_the_layer(ledger, clock):
    """The listing task is no photo: the sink never sees it (a related table would refuse a row
    without a photo, and the feature's fields belong to its photos' tasks); the ledger alone
    completes it."""
    register(ledger, Submission("F/attachments-unknown", "F", trace_id_for("F"),
                                attachments_unknown=True))
    sink = CollectingSink()
    settings = Settings().with_values({"processing.claim_limit": "1"})
    (result,) = make(ledger, clock, sink=sink, settings=settings,
                     lister=lambda task: [submission("F/a1", photo="a1")]).run_batch().results
    assert (result.status, result.outcome) == (Status.SUCCEEDED, TaskOutcome.SKIPPED)
    assert sink.take() == [] and ledger.get("F/attachments-unknown").result["expanded"] == ["F/a1"]


@responses.activate
def test_the_batch_stops_claiming_when_the_job_cannot_fit_another_task(ledger, clock):
    """With less job time left than a worst-case task, the batch claims nothing more."""
    responses.add(responses.POST, VISION, json=answer())
    register(ledger, submission("a"), submission("b"))
    settings = Settings().with_values({"processing.job_runtime_limit_s": "100"})
    processor = make(ledger, clock, settings=settings)
    report = processor.run_batch()
    assert report.results == () and report.stopped is Stop.JOB_ENDING
    assert ledger.counts()["PENDING"] == 2


@responses.activate
def test_a_written_task_is_completed_without_writing_again(ledger, clock):
    """A task with ``written`` only completes: the sink sees no second write."""
    register(ledger, submission("k"))
    (task,) = ledger.claim("crashed", 1, 1, now=T0)
    ledger.checkpoint("k", task.lease_token, Stage.ANALYZED, {
        "assessment": {**answer(), "provider": "generic"}, "verdict": "ACCEPTED",
        "reasons": [], "fingerprint": "x|y", "sha256": "x", "reused": False,
        "service": "vision"}, now=T0)
    ledger.checkpoint("k", task.lease_token, Stage.WRITTEN, {"sink": "test"}, now=T0)
    ledger.reap_expired(6, now=T0 + 2)
    clock.advance(3)
    writes = []

    class CountingSink(CollectingSink):
        def finish(self, conclusion, *, store, now):
            if not conclusion.task.done(Stage.WRITTEN):
                writes.append(conclusion.task.key)
            return super().finish(conclusion, store=store, now=now)

    (result,) = make(ledger, clock, sink=CountingSink()).run_batch().results
    assert result.status is Status.SUCCEEDED and writes == []


@responses.activate
def test_the_table_sink_writes_the_asset_row_with_the_completion(ledger, clock):
    """``writeback.sink = table``: the asset row and SUCCEEDED land together."""
    responses.add(responses.POST, VISION, json=answer("fair", 0.8))
    register(ledger, submission("k"))
    (result,) = make(ledger, clock, sink=PostgresTableSink()).run_batch().results
    assert result.status is Status.SUCCEEDED
    row = ledger.asset_condition("k")
    assert (row["condition"], row["outcome"], row["asset_type"]) == ("fair", "ACCEPTED",
                                                                     "hydrant")


@responses.activate
def test_a_lost_ledger_stops_the_batch_and_reports_it(ledger, clock, monkeypatch):
    """The ledger going away mid-task ends the batch with a reason, not a traceback."""
    responses.add(responses.POST, VISION, json=answer())
    register(ledger, submission("a"), submission("b"))
    processor = make(ledger, clock)

    def down(*args, **kwargs):
        raise StoreUnavailable("database is locked")

    monkeypatch.setattr(ledger, "checkpoint", down)
    report = processor.run_batch()
    assert len(report.results) == 1 and report.stopped is Stop.LEDGER_DOWN
    assert ledger.get("a").status is Status.PROCESSING  # its lease lapses; the reaper hands it on
    assert ledger.get("b").status is Status.PENDING


@responses.activate
def test_a_lease_lost_mid_task_ends_the_work_before_any_call_or_write(ledger, clock):
    """When another worker took the task over, the first stops at its next checkpoint: no
    Vision call and no write-back of its own."""
    register(ledger, submission("k"))

    class TakenOver(Photos):
        def __call__(self, url, token):
            ledger.reap_expired(6, now=T0 + 10_000)
            ledger.claim("other", 1, 300, now=T0 + 10_000)
            return super().__call__(url, token)

    sink = CollectingSink()
    (result,) = make(ledger, clock, photos=TakenOver(), sink=sink).run_batch().results
    assert result.status is Status.PROCESSING and "lease lost" in result.reason
    assert len(responses.calls) == 0 and sink.take() == []
    record = ledger.get("k")
    assert record.lease_owner == "other" and "downloaded" not in record.checkpoints


@responses.activate
def test_a_photo_being_analysed_for_another_task_waits_for_its_answer(ledger, clock):
    """While another task holds the photo's analysis (the same bytes in a re-created
    feature), this one defers without a call, then reuses the answer that task remembered."""
    responses.add(responses.POST, VISION, json=answer())
    register(ledger, submission("b"))
    processor = make(ledger, clock)
    digest = hashlib.sha256(b"\xff\xd8\xffhttps://photos.test/p").hexdigest()
    fingerprint = analysis_fingerprint(digest, processor.routes[Model.PRIMARY].model)
    assert ledger.claim_analysis(fingerprint, "other-task", T0 + 300, token=1, now=T0)
    (first,) = processor.run_batch().results
    assert first.status is Status.DEFERRED and "reused" in first.reason
    assert len(responses.calls) == 0
    ledger.remember_analysis(fingerprint, {"assessment": {
        **answer("fair", 0.8), "provider": "generic"}, "service": "vision"}, now=T0 + 1)
    clock.advance(processor.settings.retry.max_inline_wait_s + 1)
    (second,) = processor.run_batch().results
    assert (second.status, second.reused, second.condition) == (Status.SUCCEEDED, True, "fair")
    assert len(responses.calls) == 0


@responses.activate
def test_a_failed_analysis_gives_its_claim_up(ledger, clock):
    """A task that parks without an answer releases the photo's claim for the next one."""
    responses.add(responses.POST, VISION, status=400, json={"error": "bad image"})
    register(ledger, submission("a"))
    processor = make(ledger, clock)
    (result,) = processor.run_batch().results
    assert result.status is Status.DEAD
    digest = hashlib.sha256(b"\xff\xd8\xffhttps://photos.test/p").hexdigest()
    fingerprint = analysis_fingerprint(digest, processor.routes[Model.PRIMARY].model)
    assert ledger.claim_analysis(fingerprint, "next-task", T0 + 300, token=1, now=T0 + 1)


@responses.activate
def test_a_429_paces_the_fleet_so_the_next_calls_are_not_refused(ledger, clock):
    """The first call is refused with Retry-After 2 s: nobody calls before it has passed (the
    task waits it out inline) and the service is paced; the other tasks call one slot apart,
    and every task succeeds without spending an attempt on a second refusal."""
    responses.add(responses.POST, VISION, status=429, headers={"Retry-After": "2"},
                  json={"error": {"message": "slow down"}})
    responses.add(responses.POST, VISION, json=answer())
    register(ledger, *(submission(f"k{i}", photo=f"p{i}") for i in range(4)))
    results = make(ledger, clock).run_batch().results
    assert [r.status for r in results] == [Status.SUCCEEDED] * 4
    assert [c.response.status_code for c in responses.calls] == [429, 200, 200, 200, 200]
    assert ledger.pace_get("vision") > 0           # still paced, a little less each success
    assert sum(clock.sleeps) >= 2.0 + 0.1 * (0.97 + 0.97 ** 2)    # the Retry-After, 2 slots


class _RefusedWhileWaiting(FakeClock):
    """A clock on which another engine's call, paced at ``paced_s``, is refused with a
    Retry-After of ``retry_after_s`` the first time this engine waits (for a place among the
    calls in flight, or for its pace slot): the 429 slows the service's pace, as that engine's
    pacer would."""

    def __init__(self, ledger, retry_after_s, paced_s=0.0):
        super().__init__(T0)
        self.ledger, self.retry_after_s, self.paced_s = ledger, retry_after_s, paced_s

    def sleep(self, seconds):
        if not self.sleeps:
            from fme_ai_resilience.services.resilience.pace import CallPacer

            CallPacer("vision", store=self.ledger, clock=self, cache_ttl_s=1.0).refused(
                self.retry_after_s, self.paced_s)
        super().sleep(seconds)


@responses.activate
def test_a_call_that_waited_for_room_while_a_429_paced_the_service_parks(ledger):
    """Another engine's call holds the fleet's only place in flight; while this task waits for
    it, that call is refused (Retry-After 60 s). When the place comes free this call would be
    refused too: it parks until the pace's next slot (DEFERRED for a 429, no attempt counted,
    no call made) and gives the place back."""
    responses.add(responses.POST, VISION, json=answer())
    register(ledger, submission("k"))
    clock = _RefusedWhileWaiting(ledger, 60.0)
    settings = Settings()
    assert settings.concurrency.start == 1
    ledger.limit_acquire("vision", "other-engine", settings.concurrency, T0 + 0.05, now=T0)
    (result,) = make(ledger, clock, settings=settings).run_batch().results
    assert (result.status, result.error_class) == (Status.DEFERRED, ErrorClass.RATE_LIMITED)
    assert result.retry_at >= T0 + 60 and ledger.get("k").attempt_count == 0
    assert len(responses.calls) == 0 and clock.sleeps
    slot, _, in_flight = ledger.limit_acquire("vision", "next", settings.concurrency,
                                              clock.now() + 10, now=clock.now())
    assert slot is not None and in_flight == 1          # the place was given back


@responses.activate
def test_a_call_that_waited_for_room_with_no_429_meanwhile_is_made(ledger):
    """The same wait for a place, the other call answered: this call is made once it is free."""
    responses.add(responses.POST, VISION, json=answer())
    register(ledger, submission("k"))
    clock = FakeClock(T0)
    settings = Settings()
    ledger.limit_acquire("vision", "other-engine", settings.concurrency, T0 + 0.05, now=T0)
    (result,) = make(ledger, clock, settings=settings).run_batch().results
    assert result.status is Status.SUCCEEDED and len(responses.calls) == 1 and clock.sleeps
    assert ledger.pace_get("vision") == 0


@responses.activate
def test_a_call_that_waited_for_its_pace_slot_while_a_429_slowed_the_pace_parks(ledger):
    """The service is paced (a slot 0.5 s off, within the inline wait); while this task waits
    for it, another engine's call paced at that interval is refused (Retry-After 30 s): the
    pace doubles and this call, which would be refused too, parks without calling."""
    responses.add(responses.POST, VISION, json=answer())
    register(ledger, submission("k"))
    clock = _RefusedWhileWaiting(ledger, 30.0, paced_s=0.5)
    ledger.pace_slow("vision", 0.5, not_before=T0 + 0.5)
    (result,) = make(ledger, clock).run_batch().results
    assert (result.status, result.error_class) == (Status.DEFERRED, ErrorClass.RATE_LIMITED)
    assert result.retry_at >= T0 + 30 and ledger.get("k").attempt_count == 0
    assert len(responses.calls) == 0 and clock.sleeps[0] == 0.5

def test_the_pace_starts_at_its_first_interval_and_doubles_on_a_refusal_at_pace():
    from fme_ai_resilience.core.resilience.pace import FIRST_INTERVAL_S, slower

    assert slower(0.0) == FIRST_INTERVAL_S == 0.1
    assert slower(0.1) == 0.2 and slower(1.5) == 3.0 and slower(0.01) == FIRST_INTERVAL_S


@responses.activate
def test_a_stop_asked_mid_batch_finishes_the_task_in_hand_and_claims_no_other(ledger, clock):
    """``process --loop`` on SIGTERM: once the stop is asked, the batch claims nothing more;
    the task in hand is finished (analysed and written), the others stay PENDING for the
    next engine, and the report says why the batch stopped."""
    import threading

    responses.add(responses.POST, VISION, json=answer())
    register(ledger, *(submission(f"k{i}", photo=f"p{i}") for i in range(5)))
    stop = threading.Event()

    class StopOnFirstDownload(Photos):
        def __call__(self, url, token):
            stop.set()     # SIGTERM arrives while the first task is being worked
            return super().__call__(url, token)

    report = make(ledger, clock, photos=StopOnFirstDownload()).run_batch(stop)
    (result,) = report.results
    assert result.status is Status.SUCCEEDED and report.stopped is Stop.STOPPED
    counts = {k: v for k, v in ledger.counts().items() if v}
    assert counts == {"SUCCEEDED": 1, "PENDING": 4}
