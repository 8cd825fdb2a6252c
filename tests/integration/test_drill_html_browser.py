"""The drill's HTML page in a real headless Chromium at 1400 px: the screenshot opens with the
verdict and shows the charts; every subject's column fits the window.

The page is rendered to a file and opened as ``file://`` with every host name unresolvable,
so the browser fetches nothing; the PNG it writes is decoded with the standard library (zlib
and the PNG chunk format) and its pixels counted by colour, the top of the page apart. The
layout is read from the browser itself: a copy of the page with a script that measures the
table's columns, printed by Chromium's ``--dump-dom`` (the page itself has no script).
Without a Chromium on PATH the test is skipped with the reason, except under ``CI=true``,
where it fails.
"""
from __future__ import annotations

import dataclasses
import html
import json
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from itertools import accumulate
from typing import Tuple

import pytest

from fme_ai_resilience.drill.charts import (BACKLOG_FILL, LEVEL_COLOUR, OUTAGE_FILL,
                                            OUTCOME_COLOURS, PHOTO_COLOURS, STATE_COLOURS)
from fme_ai_resilience.drill.html import VERDICT_COLOURS, render_html
from fme_ai_resilience.drill.report import LIBRARY

from helpers.postgres import IN_CI
from helpers.drill_reports import sample_report

#: One worker draws every page: three launches of Chromium, not one on each worker that runs
#: one of these tests (34 s of the suite's CPU, 6 s on one worker).
pytestmark = pytest.mark.xdist_group("browser")

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
WIDTH, HEIGHT = 1400, 4400
#: Keeps the browser on this machine: no name resolves, no background service starts.
OFFLINE = ("--host-resolver-rules=MAP * ~NOTFOUND", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--disable-default-apps",
           "--disable-extensions", "--no-pings", "--disable-domain-reliability",
           "--disable-client-side-phishing-detection", "--no-first-run",
           "--no-default-browser-check", "--metrics-recording-only")
Pixel = Tuple[int, int, int]


def find_browser() -> str:
    """The first Chromium on PATH; skip (or, under CI, fail) when there is none."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    reason = f"no headless Chromium on PATH (looked for {', '.join(BROWSERS)})"
    if IN_CI:
        pytest.fail(f"CI=true needs Chromium for the page's screenshot: {reason}", pytrace=False)
    pytest.skip(f"{reason}; install one (apt-get install chromium) to run this test")


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def _unfilter(kind: int, line: bytes, prev: bytes, bpp: int) -> bytes:
    if kind == 0:
        return line
    if kind == 2:
        return bytes((x + b) & 0xFF for x, b in zip(line, prev))
    if kind == 1:
        out = bytearray(len(line))
        for c in range(bpp):  # each channel is a running sum of its own bytes
            out[c::bpp] = bytes(s & 0xFF for s in accumulate(line[c::bpp]))
        return bytes(out)
    out = bytearray(line)
    for i in range(len(out)):
        a = out[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        out[i] = (out[i] + ((a + b) // 2 if kind == 3 else _paeth(a, b, c))) & 0xFF
    return bytes(out)


def png_pixels(data: bytes, rows: int = 0) -> Tuple[int, int, Counter]:
    """Width, height and how many pixels of each RGB colour an 8-bit RGB(A) PNG holds (in
    its first ``rows`` rows only, when given)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(b"".join(idat)), width * bpp
    counts: Counter = Counter()
    prev = bytes(stride)
    for y in range(rows or height):
        start = y * (stride + 1)
        prev = _unfilter(raw[start], raw[start + 1:start + 1 + stride], prev, bpp)
        counts.update(zip(prev[0::bpp], prev[1::bpp], prev[2::bpp]))
    return width, height, counts


def rgb(hex_colour: str) -> Pixel:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def near(counts: Counter, colour: Pixel, tolerance: int = 3) -> int:
    """Pixels within ``tolerance`` per channel of ``colour`` (colour management may nudge them)."""
    return sum(n for pixel, n in counts.items()
               if all(abs(p - q) <= tolerance for p, q in zip(pixel, colour)))


#: The top of the page, in pixels: what a reader sees first.
TOP = 300
#: Measures the table's columns and the verdict's band once the page has laid out.
MEASURE = """<script>
window.addEventListener("load", function () {
  var out = {inner: window.innerWidth, scroll: document.documentElement.scrollWidth,
             columns: [], verdict: null, table: null};
  document.querySelectorAll("table.figures thead th").forEach(function (th) {
    var box = th.getBoundingClientRect();
    out.columns.push([th.textContent, box.left, box.right]);
  });
  var v = document.getElementById("verdict").getBoundingClientRect();
  out.verdict = [v.top, v.bottom];
  out.table = document.querySelector("table.figures").getBoundingClientRect().top;
  document.body.setAttribute("data-layout", JSON.stringify(out));
});
</script>"""


def wide_report():
    """The sample report with all five subjects run (tenacity and sweep as naive ran)."""
    report = sample_report()
    naive = report.baselines["naive"]
    report.baselines = {"naive": naive,
                        "tenacity": dataclasses.replace(naive, name="tenacity"),
                        "httpcaller": report.baselines["httpcaller"],
                        "sweep": dataclasses.replace(naive, name="sweep")}
    return report


def _chromium(where, *args):
    command = [find_browser(), "--headless=new", "--no-sandbox", "--disable-gpu",
               "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
               f"--user-data-dir={where / 'profile'}", *OFFLINE, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=where)


@pytest.fixture(scope="module")
def screenshot(tmp_path_factory) -> Tuple[int, int, Counter]:
    """The sample report's page as a headless Chromium draws it, decoded."""
    where = tmp_path_factory.mktemp("drill-html")
    page, png = where / "report.html", where / "report.png"
    page.write_text(render_html(sample_report()), encoding="utf-8")
    done = _chromium(where, f"--screenshot={png}", f"--window-size={WIDTH},{HEIGHT}",
                     page.resolve().as_uri())
    assert png.exists(), f"no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    return png_pixels(png.read_bytes())


@pytest.fixture(scope="module")
def top_of_page(tmp_path_factory) -> Counter:
    """The first TOP rows of the five-subject page at 1400 px, decoded."""
    where = tmp_path_factory.mktemp("drill-top")
    page, png = where / "report.html", where / "report.png"
    page.write_text(render_html(wide_report()), encoding="utf-8")
    done = _chromium(where, f"--screenshot={png}", f"--window-size={WIDTH},900",
                     page.resolve().as_uri())
    assert png.exists(), f"no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    return png_pixels(png.read_bytes(), rows=TOP)[2]


@pytest.fixture(scope="module")
def layout(tmp_path_factory) -> dict:
    """The five-subject page's layout at 1400 px, as the browser measured it."""
    where = tmp_path_factory.mktemp("drill-layout")
    page = where / "measured.html"
    page.write_text(render_html(wide_report()).replace("</body>", MEASURE + "</body>"),
                    encoding="utf-8")
    done = _chromium(where, "--dump-dom", f"--window-size={WIDTH},900",
                     page.resolve().as_uri())
    found = re.search(r'data-layout="([^"]*)"', done.stdout)
    assert found, f"no layout measured (exit {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def test_the_page_opens_with_the_verdict_band(top_of_page):
    """The top of the page shows the verdict's band (the sample misses a target: red)."""
    fill, _ = VERDICT_COLOURS[False]
    assert near(top_of_page, rgb(fill)) >= 20_000
    assert near(top_of_page, rgb(VERDICT_COLOURS[True][0])) == 0


def test_every_subjects_column_fits_a_1400_px_window(layout):
    """At 1400 px the table's every column, the five subjects', lies inside the window, and
    the page needs no sideways scroll; the verdict comes before the table."""
    assert layout["inner"] == WIDTH and layout["scroll"] <= WIDTH
    names = [name for name, _, _ in layout["columns"]]
    assert names == ["figure", "target", LIBRARY, "naive", "tenacity", "httpcaller", "sweep"]
    assert all(0 <= left < right <= WIDTH for _, left, right in layout["columns"])
    assert layout["verdict"][1] <= layout["table"] and layout["verdict"][0] < TOP


def test_the_screenshot_is_the_window_and_not_blank(screenshot):
    """The page fills the window with more than a white sheet: many colours, much ink."""
    width, height, counts = screenshot
    assert (width, height) == (WIDTH, HEIGHT)
    total = sum(counts.values())
    white = near(counts, (255, 255, 255), tolerance=8)
    assert total - white > total // 20
    assert len([c for c, n in counts.items() if n >= 50]) >= 12


@pytest.mark.parametrize("series,colour,at_least", [
    ("backlog area", BACKLOG_FILL, 5000),
    ("ok calls", OUTCOME_COLOURS["ok"], 3000),
    ("outage calls", OUTCOME_COLOURS["outage"], 1000),
    ("outage window", OUTAGE_FILL, 5000),
    ("breaker CLOSED", STATE_COLOURS["CLOSED"], 2000),
    ("breaker OPEN", STATE_COLOURS["OPEN"], 500),
    ("breaker HALF_OPEN", STATE_COLOURS["HALF_OPEN"], 100),
    ("degradation level", LEVEL_COLOUR, 200),
    ("photos in review", PHOTO_COLOURS["in review (under the threshold)"], 300),
    ("photos awaiting", PHOTO_COLOURS["awaiting analysis"], 150),
])
def test_each_chart_series_is_visible(screenshot, series, colour, at_least):
    """Every series the charts draw shows in its colour over a meaningful number of pixels."""
    _, _, counts = screenshot
    assert near(counts, rgb(colour)) >= at_least, f"{series} ({colour}) barely drawn"


@pytest.mark.parametrize("in_ci,outcome", [(True, pytest.fail.Exception),
                                           (False, pytest.skip.Exception)])
def test_a_missing_browser_skips_here_and_fails_under_ci(monkeypatch, in_ci, outcome):
    """No Chromium on PATH: skipped with the reason on a workstation, a failure under CI=true."""
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setitem(globals(), "IN_CI", in_ci)
    with pytest.raises(outcome, match="chromium"):
        find_browser()
