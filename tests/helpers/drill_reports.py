"""A hand-built drill report for the renderers: an outage, a skipped baseline, hostile text.

The library rides the outage out behind its breaker (OPEN, HALF_OPEN probes, CLOSED again)
and a degradation step, six photos awaiting analysis; ``naive`` hammers the dead service,
loses facts and tells people with a hostile cause; ``tenacity`` is skipped (its reason
carries markup); ``httpcaller`` has more calls in flight than its bound, overwrites an
assessment, adds a row twice and reports an outcome no stand-in knows.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from fme_ai_resilience.drill.figures import STATE_LABELS
from fme_ai_resilience.drill.report import LIBRARY, DrillReport, SubjectResult, Timeline

__all__ = ["HOSTILE_SCENARIO", "HOSTILE_REASON", "HOSTILE_CAUSE", "ODD_OUTCOME", "OUTAGE",
           "RUN_NOTE",
           "HTTPCALLER_NOTE",
           "sample_report", "timeline"]

HOSTILE_SCENARIO = 'outage <script>alert("scenario")</script>'
HOSTILE_REASON = 'tenacity is not installed: pip install "tenacity" & <script>alert(1)</script>'
HOSTILE_CAUSE = "<b>timeout</b>\x1b[31m red\x1b[0m"
HTTPCALLER_NOTE = "modelled from HTTPCaller's documentation, <i>not</i> run in FME"
ODD_OUTCOME = "<teapot>"
OUTAGE = [10.0, 20.0]
RUN_NOTE = "time scale 0.01: timeouts under 0.5 s real are raised to it <for every subject>"
SAMPLES = 40


def _series(pairs: Dict[range, int]) -> List[int]:
    out = [0] * SAMPLES
    for span, value in pairs.items():
        for i in span:
            out[i] = value
    return out


def timeline(*, backlog: List[int], ai_calls: Dict[str, List[int]],
             breaker: Optional[List[Optional[str]]] = None,
             level: Optional[List[Optional[int]]] = None, step_s: float = 1.0) -> Timeline:
    """A timeline of ``len(backlog)`` samples, ``step_s`` apart from 0."""
    n = len(backlog)
    return Timeline(step_s=step_s, t=[i * step_s for i in range(n)], backlog=list(backlog),
                    in_flight=[min(4, b) for b in backlog], ai_calls=ai_calls,
                    breaker=list(breaker) if breaker is not None else [None] * n,
                    level=list(level) if level is not None else [None] * n)


def _library() -> SubjectResult:
    backlog = [min(60, 6 * i) if i <= 12 else max(0, 60 - 3 * (i - 12)) for i in range(SAMPLES)]
    breaker = (["CLOSED"] * 11 + ["OPEN"] * 4 + ["HALF_OPEN"] + ["OPEN"] * 2 + ["HALF_OPEN"]
               + ["CLOSED"] * (SAMPLES - 19))
    level = [0] * 11 + [2] * 11 + [1] * 4 + [0] * (SAMPLES - 26)
    outage = [0] * SAMPLES
    for i in (12, 15, 18):
        outage[i] = 1
    calls = {"ok": _series({range(0, 10): 4, range(20, 34): 5}),
             "server_error": _series({range(4, 6): 1}), "outage": outage}
    return SubjectResult(
        name=LIBRARY, model="the library as deployed", submitted=130, facts=100,
        unanalysable=2, analysed=92, accepted=80, review=12, flagged=6, awaiting=6,
        dead_by_cause={"format": 2}, lost=0, duplicate_analyses=0, conflicting_writes=0,
        layer_edits=98, ai_calls=113, ai_calls_per_analysed=1.228, outage_ai_calls=3,
        recovery_lag_s=1.5, peak_concurrent_calls=4, concurrency_bound=4, peak_backlog=60,
        breaker_transitions=6, degradation_levels=["L0", "L2", "L1"], drain_s=32.0,
        time_to_result_p50_s=4.5, time_to_result_p95_s=21.0, engine_s=1840.0,
        engine_s_per_analysed=20.0, ai_spend=1.13,
        timeline=_with_photos(timeline(backlog=backlog, ai_calls=calls, breaker=breaker,
                                       level=level)))


def _with_photos(tl: Timeline) -> Timeline:
    """The library's photos by the judge's states: accepted up to 80, in review up to 12,
    six awaiting analysis at the end (the table's figures)."""
    n = len(tl.t)
    tl.photos = {STATE_LABELS["ACCEPTED"]: [min(80, 3 * i) for i in range(n)],
                 STATE_LABELS["REVIEW"]: [min(12, i // 2) for i in range(n)],
                 STATE_LABELS["AWAITING_ANALYSIS"]: [6 if i >= 11 else 0 for i in range(n)]}
    return tl


def _naive() -> SubjectResult:
    backlog = [min(100, 8 * i) if i <= 20 else max(0, 100 - 6 * (i - 20)) for i in range(SAMPLES)]
    calls = {"ok": _series({range(0, 10): 4, range(20, 36): 6}),
             "outage": _series({range(10, 20): 12}), "server_error": _series({range(4, 6): 2})}
    return SubjectResult(
        name="naive", model="three tries", submitted=130, facts=100, unanalysable=2,
        analysed=85, accepted=75, review=10, flagged=8, notified=8,
        dead_by_cause={HOSTILE_CAUSE: 8}, lost=5, duplicate_analyses=5, conflicting_writes=3,
        layer_edits=90, ai_calls=260, ai_calls_per_analysed=3.059, outage_ai_calls=120,
        recovery_lag_s=9.0, peak_concurrent_calls=4, concurrency_bound=4, peak_backlog=100,
        drain_s=37.0, time_to_result_p50_s=3.0, time_to_result_p95_s=30.0,
        engine_s_per_analysed=12.0, ai_spend=2.6, timeline=timeline(backlog=backlog, ai_calls=calls))


def _httpcaller() -> SubjectResult:
    backlog = [min(80, 7 * i) if i <= 18 else max(0, 80 - 5 * (i - 18)) for i in range(SAMPLES)]
    calls = {"ok": _series({range(0, 10): 5, range(20, 35): 6}),
             "outage": _series({range(10, 20): 6}), ODD_OUTCOME: _series({range(30, 32): 1})}
    return SubjectResult(
        name="httpcaller", model=HTTPCALLER_NOTE, submitted=130, facts=100, unanalysable=2,
        analysed=95, accepted=86, review=9, flagged=3, notified=3,
        dead_by_cause={"server_error": 3}, lost=0, duplicate_analyses=2, conflicting_writes=1,
        duplicate_rows=1, layer_edits=99, ai_calls=190, ai_calls_per_analysed=2.0,
        outage_ai_calls=60, recovery_lag_s=None, peak_concurrent_calls=6, concurrency_bound=4,
        peak_backlog=80, drain_s=36.0, time_to_result_p50_s=2.5, time_to_result_p95_s=28.0,
        engine_s_per_analysed=9.0, ai_spend=1.9,
        notes=[HTTPCALLER_NOTE], timeline=timeline(backlog=backlog, ai_calls=calls))


def sample_report() -> DrillReport:
    """The report described in the module docstring (a fresh value each call)."""
    return DrillReport(
        scenario=HOSTILE_SCENARIO, seed=7, submissions=100, engines=4, backend="sqlite",
        time_scale=0.01, watermark=40, probe_bound=4, drain_limit_s=30.0,
        limit_why="the outage's end and one call",
        outage=list(OUTAGE), library=_library(), probe_interval_s=2.0,
        calls_per_analysed_bound=1.222, notes=[RUN_NOTE],
        baselines={"naive": _naive(), "tenacity": SubjectResult(name="tenacity",
                                                                 skipped=HOSTILE_REASON),
                   "httpcaller": _httpcaller()})
