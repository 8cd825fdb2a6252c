"""The drill report's figures as rows: one cell per subject that ran, judged against the bounds."""
from __future__ import annotations

import dataclasses

from fme_ai_resilience.drill.figures import (DRAIN_TOLERANCE, Verdict, figure_rows, printable,
                                             ran, skipped, subject_notes)
from fme_ai_resilience.drill.report import LIBRARY
from tests.drill_reports import HOSTILE_CAUSE, HOSTILE_REASON, HTTPCALLER_NOTE, sample_report

FIGURES = ["submitted", "distinct_facts", "duplicates_collapsed", "succeeded",
           "succeeded:accepted", "succeeded:review", "succeeded:skipped", "dead", "lost",
           "duplicate_analyses", "duplicate_writes", "ai_calls", "ai_calls_per_completed_task",
           "analyses_reused", "outage_ai_calls", "peak_backlog", "peak_concurrent_engines",
           "breaker_transitions", "degradation_levels", "p95_end_to_end_s", "drain_s",
           "backfilled", "ai_spend"]


def rows_by_key(report):
    return {row.key: row for row in figure_rows(report)}


def test_every_figure_of_the_report_has_a_row_in_order():
    """The rows are the report's figures in the documented order, causes after the dead total."""
    keys = [row.key for row in figure_rows(sample_report())]
    assert [k for k in keys if not k.startswith("dead:")] == FIGURES
    dead = keys.index("dead")
    assert keys[dead + 1:dead + 4] == [f"dead:{HOSTILE_CAUSE}", "dead:format",
                                       "dead:server_error"]


def test_columns_are_the_subjects_that_ran_library_first():
    """The library comes first, then the baselines in the report's order; skipped ones apart."""
    report = sample_report()
    assert [s.name for s in ran(report)] == [LIBRARY, "naive", "httpcaller"]
    assert [(s.name, s.skipped) for s in skipped(report)] == [("tenacity", HOSTILE_REASON)]
    assert all(len(row.cells) == 3 for row in figure_rows(report))


def test_cells_hold_the_subjects_figures():
    """Counts, parts of totals, levels and durations read as the report holds them."""
    rows = rows_by_key(sample_report())
    assert [c.text for c in rows["succeeded"].cells] == ["98", "85", "97"]
    assert [c.text for c in rows["succeeded:skipped"].cells] == ["6", "0", "0"]
    assert [c.text for c in rows[f"dead:{HOSTILE_CAUSE}"].cells] == ["0", "8", "0"]
    assert [c.text for c in rows["dead"].cells] == ["2", "8", "3"]
    assert [c.text for c in rows["ai_calls_per_completed_task"].cells] == ["1.15", "3.06", "1.96"]
    assert rows["degradation_levels"].cells[0].text == "L0, L2, L1"
    assert rows["degradation_levels"].cells[1].text == "-"
    assert rows["p95_end_to_end_s"].cells[0].text == "14.2 s"
    assert rows["drain_s"].cells[0].text == "32.0 s (1.07x)"


def test_bounded_figures_are_judged_for_every_subject():
    """Zero lost or duplicated, outage calls within probes, engines within N: good; else bad."""
    rows = rows_by_key(sample_report())
    verdicts = {key: [c.verdict for c in rows[key].cells]
                for key in ("lost", "duplicate_analyses", "duplicate_writes", "outage_ai_calls",
                            "peak_concurrent_engines", "peak_backlog")}
    good, bad = Verdict.GOOD, Verdict.BAD
    assert verdicts == {"lost": [good, bad, good], "duplicate_analyses": [good, bad, bad],
                        "duplicate_writes": [good, bad, bad],
                        "outage_ai_calls": [good, bad, bad],
                        "peak_concurrent_engines": [good, good, bad],
                        "peak_backlog": [good, good, good]}
    assert "4" in rows["outage_ai_calls"].target and "120" in rows["peak_backlog"].target
    assert all(c.verdict is None for c in rows["ai_calls"].cells)


def test_drain_time_is_judged_against_the_littles_law_bound_with_its_tolerance():
    """Drain time at most DRAIN_TOLERANCE x the bound is good, a hair over it is bad."""
    report = sample_report()
    bound = report.drain_bound_s
    report.library.drain_s = bound * DRAIN_TOLERANCE
    report.baselines["naive"].drain_s = bound * DRAIN_TOLERANCE + 0.01
    report.baselines["httpcaller"].drain_s = None
    cells = rows_by_key(report)["drain_s"].cells
    assert [c.verdict for c in cells] == [Verdict.GOOD, Verdict.BAD, None]
    assert cells[2].text == "-"
    report.drain_bound_s = None
    assert all(c.verdict is None for c in rows_by_key(report)["drain_s"].cells)


def test_outage_calls_are_not_judged_without_an_outage():
    """A scenario with no outage has no probe bound to judge the outage calls against."""
    report = dataclasses.replace(sample_report(), outage=None)
    row = rows_by_key(report)["outage_ai_calls"]
    assert all(c.verdict is None for c in row.cells) and "no outage" in row.target


def test_a_dead_letter_without_a_cause_is_bad():
    """Every DEAD has a cause: a blank cause shows as such and is marked bad."""
    report = sample_report()
    report.library.dead_by_cause = {"": 1, "format": 2}
    rows = rows_by_key(report)
    assert rows["dead:"].label == "(no cause)"
    assert rows["dead:"].cells[0].verdict is Verdict.BAD


def test_notes_of_the_subjects_that_ran_come_in_column_order():
    """What the reader should know of a run comes with its subject's name, library first."""
    report = sample_report()
    report.library.notes = ["the run timed out\x1b[2J before every task settled"]
    report.baselines["tenacity"].notes = ["never shown: it did not run"]
    assert subject_notes(report) == [
        (LIBRARY, "the run timed out\ufffd[2J before every task settled"),
        ("httpcaller", HTTPCALLER_NOTE)]


def test_non_finite_numbers_read_as_not_available():
    """A NaN or infinite figure reads n/a and is not judged good."""
    report = sample_report()
    report.library.p95_end_to_end_s = float("nan")
    report.library.drain_s = float("inf")
    report.library.ai_spend = float("nan")
    rows = rows_by_key(report)
    assert rows["p95_end_to_end_s"].cells[0].text == "n/a"
    assert rows["ai_spend"].cells[0].text == "n/a"
    assert rows["drain_s"].cells[0].text == "n/a" and rows["drain_s"].cells[0].verdict is None


def test_printable_replaces_control_characters_and_lone_surrogates():
    """Escape sequences, NULs and unpaired surrogates never pass through to a terminal or page."""
    assert printable("a\x1b[31mb\x00c\ud800d\u0085e\tf") == "a\ufffd[31mb\ufffdc\ufffdd\ufffde f"
    assert printable("r\u00e9seau \u6771\u4eac") == "r\u00e9seau \u6771\u4eac"
