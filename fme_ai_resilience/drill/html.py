"""The drill's report as one self-contained HTML page: the verdict, the targets and the
speed first, then the figures side by side, then charts.

:func:`render_html` gives a single file that needs nothing else: inline CSS, inline SVG (no
script, no font, image or stylesheet to fetch), readable offline and from an attachment. It
opens with the verdict (the line the command ends with) and the library's targets, each met
or missed, then the speed side by side with the strongest peer. The summary table holds
every figure, one column per subject (the library first), each judged figure marked in
colour and in words, and fits a 1400 px window with every subject's column (labels and
targets wrap, numbers do not); baselines that did not run are listed with their reason.
Below it, the charts over time, one kind at a time, each subject's chart at least 640 px or
the page wide (at least half the page, its text at least 13 px) on shared scales (see
:mod:`fme_ai_resilience.drill.charts`). Every report value is escaped, and the same report
always gives the same page, byte for byte. The page is well-formed XML as well as HTML.
"""
from __future__ import annotations

from typing import Callable, List, Sequence

from .charts import (ai_calls_chart, backlog_chart, breaker_chart, escape, has_breaker,
                     has_level, has_photos, level_chart, photos_chart, scales_for, Scales)
from .figures import Row, Standing, figure_rows, number, ran, seconds, skipped, subject_notes
from .invariants import targets, verdict
from .report import LIBRARY, DrillReport, SubjectResult
from .speed import comparison, plainly
from .table import CHECKLIST_TITLE, SPEED_TITLE

__all__ = ["render_html", "render_pages", "CSS", "VERDICT_COLOURS"]

#: The verdict banner's background and edge, when every target is met and when one is not.
VERDICT_COLOURS = {True: ("#cfe8cf", "#2e7d32"), False: ("#f3c6c0", "#b71c1c")}

#: The page's whole style sheet.
CSS = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222222;
       margin: 20px 24px; background: #ffffff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 22px 0 8px; border-bottom: 1px solid #dddddd; }
h3 { font-size: 14px; margin: 10px 0 2px; }
p.params { margin: 0; color: #444444; }
table.figures { border-collapse: collapse; font-variant-numeric: tabular-nums;
                 font-size: 13px; }
table.figures th, table.figures td { padding: 2px 6px; border-bottom: 1px solid #eeeeee;
                                     text-align: right; white-space: nowrap; }
table.figures th[scope=row], table.figures td.target,
table.figures th.name { text-align: left; }
table.figures th[scope=row] { white-space: normal; min-width: 160px; max-width: 230px; }
table.figures td.target { color: #555555; white-space: normal; min-width: 120px;
                          max-width: 180px; }
table.figures tr.part th[scope=row] { padding-left: 26px; font-weight: normal; color: #444444; }
table.figures th.library, table.figures td.library { border-left: 2px solid #1f4e79;
                                                     border-right: 2px solid #1f4e79; }
td.good { background: #dcefdc; }
td.bad { background: #f6d5d1; font-weight: bold; }
span.mark { font-size: 12px; }
ul.notes { padding-left: 18px; }
li.skipped { color: #6b3a00; }
.grid { display: grid; gap: 10px 0; align-items: start;
        grid-template-columns: repeat(auto-fill, minmax(min(640px, 100%), 1fr)); }
h3.row-title { margin-top: 18px; }
.grid figure { margin: 0; padding: 0 12px 0 0; min-width: 0; }
figcaption.subject { font-weight: bold; font-size: 14px; }
svg.chart { width: 100%; height: auto; display: block; }
svg.chart text { font: 13px sans-serif; fill: #333333; }
svg.chart text.caption { font-weight: bold; }
svg.chart text.state-label { font-weight: bold; fill: #111111; }
p.no-chart { color: #666666; font-style: italic; margin: 8px 0; }
section.verdict { padding: 8px 14px; margin: 12px 0; border-left: 8px solid; }
section.verdict p.verdict-line { font-size: 17px; font-weight: bold; margin: 2px 0 6px; }
section.verdict h2 { font-size: 15px; border-bottom: none; margin: 10px 0 4px; }
ul.checklist, ul.speed { margin: 0; padding-left: 4px; list-style: none; }
ul.checklist li.missed { font-weight: bold; color: #8b0000; }
p.run-note { color: #444444; margin: 4px 0; }
""" + "".join(f"section.verdict.{'pass' if met else 'fail'} {{ background: {fill}; "
              f"border-color: {edge}; }}\n" for met, (fill, edge) in VERDICT_COLOURS.items())

_MARK_TEXT = {Standing.GOOD: "\u2713 ok", Standing.BAD: "\u2717 bad"}


def _params(report: DrillReport) -> str:
    outage = ("no outage" if report.outage is None
              else "outage " + " to ".join(number(t, 1) for t in report.outage) + " s")
    parts = [f"seed {report.seed}", report.size,
             f"{report.engines} engines", f"{report.backend} ledger",
             f"time scale {report.time_scale:g} s per production second",
             f"watermark {report.watermark}",
             f"probe bound {report.probe_bound}", outage,
             f"the drain's physical limit {seconds(report.drain_limit_s)} "
             f"({report.limit_why})"]
    return " \u00b7 ".join(escape(p) for p in parts)


def _verdict(report: DrillReport) -> List[str]:
    """The page's opening: the verdict line, the library's targets, the speed."""
    checks = targets(report)
    met = all(c.met for c in checks)
    items = [f'<li class="{"met" if c.met else "missed"}">'
             f'{_MARK_TEXT[Standing.GOOD if c.met else Standing.BAD]} {escape(c.name)}</li>'
             for c in checks]
    speed = [f"<li>{escape(line)}</li>" for line in comparison(report).lines]
    said = plainly(report)
    if said is not None:
        speed.append(f'<li class="plainly">{escape(said)}</li>')
    return [f'<section id="verdict" class="verdict {"pass" if met else "fail"}">',
            f'<p class="verdict-line">{escape(verdict([report]))}</p>',
            f"<h2>{escape(CHECKLIST_TITLE.rstrip(':'))}</h2>",
            '<ul class="checklist">', *items, "</ul>",
            f"<h2>{escape(SPEED_TITLE.rstrip(':'))}</h2>",
            '<ul class="speed">', *speed, "</ul>", "</section>"]


def _figure_row(row: Row, subjects: Sequence[SubjectResult], library: SubjectResult) -> str:
    cells = [f'<th scope="row">{escape(row.label)}</th>',
             f'<td class="target">{escape(row.target)}</td>']
    for subject, cell in zip(subjects, row.cells):
        classes = [c for c in (cell.verdict.value if cell.verdict else "",
                               "library" if subject is library else "") if c]
        attr = f' class="{" ".join(classes)}"' if classes else ""
        mark = (f' <span class="mark">{_MARK_TEXT[cell.verdict]}</span>' if cell.verdict
                else "")
        cells.append(f'<td{attr} data-subject="{escape(subject.name)}">'
                     f"{escape(cell.text)}{mark}</td>")
    part = ' class="part"' if row.depth else ""
    return f'<tr data-key="{escape(row.key)}"{part}>{"".join(cells)}</tr>'


def _figures(report: DrillReport, subjects: Sequence[SubjectResult]) -> List[str]:
    head = ['<th scope="col" class="name">figure</th>', '<th scope="col" class="name">target</th>']
    for subject in subjects:
        attr = ' class="library"' if subject is report.library else ""
        head.append(f'<th scope="col"{attr}>{escape(subject.name)}</th>')
    out = ['<section id="figures">', "<h2>Figures</h2>", '<table class="figures">',
           f"<thead><tr>{''.join(head)}</tr></thead>", "<tbody>"]
    out += [_figure_row(row, subjects, report.library) for row in figure_rows(report)]
    out += ["</tbody>", "</table>",
            f'<p class="legend">{_MARK_TEXT[Standing.GOOD]}: within its target \u00b7 '
            f"{_MARK_TEXT[Standing.BAD]}: misses it \u00b7 {escape(LIBRARY)} is the library; "
            "the other columns are the approaches FME users reach for today.</p>"]
    notes = [f'<li class="model"><strong>{escape(s.name)}</strong> models: '
             f'{escape(s.model)}</li>' for s in subjects if s.model]
    notes += [f'<li class="note"><strong>{escape(name)}</strong>: {escape(note)}</li>'
              for name, note in subject_notes(report)]
    notes += [f'<li class="skipped"><strong>{escape(s.name)}</strong> not run: '
              f"{escape(s.skipped)}</li>" for s in skipped(report)]
    notes += [f'<li class="run-note"><strong>the run</strong>: {escape(note)}</li>'
              for note in report.notes]
    if notes:
        out += ['<ul class="notes">', *notes, "</ul>"]
    out.append("</section>")
    return out


_Chart = Callable[[SubjectResult, Scales], str]


def _chart_row(title: str, subjects: Sequence[SubjectResult], scales: Scales, chart: _Chart,
               has: Callable[[SubjectResult], bool], missing: str) -> List[str]:
    """One kind of chart for every subject: as many to a row as fit at 640 px each, so a
    chart is never drawn smaller than its own size (its text 13 px) nor narrower than half
    the page."""
    out = [f'<h3 class="row-title">{escape(title)}</h3>', '<div class="grid">']
    for subject in subjects:
        caption = f'<figcaption class="subject">{escape(subject.name)}</figcaption>'
        if subject.timeline is None:
            out.append(f'<figure>{caption}<p class="no-chart">no timeline recorded</p></figure>')
        elif not has(subject):
            out.append(f'<figure>{caption}<p class="no-chart">{escape(missing)}</p></figure>')
        else:
            out.append(f"<figure>{caption}{chart(subject, scales)}</figure>")
    out.append("</div>")
    return out


def _timelines(report: DrillReport, subjects: Sequence[SubjectResult]) -> List[str]:
    if not subjects:
        return []
    scales = scales_for(report, subjects)
    out = ['<section id="timelines">', "<h2>Over time</h2>",
           f'<p class="params">Time in seconds of the run ({escape(f"{report.time_scale:g}")} s '
           "of run per production second); every chart on the same scales; the grey band is "
           "the Vision AI outage.</p>"]
    always: Callable[[SubjectResult], bool] = lambda s: True  # noqa: E731
    if any(has_photos(s) for s in subjects):
        out += _chart_row("Photos by the judge's reading of the layer: the table's states "
                          "over time", subjects, scales, photos_chart, has_photos,
                          "no photos recorded")
    out += _chart_row("Backlog against the watermark", subjects, scales, backlog_chart,
                      always, "")
    out += _chart_row("AI calls per second, by outcome", subjects, scales, ai_calls_chart,
                      always, "")
    if any(has_breaker(s) for s in subjects):
        out += _chart_row("Circuit breaker state", subjects, scales, breaker_chart,
                          has_breaker, "no circuit breaker")
    if any(has_level(s) for s in subjects):
        out += _chart_row("Degradation level", subjects, scales, level_chart, has_level,
                          "no degradation ladder")
    out += ["</section>"]
    return out


def _document(title: str, body: List[str]) -> str:
    lines = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8"/>',
             '<meta name="viewport" content="width=device-width, initial-scale=1"/>',
             f"<title>{escape(title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>",
             *body, "</body>", "</html>"]
    return "\n".join(lines) + "\n"


def _scenario(report: DrillReport, heading: str) -> List[str]:
    subjects = ran(report)
    return (["<header>", f"<{heading}>Drill: {escape(report.scenario)}</{heading}>",
             f'<p class="params">{_params(report)}</p>', "</header>"]
            + _verdict(report) + _figures(report, subjects) + _timelines(report, subjects))


def render_html(report: DrillReport) -> str:
    """The report as one self-contained HTML page (UTF-8 text; write it with that encoding)."""
    subjects = ran(report)
    names = ", ".join(s.name for s in subjects[1:]) or "no baseline"
    title = f"Drill {report.scenario}: {subjects[0].name if subjects else LIBRARY} vs {names}"
    return _document(title, _scenario(report, "h1"))


def render_pages(reports: Sequence[DrillReport]) -> str:
    """Several scenarios' reports (``drill --scenario all``) as one page: the verdict over
    all of them first, then each scenario as :func:`render_html` shows it."""
    if len(reports) == 1:
        return render_html(reports[0])
    met = all(c.met for r in reports for c in targets(r))
    body = ["<header><h1>Drill: every scenario</h1></header>",
            f'<section id="verdict" class="verdict {"pass" if met else "fail"}">',
            f'<p class="verdict-line">{escape(verdict(list(reports)))}</p>', "</section>"]
    for report in reports:
        body += [f'<article class="scenario" id="scenario-{escape(report.scenario)}">',
                 *_scenario(report, "h2"), "</article>"]
    return _document("Drill: every scenario", body)
