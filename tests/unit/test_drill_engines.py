"""The drill's engines: the chaos kill points a processor passes through its view of the ledger."""
from __future__ import annotations


from fme_ai_resilience.drill import library
from fme_ai_resilience.drill.chaos import kill_plan
from fme_ai_resilience.drill.engines import KILL_POINTS, FaultingStore
from fme_ai_resilience.drill.scenarios import SCENARIOS
from fme_ai_resilience.core.ledger import Stage


class Ledger:
    """Records what reached the ledger, in order, with the fault points around it."""

    def __init__(self, log):
        self.log = log

    def claim(self, owner, limit, lease_s, *, now):
        self.log.append("claim")
        return ["task"]

    def checkpoint(self, key, token, stage, data, *, now):
        self.log.append(f"checkpoint {Stage(stage).value}")
        return True

    def complete(self, *args, **kwargs):
        self.log.append("complete")
        return True


def test_every_stage_boundary_is_a_kill_point_in_the_order_a_task_passes_them():
    """Claimed, downloaded, analyzed, then written (the layer has it, the ledger not yet),
    then checkpointed: the fault hears each at its boundary; other calls pass through."""
    log = []
    store = FaultingStore(lambda point: log.append(f"fault {point}"), store=Ledger(log))
    store.claim("me", 1, 60.0, now=1.0)
    for stage in (Stage.DOWNLOADED, Stage.ANALYZED, Stage.WRITTEN):
        store.checkpoint("k", 1, stage, {}, now=1.0)
    store.complete("k", 1)
    assert log == ["claim", "fault claimed", "checkpoint downloaded", "fault downloaded",
                   "checkpoint analyzed", "fault analyzed", "fault written",
                   "checkpoint written", "fault checkpointed", "complete"]
    assert [p for p in KILL_POINTS] == ["claimed", "downloaded", "analyzed", "written",
                                        "checkpointed"]


def test_chaos_kills_several_engines_each_at_a_boundary_drawn_from_the_seed(monkeypatch):
    """Each kill of the chaos scenario dooms an engine at its own random kill point; the same
    seed draws the same, another seed others."""
    class Fleet:
        count = 4

        def __init__(self):
            self.doomed = []

        def doom(self, index, point):
            self.doomed.append((index, point))

    monkeypatch.setattr(library.time, "sleep", lambda s: None)
    scenario = SCENARIOS["chaos"]
    draws = []
    for seed in (1, 1, 2):
        fleet = Fleet()
        kills = kill_plan(scenario.kills_at_s, scenario=scenario.name, seed=seed,
                          engines=fleet.count)
        library._chaos(scenario, kills, fleet, "sqlite:///unused", 0.0, 0.0)
        draws.append(fleet.doomed)
    assert len(draws[0]) == len(scenario.kills_at_s) >= 3
    assert draws[0] == draws[1] and draws[0] != draws[2]
    assert all(point in KILL_POINTS for _, point in draws[0] + draws[2])
    assert len({p for _, p in draws[0] + draws[2]}) >= 3
