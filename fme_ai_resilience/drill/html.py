"""The drill's report as one self-contained HTML page: the figures side by side, then charts.

:func:`render_html` gives a single file that needs nothing else: inline CSS, inline SVG (no
script, no font, image or stylesheet to fetch), readable offline and from an attachment. The
summary table holds every figure, one column per subject (the library first), each judged
figure marked in colour and in words; baselines that did not run are listed with their reason.
Below it, the charts over time, one kind at a time, each subject's chart at least 640 px or
the page wide (at least half the page, its text at least 13 px) on shared scales (see
:mod:`fme_ai_resilience.drill.charts`). Every report value is escaped, and the same report
always gives the same page, byte for byte. The page is well-formed XML as well as HTML.
"""
from __future__ import annotations

from typing import Callable, List, Sequence

from .charts import (ai_calls_chart, backlog_chart, breaker_chart, escape, has_breaker,
                     has_level, has_photos, level_chart, photos_chart, scales_for, Scales)
from .figures import Row, Verdict, figure_rows, number, ran, seconds, skipped, subject_notes
from .report import LIBRARY, DrillReport, SubjectResult

__all__ = ["render_html", "CSS"]

#: The page's whole style sheet.
CSS = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222222;
       margin: 20px 24px; background: #ffffff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 22px 0 8px; border-bottom: 1px solid #dddddd; }
h3 { font-size: 14px; margin: 10px 0 2px; }
p.params { margin: 0; color: #444444; }
table.figures { border-collapse: collapse; font-variant-numeric: tabular-nums; }
table.figures th, table.figures td { padding: 2px 10px; border-bottom: 1px solid #eeeeee;
                                     text-align: right; white-space: nowrap; }
table.figures th[scope=row], table.figures td.target,
table.figures th.name { text-align: left; }
table.figures td.target { color: #555555; }
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
"""

_MARK_TEXT = {Verdict.GOOD: "\u2713 ok", Verdict.BAD: "\u2717 bad"}


def _params(report: DrillReport) -> str:
    outage = ("no outage" if report.outage is None
              else "outage " + " to ".join(number(t, 1) for t in report.outage) + " s")
    parts = [f"seed {report.seed}", report.size,
             f"{report.engines} engines", f"{report.backend} ledger",
             f"time scale {report.time_scale:g} s per production second",
             f"watermark {report.watermark}",
             f"probe bound {report.probe_bound}", outage,
             f"drain bound {seconds(report.drain_bound_s)}"]
    return " \u00b7 ".join(escape(p) for p in parts)


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
            f'<p class="legend">{_MARK_TEXT[Verdict.GOOD]}: within its target \u00b7 '
            f"{_MARK_TEXT[Verdict.BAD]}: misses it \u00b7 {escape(LIBRARY)} is the library; "
            "the other columns are the approaches FME users reach for today.</p>"]
    notes = [f'<li class="model"><strong>{escape(s.name)}</strong> models: '
             f'{escape(s.model)}</li>' for s in subjects if s.model]
    notes += [f'<li class="note"><strong>{escape(name)}</strong>: {escape(note)}</li>'
              for name, note in subject_notes(report)]
    notes += [f'<li class="skipped"><strong>{escape(s.name)}</strong> not run: '
              f"{escape(s.skipped)}</li>" for s in skipped(report)]
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
        out += _chart_row("Photos on the layer: analysed, in review, awaiting, skipped",
                          subjects, scales, photos_chart, has_photos, "no photos recorded")
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


def render_html(report: DrillReport) -> str:
    """The report as one self-contained HTML page (UTF-8 text; write it with that encoding)."""
    subjects = ran(report)
    names = ", ".join(s.name for s in subjects[1:]) or "no baseline"
    title = f"Drill {report.scenario}: {subjects[0].name if subjects else LIBRARY} vs {names}"
    lines = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8"/>',
             '<meta name="viewport" content="width=device-width, initial-scale=1"/>',
             f"<title>{escape(title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>",
             "<header>", f"<h1>Drill: {escape(report.scenario)}</h1>",
             f'<p class="params">{_params(report)}</p>', "</header>"]
    lines += _figures(report, subjects) + _timelines(report, subjects)
    lines += ["</body>", "</html>"]
    return "\n".join(lines) + "\n"
