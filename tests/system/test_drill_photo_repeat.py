"""The drill with a photo repeat: three photos a feature, one related-table row per photo,
every subject judged by the one judge on the rows."""
from __future__ import annotations


from fme_ai_resilience.drill.invariants import targets
from fme_ai_resilience.drill.run import BASELINE_NAMES, run_drill
from fme_ai_resilience.drill.scenarios import SCENARIOS
from fme_ai_resilience.drill.world import World

#: What the library holds at this size (its own work; the drain is judged by the bench).

from helpers.judge_spy import spy_on_judge


HELD = ("lost", "analysed", "duplicate_analyses", "conflicting_writes", "duplicate_rows",
        "peak_concurrent_calls")


def test_a_storm_of_three_photos_a_feature_is_judged_on_each_photos_row(monkeypatch):
    """Every subject's world goes to the one judge with per-photo rows: three facts a
    feature, the assessments in table 1 and none on the features, every fact accounted for
    once; the library analyses every photo that can be, once, in one row each."""
    seen, real = spy_on_judge(monkeypatch)
    report = run_drill("storm", submissions=8, engines=2, time_scale=0.02,
                       photos_per_feature=3, compare=BASELINE_NAMES)
    assert len(seen) == 1 + len(BASELINE_NAMES) and all(o.per_photo_rows for o in seen)
    assert report.as_dict()["photos_per_feature"] == 3
    for observed, subject in zip(seen, report.subjects()):
        assert all(len(p) == 3 for p in observed.photos.values())
        assert subject.analysed == real(observed).analysed
        assert (subject.analysed + subject.flagged + subject.lost + subject.unanalysable
                == subject.facts)
        photos = {(gid, p) for gid, ps in observed.photos.items() for p, _, _ in ps}
        assert {key for key, _ in observed.table_rows.values()} <= photos
    library, observed = report.library, seen[0]
    assert library.facts >= 3 * 8 and observed.history == {}
    assert [c.name for c in targets(report) if c.key in HELD and not c.met] == []
    assert library.analysed == library.analysable and library.analysed > 0
    assert len(observed.table_rows) == library.analysed + library.flagged


def test_each_photo_of_a_repeat_is_gone_from_the_layer_on_its_own_draw():
    """The storm's missing photos are drawn photo by photo: a feature can lose one of its
    three and keep the others, and only the lost ones point at the photo host's 404s."""
    with World(SCENARIOS["storm"], seed=1, time_scale=0.04, photos_per_feature=3) as world:
        plan = world.plan(100)
        shown = world.layer.photos()
        mixed = [gid for gid, photos in shown.items()
                 if {gone for _, _, gone in photos} == {True, False}]
        assert mixed and all(len(p) == 3 for p in shown.values())
        assert len(plan.missing_photos) == sum(gone for p in shown.values() for *_, gone in p)
        urls = [p["url"] for d in plan.deliveries
                for group in d.body["feature"]["attachments"].values() for p in group]
        assert sum("gone-" in u for u in set(urls)) == len(plan.missing_photos) > 0
