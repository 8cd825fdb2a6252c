"""The store operations of "done means analysed", held by every backend (SQLite file, :memory:,
PostgreSQL): claim priority, photos held back by the ladder, the layer flag, the honest counts,
the review queue and the ledger state the pages read."""
from __future__ import annotations

from fme_ai_resilience.core.resilience.degrade import CRITICAL
from fme_ai_resilience.core.errors import FailureClass
from fme_ai_resilience.core.ledger import (AssetRow, DeferCause, LayerStatus, ReviewState,
                                           ReviewVerdict, Status, TaskOutcome)

from helpers.ledger_rows import T0, claimed, register


def test_critical_tasks_are_claimed_first_then_the_longest_due(store):
    """Priority beats due time; among equals the longest due goes first."""
    register(store, "late-ordinary", now=T0)
    register(store, "early-ordinary", now=T0, due_at=T0 - 10)
    register(store, "critical", now=T0 + 1, priority=CRITICAL)
    assert [t.key for t in store.claim("e", 2, 60, now=T0 + 2)] == ["critical", "early-ordinary"]


def test_held_back_photos_leave_the_ladder_backlog_and_are_released_at_once(store):
    """DEFERRED with cause degraded: owed (backlog), not the ladder's; release makes it due."""
    task = claimed(store, "held")
    register(store, "plain")
    assert store.defer("held", task.lease_token, T0 + 300, now=T0, cause=DeferCause.DEGRADED)
    record = store.get("held")
    assert (record.status, record.defer_cause) == (Status.DEFERRED, DeferCause.DEGRADED)
    assert (store.backlog(), store.ladder_backlog()) == (2, 1)
    assert store.release_held(now=T0 + 5) == 1
    assert store.get("held").next_attempt_at == T0 + 5
    (again, _) = store.claim("e", 2, 60, now=T0 + 6)
    assert store.get(again.key).defer_cause is None and store.ladder_backlog() == 2


def test_the_layer_flag_is_fenced_and_comes_back_with_the_claim(store):
    """A stale token flags nothing; the next holder sees the flag already written."""
    task = claimed(store, "k")
    assert not store.flag_layer("k", task.lease_token + 1, LayerStatus.AWAITING_ANALYSIS,
                                now=T0)
    assert store.flag_layer("k", task.lease_token, LayerStatus.AWAITING_ANALYSIS, now=T0)
    store.defer("k", task.lease_token, T0, now=T0, cause=DeferCause.DEGRADED)
    (again,) = store.claim("e", 1, 60, now=T0 + 1)
    assert again.layer_flag is LayerStatus.AWAITING_ANALYSIS


def test_honest_counts_and_the_review_queue(store):
    """Analysed, skipped by policy, expanded, in review and dead, each counted once."""
    for key, outcome, review in (("a", TaskOutcome.ACCEPTED, False),
                                 ("r", TaskOutcome.REVIEW, True),
                                 ("s", TaskOutcome.SKIPPED, True),
                                 ("x", TaskOutcome.SKIPPED, False)):
        task = claimed(store, key)
        assert store.complete(key, task.lease_token, outcome, {}, now=T0 + 1, review=review)
    dead = claimed(store, "d")
    store.bury("d", dead.lease_token, FailureClass.AUTH, "401", now=T0 + 2)
    register(store, "owed")
    counts = store.outcome_counts()
    assert (counts.analysed, counts.skipped, counts.expanded, counts.in_review,
            counts.awaiting, dict(counts.dead)) == (2, 1, 1, 2, 1, {"AUTH": 1})
    assert store.review_stats() == (2, T0 + 1)
    assert [i.key for i in store.review_items()] == ["r", "s"]
    verdict = ReviewVerdict(condition="fair", reviewer="inspector", resolved_at=T0 + 9)
    assert store.resolve_review("s", verdict, now=T0 + 9)
    assert not store.resolve_review("s", verdict, now=T0 + 10)   # once
    item = store.review_item("s")
    assert item.state is ReviewState.RESOLVED and item.verdict == verdict
    assert store.review_written("s", now=T0 + 11) and not store.review_written("s", now=T0 + 12)
    assert store.review_item("a") is None and store.review_stats()[0] == 1


def test_a_verdicts_write_back_is_held_by_one_process_at_a_time(store):
    """The recorder holds the write-back; another takes it only once released or lapsed."""
    task = claimed(store, "s")
    assert store.complete("s", task.lease_token, TaskOutcome.SKIPPED, {}, now=T0 + 1,
                          review=True)
    verdict = ReviewVerdict(condition="fair", reviewer="inspector", resolved_at=T0 + 9)
    assert store.resolve_review("s", verdict, now=T0 + 9, write_s=60)
    assert not store.claim_review_write("s", now=T0 + 10)        # in flight elsewhere
    assert store.claim_review_write("s", now=T0 + 70)            # the holder vanished
    store.release_review_write("s")                               # its write failed
    assert store.claim_review_write("s", now=T0 + 71)
    assert store.review_written("s", now=T0 + 72)
    assert not store.claim_review_write("s", now=T0 + 999)       # written: never again


def test_an_asset_row_can_be_flagged_without_the_task(store):
    """put_asset upserts the layer value; the task stays as it is."""
    task = claimed(store, "k")
    store.put_asset(AssetRow(task_key="k", feature_global_id="F-k",
                             outcome=LayerStatus.AWAITING_ANALYSIS), now=T0)
    assert store.asset_condition("k")["outcome"] == "AWAITING_ANALYSIS"
    assert store.get("k").status is Status.PROCESSING
    assert store.complete_with_asset("k", task.lease_token, TaskOutcome.SKIPPED, {},
                                     AssetRow(task_key="k", feature_global_id="F-k",
                                              outcome=TaskOutcome.SKIPPED), now=T0 + 1,
                                     review=True)
    assert store.asset_condition("k")["outcome"] == "MANUAL_REVIEW"


def test_the_ledger_state_sees_due_work_progress_and_expired_leases(store):
    """Due work since when, the last finish, and a lease nobody renewed."""
    done = claimed(store, "done", now=T0)
    store.complete("done", done.lease_token, TaskOutcome.ACCEPTED, {}, now=T0 + 5)
    claimed(store, "stuck", now=T0, lease_s=10)
    register(store, "due", now=T0)
    state = store.ledger_state(now=T0 + 100)
    assert (state.due, state.oldest_due_at, state.last_progress_at) == (1, T0, T0 + 5)
    assert state.stalled_for_s == 95
    assert (state.expired_leases, state.oldest_expiry) == (1, T0 + 10)
