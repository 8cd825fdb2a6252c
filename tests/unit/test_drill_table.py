"""The drill's terminal table: figures as rows, the library and each baseline as a column."""
from __future__ import annotations

import copy
import dataclasses
import unicodedata

from fme_ai_resilience.drill.figures import figure_rows
from fme_ai_resilience.drill.report import LIBRARY
from fme_ai_resilience.drill.table import render_table

from helpers.drill_reports import HTTPCALLER_NOTE, sample_report


def width(text):
    """Columns a terminal gives ``text`` (wide East Asian characters take two)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def table_lines(text):
    """The table's own lines: from the header to the first blank line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("figure"))
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    return lines[start:end]


def column_starts(header):
    """Where each column of the header starts (after runs of two or more spaces)."""
    starts, i = [0], 0
    while True:
        gap = header.find("  ", i)
        if gap < 0:
            return starts
        i = gap
        while i < len(header) and header[i] == " ":
            i += 1
        starts.append(i)


def test_header_names_the_scenario_and_one_column_per_subject_that_ran():
    """The library and the baselines that ran are the columns, after the figure and its target."""
    text = render_table(sample_report())
    header = table_lines(text)[0].split()
    assert header == ["figure", "target", LIBRARY, "naive", "httpcaller"]
    assert "scenario outage <script>" in text.splitlines()[0]


def test_every_figure_is_a_row_with_its_values_right_aligned_under_their_column():
    """Each row's value cells end where their column's header ends: the table reads straight."""
    report = sample_report()
    lines = table_lines(render_table(report))
    header, body = lines[0], [line for line in lines[1:] if not set(line) <= {"-", " "}]
    ends = [header.index(name) + len(name) for name in (LIBRARY, "naive", "httpcaller")]
    rows = figure_rows(report)
    assert len(body) == len(rows)
    for line, row in zip(body, rows):
        line = line.ljust(ends[-1])  # the table trims trailing spaces
        for end, cell in zip(ends, row.cells):
            expected = cell.text + ({"good": "  ok", "bad": " BAD"}[cell.verdict.value]
                                    if cell.verdict else "    ")
            assert line[:end].endswith(expected), (line, expected)


def test_judged_figures_say_ok_or_bad_in_words():
    """Marks are words, not colours: the library's zero lost reads ok, naive's five BAD."""
    lines = table_lines(render_table(sample_report()))
    lost = next(line for line in lines if line.startswith("LOST"))
    assert lost.split()[-6:] == ["0", "ok", "5", "BAD", "0", "ok"]


def test_skipped_baselines_are_listed_with_their_reason():
    """A baseline that did not run is named under the table with why."""
    text = render_table(sample_report())
    assert "tenacity: not run: tenacity is not installed" in text


def test_subject_notes_are_printed_under_the_table():
    """A subject's notes (a run that timed out, a modelled baseline) follow the table."""
    report = sample_report()
    report.library.notes = ["the run timed out before every task settled"]
    lines = render_table(report).splitlines()
    assert f"{LIBRARY}: the run timed out before every task settled" in lines
    assert f"httpcaller: {HTTPCALLER_NOTE}" in lines


def test_control_characters_never_reach_the_terminal():
    """An escape sequence inside a report value cannot recolour or move the terminal."""
    text = render_table(sample_report())
    assert "\x1b" not in text
    assert all(ch in "\n" or unicodedata.category(ch)[0] != "C" for ch in text)


def test_wide_characters_keep_the_columns_aligned():
    """A baseline named in CJK characters still lines its values up under its header."""
    report = sample_report()
    wide = dataclasses.replace(report.baselines.pop("httpcaller"), name="\u6771\u4eac")
    report.baselines[wide.name] = wide
    lines = table_lines(render_table(report))
    assert len({width(line.rstrip()) for line in lines if line.startswith(("figure", "LOST"))
                }) == 1


def test_the_same_report_renders_the_same_table():
    """Deterministic: a copy of the report gives the same text, byte for byte."""
    report = sample_report()
    assert render_table(report) == render_table(copy.deepcopy(report))
