"""Done means analysed: a photo the degradation ladder holds back stays owed (DEFERRED, cause
degraded, AWAITING_ANALYSIS on the layer once), comes back critical types first when the ladder
steps down, and is skipped only under the deployment's own skip policy."""
from __future__ import annotations

import responses

from fme_ai_resilience.core.resilience.degrade import CRITICAL
from fme_ai_resilience.core.errors import ArcGISError, ErrorClass
from fme_ai_resilience.core.ledger import DeferCause, LayerStatus, ReviewState, Status, TaskOutcome
from fme_ai_resilience.services.compensation.compensator import Compensator
from fme_ai_resilience.services.resilience.degrade import Degradation
from fme_ai_resilience.services.processing.sinks import CollectingSink, Conclusion
from fme_ai_resilience.core.config.settings import Settings

from helpers.processing import (SKIP_BENCHES, T0, VISION, answer, clock, ledger,  # noqa: F401
                                make, register, submission)


class FlakyFlagSink(CollectingSink):
    """A sink whose layer refuses the first ``failures`` flags (an ArcGIS outage)."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def flag(self, conclusion: Conclusion, *, store, now) -> None:
        if self.failures:
            self.failures -= 1
            raise ArcGISError(ErrorClass.SERVER_ERROR, "applyEdits: 503", operation="applyEdits")
        super().flag(conclusion, store=store, now=now)


def layer_values(sink):
    return [(c.task.key, c.layer) for c in sink.take()]


@responses.activate
def test_a_held_back_photo_shows_awaiting_analysis_once_and_is_analysed_after(ledger, clock):
    """L4 defers twice, writes AWAITING_ANALYSIS once; the step down makes it due at once."""
    responses.add(responses.POST, VISION, json=answer())
    register(ledger, submission("k"))
    ladder = Degradation(store=ledger, clock=clock)
    ladder.set_override("L4")
    sink = CollectingSink()
    (first,) = make(ledger, clock, sink=sink).run_batch().results
    assert first.status is Status.DEFERRED and "awaiting analysis" in first.reason
    clock.advance(Settings().degrade.hold_s + 1)
    (second,) = make(ledger, clock, sink=sink).run_batch().results
    assert second.status is Status.DEFERRED
    assert layer_values(sink) == [("k", LayerStatus.AWAITING_ANALYSIS)]
    record = ledger.get("k")
    assert record.defer_cause is DeferCause.DEGRADED
    assert record.layer_flag is LayerStatus.AWAITING_ANALYSIS
    ladder.clear_override()   # the step down: every held-back photo is due now
    assert ledger.get("k").next_attempt_at <= clock.now()
    (done,) = make(ledger, clock, sink=sink).run_batch().results
    assert (done.status, done.outcome) == (Status.SUCCEEDED, TaskOutcome.ACCEPTED)
    assert layer_values(sink) == [("k", LayerStatus.ACCEPTED)]
    assert len(responses.calls) == 1


@responses.activate
def test_a_layer_that_refuses_the_flag_does_not_stop_the_deferral(ledger, clock):
    """The flag is tried again at the next deferral; the photo stays owed meanwhile."""
    register(ledger, submission("k"))
    Degradation(store=ledger, clock=clock).set_override("L4")
    sink = FlakyFlagSink(failures=1)
    (first,) = make(ledger, clock, sink=sink).run_batch().results
    assert first.status is Status.DEFERRED and ledger.get("k").layer_flag is None
    clock.advance(Settings().degrade.hold_s + 1)
    make(ledger, clock, sink=sink).run_batch()
    assert layer_values(sink) == [("k", LayerStatus.AWAITING_ANALYSIS)]
    assert ledger.get("k").layer_flag is LayerStatus.AWAITING_ANALYSIS


@responses.activate
def test_critical_only_analyses_critical_types_and_holds_the_rest(ledger, clock):
    """At L3 a hydrant (critical) is analysed, an unnamed type deferred, nothing skipped."""
    responses.add(responses.POST, VISION, json=answer())
    settings = Settings.from_mapping({"degrade.critical_types": "hydrant"})
    register(ledger, submission("h", photo="h", asset_type="hydrant"),
             submission("s", photo="s", asset_type="sign"))
    Degradation(store=ledger, clock=clock).set_override("L3")
    results = {r.key: r for r in make(ledger, clock, settings=settings).run_batch().results}
    assert results["h"].outcome is TaskOutcome.ACCEPTED
    assert (results["s"].status, results["s"].outcome) == (Status.DEFERRED, None)


@responses.activate
def test_only_a_named_non_critical_type_under_a_skip_policy_is_skipped(ledger, clock):
    """With when_degraded=skip a bench is SKIPPED (MANUAL_REVIEW, in review); a sign waits."""
    settings = Settings.from_mapping(SKIP_BENCHES)
    register(ledger, submission("b", photo="b", asset_type="bench"),
             submission("s", photo="s", asset_type="sign"))
    Degradation(store=ledger, clock=clock).set_override("L3")
    sink = CollectingSink()
    results = {r.key: r for r in make(ledger, clock, settings=settings,
                                      sink=sink).run_batch().results}
    assert (results["b"].status, results["b"].outcome) == (Status.SUCCEEDED,
                                                           TaskOutcome.SKIPPED)
    assert results["s"].status is Status.DEFERRED
    assert dict(layer_values(sink)) == {"b": LayerStatus.MANUAL_REVIEW,
                                        "s": LayerStatus.AWAITING_ANALYSIS}
    assert ledger.get("b").review_state is ReviewState.OPEN
    counts = ledger.outcome_counts()
    assert (counts.analysed, counts.skipped, counts.in_review, counts.awaiting,
            counts.held_back) == (0, 1, 1, 1, 1)
    assert len(responses.calls) == 0


def test_claims_take_critical_types_first_then_the_longest_due(ledger, clock):
    """A critical photo registered last is claimed before older ordinary ones."""
    for i, key in enumerate(("old", "older", "critical")):
        ledger.register(submission(key), 1000, now=T0 + i, due_at=T0 - (i == 1),
                        priority=CRITICAL if key == "critical" else 0)
    claimed = [t.key for t in ledger.claim("p", 3, 60, now=T0 + 5)]
    assert claimed == ["critical", "older", "old"]


def test_the_ladder_backlog_leaves_out_the_photos_it_holds_back(ledger, clock):
    """Held-back photos are owed (awaiting) but do not count in the ladder's own backlog."""
    register(ledger, submission("a", photo="a"), submission("b", photo="b"))
    (task, _) = ledger.claim("p", 2, 60, now=T0)
    ledger.defer(task.key, task.lease_token, T0 + 300, now=T0, cause=DeferCause.DEGRADED)
    assert (ledger.backlog(), ledger.ladder_backlog()) == (2, 1)
    assert ledger.outcome_counts().held_back == 1


@responses.activate
def test_a_computed_pause_idles_no_engine_and_an_operators_pause_ends_with_every_photo(
        ledger, clock):
    """7x the watermark pauses the ladder, yet the engine analyses every photo it claims (a
    computed level orders the work, it never idles the engines that drain the backlog); an
    operator's pause holds photos back until it is released, then each gets its one call."""
    responses.add(responses.POST, VISION, json=answer())
    settings = Settings.from_mapping({"intake.watermark": "2", "processing.claim_limit": "50",
                                      "degrade.hold_s": "30"})
    register(ledger, *(submission(f"k{i}", photo=f"p{i}") for i in range(14)))
    compensator = Compensator(settings, store=ledger, clock=clock)
    assert compensator.run(reconcile=False).ladder.effective.label == "L4"
    done = make(ledger, clock, settings=settings).run_batch().results
    assert [r.outcome for r in done] == [TaskOutcome.ACCEPTED] * 14
    assert len(responses.calls) == 14
    register(ledger, *(submission(f"h{i}", photo=f"q{i}") for i in range(3)))
    Degradation(store=ledger, clock=clock).set_override("L4")
    held = make(ledger, clock, settings=settings).run_batch().results
    assert [r.status for r in held] == [Status.DEFERRED] * 3
    Degradation(store=ledger, clock=clock).clear_override()
    done = make(ledger, clock, settings=settings).run_batch().results
    assert [r.outcome for r in done] == [TaskOutcome.ACCEPTED] * 3
    assert len(responses.calls) == 17


@responses.activate
def test_an_engine_with_a_stale_ladder_does_not_hold_back_a_released_photo_again(ledger, clock):
    """The step down releases the held photos; an engine whose cached ladder still says L4
    reads it fresh before holding one back, so the photo is analysed, not held for hold_s."""
    responses.add(responses.POST, VISION, json=answer())
    register(ledger, submission("first", photo="a"))
    Degradation(store=ledger, clock=clock).set_override("L4")
    engine = make(ledger, clock)
    (held,) = engine.run_batch().results   # the engine now caches L4
    assert held.status is Status.DEFERRED
    Degradation(store=ledger, clock=clock).clear_override()   # the compensator's step down
    (done,) = engine.run_batch().results
    assert (done.status, done.outcome) == (Status.SUCCEEDED, TaskOutcome.ACCEPTED)
    assert len(responses.calls) == 1


@responses.activate
def test_the_ladder_steps_down_by_itself_when_the_compensator_does_not_run(ledger, clock):
    """Paused on a backlog, then the compensator stops: the engines' own batches feed the
    ladder, so the pause ends once the hold passes and every photo is analysed once."""
    responses.add(responses.POST, VISION, json=answer())
    settings = Settings.from_mapping({"intake.watermark": "2", "processing.claim_limit": "50",
                                      "degrade.hold_s": "30"})
    register(ledger, *(submission(f"k{i}", photo=f"p{i}") for i in range(14)))
    Compensator(settings, store=ledger, clock=clock).run(reconcile=False)   # its last run
    assert Degradation(store=ledger, clock=clock).level().label == "L4"
    engine = make(ledger, clock, settings=settings)
    outcomes = []
    for _ in range(12):   # two minutes of engine batches, no compensator
        outcomes += [r.outcome for r in engine.run_batch().results if r.outcome]
        clock.advance(10)
    assert outcomes == [TaskOutcome.ACCEPTED] * 14
    assert len(responses.calls) == 14
