"""What a drill measured, for the library and for each baseline, as values and as JSON.

A :class:`SubjectResult` holds one subject's counts (taken from the stand-ins' counters and,
for the library, the ledger) and its :class:`Timeline`, sampled every ``step_s`` seconds of
the run. A :class:`DrillReport` is the scenario, the bounds it is judged against, the
library's result and the baselines'. ``as_dict`` gives the ``--json`` form: the library's
figures at the top level (``lost``, ``duplicate_analyses``...), each baseline's under
``baselines``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

__all__ = ["Timeline", "SubjectResult", "DrillReport", "LIBRARY"]

#: The library's subject name in a report.
LIBRARY = "fme-ai-resilience"


@dataclass
class Timeline:
    """One subject's run over time: sample ``i`` covers ``[t[i], t[i] + step_s)``.

    ``ai_calls`` counts the Vision AI calls that reached the stand-in in each step, by the
    stand-in's outcome (``ok``, ``server_error``, ``rate_limited``, ``outage``, ``drift``...);
    ``backlog`` is the unfinished work at the sample (tasks for the library, deliveries not
    yet done for a baseline); ``in_flight`` the engines busy with work; ``breaker`` the
    primary circuit's state and ``level`` the degradation level (None where the subject has
    neither).
    """

    step_s: float
    t: List[float] = field(default_factory=list)
    backlog: List[int] = field(default_factory=list)
    in_flight: List[int] = field(default_factory=list)
    ai_calls: Dict[str, List[int]] = field(default_factory=dict)
    breaker: List[Optional[str]] = field(default_factory=list)
    level: List[Optional[int]] = field(default_factory=list)


@dataclass
class SubjectResult:
    """One subject's figures (see the drill's report table for their meaning)."""

    name: str
    skipped: Optional[str] = None          # why it did not run (a library not installed)
    submitted: int = 0                     # webhook deliveries sent, redeliveries included
    distinct_facts: int = 0                # photos of distinct submissions (the business facts)
    duplicates_collapsed: int = 0          # deliveries recognised as already known
    succeeded: Dict[str, int] = field(default_factory=dict)   # accepted / review / skipped
    dead_by_cause: Dict[str, int] = field(default_factory=dict)
    lost: int = 0                          # facts neither succeeded nor dead at the end
    duplicate_analyses: int = 0            # valid Vision answers beyond one per photo
    duplicate_writes: int = 0              # write-backs beyond one per feature
    ai_calls: int = 0
    ai_calls_per_completed_task: Optional[float] = None
    analyses_reused: int = 0
    outage_ai_calls: int = 0               # calls that reached the Vision AI in its outage
    peak_backlog: int = 0
    peak_concurrent_engines: int = 0
    breaker_transitions: int = 0
    degradation_levels: List[str] = field(default_factory=list)
    p95_end_to_end_s: Optional[float] = None
    drain_s: Optional[float] = None        # first delivery to the last fact settled
    backfilled: int = 0                    # facts found by reconciliation
    ai_spend: float = 0.0
    notes: List[str] = field(default_factory=list)   # what the reader should know of the run
    timeline: Optional[Timeline] = None

    @property
    def succeeded_total(self) -> int:
        return sum(self.succeeded.values())

    def as_dict(self) -> Dict[str, Any]:
        out = asdict(self)
        out["succeeded_total"] = self.succeeded_total
        return out


@dataclass
class DrillReport:
    """A scenario's run: its parameters, its bounds, the library and the baselines."""

    scenario: str
    seed: int
    submissions: int
    engines: int
    backend: str
    time_scale: float                      # real seconds per production second
    watermark: int
    hard_ceiling: int                      # the backlog intake never stores past
    probe_bound: int                       # AI calls the breaker allows during the outage
    drain_bound_s: Optional[float]         # Little's law: the work over the engines
    outage: Optional[List[float]]          # [start_s, end_s] of the outage, run seconds
    library: SubjectResult
    baselines: Dict[str, SubjectResult] = field(default_factory=dict)

    def as_dict(self) -> Dict[str, Any]:
        library = self.library.as_dict()
        out: Dict[str, Any] = {k: v for k, v in library.items() if k not in ("name",)}
        out.update({"scenario": self.scenario, "seed": self.seed,
                    "submissions": self.submissions, "engines": self.engines,
                    "backend": self.backend, "time_scale": self.time_scale,
                    "watermark": self.watermark, "hard_ceiling": self.hard_ceiling,
                    "probe_bound": self.probe_bound, "drain_bound_s": self.drain_bound_s,
                    "outage": self.outage,
                    "baselines": {name: r.as_dict() for name, r in self.baselines.items()}})
        return out
