"""The drill's HTML page: one self-contained file, figures side by side, inline SVG charts."""
from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ET

import pytest

from fme_ai_resilience.drill.charts import OUTCOME_COLOURS, STATE_COLOURS
from fme_ai_resilience.drill.figures import figure_rows, printable
from fme_ai_resilience.drill.html import render_html
from fme_ai_resilience.drill.invariants import targets, verdict
from fme_ai_resilience.drill.report import LIBRARY, Timeline
from fme_ai_resilience.drill.standins.vision import OUTCOMES

from helpers.drill_reports import (RUN_NOTE, HOSTILE_CAUSE, HOSTILE_REASON, HOSTILE_SCENARIO,
                                 HTTPCALLER_NOTE, ODD_OUTCOME, OUTAGE, sample_report,
                                 timeline)


RAN = (LIBRARY, "naive", "httpcaller")


def parse(page):
    """The page as an element tree: it is well-formed XML as well as HTML."""
    assert page.startswith("<!DOCTYPE html>\n")
    return ET.fromstring(page[len("<!DOCTYPE html>\n"):])


@pytest.fixture(scope="module")
def page():
    """The sample report rendered once."""
    return render_html(sample_report())


@pytest.fixture(scope="module")
def tree(page):
    """The sample page parsed."""
    return parse(page)


def charts(tree, subject=None, chart=None):
    return [svg for svg in tree.iter("svg")
            if (subject is None or svg.get("data-subject") == subject)
            and (chart is None or svg.get("data-chart") == chart)]


def text_of(element):
    return "".join(element.itertext())


def test_the_page_is_one_file_with_nothing_to_fetch(page, tree):
    """No script, stylesheet link, image, frame, URL or import: the file is all there is."""
    assert not re.search(r"<(script|link|img|iframe|object|embed|image|use|foreignObject)\b",
                         page, re.IGNORECASE)
    assert "url(" not in page and "@import" not in page
    for element in tree.iter():
        for name, value in element.attrib.items():
            assert name not in ("src", "href", "xlink:href", "srcset", "action"), name
            assert not re.match(r"\s*(https?:|//|file:|data:|javascript:)", value, re.I), value
    assert tree.find("head/style") is not None
    assert tree.find("head/meta").get("charset") == "utf-8"


def test_the_title_names_the_scenario_and_the_subjects(tree):
    """The window title says what ran: scenario, library and the baselines compared."""
    title = tree.find("head/title").text
    assert HOSTILE_SCENARIO in title and LIBRARY in title and "naive" in title


def test_report_text_is_escaped_everywhere(page, tree):
    """Markup in report values stays text: escaped in the source, intact when read back."""
    assert "<script>" not in page and "<b>timeout" not in page and "<teapot>" not in page
    assert "&lt;script&gt;" in page
    text = text_of(tree)
    assert HOSTILE_REASON in text
    assert ODD_OUTCOME in text
    assert "<b>timeout</b>" in text and "\x1b" not in page


def test_each_subject_that_ran_has_its_charts_and_only_those(tree):
    """Backlog and AI calls for everyone; the breaker and level only where a subject has them."""
    found = {s: sorted(svg.get("data-chart") for svg in charts(tree, s)) for s in RAN}
    assert found == {LIBRARY: ["ai_calls", "backlog", "breaker", "level", "photos"],
                     "naive": ["ai_calls", "backlog"], "httpcaller": ["ai_calls", "backlog"]}
    assert charts(tree, "tenacity") == []
    notes = [text_of(e) for e in tree.iter() if e.get("class") == "no-chart"]
    assert sum("no circuit breaker" in n for n in notes) == 2
    assert sum("no degradation ladder" in n for n in notes) == 2
    assert sum("no photos recorded" in n for n in notes) == 2


def test_every_chart_is_labelled_for_assistive_technology(tree):
    """Each SVG is an image with a title and an aria-label that says what it shows."""
    svgs = charts(tree)
    assert len(svgs) == 9
    for svg in svgs:
        assert svg.get("role") == "img"
        assert list(svg)[0].tag == "title" and svg.get("data-subject") in list(svg)[0].text
        assert svg.get("aria-label")
    backlog = charts(tree, LIBRARY, "backlog")[0].get("aria-label")
    assert "peak 60" in backlog and "watermark 40" in backlog


def test_the_skipped_baseline_shows_its_reason(tree):
    """The baseline that did not run is named with why, where the figures are."""
    notes = [text_of(li) for li in tree.iter("li") if li.get("class") == "skipped"]
    assert notes == [f"tenacity not run: {HOSTILE_REASON}"]


def test_subject_notes_are_shown_with_the_figures():
    """Each note of a subject that ran is listed under the figures, with the subject's name."""
    report = sample_report()
    report.library.notes = ["the run timed out before every task settled"]
    page = render_html(report)
    notes = [text_of(li) for li in parse(page).iter("li") if li.get("class") == "note"]
    assert notes == [f"{LIBRARY}: the run timed out before every task settled",
                     f"httpcaller: {HTTPCALLER_NOTE}"]
    assert "<i>not</i>" not in page


def figures(tree):
    """The summary table as {row key: {subject: (text, verdict class or None)}}."""
    table = next(t for t in tree.iter("table") if t.get("class") == "figures")
    verdict = lambda td: next((c for c in (td.get("class") or "").split()  # noqa: E731
                               if c in ("good", "bad")), None)
    return {tr.get("data-key"): {td.get("data-subject"): (text_of(td).strip(), verdict(td))
                                 for td in tr.iter("td") if td.get("data-subject")}
            for tr in table.iter("tr") if tr.get("data-key")}


def test_the_figures_table_holds_every_figure_side_by_side(tree):
    """Each figure is a row with one cell per subject, the library's column first."""
    rows = figures(tree)
    for key in ("analysed", "accepted", "review", "flagged", "awaiting", "manual_review",
                "notified", "lost", "unanalysable", "facts", "submitted",
                "dead:format", f"dead:{printable(HOSTILE_CAUSE)}", "duplicate_analyses",
                "conflicting_writes", "duplicate_rows", "layer_edits", "ai_calls",
                "ai_calls_per_analysed", "outage_ai_calls", "recovery_lag_s",
                "peak_concurrent_calls", "peak_backlog", "breaker_transitions",
                "degradation_levels", "drain_s", "ai_spend"):
        assert list(rows[key]) == list(RAN), key
    assert rows["ai_calls"][LIBRARY][0] == "113" and rows["ai_calls"]["naive"][0] == "260"
    assert rows["drain_s"][LIBRARY] == ("32.0 s", None)


def test_good_and_bad_figures_are_marked_in_colour_and_in_words(tree):
    """A judged cell carries a class and a word: the library's zero lost is good, naive's bad."""
    rows = figures(tree)
    assert rows["lost"][LIBRARY] == ("0 \u2713 ok", "good")
    assert rows["lost"]["naive"] == ("5 \u2717 bad", "bad")
    assert rows["peak_concurrent_calls"]["httpcaller"][1] == "bad"
    assert rows["ai_calls"][LIBRARY][1] is None
    library_cells = [td for td in tree.iter("td") if td.get("data-subject") == LIBRARY]
    assert all("library" in td.get("class", "").split() for td in library_cells)


def test_outcomes_are_stacked_with_one_colour_each_and_a_legend(tree):
    """Each outcome's bars share its colour, the legend names it with its calls, bars stack."""
    svg = charts(tree, LIBRARY, "ai_calls")[0]
    legend = {g.get("data-outcome"): (g.find("rect").get("fill"), text_of(g))
              for g in svg.iter("g") if g.get("class") == "legend-entry"}
    assert legend == {"ok": (OUTCOME_COLOURS["ok"], "ok (110 calls)"),
                      "server_error": (OUTCOME_COLOURS["server_error"], "server_error (2 calls)"),
                      "outage": (OUTCOME_COLOURS["outage"], "outage (3 calls)")}
    bars = [r for r in svg.iter("rect") if r.get("class") == "bar"]
    assert {r.get("fill") for r in bars if r.get("data-outcome") == "ok"} == {
        OUTCOME_COLOURS["ok"]}
    at_4 = sorted((r for r in bars if r.get("data-t") == "4"), key=lambda r: -float(r.get("y")))
    assert [r.get("data-outcome") for r in at_4] == ["ok", "server_error"]
    ok, error = (float(r.get("height")) for r in at_4)
    assert ok == pytest.approx(4 * error, abs=0.02)
    assert float(at_4[1].get("y")) + error == pytest.approx(float(at_4[0].get("y")), abs=0.02)
    odd = charts(tree, "httpcaller", "ai_calls")[0]
    assert ODD_OUTCOME in [g.get("data-outcome") for g in odd.iter("g")
                           if g.get("class") == "legend-entry"]


def test_every_stand_in_outcome_and_breaker_state_has_its_own_colour():
    """No two outcomes (and no two breaker states) share a colour."""
    assert set(OUTCOMES) <= set(OUTCOME_COLOURS)
    assert len(set(OUTCOME_COLOURS.values())) == len(OUTCOME_COLOURS)
    assert set(STATE_COLOURS) == {"CLOSED", "HALF_OPEN", "OPEN"}
    assert len(set(STATE_COLOURS.values())) == 3


def x_span(svg, element):
    """The time span [t0, t1] an element covers, from the chart's data-x0/-x1 calibration."""
    x0, x1 = float(svg.get("data-plot-x0")), float(svg.get("data-plot-x1"))
    t0, t1 = float(svg.get("data-t0")), float(svg.get("data-t1"))
    left = float(element.get("x"))
    right = left + float(element.get("width"))
    to_t = lambda x: t0 + (x - x0) * (t1 - t0) / (x1 - x0)  # noqa: E731
    return to_t(left), to_t(right)


def test_the_outage_is_shaded_on_every_time_chart(tree):
    """Every chart over time shades the outage window, at its time, labelled in words."""
    for svg in charts(tree):
        shades = [r for r in svg.iter("rect") if r.get("class") == "outage"]
        assert len(shades) == 1, svg.get("data-chart")
        assert x_span(svg, shades[0]) == pytest.approx(tuple(OUTAGE), abs=0.05)
        assert "outage" in [t.text for t in svg.iter("text")]


def test_the_backlog_is_drawn_against_the_watermark_on_one_shared_scale(tree):
    """The watermark is drawn and labelled; one y scale is shared by every subject's backlog."""
    scales = set()
    for subject in RAN:
        svg = charts(tree, subject, "backlog")[0]
        [line] = [line for line in svg.iter("line") if line.get("class") == "watermark"]
        labels = " ".join(t.text or "" for t in svg.iter("text"))
        assert "watermark 40" in labels and "ceiling" not in labels
        assert svg.find(".//path[@class='backlog']") is not None
        scales.add((line.get("y1"), svg.get("data-t1")))
    assert len(scales) == 1


def test_a_guide_line_far_above_the_backlog_is_not_drawn_on_its_axis():
    """A watermark of 100,000 against a backlog of 100 is said in words, never drawn at the
    top of a 0-100 axis."""
    report = sample_report()
    report.watermark = 100_000
    svg = charts(parse(render_html(report)), LIBRARY, "backlog")[0]
    assert [line for line in svg.iter("line") if line.get("class") == "watermark"] == []
    assert "watermark 100000 (far above this axis, not drawn)" in svg.get("aria-label")
    ticks = [float(t.text) for t in svg.iter("text") if t.get("class") == "tick"
             and not t.text.endswith(" s")]
    assert max(ticks) <= 200


def test_the_photos_chart_speaks_the_tables_words_and_ends_at_its_figures(tree):
    """One line per state the run reached, each named as the table's row is, and each
    line's last value (in its legend) is that row's figure."""
    svg = charts(tree, LIBRARY, "photos")[0]
    series = [p.get("data-series") for p in svg.iter("path") if p.get("class") == "photos"]
    assert series == ["accepted", "in review (under the threshold)", "awaiting analysis"]
    rows = {row.label: row for row in figure_rows(sample_report())}
    legend = [text_of(g) for g in svg.iter("g") if g.get("class") == "legend-entry"]
    assert legend == [f"{name}: {rows[name].cells[0].text}" for name in series]
    assert legend == ["accepted: 80", "in review (under the threshold): 12",
                      "awaiting analysis: 6"]


def test_charts_are_half_the_page_wide_with_text_of_twelve_pixels_at_least(page):
    """A chart column is never narrower than the chart's own 640 units (or the page): as
    many to a row as fit, so each is at least half the page wide and its 13-unit text at
    least 13 px."""
    assert "svg.chart text { font: 13px" in page and "max-width: 440px" not in page
    assert "grid-template-columns: repeat(auto-fill, minmax(min(640px, 100%), 1fr))" in page
    views = {float(v.split()[2]) for v in re.findall(r'viewBox="([^"]+)"', page)}
    assert views == {640.0}
    sizes = {int(px) for px in re.findall(r"font(?:-size)?: (\d+)px", page)}
    assert min(sizes) >= 12


def test_the_breaker_band_follows_the_states_in_time_order_with_labels(tree):
    """One band segment per run of a state, coloured and named; its legend names the states."""
    svg = charts(tree, LIBRARY, "breaker")[0]
    runs = [(r.get("data-state"), x_span(svg, r)) for r in svg.iter("rect")
            if r.get("class") == "state"]
    assert [s for s, _ in runs] == ["CLOSED", "OPEN", "HALF_OPEN", "OPEN", "HALF_OPEN", "CLOSED"]
    assert runs[1][1] == pytest.approx((11.0, 15.0), abs=0.05)
    assert {r.get("fill") for r in svg.iter("rect") if r.get("data-state") == "OPEN"} == {
        STATE_COLOURS["OPEN"]}
    legend = [text_of(g) for g in svg.iter("g") if g.get("class") == "legend-entry"]
    assert legend == ["CLOSED", "HALF_OPEN", "OPEN"]
    assert "OPEN" in [t.text for t in svg.iter("text") if t.get("class") == "state-label"]


def test_the_degradation_level_is_a_step_line_over_named_levels(tree):
    """The level path steps through L0, L2, L1 and back to L0; the axis names the levels."""
    svg = charts(tree, LIBRARY, "level")[0]
    path = svg.find(".//path[@class='level']").get("d")
    ys = [float(y) for y in re.findall(r"[ML][\d.]+,([\d.]+)", path)]
    distinct = []
    for y in ys:
        if not distinct or distinct[-1] != y:
            distinct.append(y)
    assert len(distinct) == 4 and distinct[0] == distinct[3]
    assert distinct[1] < distinct[2] < distinct[0]  # L2 above L1 above L0 (SVG y grows down)
    axis = [t.text for t in svg.iter("text")]
    assert "L0 normal" in axis and "L4 paused" in axis


def test_a_subject_without_a_timeline_says_so_instead_of_charts():
    """No timeline recorded: a note in place of the charts, the figures still shown."""
    report = sample_report()
    report.baselines["naive"].timeline = None
    tree = parse(render_html(report))
    assert charts(tree, "naive") == []
    notes = [text_of(e) for e in tree.iter() if e.get("class") == "no-chart"]
    assert any("no timeline recorded" in n for n in notes)
    assert figures(tree)["lost"]["naive"][0].startswith("5")


def test_odd_timelines_render_without_error():
    """A zero step, uneven series, non-finite or negative numbers and no outage still render."""
    report = sample_report()
    report.outage = None
    report.library.timeline = Timeline(step_s=0.0, t=[0.0, 1.0, float("nan")],
                                       backlog=[1, -3], in_flight=[], breaker=["CLOSED"],
                                       level=[7, None, 1], ai_calls={"ok": [1, 2, 3, 4]})
    report.baselines["naive"].timeline = timeline(backlog=[], ai_calls={})
    report.library.p95_end_to_end_s = float("inf")
    tree = parse(render_html(report))
    assert all(not [r for r in svg.iter("rect") if r.get("class") == "outage"]
               for svg in charts(tree))
    for svg in charts(tree):
        for element in svg.iter():
            for name in ("x", "y", "width", "height"):
                value = element.get(name)
                assert value is None or re.fullmatch(r"-?\d+(\.\d+)?", value), (name, value)


def test_the_same_report_renders_the_same_page():
    """Deterministic: a copy of the report gives the same page, byte for byte."""
    report = sample_report()
    assert render_html(report) == render_html(copy.deepcopy(report))


def test_the_page_opens_with_the_verdict_the_targets_and_the_speed(tree):
    """Right after the heading: the verdict line the command ends with, every target of the
    library met or missed in words, then the speed side by side; the table comes after."""
    body = tree.find("body")
    sections = [el for el in body if el.tag == "section"]
    assert [s.get("id") for s in sections] == ["verdict", "figures", "timelines"]
    verdict_section = sections[0]
    assert "fail" in verdict_section.get("class").split()
    report = sample_report()
    line = next(p for p in verdict_section.iter("p") if p.get("class") == "verdict-line")
    assert text_of(line) == printable(verdict([report]))
    checklist = next(u for u in verdict_section.iter("ul") if u.get("class") == "checklist")
    items = [(li.get("class"), text_of(li)) for li in checklist.iter("li")]
    assert items == [("met" if c.met else "missed",
                      ("\u2713 ok " if c.met else "\u2717 bad ") + printable(c.name))
                     for c in targets(report)]
    speed = next(u for u in verdict_section.iter("ul") if u.get("class") == "speed")
    lines = [text_of(li) for li in speed.iter("li")]
    assert lines[0].startswith("drain 32.0 s beside httpcaller 36.0 s")
    assert any("analysed more photos than the library" in line for line in lines)


def test_the_runs_notes_are_shown_with_the_figures(tree):
    """The run's notes (the timeouts raised to the floor, the schedules) are on the page."""
    notes = [text_of(li) for li in tree.iter("li") if li.get("class") == "run-note"]
    assert notes == [f"the run: {printable(RUN_NOTE)}"]
