"""The drill's judge on a form with a photo repeat: each photo's assessment read from its
related-table row, by the same function as the feature's own fields."""
from __future__ import annotations

from fme_ai_resilience.drill.invariants import targets
from fme_ai_resilience.drill.judge import Observed, judge
from fme_ai_resilience.drill.report import DrillReport, SubjectResult

A = "{AAAAAAAA-0000-4000-8000-000000000000}"
P1, P2, P3 = ("{%s-1111-4000-8000-000000000000}" % (c * 8) for c in "123")
TRUTH = {"s1": ("fair", 0.8), "s2": ("good", 0.6), "s3": ("damaged", 0.9)}
PHOTOS = {A: [(P1, "s1", False), (P2, "s2", False), (P3, "s3", False)]}


def written(condition, confidence, outcome):
    return {"ai_condition": condition, "ai_confidence": confidence, "ai_status": outcome}


def rows(**extra):
    """One row per photo of feature A holding the Vision AI's answer, plus ``extra`` rows."""
    table = {1: ((A, P1), [(1.0, {"parentglobalid": A, "ai_photo_globalid": P1,
                                  **written("fair", 0.8, "ACCEPTED")})]),
             2: ((A, P2), [(2.0, written("good", 0.6, "REVIEW"))]),
             3: ((A, P3), [(3.0, written("damaged", 0.9, "ACCEPTED"))])}
    table.update({int(k[1:]): v for k, v in extra.items()})
    return table


def seen(table, history=None):
    return Observed(photos=PHOTOS, history=history or {}, answers=TRUTH,
                    vision_log=[(0.1, "s1", "ok"), (0.2, "s2", "ok"), (0.3, "s3", "ok")],
                    table_rows=table, per_photo_rows=True, started=0.5, peak_in_flight=1)


def failing(observed):
    report = DrillReport(scenario="storm", seed=1, submissions=1, engines=1, backend="sqlite",
                         time_scale=0.1, watermark=10, probe_bound=0, drain_limit_s=10.0,
                         outage=None, calls_per_analysed_bound=1.22, photos_per_feature=3,
                         library=SubjectResult.judged("s", judge(observed),
                                                      concurrency_bound=1))
    return {c.key for c in targets(report) if not c.met}


def test_each_photo_is_analysed_by_its_own_row():
    """Three photos of one feature, a row each with its answer: three analysed, every
    target met, the table's writes counted as edits and in the drain."""
    f = judge(seen(rows()))
    assert (f.facts, f.analysed, f.accepted, f.review, f.lost) == (3, 3, 2, 1, 0)
    assert (f.layer_edits, f.duplicate_rows, f.conflicting_writes, f.drain_s) == (3, 0, 0, 2.5)
    assert failing(seen(rows())) == set()


def test_a_photo_without_a_row_is_lost_whatever_its_feature_holds():
    """With a photo repeat the feature's own fields hold no photo's assessment: a photo with
    no row of its own is lost, a row with a flag value flags it."""
    table = rows()
    del table[3]
    table[2] = ((A, P2), [(2.0, written(None, None, "AWAITING_ANALYSIS"))])
    f = judge(seen(table, history={A: [(1.0, written("damaged", 0.9, "ACCEPTED"))]}))
    assert (f.analysed, f.flagged, f.awaiting, f.lost) == (1, 1, 1, 1)
    assert {"lost", "analysed"} <= failing(seen(table))


def test_a_row_holding_another_answer_does_not_analyse_its_photo():
    """A row whose condition is not what the Vision AI answered for those bytes is lost."""
    table = rows()
    table[1] = ((A, P1), [(1.0, written("good", 0.99, "ACCEPTED"))])
    assert (judge(seen(table)).analysed, judge(seen(table)).lost) == (2, 1)


def test_a_second_row_for_one_photo_is_a_duplicate_row():
    """A planted second row naming photo 1 is caught and fails the drill, though a row
    holds the answer."""
    obs = seen(rows(r9=((A.lower(), P1.lower()), [(4.0, written("fair", 0.8, "ACCEPTED"))])))
    f = judge(obs)
    assert (f.duplicate_rows, f.analysed, f.layer_edits) == (1, 3, 4)
    assert "duplicate_rows" in failing(obs)


def test_a_rows_assessment_overwritten_with_another_is_a_conflicting_write():
    """A planted second write of photo 2's row with a different condition is a conflict;
    a repeat of the same values is not."""
    same = rows()
    same[2][1].append((4.0, written("good", 0.6, "REVIEW")))
    assert judge(seen(same)).conflicting_writes == 0
    other = rows()
    other[2][1].append((4.0, written("damaged", 0.6, "REVIEW")))
    f = judge(seen(other))
    assert (f.conflicting_writes, f.analysed) == (1, 2)
    assert "conflicting_writes" in failing(seen(other))
