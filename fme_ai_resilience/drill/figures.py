"""A drill report's figures as rows: one cell per subject that ran, judged against the bounds.

The terminal table and the HTML page show the same rows (:func:`figure_rows`), so both say
the same thing. Columns are the subjects that ran, the library first and the baselines in the
report's order; a skipped baseline is not a column (:func:`skipped` gives it with its reason).
A figure with a bound is judged for every subject by the same checks
(:func:`~fme_ai_resilience.drill.invariants.checks`); "photos analysed" comes first. Speed
figures (the drain, the time to result, the engine time, the recovery lag) are shown side
by side, never judged (:mod:`~fme_ai_resilience.drill.speed`). :data:`STATE_LABELS` names
the judge's states as the table does, and the page's charts use the same names.
"""
from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

from ..store.text import REPLACEMENT, clean_text
from .invariants import checks
from .report import DrillReport, SubjectResult

__all__ = ["Standing", "Cell", "Row", "STATE_LABELS", "ran", "skipped",
           "figure_rows", "subject_notes", "printable", "number", "seconds"]

#: The judge's states of a photo as the table names them (the page's charts too).
STATE_LABELS = {"ACCEPTED": "accepted", "REVIEW": "in review (under the threshold)",
                "REVIEWED": "a reviewer's verdict", "AWAITING_ANALYSIS": "awaiting analysis",
                "MANUAL_REVIEW": "manual review", "notified": "a person told the cause",
                "lost": "LOST (nobody knows)"}


# C0 and C1 controls and DEL: an escape sequence would steer a terminal, and XML refuses most.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class Standing(str, enum.Enum):
    """How a figure stands against its bound."""

    GOOD = "good"
    BAD = "bad"


@dataclass(frozen=True)
class Cell:
    """One subject's figure as shown, and its verdict where the figure has a bound."""

    text: str
    verdict: Optional[Standing] = None


@dataclass(frozen=True)
class Row:
    """One figure across the subjects; ``depth`` 1 for a part of the total above it."""

    key: str
    label: str
    target: str
    cells: Tuple[Cell, ...]
    depth: int = 0


def printable(text: object) -> str:
    """``text`` safe to show: controls and unpaired surrogates as U+FFFD, tabs and newlines as
    spaces."""
    value = clean_text(str(text)).replace("\t", " ").replace("\n", " ")
    return _CONTROL.sub(REPLACEMENT, value)


def number(value: Optional[float], digits: int = 2) -> str:
    """A float with ``digits`` decimals; ``-`` for None, ``n/a`` when not finite."""
    if value is None:
        return "-"
    if not math.isfinite(value):
        return "n/a"
    return f"{value + 0.0:.{digits}f}"


def seconds(value: Optional[float]) -> str:
    """A duration: two decimals under 10 s, one above; ``-`` for None, ``n/a`` when not finite."""
    text = number(value, 2 if value is not None and math.isfinite(value) and abs(value) < 10
                  else 1)
    return text if text in ("-", "n/a") else f"{text} s"


def ran(report: DrillReport) -> List[SubjectResult]:
    """The subjects that ran: the library, then the baselines in the report's order."""
    return [s for s in [report.library, *report.baselines.values()] if s.skipped is None]


def skipped(report: DrillReport) -> List[SubjectResult]:
    """The subjects that did not run, each with its ``skipped`` reason."""
    return [s for s in [report.library, *report.baselines.values()] if s.skipped is not None]


def subject_notes(report: DrillReport) -> List[Tuple[str, str]]:
    """``(subject, note)`` for each note of a subject that ran, in column order, printable."""
    return [(printable(s.name), printable(note)) for s in ran(report) for note in s.notes]


def _finite(value: Optional[float]) -> bool:
    return value is not None and math.isfinite(value)


def _judge(ok: bool) -> Standing:
    return Standing.GOOD if ok else Standing.BAD


def _keys(subjects: Sequence[SubjectResult], attr: str, first: Iterable[str] = ()) -> List[str]:
    present = {k for s in subjects for k in getattr(s, attr)}
    return list(first) + sorted(present - set(first))


def figure_rows(report: DrillReport) -> List[Row]:
    """Every figure of the report as a row, in the order the drill's table shows them; a
    judged cell's verdict is :func:`~fme_ai_resilience.drill.invariants.checks`'."""
    subjects = ran(report)
    verdicts = [{c.key: _judge(c.met) for c in checks(report, s)} for s in subjects]
    rows: List[Row] = []

    def add(key: str, label: str, text: Callable[[SubjectResult], str], target: str = "",
            depth: int = 0, judged: bool = False) -> None:
        rows.append(Row(key, printable(label), target, tuple(
            Cell(text(s), v.get(key) if judged else None)
            for s, v in zip(subjects, verdicts)), depth))

    def count(key: str, label: str, target: str = "", depth: int = 0,
              judged: bool = False) -> None:
        add(key, label, lambda s: str(getattr(s, key)), target, depth, judged)

    add("analysed", "photos analysed", lambda s: f"{s.analysed} / {s.analysable}",
        "= every photo that can be", judged=True)
    count("accepted", STATE_LABELS["ACCEPTED"], depth=1)
    count("review", STATE_LABELS["REVIEW"], depth=1)
    if any(s.reviewed for s in subjects):
        count("reviewed", STATE_LABELS["REVIEWED"], depth=1)
    count("flagged", "flagged, not analysed")
    count("awaiting", STATE_LABELS["AWAITING_ANALYSIS"], depth=1)
    count("manual_review", STATE_LABELS["MANUAL_REVIEW"], depth=1)
    count("notified", STATE_LABELS["notified"], depth=1)
    count("lost", STATE_LABELS["lost"], "= 0", judged=True)
    count("unanalysable", "gone from the layer (no one can analyse)")
    count("facts", "photos created (facts)")
    count("submitted", "webhook deliveries")
    count("duplicate_analyses", "duplicate analyses", "= 0", judged=True)
    if any(s.cut_by_kills for s in subjects):
        count("cut_by_kills", "paid again: a killed engine's call cut", depth=1)
    count("conflicting_writes", "conflicting writes", "= 0", judged=True)
    count("duplicate_rows", "rows added twice", "= 0", judged=True)
    count("layer_edits", "layer edits")
    count("ai_calls", "AI calls")
    calls_bound = report.calls_per_analysed_bound
    add("ai_calls_per_analysed", "AI calls per analysed photo",
        lambda s: number(s.ai_calls_per_analysed),
        "outage: see the probe bound" if report.outage or report.drift or calls_bound is None
        else f"<= {number(calls_bound)}", judged=report.outage is None and report.drift is None)
    if report.drift is not None:
        count("drift_ai_calls", "AI calls into the drifted model",
              f"<= {report.drift_call_bound} (probes)", judged=True)
        add("drift_detection_s", "drift detected (circuit open) after",
            lambda s: seconds(s.drift_detection_s))
    if report.outage is None:
        count("outage_ai_calls", "AI calls during the outage", "no outage")
    else:
        count("outage_ai_calls", "AI calls during the outage",
              f"<= {report.probe_bound} probes", judged=True)
    add("peak_concurrent_calls", "peak AI calls in flight",
        lambda s: f"{s.peak_concurrent_calls} / {s.concurrency_bound}",
        "<= its concurrency bound", judged=True)
    add("drain_s", "drain time", lambda s: seconds(s.drain_s),
        f"side by side; limit {seconds(report.drain_limit_s)}")
    add("time_to_result", "time to result, median / 95th pct",
        lambda s: f"{seconds(s.time_to_result_p50_s)} / {seconds(s.time_to_result_p95_s)}",
        "side by side")
    add("engine_s_per_analysed", "engine time per analysed photo",
        lambda s: seconds(s.engine_s_per_analysed), "side by side (production s)")
    if report.outage is not None:
        add("recovery_lag_s", "recovery lag", lambda s: seconds(s.recovery_lag_s),
            f"one probe interval {seconds(report.probe_interval_s)}")
    for cause in _keys(subjects, "dead_by_cause"):
        add(f"dead:{cause}", f"told: {cause}", lambda s, c=cause: str(s.dead_by_cause.get(c, 0)),
            depth=1)
    count("peak_backlog", "peak backlog")
    count("breaker_transitions", "breaker transitions")
    add("degradation_levels", "degradation levels",
        lambda s: printable(", ".join(map(str, s.degradation_levels))) or "-")
    add("ai_spend", "AI spend", lambda s: number(s.ai_spend))
    return rows
