"""The drill page's charts over time, as inline SVG: no script, no external resource.

Up to five charts per subject, drawn on scales every subject shares (:func:`scales_for`) so
they compare at a glance: the photos in each of the judge's states over time, named as the
table names them (accepted, in review, awaiting analysis, manual review, a person told the
cause), so the last point of each line is the table's figure; the backlog (against the watermark, drawn only where it fits the axis), the AI
calls per second stacked by outcome (one colour each, with a legend naming each outcome and its
calls), the breaker state as a band and the degradation level as a step line. Text is 13
units high in a 640-unit-wide chart that the page shows at least half its width. Every chart
shades the outage window, has a ``<title>`` and an ``aria-label`` that says in words what it
shows, and labels its series in text as well as colour. Report text is escaped; numbers that
are not finite are left out, so odd timelines still draw.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..core.resilience.degrade import Level
from .figures import STATE_LABELS, printable
from .report import DrillReport, SubjectResult, Timeline

__all__ = ["OUTCOME_COLOURS", "EXTRA_COLOURS", "STATE_COLOURS", "OTHER_STATE_COLOUR",
           "BACKLOG_LINE", "BACKLOG_FILL", "WATERMARK_COLOUR", "LEVEL_COLOUR", "PHOTO_COLOURS",
           "OUTAGE_FILL", "MAX_BARS", "Scales", "scales_for", "outcome_palette", "escape",
           "has_breaker", "has_level", "has_photos", "backlog_chart", "ai_calls_chart",
           "breaker_chart", "level_chart", "photos_chart"]

#: One colour per stand-in outcome (Okabe-Ito first: told apart under colour blindness).
OUTCOME_COLOURS = {"ok": "#009e73", "server_error": "#d55e00", "html_502": "#e69f00",
                   "truncated": "#cc79a7", "rate_limited": "#f0e442", "outage": "#333333",
                   "drift": "#56b4e9", "constant": "#0072b2", "bad_request": "#8c564b",
                   "unauthorized": "#9467bd"}
#: Colours for outcomes no stand-in names, given out in sorted order of their names.
EXTRA_COLOURS = ("#7f7f7f", "#17becf", "#bcbd22", "#aec7e8", "#ff9896", "#c5b0d5")
STATE_COLOURS = {"CLOSED": "#a6dba0", "HALF_OPEN": "#fdb863", "OPEN": "#d73027"}
OTHER_STATE_COLOUR = "#bdbdbd"
BACKLOG_LINE, BACKLOG_FILL = "#1f4e79", "#bcd7ee"
WATERMARK_COLOUR = "#b8860b"
#: The photos chart's series: the judge's states, as the table names them.
PHOTO_COLOURS = {STATE_LABELS["ACCEPTED"]: "#009e73", STATE_LABELS["REVIEW"]: "#0072b2",
                 STATE_LABELS["REVIEWED"]: "#56b4e9",
                 STATE_LABELS["AWAITING_ANALYSIS"]: "#e69f00",
                 STATE_LABELS["MANUAL_REVIEW"]: "#d55e00", STATE_LABELS["notified"]: "#cc79a7"}
LEVEL_COLOUR = "#7b3294"
OUTAGE_FILL = "#e4e4e4"
#: The most bars the AI-call chart draws; longer timelines are summed into wider steps.
MAX_BARS = 240

_WIDTH, _LEFT, _RIGHT = 640.0, 128.0, 16.0
_AXIS, _GRID = "#555555", "#eeeeee"
_CHAR_W = 7.4  # a 13 px sans-serif character, for laying out labels
_GUIDE_IN_SCALE = 4.0  # the watermark widens the axis up to this x the highest backlog
_LARGEST = 1e15  # numbers past this are drawn at it: no overflow, no exponent in a coordinate
_LEVEL_TOP = int(max(Level))


def escape(text: object) -> str:
    """Report text ready for HTML or SVG: printable, then entity-escaped (quotes too)."""
    return html.escape(printable(text), quote=True)


def _f(value: float) -> str:
    """A coordinate: at most two decimals, never ``-0``, ``nan`` or an exponent."""
    text = f"{round(value, 2) + 0.0:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _finite(value: object) -> Optional[float]:
    """A number as a float within +-:data:`_LARGEST`; None when it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        number = math.copysign(_LARGEST, value)
    return min(max(number, -_LARGEST), _LARGEST) if math.isfinite(number) else None


@dataclass(frozen=True)
class _Samples:
    """A timeline's usable samples: start times, with each series aligned on them."""

    step: float
    t: Tuple[float, ...]
    index: Tuple[int, ...]  # the timeline index of each usable sample

    @classmethod
    def of(cls, timeline: Timeline) -> "_Samples":
        step = _finite(timeline.step_s)
        step = step if step is not None and step > 0 else 1.0
        kept = [(i, t) for i, t in enumerate(map(_finite, timeline.t)) if t is not None]
        return cls(step, tuple(t for _, t in kept), tuple(i for i, _ in kept))

    def raw(self, series: Sequence[object]) -> List[object]:
        """``series`` aligned on the usable samples, None where it falls short."""
        return [series[i] if i < len(series) else None for i in self.index]

    def values(self, series: Sequence[object]) -> List[Optional[float]]:
        """``series`` aligned on the samples as numbers at least 0, None where not finite."""
        return [None if v is None else max(v, 0.0) for v in map(_finite, self.raw(series))]

    @property
    def end(self) -> float:
        return max(self.t) + self.step if self.t else 0.0


@dataclass(frozen=True)
class Scales:
    """The ranges every subject's charts share: time, backlog, calls per second, level."""

    t1: float
    backlog_top: float
    rate_top: float
    outage: Optional[Tuple[float, float]]
    watermark: int
    palette: Dict[str, str]
    photos_top: float = 1.0


def _nice(value: float) -> float:
    """The smallest 1, 2 or 5 x a power of ten at or above ``value``."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value * (1 - 1e-9))


def _ticks(top: float, count: int, whole: bool) -> List[float]:
    step = _nice(top / count)
    step = max(step, 1.0) if whole else step
    return [i * step for i in range(int(top / step + 1e-9) + 1)]


def _top(value: float, whole: bool) -> float:
    value = min(value, _LARGEST) if math.isfinite(value) else _LARGEST
    step = _nice(value / 4) if value > 0 else 1.0
    step = max(step, 1.0) if whole else step
    return max(step, math.ceil(value / step - 1e-9) * step)


def outcome_palette(names: Iterable[str]) -> Dict[str, str]:
    """Each outcome's colour, the stand-in's outcomes in their order, then others sorted."""
    names = set(names)
    known = {n: c for n, c in OUTCOME_COLOURS.items() if n in names}
    extra = sorted(names - set(OUTCOME_COLOURS))
    return {**known, **{n: EXTRA_COLOURS[i % len(EXTRA_COLOURS)] for i, n in enumerate(extra)}}


def _buckets(samples: _Samples, calls: Dict[str, Sequence[object]]
             ) -> List[Tuple[float, float, Dict[str, float]]]:
    """``(start, end, calls per second by outcome)`` per bar, at most :data:`MAX_BARS`."""
    series = {name: [v or 0.0 for v in samples.values(values)] for name, values in calls.items()}
    size = max(1, math.ceil(len(samples.t) / MAX_BARS))
    out = []
    for first in range(0, len(samples.t), size):
        last = min(first + size, len(samples.t)) - 1
        span = (last - first + 1) * samples.step
        rates = {n: sum(v[first:last + 1]) / span for n, v in series.items()}
        out.append((samples.t[first], samples.t[last] + samples.step, rates))
    return out


def has_breaker(subject: SubjectResult) -> bool:
    """Whether the subject's timeline records a breaker state."""
    return subject.timeline is not None and any(s is not None for s in subject.timeline.breaker)


def has_photos(subject: SubjectResult) -> bool:
    """Whether the subject's timeline records the photos on the layer."""
    return subject.timeline is not None and bool(subject.timeline.photos)


def has_level(subject: SubjectResult) -> bool:
    """Whether the subject's timeline records a degradation level."""
    return subject.timeline is not None and any(
        _finite(v) is not None for v in subject.timeline.level)


def scales_for(report: DrillReport, subjects: Sequence[SubjectResult]) -> Scales:
    """The shared scales of ``subjects``' charts, from their timelines and the report's bounds."""
    ends, backlogs, rates, names = [0.0], [0.0], [0.0], set()
    for subject in subjects:
        if subject.timeline is None:
            continue
        samples = _Samples.of(subject.timeline)
        ends.append(samples.end)
        backlogs += [v for v in samples.values(subject.timeline.backlog) if v is not None]
        names |= {n for n, v in subject.timeline.ai_calls.items()
                  if any(x for x in samples.values(v))}
        rates += [sum(r.values()) for _, _, r in _buckets(samples, subject.timeline.ai_calls)]
    outage = None
    if report.outage is not None and len(report.outage) == 2:
        start, end = (_finite(v) for v in report.outage)
        if start is not None and end is not None and end > start:
            outage = (start, end)
            ends.append(end)
    watermark = _finite(report.watermark) or 0.0
    highest = max(backlogs)
    if watermark <= _GUIDE_IN_SCALE * max(highest, 1):
        highest = max(highest, watermark)
    photos = [sum(v[i] for v in s.timeline.photos.values() if i < len(v))
              for s in subjects if s.timeline is not None and s.timeline.photos
              for i in range(len(s.timeline.t))]
    return Scales(_top(max(ends), False), _top(highest * 1.05, True), _top(max(rates), False),
                  outage, report.watermark, outcome_palette(names),
                  _top(max(photos, default=1) * 1.05, True))


@dataclass(frozen=True)
class _Frame:
    """A plot area: time across, a value range up, in the chart's own pixels."""

    top: float
    height: float
    t1: float
    v1: float

    def x(self, t: float) -> float:
        return _LEFT + (_WIDTH - _LEFT - _RIGHT) * min(max(t, 0.0), self.t1) / self.t1

    def y(self, v: float) -> float:
        return self.top + self.height * (1 - min(max(v, 0.0), self.v1) / self.v1)

    @property
    def bottom(self) -> float:
        return self.top + self.height


def _svg(chart: str, subject: str, title: str, label: str, height: float, frame: _Frame,
         body: List[str]) -> str:
    attrs = (f'class="chart" role="img" viewBox="0 0 {_f(_WIDTH)} {_f(height)}" '
             f'width="{_f(_WIDTH)}" height="{_f(height)}" data-chart="{chart}" '
             f'data-subject="{escape(subject)}" aria-label="{escape(label)}" '
             f'data-plot-x0="{_f(_LEFT)}" data-plot-x1="{_f(_WIDTH - _RIGHT)}" '
             f'data-t0="0" data-t1="{_f(frame.t1)}"')
    return "\n".join([f"<svg {attrs}>", f"<title>{escape(title)}</title>", *body, "</svg>"])


def _text(x: float, y: float, text: str, anchor: str = "start", cls: str = "",
          fill: str = "") -> str:
    extra = (f' class="{cls}"' if cls else "") + (f' fill="{fill}"' if fill else "")
    return (f'<text x="{_f(x)}" y="{_f(y)}" text-anchor="{anchor}"{extra}>'
            f"{escape(text)}</text>")


def _rect(x: float, y: float, w: float, h: float, fill: str, extra: str = "",
          title: str = "") -> str:
    inner = f"<title>{escape(title)}</title>" if title else ""
    return (f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(max(w, 0.0))}" height="{_f(max(h, 0.0))}"'
            f' fill="{fill}"{extra}>{inner}</rect>')


def _time_axis(frame: _Frame, scales: Scales) -> List[str]:
    out = [f'<line x1="{_f(_LEFT)}" y1="{_f(frame.bottom)}" x2="{_f(_WIDTH - _RIGHT)}" '
           f'y2="{_f(frame.bottom)}" stroke="{_AXIS}"/>']
    for t in _ticks(scales.t1, 6, False):
        out.append(_text(frame.x(t), frame.bottom + 13, f"{_f(t)} s", "middle", "tick"))
    return out


def _value_axis(frame: _Frame, ticks: Iterable[float], unit: str) -> List[str]:
    out = []
    for v in ticks:
        y = frame.y(v)
        out.append(f'<line x1="{_f(_LEFT)}" y1="{_f(y)}" x2="{_f(_WIDTH - _RIGHT)}" '
                   f'y2="{_f(y)}" stroke="{_GRID}"/>')
        out.append(_text(_LEFT - 5, y + 4, f"{_f(v)}{unit}", "end", "tick"))
    return out


def _outage(frame: _Frame, scales: Scales) -> List[str]:
    if scales.outage is None or scales.outage[0] >= scales.t1:
        return []
    left, right = frame.x(scales.outage[0]), frame.x(scales.outage[1])
    start, end = (f"{_f(v)} s" for v in scales.outage)
    return [_rect(left, frame.top, right - left, frame.height, OUTAGE_FILL, ' class="outage"',
                  f"Vision AI outage {start} to {end}"),
            _text((left + right) / 2, frame.top - 4, "outage", "middle", "outage-label")]


def _legend(y: float, entries: Sequence[Tuple[Tuple[str, str], str, str]]
            ) -> Tuple[List[str], float]:
    """``((attribute, key), colour, text)`` swatches in rows from ``y``: them and the end."""
    out, x = [], _LEFT
    for key, colour, text in entries:
        shown = text if len(text) <= 40 else text[:39] + "\u2026"
        width = 16 + _CHAR_W * len(shown) + 12
        if x + width > _WIDTH - _RIGHT and x > _LEFT:
            x, y = _LEFT, y + 16
        out.append(f'<g class="legend-entry" data-{key[0]}="{escape(key[1])}">'
                   + _rect(x, y - 9, 11, 11, colour, ' stroke="#333333" stroke-width="0.5"')
                   + _text(x + 15, y, shown) + "</g>")
        x += width
    return out, y + 8


def _runs(samples: _Samples, values: Sequence[object]) -> List[Tuple[object, float, float]]:
    """Consecutive samples of one value (aligned on the samples) as ``(value, start, end)``;
    None ends a run."""
    runs: List[Tuple[object, float, float]] = []
    for t, value in zip(samples.t, values):
        if value is not None and runs and runs[-1][0] == value and abs(runs[-1][2] - t) < 1e-9:
            runs[-1] = (value, runs[-1][1], t + samples.step)
        elif value is not None:
            runs.append((value, t, t + samples.step))
    return runs


def _spans(runs: Sequence[Tuple[object, float, float]],
           name: Callable[[object], str] = str) -> str:
    text = ", ".join(f"{name(v)} {_f(a)}-{_f(b)} s" for v, a, b in runs[:12])
    return text + (", ..." if len(runs) > 12 else "")


def backlog_chart(subject: SubjectResult, scales: Scales) -> str:
    """The subject's backlog over time, with the watermark where it fits the axis."""
    frame = _Frame(28.0, 120.0, scales.t1, scales.backlog_top)
    samples = _Samples.of(subject.timeline)  # type: ignore[arg-type]
    points = [(frame.x(t), frame.y(v)) for t, v in
              zip(samples.t, samples.values(subject.timeline.backlog)) if v is not None]
    body = _outage(frame, scales) + _value_axis(frame, _ticks(frame.v1, 4, True), "")
    peak = "no samples"
    if points:
        line = " ".join(f"{_f(x)},{_f(y)}" for x, y in points)
        body.append(f'<path class="backlog-area" d="M{_f(points[0][0])},{_f(frame.bottom)} '
                    f'L{line} L{_f(points[-1][0])},{_f(frame.bottom)} Z" fill="{BACKLOG_FILL}"/>')
        body.append(f'<path class="backlog" d="M{line}" fill="none" stroke="{BACKLOG_LINE}" '
                    f'stroke-width="2"/>')
        values = [v for v in samples.values(subject.timeline.backlog) if v is not None]
        at = samples.t[samples.values(subject.timeline.backlog).index(max(values))]
        peak = f"peak {_f(max(values))} at {_f(at)} s"
    fits = scales.watermark <= frame.v1
    if fits:
        y = frame.y(scales.watermark)
        body.append(f'<line class="watermark" x1="{_f(_LEFT)}" y1="{_f(y)}" '
                    f'x2="{_f(_WIDTH - _RIGHT)}" y2="{_f(y)}" stroke="{WATERMARK_COLOUR}" '
                    'stroke-width="1.5" stroke-dasharray="6 3"/>')
        body.append(_text(_WIDTH - _RIGHT - 2, y - 3, f"watermark {scales.watermark}", "end",
                          "watermark-label", WATERMARK_COLOUR))
    body += _time_axis(frame, scales)
    body.append(_text(_LEFT, 14, "backlog (unfinished work)", cls="caption"))
    label = (f"Backlog of {subject.name} over time: {peak}; watermark {scales.watermark}"
             + ("" if fits else " (far above this axis, not drawn)") + _outage_words(scales))
    return _svg("backlog", subject.name, f"Backlog over time: {subject.name}", label,
                frame.bottom + 22, frame, body)


def _outage_words(scales: Scales) -> str:
    if scales.outage is None:
        return ""
    return f"; outage {_f(scales.outage[0])}-{_f(scales.outage[1])} s shaded"


def ai_calls_chart(subject: SubjectResult, scales: Scales) -> str:
    """The subject's AI calls per second, stacked by outcome, with a legend of the outcomes."""
    frame = _Frame(28.0, 120.0, scales.t1, scales.rate_top)
    timeline: Timeline = subject.timeline  # type: ignore[assignment]
    samples = _Samples.of(timeline)
    body = _outage(frame, scales) + _value_axis(frame, _ticks(frame.v1, 4, False), "/s")
    order = [n for n in scales.palette if n in timeline.ai_calls]
    for start, end, rates in _buckets(samples, timeline.ai_calls):
        left, right = frame.x(start), frame.x(end)
        width = right - left - (0.5 if right - left > 2 else 0.0)
        base = 0.0
        for name in order:
            if rates.get(name, 0.0) <= 0:
                continue
            top = base + rates[name]
            y = frame.y(top)
            body.append(_rect(left, y, width, frame.y(base) - y, scales.palette[name],
                              f' class="bar" data-outcome="{escape(name)}" data-t="{_f(start)}"',
                              f"{_f(start)}-{_f(end)} s: {printable(name)} "
                              f"{rates[name]:.2f} calls/s"))
            base = top
    totals = {n: int(sum(v or 0 for v in samples.values(timeline.ai_calls[n]))) for n in order}
    shown = [n for n in order if totals[n] > 0]
    legend, end = _legend(frame.bottom + 34, [(("outcome", n), scales.palette[n],
                                                f"{printable(n)} ({totals[n]} calls)")
                                               for n in shown])
    body += _time_axis(frame, scales) + legend
    body.append(_text(_LEFT, 14, "AI calls per second, by outcome", cls="caption"))
    words = ", ".join(f"{printable(n)} {totals[n]} calls" for n in shown) or "no calls"
    label = f"AI calls per second of {subject.name} by outcome: {words}" + _outage_words(scales)
    return _svg("ai_calls", subject.name, f"AI calls per second by outcome: {subject.name}",
                label, end, frame, body)


def breaker_chart(subject: SubjectResult, scales: Scales) -> str:
    """The subject's primary breaker state as a band of CLOSED, HALF_OPEN and OPEN runs."""
    frame = _Frame(32.0, 34.0, scales.t1, 1.0)
    timeline: Timeline = subject.timeline  # type: ignore[assignment]
    samples = _Samples.of(timeline)
    runs = _runs(samples, [None if s is None else printable(s)
                           for s in samples.raw(timeline.breaker)])
    body = _outage(frame, scales)
    for state, start, end in runs:
        left, right = frame.x(start), frame.x(end)
        colour = STATE_COLOURS.get(str(state), OTHER_STATE_COLOUR)
        body.append(_rect(left, frame.top + 6, right - left, frame.height - 12, colour,
                          f' class="state" data-state="{escape(state)}"',
                          f"{state} {_f(start)}-{_f(end)} s"))
        if right - left >= _CHAR_W * len(str(state)) + 4:
            body.append(_text((left + right) / 2, frame.top + frame.height / 2 + 4, str(state),
                              "middle", "state-label"))
    states = list(STATE_COLOURS) + sorted({str(s) for s, _, _ in runs} - set(STATE_COLOURS))
    legend, end = _legend(frame.bottom + 34, [(("state", s), STATE_COLOURS.get(
        s, OTHER_STATE_COLOUR), s) for s in states])
    body += _time_axis(frame, scales) + legend
    body.append(_text(_LEFT, 12, "circuit breaker (primary Vision AI)", cls="caption"))
    label = (f"Breaker state of {subject.name} over time: {_spans(runs) or 'no samples'}"
             + _outage_words(scales))
    return _svg("breaker", subject.name, f"Breaker state over time: {subject.name}", label,
                end, frame, body)


def _level_name(level: int) -> str:
    try:
        return f"L{level} {Level(level).name.lower().replace('_', ' ')}"
    except ValueError:
        return f"L{level}"


def level_chart(subject: SubjectResult, scales: Scales) -> str:
    """The subject's degradation level as a step line over the named levels L0-L4 (a level
    past L4 is drawn at L4)."""
    frame = _Frame(24.0, 90.0, scales.t1, float(_LEVEL_TOP))
    timeline: Timeline = subject.timeline  # type: ignore[assignment]
    samples = _Samples.of(timeline)
    levels = [None if v is None else min(int(round(v)), _LEVEL_TOP)
              for v in samples.values(timeline.level)]
    body = _outage(frame, scales)
    for level in range(_LEVEL_TOP + 1):
        y = frame.y(level)
        body.append(f'<line x1="{_f(_LEFT)}" y1="{_f(y)}" x2="{_f(_WIDTH - _RIGHT)}" '
                    f'y2="{_f(y)}" stroke="{_GRID}"/>')
        body.append(_text(_LEFT - 5, y + 4, _level_name(level), "end", "tick"))
    path, previous = [], None
    for t, level in zip(samples.t, levels):
        if level is None:
            previous = None
            continue
        y = _f(frame.y(level))
        path.append(f"{'L' if previous is not None else 'M'}{_f(frame.x(t))},{y}")
        path.append(f"L{_f(frame.x(t + samples.step))},{y}")
        previous = level
    if path:
        body.append(f'<path class="level" d="{" ".join(path)}" fill="none" '
                    f'stroke="{LEVEL_COLOUR}" stroke-width="2.5"/>')
    body += _time_axis(frame, scales)
    body.append(_text(_LEFT, 12, "degradation level", cls="caption"))
    runs = _runs(samples, levels)
    label = (f"Degradation level of {subject.name} over time: "
             f"{_spans(runs, lambda v: f'L{v}') or 'no samples'}" + _outage_words(scales))
    return _svg("level", subject.name, f"Degradation level over time: {subject.name}", label,
                frame.bottom + 22, frame, body)


def photos_chart(subject: SubjectResult, scales: Scales) -> str:
    """The photos in each of the judge's states over time, one line per state the run
    reached, named as the table names them; the last point of each is the table's figure."""
    frame = _Frame(28.0, 150.0, scales.t1, scales.photos_top)
    timeline: Timeline = subject.timeline  # type: ignore[assignment]
    samples = _Samples.of(timeline)
    body = _outage(frame, scales) + _value_axis(frame, _ticks(frame.v1, 4, True), "")
    finals = []
    for name, colour in PHOTO_COLOURS.items():
        if name not in timeline.photos:
            continue
        values = samples.values(timeline.photos[name])
        points = [f"{_f(frame.x(t + samples.step))},{_f(frame.y(v))}"
                  for t, v in zip(samples.t, values) if v is not None]
        if points:
            body.append(f'<path class="photos" data-series="{escape(name)}" d="M'
                        + " L".join(points) + f'" fill="none" stroke="{colour}" '
                        'stroke-width="2.5"/>')
        last = next((v for v in reversed(values) if v is not None), 0.0)
        finals.append((name, colour, int(last)))
    legend, end = _legend(frame.bottom + 34, [(("series", n), c, f"{n}: {v}")
                                              for n, c, v in finals])
    body += _time_axis(frame, scales) + legend
    body.append(_text(_LEFT, 14, "photos by the judge's reading of the layer", cls="caption"))
    words = ", ".join(f"{n} {v}" for n, _, v in finals) or "no photo analysed or flagged"
    label = (f"Photos of {subject.name} over time by the judge's reading of the layer, at "
             f"the end: {words}" + _outage_words(scales))
    return _svg("photos", subject.name, f"Photos over time: {subject.name}",
                label, end, frame, body)
