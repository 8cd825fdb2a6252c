"""The drill's terminal table: the figures as rows, the library and each baseline as a column.

Plain text with aligned columns (wide East Asian characters count as two), values right-aligned
under their subject, and a figure with a bound marked in words, ``ok`` or ``BAD``, so the table
reads the same without colour and in a log file. Report values are shown through
:func:`~fme_ai_resilience.drill.figures.printable`: no escape sequence reaches the terminal.
After the table come the library's targets (they decide the exit code), the speed side by
side with the strongest peer (:mod:`~fme_ai_resilience.drill.speed`, never a target), and
the run's verdict in one line (:func:`~fme_ai_resilience.drill.invariants.verdict`).
"""
from __future__ import annotations

import unicodedata
from typing import List, Optional, Sequence

from .figures import (Cell, Standing, figure_rows, number, printable, ran, seconds, skipped,
                      subject_notes)
from .invariants import targets, verdict
from .report import LIBRARY, DrillReport, SubjectResult
from .speed import comparison, plainly

__all__ = ["render_table", "render_checklist", "render_speed", "render_excerpt", "excerpt",
           "render_report",
           "display_width", "MARKS", "EXCERPT_ROWS", "CHECKLIST_TITLE", "SPEED_TITLE"]

#: The rows of the table the README's excerpt shows, in the table's order.
EXCERPT_ROWS = ("analysed", "accepted", "review", "flagged", "lost", "unanalysable",
                "duplicate_analyses", "conflicting_writes", "ai_calls", "ai_calls_per_analysed",
                "outage_ai_calls", "peak_concurrent_calls", "drain_s", "time_to_result",
                "engine_s_per_analysed")
CHECKLIST_TITLE = "the library's targets (they decide the exit code):"
SPEED_TITLE = "speed, side by side in this run (never decides the exit code):"

#: What a judged cell says after its value; every mark is as wide as the others.
MARKS = {Standing.GOOD: "  ok", Standing.BAD: " BAD", None: "    "}
_GAP = "  "


def display_width(text: str) -> int:
    """Columns a terminal gives ``text``: wide characters take two, combining marks none."""
    return sum(0 if unicodedata.combining(ch) else
               2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _left(text: str, width: int) -> str:
    return text + " " * (width - display_width(text))


def _right(text: str, width: int) -> str:
    return " " * (width - display_width(text)) + text


def _cell(cell: Cell) -> str:
    return cell.text + MARKS[cell.verdict]


def _heading(report: DrillReport) -> List[str]:
    outage = ("no outage" if report.outage is None else
              "outage " + "-".join(number(t, 1) for t in report.outage) + " s")
    return [printable(
        f"drill: scenario {report.scenario}, seed {report.seed}, {report.size}, "
        f"{report.engines} engines, {report.backend} ledger, time scale "
        f"{report.time_scale:g}"),
        printable(f"bounds: probe bound {report.probe_bound}, {outage}; the drain's physical "
                  f"limit {seconds(report.drain_limit_s)} ({report.limit_why}); every "
                  "subject judged at the stand-ins by the same function")]


def _columns(header: Sequence[str], lines: Sequence[Sequence[str]]) -> List[int]:
    return [max(display_width(line[i]) for line in [header, *lines])
            for i in range(len(header))]


def _table(report: DrillReport, keys: Optional[Sequence[str]] = None) -> List[str]:
    """The header, the rule and the rows (those of ``keys`` only, when given), aligned."""
    subjects = ran(report)
    header = ["figure", "target"] + [printable(s.name) for s in subjects]
    body = [[("  " * row.depth) + row.label, printable(row.target)]
            + [printable(_cell(c)) for c in row.cells] for row in figure_rows(report)
            if keys is None or row.key in keys]
    widths = _columns(header, body)

    def line(cells: Sequence[str]) -> str:
        parts = [_left(c, w) if i < 2 else _right(c, w)
                 for i, (c, w) in enumerate(zip(cells, widths))]
        return _GAP.join(parts).rstrip()

    return [line(header), _GAP.join("-" * w for w in widths)] + [line(c) for c in body]


def render_checklist(report: DrillReport) -> str:
    """The closing checklist: every target of the library, ``ok`` or ``BAD``."""
    lines = [CHECKLIST_TITLE] + [f"{'ok ' if c.met else 'BAD'}  {printable(c.name)}"
                                 for c in targets(report)]
    return "\n".join(lines) + "\n"


def render_speed(report: DrillReport) -> str:
    """The speed side by side with the strongest peer, and, when the peer analysed as many
    photos, the sentence saying what the library's case rests on."""
    lines = [SPEED_TITLE] + [f"     {printable(line)}" for line in comparison(report).lines]
    said = plainly(report)
    if said is not None:
        lines.append(f"     {printable(said)}")
    return "\n".join(lines) + "\n"


def render_excerpt(report: DrillReport) -> str:
    """What the README shows of a run: :func:`excerpt` of what the command prints for it."""
    return excerpt(render_report([report]))


def _excerpt_labels() -> List[str]:
    """The labels of :data:`EXCERPT_ROWS` as the table prints them (a part indented)."""
    blank = DrillReport(scenario="", seed=0, submissions=0, engines=0, backend="",
                        time_scale=1.0, watermark=0, probe_bound=0, drain_limit_s=None,
                        outage=[0.0, 1.0], library=SubjectResult(name=LIBRARY))
    return [("  " * row.depth) + row.label for row in figure_rows(blank)
            if row.key in EXCERPT_ROWS]


def excerpt(printed: str) -> str:
    """The README's excerpt of what ``drill`` printed (one scenario): the heading's first line,
    the table's header, rule and rows of :data:`EXCERPT_ROWS`, then, as printed, the
    targets, the speed and the verdict. Cut from the output, never rebuilt."""
    lines = printed.rstrip("\n").splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("figure "))
    width = len(lines[header + 1].split(_GAP)[0])
    wanted = set(_excerpt_labels())
    rows = [line for line in lines[header + 2:]
            if line[:width].rstrip() in wanted and not line.startswith(" " * (width + 1))]
    rows = rows[:len(wanted)]
    checks = lines.index(CHECKLIST_TITLE)
    return "\n".join([lines[0], "", lines[header], lines[header + 1], *rows, "...",
                      *lines[checks:]]) + "\n"


def render_report(reports: Sequence[DrillReport]) -> str:
    """What the ``drill`` command prints: per scenario the table, the library's targets and
    the speed, then one verdict line last."""
    parts = [render_table(r) + "\n" + render_checklist(r) + render_speed(r) + "\n"
             for r in reports]
    return "".join(parts) + verdict(list(reports)) + "\n"


def render_table(report: DrillReport) -> str:
    """The report as the drill prints it: a heading, the table, then the baselines not run."""
    out = _heading(report) + [""] + _table(report)
    out += ["", "ok: within its target; BAD: misses it. "
            f"{LIBRARY} is the library; the other columns are the usual approaches."]
    out += [printable(f"{s.name} models: {s.model}") for s in ran(report) if s.model]
    out += [f"{name}: {note}" for name, note in subject_notes(report)]
    out += [printable(f"the run: {note}") for note in report.notes]
    out += [printable(f"{s.name}: not run: {s.skipped}") for s in skipped(report)]
    return "\n".join(out) + "\n"
