"""What a drill measured, for the library and for each baseline, as values and as JSON.

A :class:`SubjectResult` holds one subject's figures (the judge's, counted at the stand-ins,
:mod:`~fme_ai_resilience.drill.judge`) and its :class:`Timeline`, sampled every ``step_s`` seconds of
the run. A :class:`DrillReport` is the scenario, the bounds it is judged against, the
library's result and the baselines'. ``as_dict`` gives the ``--json`` form: the library's
figures at the top level (``facts``, ``analysed``, ``flagged``, ``lost``...), each baseline's under
``baselines``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

from .judge import Figures

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
    neither); ``photos`` the photos (facts) in each of the judge's states at the end of each
    step, named as the table names them (``accepted``, ``in review``...), replayed from the
    layer's writes by the judge itself, so the last step holds the table's figures.
    """

    step_s: float
    t: List[float] = field(default_factory=list)
    backlog: List[int] = field(default_factory=list)
    in_flight: List[int] = field(default_factory=list)
    ai_calls: Dict[str, List[int]] = field(default_factory=dict)
    breaker: List[Optional[str]] = field(default_factory=list)
    level: List[Optional[int]] = field(default_factory=list)
    photos: Dict[str, List[int]] = field(default_factory=dict)


@dataclass
class SubjectResult:
    """One subject's figures: the judge's (:class:`~fme_ai_resilience.drill.judge.Figures`,
    counted at the stand-ins) and what the report shows beside them.

    ``model`` says what the subject models and assumes; ``concurrency_bound`` is its engines
    x the Vision AI calls one engine may have in flight; ``engine_s`` the engine-seconds its
    jobs held (production seconds, what FME Flow licenses); ``peak_backlog``,
    ``breaker_transitions`` and ``degradation_levels`` describe the run (from the sampler)
    and are never judged.
    """

    name: str
    skipped: Optional[str] = None          # why it did not run (a library not installed)
    model: str = ""                        # what the subject models and assumes
    submitted: int = 0                     # webhook deliveries sent, redeliveries included
    facts: int = 0                         # distinct photos the world created
    unanalysable: int = 0                  # facts whose photos are gone from the layer
    analysed: int = 0                      # the layer holds the Vision AI's answer
    accepted: int = 0
    review: int = 0
    reviewed: int = 0                      # a reviewer's verdict from the review queue
    flagged: int = 0                       # not analysed, and somebody can see it
    awaiting: int = 0
    manual_review: int = 0
    notified: int = 0
    lost: int = 0                          # neither: nobody knows
    duplicate_analyses: int = 0            # usable answers paid beyond one per photo's bytes
    cut_by_kills: int = 0                  # ...paid again: a killed engine's calls cut short
    conflicting_writes: int = 0            # an assessment overwritten with a different one
    duplicate_rows: int = 0                # a related-table row added twice
    layer_edits: int = 0                   # rows the layer wrote (cost)
    ai_calls: int = 0
    ai_calls_per_analysed: Optional[float] = None
    outage_ai_calls: int = 0               # calls that reached the Vision AI in its outage
    recovery_lag_s: Optional[float] = None  # the service back to its first usable answer
    drift_ai_calls: int = 0                # answers the drifted model gave (out of schema)
    drift_detection_s: Optional[float] = None   # the drift's start to the circuit open
    peak_concurrent_calls: int = 0         # calls in flight at the Vision AI at once
    concurrency_bound: int = 0             # engines x calls one engine may have in flight
    drain_s: Optional[float] = None        # the start to the last write or message
    time_to_result_p50_s: Optional[float] = None   # submission to analysis, median
    time_to_result_p95_s: Optional[float] = None   # and 95th percentile
    engine_s: float = 0.0                  # engine-seconds held, production seconds
    engine_s_per_analysed: Optional[float] = None
    settled: bool = True                   # False: still unsettled at the horizon
    dead_by_cause: Dict[str, int] = field(default_factory=dict)   # people told, by cause
    ai_spend: float = 0.0
    peak_backlog: int = 0
    breaker_transitions: int = 0
    degradation_levels: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)   # what the reader should know of the run
    timeline: Optional[Timeline] = None

    @classmethod
    def judged(cls, name: str, figures: Figures, **extra: Any) -> "SubjectResult":
        """A subject's result from the judge's ``figures`` and the report's ``extra``."""
        values = asdict(figures)
        values["dead_by_cause"] = dict(figures.dead_by_cause)
        return cls(name=name, **values, **extra)

    @property
    def analysable(self) -> int:
        """Facts some subject could analyse: all but the unanalysable."""
        return self.facts - self.unanalysable

    def held_engines(self, busy_real_s: float, time_scale: float) -> None:
        """Record the engine-seconds held (``busy_real_s`` real seconds), and per analysed
        photo, in production seconds."""
        self.engine_s = round(busy_real_s / time_scale, 3)
        self.engine_s_per_analysed = (round(self.engine_s / self.analysed, 3)
                                      if self.analysed else None)

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class DrillReport:
    """A scenario's run: its parameters, its bounds, the library and the baselines.

    Bounds are computed before the run from the settings and the scenario
    (:mod:`~fme_ai_resilience.drill.bounds`): ``probe_bound`` the calls the breaker lets into
    the outage, ``probe_interval_s`` one probe interval, ``calls_per_analysed_bound`` 1.1 x
    1/(1-p). ``drain_limit_s`` is the physical limit of the drain (real seconds) and
    ``limit_why`` what binds it (:func:`~fme_ai_resilience.drill.speed.physical_limit_s`).
    ``drift`` is ``[start_s, fix_s]`` of a model answering out of schema (run seconds) and
    ``drift_call_bound`` the calls allowed into it. ``notes`` say what the reader should
    know of the run as a whole (the timeouts a machine could not honour at this time scale,
    the schedules).
    """

    scenario: str
    seed: int
    submissions: int
    engines: int
    backend: str
    time_scale: float                      # real seconds per production second
    watermark: int
    probe_bound: int                       # AI calls the breaker allows during the outage
    drain_limit_s: Optional[float]         # the physical limit of the drain, real seconds
    outage: Optional[List[float]]          # [start_s, end_s] of the outage, run seconds
    library: SubjectResult
    limit_why: str = ""                    # what binds the physical limit
    probe_interval_s: Optional[float] = None
    calls_per_analysed_bound: Optional[float] = None
    drift: Optional[List[float]] = None
    drift_call_bound: Optional[int] = None
    baselines: Dict[str, SubjectResult] = field(default_factory=dict)
    photos_per_feature: int = 1            # above 1: one related-table row per photo
    notes: List[str] = field(default_factory=list)
    waits: List[str] = field(default_factory=list)   # what each subject's schedule adds
    @property
    def size(self) -> str:
        """``"300 submissions"``, or ``"300 submissions x 3 photos"`` with a photo repeat."""
        photos = (f" x {self.photos_per_feature} photos" if self.photos_per_feature > 1
                  else "")
        return f"{self.submissions} submissions{photos}"

    def subjects(self) -> List[SubjectResult]:
        """The library, then the baselines in the report's order."""
        return [self.library, *self.baselines.values()]

    def as_dict(self) -> Dict[str, Any]:
        library = self.library.as_dict()
        out: Dict[str, Any] = {k: v for k, v in library.items() if k not in ("name",)}
        out.update({"scenario": self.scenario, "seed": self.seed,
                    "submissions": self.submissions,
                    "photos_per_feature": self.photos_per_feature, "engines": self.engines,
                    "backend": self.backend, "time_scale": self.time_scale,
                    "watermark": self.watermark, "probe_bound": self.probe_bound,
                    "probe_interval_s": self.probe_interval_s,
                    "calls_per_analysed_bound": self.calls_per_analysed_bound,
                    "drain_limit_s": self.drain_limit_s, "limit_why": self.limit_why,
                    "outage": self.outage, "drift": self.drift,
                    "drift_call_bound": self.drift_call_bound, "run_notes": list(self.notes),
                    "schedule_waits": list(self.waits),
                    "baselines": {name: {**r.as_dict(), "probe_bound": self.probe_bound,
                                         "drain_limit_s": self.drain_limit_s,
                                         "drift_call_bound": self.drift_call_bound}
                                  for name, r in self.baselines.items()}})
        return out
