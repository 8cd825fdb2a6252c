"""The chaos scenario's engine kills, drawn once and met alike by every subject.

:func:`kill_plan` draws, from the seed, which engine dies at each of the scenario's kill
times and at which stage boundary of its next task (:data:`KILL_POINTS`: after the claim,
after the photo's download, after the Vision AI's answer, after the write-back, or after
that write's checkpoint). The library's engines are OS processes SIGKILLed there
(:mod:`~fme_ai_resilience.drill.engines`); a baseline's engine is a thread whose job stops
there (:class:`EngineKilled`): nothing after the boundary happens, as when FME Flow loses
the engine. For every subject, FME Flow's job recovery then resubmits the killed job, up to
:data:`JOB_RECOVERIES` times (docs/drill.md, "Chaos").
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Tuple

from ..core.errors import ResilienceError
from .engines import KILL_POINTS

__all__ = ["Kill", "kill_plan", "EngineKilled", "JOB_RECOVERIES", "KILL_POINTS",
           "baseline_point"]

#: FME Flow's job recovery: a job whose engine crashed is resubmitted up to 3 times.
JOB_RECOVERIES = 3


class EngineKilled(ResilienceError):
    """A baseline engine's job dies at a stage boundary (chaos): not an error of the job,
    which lets it through every handler of its own, as a kill is nothing the workspace
    sees."""


@dataclass(frozen=True)
class Kill:
    """One kill: at ``at_s`` production seconds, engine ``engine`` dies at ``point`` of its
    next task."""

    at_s: float
    engine: int
    point: str


def kill_plan(kills_at_s: Tuple[float, ...], *, scenario: str, seed: int,
              engines: int) -> Tuple[Kill, ...]:
    """The kills of a scenario, each engine and stage boundary drawn from the seed."""
    rng = random.Random(f"chaos:{seed}:{scenario}")
    return tuple(Kill(at, rng.randrange(engines), rng.choice(KILL_POINTS))
                 for at in kills_at_s)


def baseline_point(point: str) -> str:
    """Where a baseline's job stops for a kill at ``point``: a baseline keeps no checkpoint,
    so a kill after the write's checkpoint falls on the write itself."""
    return "written" if point == "checkpointed" else point
