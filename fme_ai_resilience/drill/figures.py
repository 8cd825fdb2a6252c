"""A drill report's figures as rows: one cell per subject that ran, judged against the bounds.

The terminal table and the HTML page show the same rows (:func:`figure_rows`), so both say
the same thing. Columns are the subjects that ran, the library first and the baselines in the
report's order; a skipped baseline is not a column (:func:`skipped` gives it with its reason).
A figure with a bound is judged for every subject: zero lost, zero duplicate analyses and
write-backs, every dead letter with a cause, AI calls in the outage within the breaker's probe
bound, the backlog never past the hard ceiling, engine work never past N, and the drain time
within :data:`DRAIN_TOLERANCE` x the Little's-law bound.
"""
from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

from ..store.text import REPLACEMENT, clean_text
from .report import DrillReport, SubjectResult

__all__ = ["Verdict", "Cell", "Row", "DRAIN_TOLERANCE", "SUCCEEDED_ORDER", "ran", "skipped",
           "figure_rows", "subject_notes", "printable", "number", "seconds"]

#: How far past the Little's-law bound the drain time may run and still be good.
DRAIN_TOLERANCE = 1.15
#: The usual outcomes of a succeeded task, in the order shown; others follow, sorted.
SUCCEEDED_ORDER = ("accepted", "review", "skipped")

# C0 and C1 controls and DEL: an escape sequence would steer a terminal, and XML refuses most.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class Verdict(str, enum.Enum):
    """How a figure stands against its bound."""

    GOOD = "good"
    BAD = "bad"


@dataclass(frozen=True)
class Cell:
    """One subject's figure as shown, and its verdict where the figure has a bound."""

    text: str
    verdict: Optional[Verdict] = None


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


def _judge(ok: bool) -> Verdict:
    return Verdict.GOOD if ok else Verdict.BAD


def _keys(subjects: Sequence[SubjectResult], attr: str, first: Iterable[str] = ()) -> List[str]:
    present = {k for s in subjects for k in getattr(s, attr)}
    return list(first) + sorted(present - set(first))


def figure_rows(report: DrillReport) -> List[Row]:
    """Every figure of the report as a row, in the order the drill's table shows them."""
    subjects = ran(report)
    rows: List[Row] = []

    def add(key: str, label: str, cell: Callable[[SubjectResult], Cell], target: str = "",
            depth: int = 0) -> None:
        rows.append(Row(key, printable(label), target, tuple(cell(s) for s in subjects), depth))

    def count(key: str, label: str, value: Callable[[SubjectResult], int],
              ok: Optional[Callable[[int], bool]] = None, target: str = "",
              depth: int = 0) -> None:
        add(key, label, lambda s: Cell(str(value(s)),
                                       None if ok is None else _judge(ok(value(s)))),
            target, depth)

    count("submitted", "submitted", lambda s: s.submitted)
    count("distinct_facts", "distinct facts", lambda s: s.distinct_facts)
    count("duplicates_collapsed", "duplicates collapsed", lambda s: s.duplicates_collapsed)
    count("succeeded", "succeeded", lambda s: s.succeeded_total)
    for outcome in _keys(subjects, "succeeded", SUCCEEDED_ORDER):
        count(f"succeeded:{outcome}", outcome, lambda s, o=outcome: s.succeeded.get(o, 0),
              depth=1)
    count("dead", "dead", lambda s: sum(s.dead_by_cause.values()))
    for cause in _keys(subjects, "dead_by_cause"):
        blank = not cause.strip()
        count(f"dead:{cause}", "(no cause)" if blank else cause,
              lambda s, c=cause: s.dead_by_cause.get(c, 0),
              (lambda n: n == 0) if blank else None, "a cause" if blank else "", depth=1)
    zero = lambda n: n == 0  # noqa: E731
    count("lost", "LOST", lambda s: s.lost, zero, "= 0")
    count("duplicate_analyses", "duplicate analyses", lambda s: s.duplicate_analyses, zero, "= 0")
    count("duplicate_writes", "duplicate write-backs", lambda s: s.duplicate_writes, zero, "= 0")
    count("ai_calls", "AI calls", lambda s: s.ai_calls)
    add("ai_calls_per_completed_task", "AI calls per completed task",
        lambda s: Cell(number(s.ai_calls_per_completed_task)))
    count("analyses_reused", "analyses reused", lambda s: s.analyses_reused)
    if report.outage is None:
        count("outage_ai_calls", "AI calls during the outage", lambda s: s.outage_ai_calls,
              target="no outage")
    else:
        count("outage_ai_calls", "AI calls during the outage", lambda s: s.outage_ai_calls,
              lambda n: n <= report.probe_bound, f"<= {report.probe_bound} probes")
    count("peak_backlog", "peak backlog", lambda s: s.peak_backlog,
          lambda n: n <= report.hard_ceiling,
          f"<= {report.hard_ceiling} ceiling, watermark {report.watermark}")
    count("peak_concurrent_engines", "peak concurrent engines",
          lambda s: s.peak_concurrent_engines, lambda n: n <= report.engines,
          f"<= {report.engines} (N)")
    count("breaker_transitions", "breaker transitions", lambda s: s.breaker_transitions)
    add("degradation_levels", "degradation levels",
        lambda s: Cell(printable(", ".join(map(str, s.degradation_levels))) or "-"))
    add("p95_end_to_end_s", "P95 end to end", lambda s: Cell(seconds(s.p95_end_to_end_s)))
    add("drain_s", "drain time", lambda s: _drain(s.drain_s, report.drain_bound_s),
        _drain_target(report.drain_bound_s))
    count("backfilled", "reconciliation backfills", lambda s: s.backfilled)
    add("ai_spend", "AI spend", lambda s: Cell(number(s.ai_spend)))
    return rows


def _drain_target(bound: Optional[float]) -> str:
    if not _finite(bound) or bound <= 0:  # type: ignore[operator]
        return "-"
    return f"<= {DRAIN_TOLERANCE:g} x {seconds(bound)} (Little's law)"


def _drain(drain: Optional[float], bound: Optional[float]) -> Cell:
    if not _finite(drain) or _drain_target(bound) == "-":
        return Cell(seconds(drain))
    ok = drain <= DRAIN_TOLERANCE * bound  # type: ignore[operator]
    return Cell(f"{seconds(drain)} ({drain / bound:.2f}x)", _judge(ok))  # type: ignore[operator]
