"""The ledger contract, held by every backend (SQLite file, SQLite :memory:, PostgreSQL)."""
from __future__ import annotations

import json

import pytest

from fme_ai_resilience.core.errors import ConfigurationError, ErrorClass, FailureClass
from fme_ai_resilience.core.ledger import (CallRecord, InvalidBodyKept, FormatAnomaly,
                                           OverloadMode, ReapResult, RegisterOutcome, Stage,
                                           Status, TaskOutcome)
from fme_ai_resilience.core.config.pipeline_settings import SECRET_SETTINGS
from fme_ai_resilience.store import SqlStore
from fme_ai_resilience.core.intake.submission import Submission


# -- schema ------------------------------------------------------------------------------------

from helpers.ledger_rows import T0, claimed, register, sub


def test_init_schema_twice_is_harmless(store):
    """A second init applies nothing, keeps the rows and leaves the version at the latest."""
    register(store, "a")
    assert store.init_schema(now=T0) == []
    assert store.schema_version() == SqlStore.latest_schema_version(store.dialect)
    assert store.get("a").status is Status.PENDING


def test_clear_empties_the_ledger(store):
    """clear() removes rows from every table but keeps the schema."""
    register(store, "a")
    store.set_config({"x": "1"}, now=T0)
    store.clear()
    assert sum(store.counts().values()) == 0 and store.get_config() == {}


# -- register ----------------------------------------------------------------------------------

def test_register_new_stores_a_pending_row_without_the_token(store):
    """NEW: one PENDING row whose payload is the submission minus the portal token."""
    s = sub("k1", portal_token="SECRET-TOKEN-123", attributes={"asset": "hydrant"})
    reg = store.register(s, 10, now=T0)
    assert (reg.outcome, reg.status, reg.backlog) == (RegisterOutcome.NEW, Status.PENDING, 0)
    record = store.get("k1")
    assert record.status is Status.PENDING and record.created_at == T0
    assert record.payload == s.to_payload()
    assert "SECRET-TOKEN-123" not in json.dumps(dict(record.payload))
    assert Submission.from_payload(record.payload) == s
    assert record.trace_id == "trace-k1" and record.source == "survey123"


@pytest.mark.parametrize("status", ["PENDING", "PROCESSING", "FAILED", "DEFERRED"])
def test_duplicate_of_an_in_progress_task(store, status):
    """A redelivery of an unfinished task is DUPLICATE_IN_PROGRESS and reports its status."""
    register(store, "k")
    if status != "PENDING":
        (task,) = store.claim("e", 1, 60, now=T0)
        if status == "FAILED":
            assert store.fail("k", task.lease_token, ErrorClass.SERVER_ERROR, "503", T0 + 5, now=T0)
        elif status == "DEFERRED":
            assert store.defer("k", task.lease_token, T0 + 5, now=T0)
    reg = register(store, "k", now=T0 + 1)
    assert reg.outcome is RegisterOutcome.DUPLICATE_IN_PROGRESS
    assert reg.status is Status(status)
    assert store.counts()[status] == 1


def test_duplicate_of_a_succeeded_task_is_done_with_its_outcome(store):
    """A redelivery after success is DUPLICATE_DONE with the task's outcome."""
    task = claimed(store, "k")
    assert store.complete("k", task.lease_token, TaskOutcome.REVIEW, {"c": "fair"}, now=T0 + 1)
    reg = register(store, "k", now=T0 + 2)
    assert (reg.outcome, reg.status, reg.task_outcome) == (
        RegisterOutcome.DUPLICATE_DONE, Status.SUCCEEDED, TaskOutcome.REVIEW)


def test_duplicate_of_a_dead_letter_is_done(store):
    """A dead letter is finished: redelivery does not revive it (only requeue does)."""
    task = claimed(store, "k")
    assert store.bury("k", task.lease_token, FailureClass.AUTH, "401", now=T0 + 1)
    reg = register(store, "k", now=T0 + 2)
    assert (reg.outcome, reg.status) == (RegisterOutcome.DUPLICATE_DONE, Status.DEAD)
    assert store.get("k").status is Status.DEAD


def test_reject_mode_refuses_past_the_ceiling_and_stores_nothing(store):
    """REJECT: at the ceiling a new key is OVER_BACKLOG and leaves no row."""
    for i in range(3):
        assert register(store, f"k{i}", ceiling=3,
                        overload_mode=OverloadMode.REJECT).outcome is RegisterOutcome.NEW
    reg = register(store, "k3", ceiling=3, overload_mode=OverloadMode.REJECT)
    assert (reg.outcome, reg.status, reg.backlog) == (RegisterOutcome.OVER_BACKLOG, None, 3)
    assert store.get("k3") is None


def test_duplicates_are_reported_whatever_the_backlog(store):
    """Over the ceiling, a known key is still answered as a duplicate, not refused."""
    for i in range(3):
        register(store, f"k{i}", ceiling=3)
    reg = register(store, "k0", ceiling=1, overload_mode=OverloadMode.REJECT)
    assert reg.outcome is RegisterOutcome.DUPLICATE_IN_PROGRESS


def test_park_mode_stores_deferred_up_to_the_park_ceiling(store):
    """PARK: past the ceiling rows are stored DEFERRED; past the park ceiling refused."""
    outcomes = [register(store, f"k{i}", ceiling=2, overload_mode=OverloadMode.PARK,
                         park_ceiling=4).outcome for i in range(5)]
    assert outcomes == [RegisterOutcome.NEW] * 2 + [RegisterOutcome.PARKED] * 2 + [
        RegisterOutcome.OVER_BACKLOG]
    assert store.get("k2").status is Status.DEFERRED
    assert store.get("k4") is None
    assert store.counts()["DEFERRED"] == 2


def test_park_without_a_park_ceiling_never_refuses(store):
    """PARK with no park ceiling parks every new key past the ceiling."""
    for i in range(4):
        register(store, f"k{i}", ceiling=1, overload_mode=OverloadMode.PARK)
    assert store.counts()["DEFERRED"] == 3


def test_backlog_counts_only_in_progress_rows_and_is_capped(store):
    """Finished rows leave the backlog; the reported backlog never exceeds ceiling + 1."""
    for i in range(6):
        register(store, f"k{i}", ceiling=100)
    task = store.claim("e", 1, 60, now=T0)[0]
    store.complete(task.key, task.lease_token, TaskOutcome.ACCEPTED, None, now=T0)
    assert register(store, "n1", ceiling=100).backlog == 5
    assert register(store, "n2", ceiling=2, overload_mode=OverloadMode.REJECT).backlog == 3


def test_parked_tasks_are_claimable_and_due_at_delays_them(store):
    """A parked task is due at its due_at (default: at once) in claim order."""
    register(store, "a", ceiling=0, overload_mode=OverloadMode.PARK)
    store.register(sub("b"), 0, OverloadMode.PARK, now=T0, due_at=T0 + 100)
    assert [t.key for t in store.claim("e", 10, 60, now=T0)] == ["a"]
    assert [t.key for t in store.claim("e", 10, 60, now=T0 + 100)] == ["b"]


@pytest.mark.parametrize("kwargs", [
    {"backlog_ceiling": -1}, {"backlog_ceiling": 1.5}, {"now": float("nan")},
    {"backlog_ceiling": 5, "park_ceiling": 4},
])
def test_register_rejects_bad_arguments(store, kwargs):
    """Bad numbers are refused with a ValueError naming the argument; nothing is stored."""
    args = {"now": T0, "backlog_ceiling": 10, **kwargs}
    with pytest.raises(ValueError):
        store.register(sub("k"), **args)
    assert store.get("k") is None


# -- dead letters --------------------------------------------------------------------------------

def test_record_dead_letter_keeps_redacted_evidence_once(store):
    """An invalid body is stored DEAD once per key, with secret values redacted."""
    body = {"portalInfo": {"token": "TOPSECRET-abc"}, "feature": "garbled"}
    assert store.record_dead_letter("hash1", body, FailureClass.INVALID_PAYLOAD,
                                    "bad body token=TOPSECRET-abc", now=T0, trace_id="t")
    assert not store.record_dead_letter("hash1", body, FailureClass.INVALID_PAYLOAD, "again",
                                        now=T0 + 1)
    record = store.get("hash1")
    assert record.status is Status.DEAD and record.failure_class is FailureClass.INVALID_PAYLOAD
    assert record.completed_at == T0 and record.payload["feature"] == "garbled"
    assert "TOPSECRET" not in json.dumps(dict(record.payload)) + record.last_error
    assert store.dead_letters()["INVALID_PAYLOAD"] == 1


# -- claim -----------------------------------------------------------------------------------

def test_claim_leases_with_a_fresh_token_in_due_order(store):
    """Claim takes due tasks oldest first, sets PROCESSING, owner, expiry and token 1."""
    for i, key in enumerate(["c", "a", "b"]):
        register(store, key, now=T0 + i)
    tasks = store.claim("engine-7", 2, 30.0, now=T0 + 10)
    assert [t.key for t in tasks] == ["c", "a"]
    assert all(t.lease_token == 1 and t.lease_expires_at == T0 + 40 for t in tasks)
    record = store.get("c")
    assert (record.status, record.lease_owner, record.lease_expires_at) == (
        Status.PROCESSING, "engine-7", T0 + 40)
    assert record.next_attempt_at == T0 + 40  # due again only if the lease lapses
    assert tasks[0].payload["feature_global_id"] == "F-c"
    assert [t.key for t in store.claim("engine-8", 5, 30.0, now=T0 + 10)] == ["b"]
    assert store.claim("engine-9", 5, 30.0, now=T0 + 10) == []


def test_claim_waits_for_next_attempt_at(store):
    """FAILED and DEFERRED tasks are due only once next_attempt_at has passed."""
    t1, t2 = claimed(store, "f"), claimed(store, "d")
    store.fail("f", t1.lease_token, ErrorClass.CONNECT_TIMEOUT, "timeout", T0 + 50, now=T0)
    store.defer("d", t2.lease_token, T0 + 20, now=T0)
    assert store.claim("e", 10, 60, now=T0 + 19) == []
    assert [t.key for t in store.claim("e", 10, 60, now=T0 + 20)] == ["d"]
    again = store.claim("e", 10, 60, now=T0 + 50)
    assert [t.key for t in again] == ["f"] and again[0].lease_token == 2


def test_claim_skips_finished_and_leased_tasks(store):
    """SUCCEEDED, DEAD and PROCESSING rows are never claimed."""
    done = claimed(store, "done")
    store.complete("done", done.lease_token, TaskOutcome.ACCEPTED, None, now=T0)
    store.record_dead_letter("dead", {}, FailureClass.INVALID_PAYLOAD, "x", now=T0)
    claimed(store, "held")
    assert store.claim("e", 10, 60, now=T0 + 1) == []


@pytest.mark.parametrize("kwargs", [{"limit": 0}, {"lease_s": 0}, {"owner": ""}])
def test_claim_rejects_bad_arguments(store, kwargs):
    """A zero limit, a zero lease or an empty owner is refused."""
    args = {"owner": "e", "limit": 1, "lease_s": 10.0, "now": T0, **kwargs}
    with pytest.raises(ValueError):
        store.claim(**args)


# -- checkpoints ---------------------------------------------------------------------------

def test_checkpoints_are_kept_and_come_back_on_the_next_claim(store):
    """Each stage's data is stored; a reclaimed task knows which stages are done."""
    task = claimed(store, "k")
    assert store.checkpoint("k", task.lease_token, Stage.DOWNLOADED, {"bytes": 1234}, now=T0 + 1)
    assert store.checkpoint("k", task.lease_token, Stage.ANALYZED,
                            {"condition": "damaged", "confidence": 0.9}, now=T0 + 2)
    assert store.fail("k", task.lease_token, ErrorClass.SERVER_ERROR, "write-back 503", T0 + 3,
                      now=T0 + 2)
    (again,) = store.claim("e2", 1, 60, now=T0 + 3)
    assert again.done(Stage.DOWNLOADED) and again.done(Stage.ANALYZED)
    assert not again.done(Stage.WRITTEN)
    assert again.checkpoints["analyzed"] == {"condition": "damaged", "confidence": 0.9}
    assert store.checkpoint("k", again.lease_token, Stage.WRITTEN, None, now=T0 + 4)
    assert store.get("k").checkpoints["written"] is True


def test_checkpoint_with_a_stale_token_changes_nothing(store):
    """A zombie's checkpoint is refused and the stage stays undone."""
    task = claimed(store, "k")
    assert not store.checkpoint("k", task.lease_token + 1, Stage.ANALYZED, {"x": 1}, now=T0)
    assert not store.checkpoint("missing", 1, Stage.ANALYZED, {"x": 1}, now=T0)
    assert store.get("k").checkpoints == {}


def test_checkpoint_data_must_be_json_ready(store):
    """Data that JSON cannot carry is refused before anything is written."""
    task = claimed(store, "k")
    with pytest.raises(ValueError, match="analyzed"):
        store.checkpoint("k", task.lease_token, Stage.ANALYZED, {"x": object()}, now=T0)


# -- complete / fail / defer / bury ----------------------------------------------------------

def test_complete_records_outcome_result_and_completion_time(store):
    """PROCESSING -> SUCCEEDED with outcome, result, completed_at; the lease is released."""
    task = claimed(store, "k")
    assert store.complete("k", task.lease_token, TaskOutcome.ACCEPTED, {"condition": "good"},
                          now=T0 + 5)
    record = store.get("k")
    assert (record.status, record.outcome, record.result, record.completed_at) == (
        Status.SUCCEEDED, TaskOutcome.ACCEPTED, {"condition": "good"}, T0 + 5)
    assert record.lease_expires_at is None
    assert not store.complete("k", task.lease_token, TaskOutcome.REVIEW, None, now=T0 + 6)
    assert store.get("k").outcome is TaskOutcome.ACCEPTED


def test_fail_counts_an_attempt_and_sets_the_retry_time(store):
    """FAILED with attempt_count + 1, the error, and next_attempt_at = retry_at."""
    task = claimed(store, "k")
    assert store.fail("k", task.lease_token, ErrorClass.TTFB_TIMEOUT,
                      "timed out; Authorization: Bearer sekret-token-xyz", T0 + 30, now=T0 + 1)
    record = store.get("k")
    assert (record.status, record.attempt_count, record.next_attempt_at) == (
        Status.FAILED, 1, T0 + 30)
    assert "sekret-token-xyz" not in record.last_error
    assert record.lease_expires_at is None


def test_defer_counts_no_attempt(store):
    """DEFERRED until a time, attempt_count unchanged."""
    task = claimed(store, "k")
    assert store.defer("k", task.lease_token, T0 + 60, now=T0 + 1)
    record = store.get("k")
    assert (record.status, record.attempt_count, record.next_attempt_at) == (
        Status.DEFERRED, 0, T0 + 60)


def test_bury_makes_a_dead_letter(store):
    """DEAD with the failure class, the error and completed_at."""
    task = claimed(store, "k")
    assert store.bury("k", task.lease_token, FailureClass.FORMAT, "schema drift", now=T0 + 2)
    record = store.get("k")
    assert (record.status, record.failure_class, record.last_error, record.completed_at) == (
        Status.DEAD, FailureClass.FORMAT, "schema drift", T0 + 2)
    assert store.dead_letters()["FORMAT"] == 1


@pytest.mark.parametrize("write", ["complete", "fail", "defer", "bury", "checkpoint"])
def test_stale_token_writes_change_nothing(store, write):
    """After a reap and a reclaim, the old holder's write returns False and changes nothing."""
    old = claimed(store, "k", lease_s=10)
    store.reap_expired(now=T0 + 11, max_attempts=6)
    (new,) = store.claim("engine-2", 1, 60, now=T0 + 12)
    assert new.lease_token == old.lease_token + 1
    before = store.get("k")
    calls = {
        "complete": lambda t: store.complete("k", t, TaskOutcome.ACCEPTED, {"r": 1}, now=T0 + 13),
        "fail": lambda t: store.fail("k", t, ErrorClass.SERVER_ERROR, "x", T0 + 20, now=T0 + 13),
        "defer": lambda t: store.defer("k", t, T0 + 20, now=T0 + 13),
        "bury": lambda t: store.bury("k", t, FailureClass.AUTH, "x", now=T0 + 13),
        "checkpoint": lambda t: store.checkpoint("k", t, Stage.ANALYZED, {"r": 1}, now=T0 + 13),
    }
    assert calls[write](old.lease_token) is False
    assert store.get("k") == before
    assert calls[write](new.lease_token) is True


@pytest.mark.parametrize("write", ["complete", "fail", "defer", "bury"])
def test_writes_on_a_finished_task_change_nothing(store, write):
    """Once a task has left PROCESSING, even its current token cannot move it again."""
    task = claimed(store, "k")
    assert store.complete("k", task.lease_token, TaskOutcome.ACCEPTED, None, now=T0 + 1)
    token = task.lease_token
    calls = {
        "complete": lambda: store.complete("k", token, TaskOutcome.REVIEW, None, now=T0 + 2),
        "fail": lambda: store.fail("k", token, ErrorClass.SERVER_ERROR, "x", T0 + 9, now=T0 + 2),
        "defer": lambda: store.defer("k", token, T0 + 9, now=T0 + 2),
        "bury": lambda: store.bury("k", token, FailureClass.AUTH, "x", now=T0 + 2),
    }
    assert calls[write]() is False
    assert store.get("k").status is Status.SUCCEEDED


# -- reap ------------------------------------------------------------------------------------

def test_reap_returns_expired_leases_to_pending_counting_an_attempt(store):
    """Expired PROCESSING -> PENDING (attempt + 1); live leases are untouched."""
    claimed(store, "old", lease_s=10)
    claimed(store, "live", now=T0 + 5, lease_s=100)
    result = store.reap_expired(now=T0 + 10, max_attempts=6)
    assert (result.requeued, result.buried) == (1, 0)
    record = store.get("old")
    assert (record.status, record.attempt_count) == (Status.PENDING, 1)
    assert store.get("live").status is Status.PROCESSING
    assert [t.key for t in store.claim("e", 5, 10, now=T0 + 10)] == ["old"]


def test_reap_buries_a_task_whose_budget_is_spent(store):
    """The attempt that reaches max_attempts sends the task to DEAD/BUDGET."""
    claimed(store, "k", lease_s=10)
    assert store.reap_expired(now=T0 + 10, max_attempts=2) == ReapResult(requeued=1, buried=0)
    (task,) = store.claim("e", 1, 10, now=T0 + 11)
    result = store.reap_expired(now=T0 + 30, max_attempts=2)
    assert (result.requeued, result.buried) == (0, 1)
    record = store.get("k")
    assert (record.status, record.failure_class, record.attempt_count) == (
        Status.DEAD, FailureClass.BUDGET, 2)
    assert record.completed_at == T0 + 30
    assert not store.complete("k", task.lease_token, TaskOutcome.ACCEPTED, None, now=T0 + 31)


# -- requeue ---------------------------------------------------------------------------------

def _dead(store, key, failure_class, now=T0):
    task = claimed(store, key, now=now)
    store.fail(key, task.lease_token, ErrorClass.SERVER_ERROR, "x", now, now=now)
    (task,) = store.claim("e", 1, 60, now=now)
    store.checkpoint(key, task.lease_token, Stage.DOWNLOADED, {"ok": True}, now=now)
    assert store.bury(key, task.lease_token, failure_class, "x", now=now)


def test_requeue_by_keys_resets_attempts_and_keeps_checkpoints(store):
    """Named dead letters go back to PENDING with attempts 0 and their checkpoints kept."""
    _dead(store, "a", FailureClass.BUDGET)
    _dead(store, "b", FailureClass.BUDGET)
    register(store, "live")
    assert store.requeue(now=T0 + 1, keys=["a", "live", "missing", "a"]) == 1
    record = store.get("a")
    assert (record.status, record.attempt_count, record.failure_class) == (
        Status.PENDING, 0, None)
    assert record.checkpoints == {"downloaded": {"ok": True}}
    assert store.get("b").status is Status.DEAD
    assert store.get("live").status is Status.PENDING
    assert "a" in [t.key for t in store.claim("e", 5, 10, now=T0 + 1)]


def test_requeue_by_failure_class(store):
    """Every dead letter of one cause is requeued, others stay."""
    _dead(store, "a", FailureClass.FORMAT)
    _dead(store, "b", FailureClass.FORMAT)
    _dead(store, "c", FailureClass.NOT_FOUND)
    assert store.requeue(now=T0 + 1, failure_class=FailureClass.FORMAT) == 2
    assert store.counts()["DEAD"] == 1 and store.dead_letters()["NOT_FOUND"] == 1


def test_requeue_by_keys_and_class_takes_only_keys_of_that_class(store):
    """Given both, only the listed keys of that failure class move."""
    _dead(store, "a", FailureClass.FORMAT)
    _dead(store, "b", FailureClass.AUTH)
    assert store.requeue(now=T0, keys=["a", "b"], failure_class=FailureClass.AUTH) == 1
    assert store.get("a").status is Status.DEAD and store.get("b").status is Status.PENDING


def _error_class(store, key):
    rows = store._transact(lambda tx: tx.execute(
        f"SELECT error_class FROM ai_task_registry WHERE task_key = '{key}'"), write=False).rows
    return rows[0]["error_class"]


def test_requeue_clears_the_previous_life(store):
    """A requeued task keeps no error class, error text, lease holder or expiry of its last life."""
    _dead(store, "a", FailureClass.BUDGET)
    _dead(store, "b", FailureClass.FORMAT)
    assert (_error_class(store, "a"), store.get("a").lease_owner) == ("SERVER_ERROR", "e")
    assert store.requeue(now=T0 + 1, keys=["a"]) == 1
    assert store.requeue(now=T0 + 1, failure_class=FailureClass.FORMAT) == 1
    for key in ("a", "b"):
        record = store.get(key)
        assert (record.status, record.last_error, record.lease_owner, record.lease_expires_at,
                _error_class(store, key)) == (Status.PENDING, None, None, None, None)


def test_requeue_moves_invalid_payload_evidence_only_when_forced(store):
    """INVALID_PAYLOAD rows (no submission inside) stay DEAD unless requeue is forced."""
    assert store.record_dead_letter("body:1", {"raw": "{"}, FailureClass.INVALID_PAYLOAD,
                                    "not JSON", now=T0)
    assert store.record_dead_letter("body:2", {"raw": "["}, FailureClass.INVALID_PAYLOAD,
                                    "not JSON", now=T0)
    _dead(store, "a", FailureClass.FORMAT)
    assert store.requeue(now=T0 + 1, keys=["body:1", "a"]) == 1
    assert store.get("body:1").status is Status.DEAD and store.get("a").status is Status.PENDING
    with pytest.raises(ValueError):
        store.requeue(now=T0 + 1, failure_class=FailureClass.INVALID_PAYLOAD)
    assert store.dead_letters()["INVALID_PAYLOAD"] == 2
    assert store.requeue(now=T0 + 1, keys=["body:1"], force=True) == 1
    assert store.requeue(now=T0 + 1, failure_class=FailureClass.INVALID_PAYLOAD, force=True) == 1
    assert store.get("body:1").status is store.get("body:2").status is Status.PENDING


def test_requeue_needs_keys_or_a_class(store):
    """Requeue with nothing named refuses rather than reviving every dead letter."""
    with pytest.raises(ValueError):
        store.requeue(now=T0)


# -- reading ---------------------------------------------------------------------------------

def test_counts_has_all_six_statuses(store):
    """The water level lists every status, zero or not."""
    assert store.counts() == {s.value: 0 for s in Status}
    claimed(store, "b")
    register(store, "a")
    assert store.counts()["PENDING"] == 1 and store.counts()["PROCESSING"] == 1
    assert set(store.dead_letters()) == {f.value for f in FailureClass}


def test_backlog_counts_in_progress_rows_up_to_the_limit(store):
    """backlog(): PENDING, PROCESSING, FAILED and DEFERRED rows, never past the limit."""
    assert store.backlog() == 0 and store.backlog(5) == 0
    for key in ("processing", "failed", "deferred", "done", "dead"):
        register(store, key)
    tasks = {t.key: t for t in store.claim("e", 5, 60, now=T0)}
    store.fail("failed", tasks["failed"].lease_token, ErrorClass.SERVER_ERROR, "x", T0 + 9, now=T0)
    store.defer("deferred", tasks["deferred"].lease_token, T0 + 9, now=T0)
    store.complete("done", tasks["done"].lease_token, TaskOutcome.ACCEPTED, None, now=T0)
    store.bury("dead", tasks["dead"].lease_token, FailureClass.AUTH, "x", now=T0)
    store.record_dead_letter("invalid", {}, FailureClass.INVALID_PAYLOAD, "x", now=T0)
    register(store, "pending")
    counts = store.counts()
    assert [counts[s] for s in ("PENDING", "PROCESSING", "FAILED", "DEFERRED")] == [1, 1, 1, 1]
    assert store.backlog() == 4
    assert [store.backlog(n) for n in (0, 1, 3, 4, 100)] == [0, 1, 3, 4, 4]
    with pytest.raises(ValueError):
        store.backlog(-1)


def test_completed_since_counts_the_work_engines_finished(store):
    """The measured drain: tasks an engine took to SUCCEEDED or DEAD at or after a time; the
    dead letter of a body that never became a task is no drained work."""
    a, b = claimed(store, "a"), claimed(store, "b")
    store.complete("a", a.lease_token, TaskOutcome.ACCEPTED, None, now=T0 + 10)
    store.bury("b", b.lease_token, FailureClass.AUTH, "x", now=T0 + 20)
    store.record_dead_letter("c", {}, FailureClass.INVALID_PAYLOAD, "x", now=T0 + 5)
    assert store.keep_invalid_body("d", {}, "x", now=T0 + 6, per_minute=5, limit=5) \
        is InvalidBodyKept.KEPT
    assert store.completed_since(T0 + 5) == 2
    assert store.completed_since(T0 + 10) == 2
    assert store.completed_since(T0 + 21) == 0


def test_dead_letters_of_invalid_bodies_are_bounded_per_minute_and_in_all(store):
    """Past per_minute in the last 60 s, or limit in all, an invalid body's dead letter is not
    kept and the invalid_not_kept counter counts it; a key already kept stays as it is."""
    keep = store.keep_invalid_body
    outcomes = [keep(f"body:{i}", {"i": i}, "bad", now=T0 + i, per_minute=3, limit=5)
                for i in range(5)]
    assert outcomes == [InvalidBodyKept.KEPT] * 3 + [InvalidBodyKept.NOT_KEPT] * 2
    assert keep("body:0", {}, "bad", now=T0 + 5, per_minute=3, limit=5) \
        is InvalidBodyKept.ALREADY_KEPT
    later = [keep(f"body:{i}", {}, "bad", now=T0 + 61 + i, per_minute=3, limit=5)
             for i in range(10, 14)]
    assert later == [InvalidBodyKept.KEPT] * 2 + [InvalidBodyKept.NOT_KEPT] * 2
    assert store.counts()["DEAD"] == 5 and store.dead_letters()["INVALID_PAYLOAD"] == 5
    assert store.intake_counters()["invalid_not_kept"] == 4


def test_get_missing_key_is_none(store):
    """get() of an unknown key is None."""
    assert store.get("nope") is None


# -- call log, anomalies, config -------------------------------------------------------------

def test_call_window_counts_failures_slow_calls_and_retries(store):
    """Window aggregates for one service since a time; other services and older calls ignored."""
    calls = [
        CallRecord("vision", T0 + 1, 0.5, phases={"connect": 0.1, "ttfb": 0.3, "body": 0.1}),
        CallRecord("vision", T0 + 2, 25.0, error_class=ErrorClass.TTFB_TIMEOUT, retry=False,
                   down=True),   # a slow one is no failure: test_store_call_limits
        CallRecord("vision", T0 + 3, 1.0, error_class="SERVER_ERROR", status_code=503,
                   retry=True, trace_id="t", task_key="k"),
        CallRecord("vision", T0 - 100, 30.0, error_class="SERVER_ERROR"),
        CallRecord("other", T0 + 1, 30.0, error_class="AUTH"),
    ]
    for call in calls:
        store.record_call(call)
    window = store.call_window("vision", T0, slow_s=20.0)
    assert (window.calls, window.failures, window.slow, window.retries) == (3, 2, 1, 1)
    assert store.call_window("vision", T0 + 10, 20.0).calls == 0


def test_call_log_stores_error_classes_by_value(store):
    """An ErrorClass member is stored as its value, so any reader can group by it."""
    store.record_call(CallRecord("vision", T0, 1.0, error_class=ErrorClass.RATE_LIMITED))
    raw = store._transact(lambda tx: tx.cursor.execute(
        "SELECT error_class FROM ai_call_log") or tx.cursor.fetchall(), write=False)
    assert [tuple(r) for r in raw] == [("RATE_LIMITED",)]


def test_anomalies_are_stored_redacted(store):
    """A format anomaly keeps its errors and a redacted excerpt; newest first."""
    store.record_anomaly(FormatAnomaly("azure", T0, ("missing 'condition'",),
                                       '{"api_key": "K-12345678"}', "v1", "k", "t"))
    store.record_anomaly(FormatAnomaly("azure", T0 + 1, ("bad",), "{}"))
    found = store.recent_anomalies(T0)
    assert [a.observed_at for a in found] == [T0 + 1, T0]
    assert found[1].errors == ("missing 'condition'",) and found[1].model_version == "v1"
    assert "K-12345678" not in found[1].excerpt
    assert len(store.recent_anomalies(T0 + 1)) == 1


def test_config_upserts(store):
    """set_config inserts and overwrites; get_config returns strings."""
    assert store.get_config() == {}
    store.set_config({"breaker.failure_rate": "0.5", "retry.task_attempts": 6}, now=T0)
    store.set_config({"breaker.failure_rate": "0.4"}, now=T0 + 1)
    assert store.get_config() == {"breaker.failure_rate": "0.4", "retry.task_attempts": "6"}


@pytest.mark.parametrize("secret", sorted(SECRET_SETTINGS))
def test_a_secret_setting_is_never_stored(store, secret):
    """The config table refuses secrets (all or none), and the refusal does not show the value."""
    with pytest.raises(ConfigurationError) as info:
        store.set_config({"breaker.failure_rate": "0.4", secret: "sk-live-0123456789"}, now=T0)
    assert "sk-live-0123456789" not in str(info.value) and store.get_config() == {}


def test_the_upgrade_drops_a_retired_setting_row_and_keeps_the_others(store):
    """A resilience_config row naming the retired intake.park_ceiling_factor is removed by the
    migration that retires it, so it cannot keep the other rows out of force."""
    store.set_config({"intake.park_ceiling_factor": "10", "INTAKE_PARK_CEILING_FACTOR": "5",
                      "intake.watermark": "60"}, now=T0)
    store._transact(lambda tx: tx.execute("DELETE FROM schema_version WHERE version = 3"))
    assert store.init_schema(now=T0) == [3]
    assert store.get_config() == {"intake.watermark": "60"}


# -- the pace of a rate-limited service ------------------------------------------------------------

def test_a_service_is_not_paced_until_a_429_says_so(store):
    """No row, no pace: pace_get is 0 and pace_claim hands out no slot."""
    assert store.pace_get("vision") == 0.0
    assert store.pace_claim("vision", now=T0) is None


def test_each_claim_takes_the_next_slot_one_interval_on(store):
    """After a 429 asking 2 s: no slot before the Retry-After, then slots 0.5 s apart, one
    per claim, however many engines claim at once."""
    store.pace_slow("vision", 0.5, not_before=T0 + 2)
    assert store.pace_get("vision") == 0.5
    slots = [store.pace_claim("vision", now=T0)[0] for _ in range(3)]
    assert slots == [T0 + 2, T0 + 2.5, T0 + 3]
    # an engine that comes after the slots ran out takes one at its own time
    assert store.pace_claim("vision", now=T0 + 60) == (T0 + 60, 0.5)


def test_the_pace_never_shortens_on_a_429_and_relaxes_on_success_until_off(store):
    """pace_slow keeps the longer interval and the later start; pace_relax shrinks the
    interval by its factor and switches the pace off below the floor."""
    store.pace_slow("vision", 1.0, not_before=T0 + 5)
    store.pace_slow("vision", 0.2, not_before=T0 + 1)
    assert store.pace_get("vision") == 1.0
    assert store.pace_claim("vision", now=T0)[0] == T0 + 5
    store.pace_relax("vision", 0.5, 0.3)
    assert store.pace_get("vision") == 0.5
    store.pace_relax("vision", 0.5, 0.3)
    assert store.pace_get("vision") == 0.0 and store.pace_claim("vision", now=T0) is None
    assert store.pace_get("other") == 0.0


def test_pace_shown_counts_the_calls_taken_since_the_latest_429_in_range(store):
    """pace_shown: the latest 429 in [since, before) and the calls after it (anything but a
    429, a failure too: the service took it), before ``before``, of that service only, those
    still in flight (holding a slot, not logged yet) too."""
    assert store.pace_shown("vision", since=T0, before=T0 + 100) is None
    rate_limited = ErrorClass.RATE_LIMITED.value
    for at, error in [(T0 + 1, rate_limited), (T0 + 2, None), (T0 + 3, rate_limited),
                      (T0 + 4, None), (T0 + 5, ErrorClass.SERVER_ERROR.value),
                      (T0 + 6, rate_limited), (T0 + 7, None), (T0 + 8, None)]:
        store.record_call(CallRecord("vision", at, 0.1, error))
    store.record_call(CallRecord("other", T0 + 5.5, 0.1, None))
    assert store.pace_shown("vision", since=T0, before=T0 + 6) == (T0 + 3, 2)
    assert store.pace_shown("vision", since=T0, before=T0 + 100) == (T0 + 6, 2)
    assert store.pace_shown("vision", since=T0, before=T0 + 7.5) == (T0 + 6, 1)
    assert store.pace_shown("vision", since=T0 + 6.5, before=T0 + 100) is None
    assert store.pace_shown("other", since=T0, before=T0 + 100) is None
    from fme_ai_resilience.core.resilience.concurrency import ConcurrencySettings
    settings = ConcurrencySettings(start=4)
    assert store.limit_acquire("vision", "e1", settings, T0 + 60, now=T0 + 9)[0] is not None
    assert store.limit_acquire("vision", "e2", settings, T0 + 60, now=T0 + 5.8)[0] is not None
    assert store.pace_shown("vision", since=T0, before=T0 + 10) == (T0 + 6, 3)
    assert store.pace_shown("vision", since=T0, before=T0 + 61) == (T0 + 6, 2)  # slots over


def test_a_slot_beyond_the_latest_start_is_shown_not_taken(store):
    """A caller that would park rather than wait takes no slot: many such callers leave the
    fleet's next slot where it was, so the slots taken are the calls made."""
    store.pace_slow("vision", 0.5, not_before=T0 + 10)
    for _ in range(50):
        assert store.pace_claim("vision", now=T0, latest=T0 + 5) == (T0 + 10, 0.5)
    assert store.pace_claim("vision", now=T0 + 9, latest=T0 + 14) == (T0 + 10, 0.5)
    assert store.pace_claim("vision", now=T0 + 9, latest=T0 + 14) == (T0 + 10.5, 0.5)


def test_clear_forgets_the_pace(store):
    store.pace_slow("vision", 1.0, not_before=T0)
    store.clear()
    assert store.pace_get("vision") == 0.0
