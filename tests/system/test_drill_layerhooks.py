"""The layerhooks scenario at a small size: photos announced only by the layer's own webhook,
every subject meeting the same world and judged by the one judge at the stand-ins.

No app webhook is delivered: the features reach the layer at the plan's times and the layer
notifies each subject on its schedule, two notifications per batch, its first extractChanges
job failing. The library's gateway holds the signature key; the baselines' FME Flow webhook
trigger receives the notifications unsigned. Which subject fares better is not asserted for
the baselines; speed is never asserted."""
from __future__ import annotations

from typing import Any, Dict, Iterator, List

import pytest

from fme_ai_resilience.drill.invariants import targets
from fme_ai_resilience.drill.run import run_drill
from fme_ai_resilience.drill.world import World

from helpers.judge_spy import spy_on_judge

SIZE = dict(submissions=16, engines=2, time_scale=0.04)
COMPARE = ("httpcaller", "sweep")


def accounted(subject: Any) -> bool:
    """Every fact is analysed, flagged, lost or unanalysable, once."""
    return (subject.analysed + subject.flagged + subject.lost + subject.unanalysable
            == subject.facts)


@pytest.fixture
def layers(monkeypatch) -> Iterator[Dict[int, Dict[str, Any]]]:
    """The change-tracking counters of each subject's layer, as last seen when its world was
    observed for the judge (by world). Each world is kept alive until the test ends: a world
    let go may leave its id to the next subject's, which would merge their counters."""
    seen: Dict[int, Dict[str, Any]] = {}
    worlds: List[World] = []
    real = World.observe

    def observe(self: World, **kw: Any) -> Any:
        if not any(world is self for world in worlds):
            worlds.append(self)
        seen[id(self)] = self.layer.snapshot()
        return real(self, **kw)

    monkeypatch.setattr(World, "observe", observe)
    yield seen
    worlds.clear()


@pytest.mark.long
def test_photos_announced_only_by_the_layers_webhook_are_judged_alike_for_every_subject(
        monkeypatch, layers):
    """The library and two baselines meet the same features, notified only by the layer's
    webhook (its first extractChanges job failing for each): each subject's world goes to the
    one judge once and every fact is accounted for once; the library analyses and writes
    every photo once, paying one call each."""
    seen, real = spy_on_judge(monkeypatch)
    report = run_drill("layerhooks", compare=COMPARE, **SIZE)
    ran = [s for s in report.subjects() if s.skipped is None]
    assert [s.name for s in ran][1:] == list(COMPARE)
    assert len(seen) == len(ran) and len({id(o) for o in seen}) == len(ran)
    assert [s.analysed for s in ran] == [real(o).analysed for o in seen]
    lib = report.library
    for subject in ran:
        assert accounted(subject), subject.name
        assert subject.facts == lib.facts == SIZE["submissions"], subject.name
        assert subject.submitted >= 2, subject.name          # notifications, two a batch
    # every subject's layer: change tracking read, the first job failing for each alike
    assert len(layers) == len(ran)
    for counters in layers.values():
        assert counters["change_jobs_failed"] == 1
        assert counters["extract_changes"] >= 2 and counters["results_served"] >= 1
    # the library: every photo analysed once and written, every target met
    assert [c.name for c in targets(report) if not c.met] == []
    assert lib.analysed == lib.facts and lib.lost == 0
    assert lib.ai_calls == lib.analysed and lib.duplicate_analyses == 0
    assert lib.conflicting_writes == 0
    assert any("no app webhook" in note for note in report.notes)
    assert report.limit_why == "the last arrival's notification and one call"
    for name in COMPARE:
        assert "registered without a signatureKey" in report.baselines[name].model
