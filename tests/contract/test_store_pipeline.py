"""The store operations of the pipeline, held by every backend (SQLite file, :memory:, PostgreSQL):
lease renewal, completion with the asset row, the analysis cache, notifications, retention,
dead-letter requeues with a budget, reconciliation lookups and the golden-signal reads."""
from __future__ import annotations

import pytest

from fme_ai_resilience.core.errors import ErrorClass, FailureClass, StoreError
from fme_ai_resilience.core.ledger import AssetRow, CallRecord, FormatAnomaly, Status, TaskOutcome

from helpers.ledger_rows import T0, claimed, register, sub


def asset(key, **extra):
    return AssetRow(task_key=key, feature_global_id=f"F-{key}", outcome=TaskOutcome.ACCEPTED,
                    condition="damaged", confidence=0.9, **extra)


def test_renew_extends_a_live_lease_and_refuses_a_stale_token(store):
    """A holder pushes its lease out; a zombie with an old token extends nothing."""
    task = claimed(store, "k", lease_s=60)
    assert store.renew("k", task.lease_token, 120, now=T0 + 50)
    assert store.get("k").lease_expires_at == T0 + 170
    assert store.claim("other", 1, 60, now=T0 + 100) == []  # still leased
    assert not store.renew("k", task.lease_token + 1, 120, now=T0 + 60)


def test_a_claimed_task_carries_its_last_error_class_and_requeue_count(store):
    """What the retry budget needs across parking comes back with the claim."""
    task = claimed(store, "k")
    store.fail("k", task.lease_token, ErrorClass.BAD_FORMAT, "drift", T0 + 1, now=T0)
    (again,) = store.claim("e", 1, 60, now=T0 + 2)
    assert (again.error_class, again.attempt_count, again.requeue_count) == (
        ErrorClass.BAD_FORMAT, 1, 0)


def test_complete_with_asset_writes_both(store):
    """The task is SUCCEEDED and its asset row holds the conclusion."""
    task = claimed(store, "k")
    assert store.complete_with_asset("k", task.lease_token, TaskOutcome.ACCEPTED,
                                     {"condition": "damaged"}, asset("k"), now=T0 + 1)
    assert store.get("k").status is Status.SUCCEEDED
    row = store.asset_condition("k")
    assert (row["condition"], row["outcome"], row["feature_global_id"]) == (
        "damaged", "ACCEPTED", "F-k")


def test_complete_with_asset_and_a_stale_token_writes_neither(store):
    """A lost lease leaves the asset untouched as well as the task."""
    task = claimed(store, "k")
    assert not store.complete_with_asset("k", task.lease_token + 1, TaskOutcome.ACCEPTED,
                                         None, asset("k"), now=T0 + 1)
    assert store.get("k").status is Status.PROCESSING and store.asset_condition("k") is None


def test_a_failure_between_the_asset_write_and_the_completion_leaves_neither(store,
                                                                           monkeypatch):
    """Never "asset updated, task still PROCESSING": the transaction rolls both back."""
    from fme_ai_resilience.store.sqlbase import Tx

    task = claimed(store, "k")

    def failing_after(real_run):
        def run(self, name, params=None):
            if name == "complete":
                raise StoreError("injected between the asset write and the completion")
            return real_run(self, name, params)
        return run

    with monkeypatch.context() as patch:
        # every transaction class a backend uses (PostgreSQL's runs prepared statements)
        for cls in (Tx, *Tx.__subclasses__()):
            if "run" in vars(cls):
                patch.setattr(cls, "run", failing_after(vars(cls)["run"]))
        with pytest.raises(StoreError, match="injected"):
            store.complete_with_asset("k", task.lease_token, TaskOutcome.ACCEPTED, None,
                                      asset("k"), now=T0 + 1)
    assert store.asset_condition("k") is None
    assert store.get("k").status is Status.PROCESSING


def test_the_analysis_cache_keeps_the_first_result_and_counts_reuse(store):
    """One result per fingerprint: the first stays, later ones are refused."""
    assert store.cached_analysis("sha:abc|m1") is None
    assert store.remember_analysis("sha:abc|m1", {"condition": "good"}, now=T0)
    assert not store.remember_analysis("sha:abc|m1", {"condition": "fair"}, now=T0 + 1)
    assert store.cached_analysis("sha:abc|m1") == {"condition": "good"}
    store.note_analysis_reused("sha:abc|m1", now=T0 + 2)
    assert store.cached_analysis("sha:abc|m2") is None


def test_one_task_at_a_time_holds_a_photos_analysis(store):
    """The first task claims the fingerprint; another is refused while the claim runs, takes
    it once it lapsed or was released; the holder may claim again."""
    assert store.claim_analysis("fp", "a", T0 + 60, token=1, now=T0)
    assert not store.claim_analysis("fp", "b", T0 + 70, token=1, now=T0 + 1)
    assert store.claim_analysis("fp", "a", T0 + 80, token=1, now=T0 + 2)   # its own, extended
    assert not store.claim_analysis("fp", "b", T0 + 90, token=1, now=T0 + 79)
    assert store.claim_analysis("fp", "b", T0 + 90, token=1, now=T0 + 80)  # lapsed: anyone's
    store.release_analysis("fp", "a", token=1)                          # not a's any more
    assert not store.claim_analysis("fp", "a", T0 + 95, token=1, now=T0 + 81)
    store.release_analysis("fp", "b", token=1)
    assert store.claim_analysis("fp", "a", T0 + 99, token=1, now=T0 + 82)
    assert store.claim_analysis("other", "b", T0 + 99, token=1, now=T0 + 82)


def test_a_new_lease_of_the_same_task_waits_for_the_claim_of_the_old_one(store):
    """The claim names the lease: the task's next holder (a new fencing token) is refused
    while the old holder's claim runs, cannot release it, and takes it once it lapsed."""
    assert store.claim_analysis("fp", "a", T0 + 60, token=1, now=T0)
    assert not store.claim_analysis("fp", "a", T0 + 70, token=2, now=T0 + 1)
    store.release_analysis("fp", "a", token=2)                          # not its claim
    assert not store.claim_analysis("fp", "a", T0 + 70, token=2, now=T0 + 2)
    assert store.claim_analysis("fp", "a", T0 + 90, token=2, now=T0 + 60)
    assert not store.claim_analysis("fp", "a", T0 + 95, token=1, now=T0 + 61)  # a zombie


def test_notifications_are_kept_once_per_kind_and_task_and_handed_over_once(store):
    """The compensator may notify on every pass: people hear once."""
    assert store.notify("photo-missing", "Photo gone", "the photo of k is 404", "k", now=T0)
    assert not store.notify("photo-missing", "Photo gone", "again", "k", now=T0 + 1)
    assert store.notify("photo-missing", "Photo gone", "other", "j", now=T0 + 2)
    pending = store.pending_notifications()
    assert [(n.task_key, n.body) for n in pending] == [("k", "the photo of k is 404"),
                                                       ("j", "other")]
    assert store.mark_notified([pending[0].id, pending[0].id], now=T0 + 3) == 1
    assert [n.task_key for n in store.pending_notifications()] == ["j"]


def test_a_notification_that_did_not_reach_its_reader_is_given_back(store):
    """A take that could not print gives back what it marked, and only that."""
    store.notify("photo-missing", "Photo gone", "k", "k", now=T0)
    store.notify("photo-missing", "Photo gone", "j", "j", now=T0 + 1)
    k, j = store.pending_notifications()
    assert store.mark_notified([k.id], now=T0 + 2) == 1
    assert store.mark_notified([j.id], now=T0 + 3) == 1
    assert store.unmark_notified([k.id, j.id, k.id], sent_at=T0 + 2) == 1  # j: another's mark
    assert [n.task_key for n in store.pending_notifications()] == ["k"]
    assert store.unmark_notified([k.id], sent_at=T0 + 2) == 0              # waiting already


def test_prune_removes_only_what_is_older_than_the_retention(store):
    """Calls and anomalies before the cut go; later ones stay."""
    for at in (T0, T0 + 100):
        store.record_call(CallRecord("vision", at, 0.1))
        store.record_anomaly(FormatAnomaly("generic", at, ("x",), "{}"))
    result = store.prune(T0 + 50, T0 + 50)
    assert (result.calls, result.anomalies) == (1, 1)
    assert store.call_window("vision", 0, 5).calls == 1
    assert store.anomalies_since(0) == 1


def test_dead_letters_are_listed_newest_first_by_class(store):
    """``dlq list`` reads dead letters of one cause, newest first, a page at a time."""
    for i, klass in enumerate((FailureClass.NOT_FOUND, FailureClass.AUTH,
                               FailureClass.NOT_FOUND)):
        task = claimed(store, f"k{i}", now=T0 + i)
        store.bury(f"k{i}", task.lease_token, klass, "gone", now=T0 + i)
    assert [r.key for r in store.dead_letter_records(FailureClass.NOT_FOUND)] == ["k2", "k0"]
    assert [r.key for r in store.dead_letter_records(limit=1, offset=1)] == ["k1"]


def test_requeue_with_a_budget_and_compare_and_set(store):
    """A dead letter goes back due later, once per requeue read; past the budget it stays."""
    task = claimed(store, "k")
    store.bury("k", task.lease_token, FailureClass.BUDGET, "spent", now=T0)
    assert store.requeue_candidates(FailureClass.BUDGET, 2, 10) == [("k", 0)]
    assert store.requeue_later("k", 0, T0 + 30, now=T0 + 1)
    assert not store.requeue_later("k", 0, T0 + 30, now=T0 + 1)  # moved meanwhile
    record = store.get("k")
    assert (record.status, record.requeue_count, record.next_attempt_at) == (
        Status.PENDING, 1, T0 + 30)
    assert store.claim("e", 1, 60, now=T0 + 10) == []  # not due yet
    (again,) = store.claim("e", 1, 60, now=T0 + 30)
    store.bury("k", again.lease_token, FailureClass.BUDGET, "spent", now=T0 + 31)
    assert store.requeue_candidates(FailureClass.BUDGET, 1, 10) == []


def test_existing_keys_tells_which_keys_the_ledger_holds(store):
    """The reconciler asks about many keys at once."""
    register(store, "a")
    register(store, "b")
    assert store.existing_keys(["a", "c", "b"]) == {"a", "b"}
    assert store.existing_keys([]) == set()


def test_the_signal_reads_return_what_happened_in_the_window(store):
    """Calls, completions (with reuse), registrations (with arrival) and anomalies since a
    time."""
    store.register(sub("r1"), 100, now=T0 + 5, received_at=T0 + 4.5)
    task = claimed(store, "done", now=T0)
    store.complete("done", task.lease_token, TaskOutcome.ACCEPTED, {"reused": True},
                   now=T0 + 10)
    store.record_call(CallRecord("vision", T0 + 1, 0.4, "SERVER_ERROR", 503, retry=True))
    store.record_anomaly(FormatAnomaly("generic", T0 + 2, ("drift",), "{}"))
    (call,) = store.call_samples(T0)
    assert (call.service, call.error_class, call.retry) == ("vision", "SERVER_ERROR", True)
    (done,) = store.completion_samples(T0)
    assert (done.created_at, done.completed_at, done.reused) == (T0, T0 + 10, True)
    received = {s.created_at: s.received_at for s in store.registration_samples(T0)}
    assert received == {T0 + 5: T0 + 4.5, T0: None}
    assert store.anomalies_since(T0) == 1 and store.anomalies_since(T0 + 3) == 0
