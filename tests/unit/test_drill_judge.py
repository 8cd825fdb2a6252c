"""The drill's judge: a subject's figures from what the stand-ins saw, and the targets on them."""
from __future__ import annotations

import dataclasses

import pytest

from fme_ai_resilience.drill.invariants import checks, targets
from fme_ai_resilience.drill.judge import (KILL_GRACE_S, Observed, judge, photo_key,
                                            replay)
from fme_ai_resilience.drill.report import DrillReport, SubjectResult
from fme_ai_resilience.drill.standins import Message

A, B, C = ("{%s-0000-4000-8000-000000000000}" % (c * 8) for c in "ABC")
PA, PB, PC = ("{%s-1111-4000-8000-000000000000}" % (c * 8) for c in "ABC")
TRUTH = {"sa": ("fair", 0.8), "sb": ("good", 0.6), "sc": ("damaged", 0.9)}


def written(condition, confidence, outcome):
    return {"ai_condition": condition, "ai_confidence": confidence, "ai_status": outcome}


def answered(log):
    """The usable answers a Vision AI that logged ``log`` gave: its ``ok`` calls' truth."""
    return {sha: TRUTH[sha] for _, sha, outcome in log if outcome == "ok"}


def seen(history, *, photos=None, log=(), messages=(), **kw):
    photos = photos or {A: [(PA, "sa", False)], B: [(PB, "sb", False)],
                        C: [(PC, "sc", False)]}
    kw.setdefault("answers", answered(log))
    return Observed(photos=photos, history=history, vision_log=list(log),
                    messages=list(messages), **kw)


def report(subject, **kw):
    values = dict(scenario="storm", seed=1, submissions=3, engines=2, backend="sqlite",
                  time_scale=0.1, watermark=10, probe_bound=0, drain_limit_s=10.0,
                  outage=None, library=subject, calls_per_analysed_bound=1.22)
    values.update(kw)
    return DrillReport(**values)


def honest():
    """Every photo analysed once, at the truth, and written once."""
    return seen({A: [(1.0, written("fair", 0.8, "ACCEPTED"))],
                 B: [(2.0, written("good", 0.6, "REVIEW"))],
                 C: [(3.0, written("damaged", 0.9, "ACCEPTED"))]},
                log=[(0.1, "sa", "ok"), (0.2, "sb", "ok"), (0.3, "sc", "ok")], started=0.5,
                peak_in_flight=2)


def subject(observed, bound=2):
    return SubjectResult.judged("s", judge(observed), concurrency_bound=bound)


def failing(observed, **kw):
    r = report(subject(observed, kw.pop("bound", 2)), **kw)
    return {c.key for c in targets(r) if not c.met}


def test_an_honest_run_is_analysed_whole_and_meets_every_target():
    """Every photo's truth on the layer: analysed 3, accepted 2, review 1, nothing failing."""
    f = judge(honest())
    assert (f.facts, f.analysed, f.accepted, f.review, f.lost, f.flagged) == (3, 3, 2, 1, 0, 0)
    assert (f.ai_calls, f.ai_calls_per_analysed, f.layer_edits, f.drain_s) == (3, 1.0, 3, 2.5)
    assert failing(honest()) == set()


def test_a_photo_marked_done_without_its_analysis_is_lost():
    """ACCEPTED on the layer with a value the Vision AI never answered is not analysed."""
    lie = seen({A: [(1.0, written("good", 0.99, "ACCEPTED"))],
                B: [(2.0, written("good", 0.6, "REVIEW"))],
                C: [(3.0, written("damaged", 0.9, "ACCEPTED"))]},
               log=[(0.2, "sb", "ok"), (0.3, "sc", "ok")], started=0.5)
    f = judge(lie)
    assert (f.analysed, f.lost) == (2, 1)
    assert {"lost", "analysed"} <= failing(lie)


def test_the_truth_written_without_a_call_to_the_vision_ai_is_not_an_analysis():
    """A subject that never calls the Vision AI and writes each photo's true condition and
    confidence analysed nothing: no answer was given for those bytes."""
    truth_only = seen({A: [(1.0, written("fair", 0.8, "ACCEPTED"))],
                       B: [(2.0, written("good", 0.6, "REVIEW"))],
                       C: [(3.0, written("damaged", 0.9, "ACCEPTED"))]}, started=0.5)
    f = judge(truth_only)
    assert (f.analysed, f.lost, f.ai_calls) == (0, 3, 0)
    assert {"lost", "analysed"} <= failing(truth_only)


def test_a_score_read_out_of_an_answer_out_of_schema_is_not_an_analysis():
    """Answers out of schema (the model renamed ``confidence``) give no usable answer: a
    subject that reads the score out of them and writes it analysed nothing."""
    lie = seen({A: [(1.0, written("fair", 0.8, "ACCEPTED"))],
                B: [(2.0, written("good", 0.6, "REVIEW"))],
                C: [(3.0, written("damaged", 0.9, "ACCEPTED"))]},
               log=[(0.1, "sa", "drift"), (0.2, "sb", "drift"), (0.3, "sc", "ok")],
               started=0.5)
    f = judge(lie)
    assert (f.analysed, f.lost) == (1, 2)
    assert {"lost", "analysed"} <= failing(lie)


def test_an_assessment_other_than_the_answer_given_is_not_an_analysis():
    """The Vision AI answered every photo; a subject writing another condition or another
    confidence for one of them did not analyse it."""
    for other in (written("good", 0.8, "ACCEPTED"), written("fair", 0.7, "ACCEPTED")):
        lie = dataclasses.replace(honest(), history={**honest().history, A: [(1.0, other)]})
        assert (judge(lie).analysed, judge(lie).lost) == (2, 1)
        assert "lost" in failing(lie)


def test_a_reviewers_verdict_counts_only_when_a_reviewer_gave_it():
    """REVIEWED with the verdict a reviewer gave from the review queue is analysed (by a
    person), over the answer it reviewed without a conflict; REVIEWED that no reviewer gave
    is not."""
    reviewed = written("damaged", None, "REVIEWED")
    history = {**honest().history, B: [(2.0, written("good", 0.6, "REVIEW")),
                                       (4.0, reviewed)]}
    given = dataclasses.replace(honest(), history=history,
                                verdicts={photo_key(B, PB): "damaged"})
    f = judge(given)
    assert (f.analysed, f.reviewed, f.review, f.conflicting_writes) == (3, 1, 0, 0)
    invented = dataclasses.replace(honest(), history=history)
    f = judge(invented)
    assert (f.analysed, f.lost, f.conflicting_writes) == (2, 1, 1)


def test_each_photos_time_to_result_runs_from_its_submission_to_its_answer_on_the_layer():
    """The median and 95th percentile of submission to analysis, per fact."""
    timed = dataclasses.replace(honest(), submitted={"sa": 0.5, "sb": 1.0, "sc": 0.0})
    f = judge(timed)
    assert (f.time_to_result_p50_s, f.time_to_result_p95_s) == (1.0, 3.0)


def test_the_replay_counts_each_photo_in_its_state_over_time_ending_at_the_figures():
    """Replayed at chosen moments, the layer's writes give each state's count then; the
    last moment holds the judge's figures."""
    obs = honest()
    obs.history[A].insert(0, (0.6, written(None, None, "AWAITING_ANALYSIS")))
    series = replay(obs, at=[0.7, 1.5, 2.5, 9.0]).series
    assert series["AWAITING_ANALYSIS"] == [1, 0, 0, 0]
    assert series["ACCEPTED"] == [0, 1, 1, 2]
    assert series["REVIEW"] == [0, 0, 1, 1]
    f = judge(obs)
    assert (series["ACCEPTED"][-1], series["REVIEW"][-1]) == (f.accepted, f.review)


def test_a_skipped_photo_is_lost_and_an_awaiting_one_is_flagged():
    """A contract value (AWAITING_ANALYSIS) flags a photo; any other empty outcome does not."""
    obs = seen({A: [(1.0, written(None, None, "AWAITING_ANALYSIS"))],
                B: [(2.0, written(None, None, "SKIPPED"))],
                C: [(3.0, written(None, None, "MANUAL_REVIEW"))]})
    f = judge(obs)
    assert (f.flagged, f.awaiting, f.manual_review, f.lost, f.analysed) == (2, 1, 1, 1, 0)


def test_a_person_told_the_cause_flags_the_photo_and_counts_by_cause():
    """A notification naming the photo's task key (with a cause) flags it; one with no cause
    flags nothing."""
    obs = seen({}, messages=[Message("not_found", "gone", 1.0, task_key=photo_key(A, PA)),
                             Message("budget", "gave up", 2.0, feature_global_id=B),
                             Message(" ", "no cause", 3.0, task_key=photo_key(C, PC))])
    f = judge(obs)
    assert (f.notified, f.flagged, f.lost) == (2, 2, 1)
    assert f.dead_by_cause == {"not_found": 1, "budget": 1}


def test_photos_gone_from_the_layer_are_apart_and_blame_nobody():
    """A fact whose every photo is gone is unanalysable, neither lost nor analysed."""
    obs = dataclasses.replace(honest(), photos={A: [(PA, "sa", False)], B: [(PB, "sb", False)],
                                                C: [(PC, "sc", True)]},
                              vision_log=honest().vision_log[:2],
                              answers=answered(honest().vision_log[:2]))
    f = judge(obs)
    assert (f.facts, f.unanalysable, f.analysed, f.lost) == (3, 1, 2, 0)
    assert subject(obs).analysable == 2 and failing(obs) == set()


def test_a_recreated_feature_is_analysed_only_when_both_carriers_hold_the_answer():
    """The same photo's bytes on two features: one fact, analysed when both carry it."""
    photos = {A: [(PA, "sa", False)], B: [(PB, "sa", False)]}
    log = [(0.1, "sa", "ok")]
    one = seen({A: [(1.0, written("fair", 0.8, "ACCEPTED"))]}, photos=photos, log=log)
    both = seen({A: [(1.0, written("fair", 0.8, "ACCEPTED"))],
                 B: [(1.0, written("fair", 0.8, "ACCEPTED"))]}, photos=photos, log=log)
    assert (judge(one).facts, judge(one).lost) == (1, 1)
    assert (judge(both).facts, judge(both).analysed) == (1, 1)


def test_a_repeat_with_identical_values_is_not_a_conflicting_write():
    """Writing the same assessment again changes nothing; another one is a conflict."""
    same = honest()
    same.history[A].append((4.0, written("fair", 0.8, "ACCEPTED")))
    assert judge(same).conflicting_writes == 0 and judge(same).layer_edits == 4
    other = honest()
    other.history[A].append((4.0, written("damaged", 0.8, "ACCEPTED")))
    assert judge(other).conflicting_writes == 1
    assert "conflicting_writes" in failing(other)


def test_an_awaiting_photo_filled_later_is_not_a_conflict():
    """AWAITING_ANALYSIS then the answer: the assessment was empty, nothing overwritten."""
    obs = honest()
    obs.history[A].insert(0, (0.6, written(None, None, "AWAITING_ANALYSIS")))
    assert judge(obs).conflicting_writes == 0 and judge(obs).analysed == 3


def test_a_row_added_twice_fails_the_drill():
    """Two related-table rows for one photo: a duplicate row, whichever holds the answer."""
    row = [(1.0, {"ai_condition": "fair"})]
    obs = dataclasses.replace(honest(), table_rows={1: ((A, PA), row), 2: ((A, PA), row),
                                                    3: ((B, PB), row)})
    assert judge(obs).duplicate_rows == 1 and "duplicate_rows" in failing(obs)


def test_usable_answers_paid_twice_and_calls_past_the_concurrency_fail():
    """A second usable answer for the same bytes is a duplicate analysis; calls in flight
    past its concurrency bound fail it."""
    obs = dataclasses.replace(honest(), vision_log=honest().vision_log + [(0.4, "sa", "ok"),
                                                                         (0.5, "sa", "outage")])
    f = judge(obs)
    assert (f.duplicate_analyses, f.ai_calls) == (1, 5)
    assert "duplicate_analyses" in failing(obs)
    wide = dataclasses.replace(honest(), peak_in_flight=3)
    assert "peak_concurrent_calls" in failing(wide, bound=2)
    assert "peak_concurrent_calls" not in failing(wide, bound=3)


def test_an_answer_paid_again_is_excused_only_when_an_engines_death_took_the_first():
    """A second usable answer for the same bytes is counted apart (cut by a kill) when its
    client closed the connection the first waited on, or went out whole on, within
    KILL_GRACE_S after an engine's death (a killed process closes every socket it held) and
    the layer did not show the photo by then; never otherwise."""
    again = honest().vision_log + [(0.4, "sa", "ok")]

    def figures(**kw):
        f = judge(dataclasses.replace(honest(), vision_log=again, **kw))
        return f.duplicate_analyses, f.cut_by_kills

    for seen in ("left", "closed"):
        cut = {seen: [(0.62, "sa", "ok")]}
        assert figures(deaths=(0.6,), **cut) == (0, 1)
        assert figures(**cut) == (1, 0)                                    # nobody died
        assert figures(deaths=(0.6 - KILL_GRACE_S - 0.01,), **cut) == (1, 0)  # closed later
        assert figures(deaths=(0.63,), **cut) == (1, 0)                   # closed before it
        assert figures(deaths=(0.6,), **{seen: [(0.62, "sa", "drift")]}) == (1, 0)
    # the layer showed the photo (at 1.0) before the death: the death took nothing of it
    assert figures(closed=[(1.06, "sa", "ok")], deaths=(1.05,)) == (1, 0)
    left = [(0.62, "sa", "ok")]
    assert "duplicate_analyses" not in failing(dataclasses.replace(
        honest(), vision_log=again, left=left, deaths=(0.6,)))
    twice = again + [(0.7, "sa", "ok")]                                   # one excused of two
    f = judge(dataclasses.replace(honest(), vision_log=twice, left=left, deaths=(0.6,)))
    assert (f.duplicate_analyses, f.cut_by_kills) == (1, 1)


def test_the_outage_is_judged_by_its_probe_bound_and_its_recovery_lag_measured():
    """Calls into the outage past the probe bound fail; the recovery lag is measured (speed,
    never a target)."""
    log = [(11.0, "sa", "ok"), (12.0, "sb", "ok"), (13.0, "sc", "ok")]
    obs = dataclasses.replace(honest(), outages=[(0.0, 10.0, 5)], time_scale=0.1,
                              vision_log=log, answers=answered(log))
    f = judge(obs)
    assert (f.outage_ai_calls, f.recovery_lag_s) == (5, 0.1)
    assert failing(obs, outage=[0.0, 1.0], probe_bound=5, probe_interval_s=0.1) == set()
    assert failing(obs, outage=[0.0, 1.0], probe_bound=4, probe_interval_s=0.05) == {
        "outage_ai_calls"}


def test_too_many_calls_per_analysed_photo_fail_and_a_slow_drain_is_no_target():
    """AI calls per analysed photo past 1.1 x 1/(1-p) fail; the drain, however slow beside
    its limit, decides nothing."""
    obs = honest()
    assert failing(obs, calls_per_analysed_bound=0.9) == {"ai_calls_per_analysed"}
    assert failing(obs, drain_limit_s=0.01) == set()


def test_a_run_that_wrote_nothing_has_no_per_photo_figure_and_misses_its_targets():
    """Nothing on the layer: every fact lost, no division by zero, no drain."""
    f = judge(seen({}))
    assert (f.lost, f.ai_calls_per_analysed, f.drain_s) == (3, None, None)
    assert {"lost", "analysed", "ai_calls_per_analysed"} <= failing(seen({}))


@pytest.mark.parametrize("key", ["lost", "analysed", "duplicate_analyses", "conflicting_writes",
                                 "duplicate_rows", "peak_concurrent_calls",
                                 "ai_calls_per_analysed"])
def test_every_target_of_a_subject_is_checked_for_the_library_and_each_baseline(key):
    """checks() applies the same targets to any subject; targets() are the library's."""
    r = report(subject(honest()), baselines={"naive": subject(honest())})
    assert [c.key for c in checks(r, r.baselines["naive"])] == [c.key for c in targets(r)]
    assert key in [c.key for c in targets(r)]


def test_the_drain_ends_when_the_last_photo_reached_its_final_state():
    """A rewrite with identical values later, or a message about a photo gone from the layer,
    changes nothing anyone sees: the drain ends at the last photo's final state."""
    obs = honest()
    obs.history[A].append((9.0, written("fair", 0.8, "ACCEPTED")))
    late = dataclasses.replace(obs, photos={**obs.photos, "{DDDDDDDD-0000-4000-8000-0000000"
                                                          "00000}": [(PA, "gone", True)]},
                               messages=[Message("not_found", "gone", 12.0, task_key="x")])
    assert judge(late).drain_s == 2.5 and judge(late).layer_edits == 4
    obs.history[B].append((7.0, written("damaged", 0.9, "ACCEPTED")))   # not B's answer
    assert judge(obs).drain_s == 6.5 and judge(obs).lost == 1
