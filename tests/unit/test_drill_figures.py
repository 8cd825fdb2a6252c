"""The drill report's figures as rows: one cell per subject that ran, judged against the bounds."""
from __future__ import annotations

import dataclasses

from fme_ai_resilience.drill.figures import (Cell, Standing, figure_rows, printable, ran, skipped,
                                             subject_notes)
from fme_ai_resilience.drill.invariants import checks
from fme_ai_resilience.drill.report import LIBRARY

from helpers.drill_reports import HOSTILE_CAUSE, HOSTILE_REASON, HTTPCALLER_NOTE, sample_report


FIGURES = ["analysed", "accepted", "review", "flagged", "awaiting", "manual_review", "notified",
           "lost", "unanalysable", "facts", "submitted", "duplicate_analyses",
           "conflicting_writes", "duplicate_rows", "layer_edits", "ai_calls",
           "ai_calls_per_analysed", "outage_ai_calls", "peak_concurrent_calls", "drain_s",
           "time_to_result", "engine_s_per_analysed", "recovery_lag_s", "peak_backlog",
           "breaker_transitions", "degradation_levels", "ai_spend"]
SPEED = ("drain_s", "time_to_result", "engine_s_per_analysed", "recovery_lag_s")


def rows_by_key(report):
    return {row.key: row for row in figure_rows(report)}


def test_every_figure_of_the_report_has_a_row_in_order_photos_analysed_first():
    """The rows are the report's figures in the documented order, "photos analysed" first,
    the causes people were told after the speed."""
    keys = [row.key for row in figure_rows(sample_report())]
    assert [k for k in keys if not k.startswith("dead:")] == FIGURES
    assert keys[0] == "analysed" and figure_rows(sample_report())[0].label == "photos analysed"
    last = keys.index("recovery_lag_s")
    assert keys[last + 1:last + 4] == [f"dead:{HOSTILE_CAUSE}", "dead:format",
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
    assert [c.text for c in rows["analysed"].cells] == ["92 / 98", "85 / 98", "95 / 98"]
    assert [c.text for c in rows["awaiting"].cells] == ["6", "0", "0"]
    assert [c.text for c in rows[f"dead:{HOSTILE_CAUSE}"].cells] == ["0", "8", "0"]
    assert [c.text for c in rows["ai_calls_per_analysed"].cells] == ["1.23", "3.06", "2.00"]
    assert [c.text for c in rows["peak_concurrent_calls"].cells] == ["4 / 4", "4 / 4", "6 / 4"]
    assert rows["degradation_levels"].cells[0].text == "L0, L2, L1"
    assert rows["degradation_levels"].cells[1].text == "-"
    assert rows["recovery_lag_s"].cells[0].text == "1.50 s"
    assert rows["drain_s"].cells[0].text == "32.0 s"
    assert rows["time_to_result"].cells[0].text == "4.50 s / 21.0 s"
    assert rows["engine_s_per_analysed"].cells[:2] == (Cell("20.0 s"), Cell("12.0 s"))


def test_bounded_figures_are_judged_for_every_subject_by_the_same_checks():
    """Each judged row's verdicts are invariants.checks' for that subject."""
    report = sample_report()
    rows = rows_by_key(report)
    for i, subject in enumerate(ran(report)):
        for check in checks(report, subject):
            assert rows[check.key].cells[i].verdict is (
                Standing.GOOD if check.met else Standing.BAD), (subject.name, check)
    good, bad = Standing.GOOD, Standing.BAD
    verdicts = {key: [c.verdict for c in rows[key].cells]
                for key in ("analysed", "lost", "conflicting_writes", "duplicate_rows",
                            "outage_ai_calls", "peak_concurrent_calls")}
    assert verdicts == {"analysed": [bad, bad, bad], "lost": [good, bad, good],
                        "conflicting_writes": [good, bad, bad],
                        "duplicate_rows": [good, good, bad],
                        "outage_ai_calls": [good, bad, bad],
                        "peak_concurrent_calls": [good, good, bad]}
    assert "4" in rows["outage_ai_calls"].target
    assert all(c.verdict is None for c in rows["ai_calls"].cells)
    assert all(c.verdict is None for c in rows["ai_calls_per_analysed"].cells)


def test_speed_is_shown_side_by_side_and_never_judged():
    """The drain, the time to result, the engine time and the recovery lag are wall-clock
    figures of one run: shown for every subject, none marked, the drain beside its limit."""
    rows = rows_by_key(sample_report())
    for key in SPEED:
        assert all(c.verdict is None for c in rows[key].cells), key
    assert rows["drain_s"].target == "side by side; limit 30.0 s"
    assert rows["recovery_lag_s"].target == "one probe interval 2.00 s"


def test_without_an_outage_calls_per_analysed_photo_are_judged_instead():
    """No outage: the outage calls are shown unjudged, AI calls per analysed photo judged."""
    report = dataclasses.replace(sample_report(), outage=None)
    rows = rows_by_key(report)
    row = rows["outage_ai_calls"]
    assert all(c.verdict is None for c in row.cells) and "no outage" in row.target
    assert "recovery_lag_s" not in rows
    assert [c.verdict for c in rows["ai_calls_per_analysed"].cells] == [
        Standing.BAD, Standing.BAD, Standing.BAD]
    assert rows["ai_calls_per_analysed"].target == "<= 1.22"


def test_notes_of_the_subjects_that_ran_come_in_column_order():
    """What the reader should know of a run comes with its subject's name, library first."""
    report = sample_report()
    report.library.notes = ["the run timed out\x1b[2J before every task settled"]
    report.baselines["tenacity"].notes = ["never shown: it did not run"]
    assert subject_notes(report) == [
        (LIBRARY, "the run timed out\ufffd[2J before every task settled"),
        ("httpcaller", HTTPCALLER_NOTE)]


def test_non_finite_numbers_read_as_not_available():
    """A NaN or infinite figure reads n/a, and a judged one is not judged good."""
    report = sample_report()
    report.library.recovery_lag_s = float("nan")
    report.library.drain_s = float("inf")
    report.library.ai_spend = float("nan")
    report.library.ai_calls_per_analysed = float("inf")
    rows = rows_by_key(dataclasses.replace(report, outage=None))
    assert rows["ai_spend"].cells[0].text == "n/a"
    assert rows["drain_s"].cells[0].text == "n/a"
    assert rows["ai_calls_per_analysed"].cells[0].text == "n/a"
    assert rows["ai_calls_per_analysed"].cells[0].verdict is Standing.BAD
    assert rows_by_key(report)["recovery_lag_s"].cells[0].text == "n/a"


def test_printable_replaces_control_characters_and_lone_surrogates():
    """Escape sequences, NULs and unpaired surrogates never pass through to a terminal or page."""
    assert printable("a\x1b[31mb\x00c\ud800d\u0085e\tf") == "a\ufffd[31mb\ufffdc\ufffdd\ufffde f"
    assert printable("r\u00e9seau \u6771\u4eac") == "r\u00e9seau \u6771\u4eac"


def test_a_drift_judges_the_calls_into_the_drifted_model_and_shows_its_detection():
    """With a drift, the calls into the drifted model are judged against their probe bound
    (in place of calls per analysed photo) and the time to detection is shown."""
    report = dataclasses.replace(sample_report(), outage=None, drift=[2.4, 6.0],
                                 drift_call_bound=9)
    report.library.drift_ai_calls, report.library.drift_detection_s = 7, 0.6
    report.baselines["naive"].drift_ai_calls = 40
    rows = rows_by_key(report)
    assert [c.verdict for c in rows["drift_ai_calls"].cells][:2] == [Standing.GOOD, Standing.BAD]
    assert rows["drift_detection_s"].cells[0].text == "0.60 s"
    assert all(c.verdict is None for c in rows["ai_calls_per_analysed"].cells)
    assert [c.key for c in checks(report, report.library)].count("drift_ai_calls") == 1
