"""The drill bench runs the README's main job as the README types it and cuts the README's
excerpt from what it printed, runs its scenarios for the library and the baselines asked
for, judges the library on its targets, and writes its figures into the docs and the README
itself."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from fme_ai_resilience.drill.invariants import targets
from fme_ai_resilience.drill.table import (CHECKLIST_TITLE, SPEED_TITLE, excerpt,
                                           render_excerpt, render_report)

from helpers.drill_reports import sample_report
from helpers import REPO


ROOT = REPO
START, END = "<!-- drill-excerpt: start -->", "<!-- drill-excerpt: end -->"
TINY = "--submissions 4 --engines 1 --time-scale 0.01 --compare naive"


def _between(text, start, end):
    return text.split(start, 1)[1].split(end, 1)[0]


@pytest.mark.long
def test_a_small_run_writes_its_figures_between_the_markers(tmp_path):
    """The main job (shrunk) run as a command, twice more in a row, and a tiny storm and
    outage: --write puts the command's own excerpt into the README, the repeated runs and a
    row per subject into the benchmarks, nothing else."""
    (tmp_path / "docs").mkdir()
    for name in ("README.md", "docs/benchmarks.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    before = (tmp_path / "README.md").read_text(encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "drill.py"), "--scenarios", "storm,outage",
         "--submissions", "6", "--engines", "1", "--time-scale", "0.01", "--compare", "naive",
         "--main-args", TINY, "--repeat", "2", "--write", "--root", str(tmp_path)],
        capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr    # 1: a target missed on a tiny run
    docs = (tmp_path / "docs/benchmarks.md").read_text(encoding="utf-8")
    bench = _between(docs, "<!-- drill-bench: start -->\n", "<!-- drill-bench: end -->")
    rows = [line.split("|")[1:-1] for line in bench.splitlines() if line.startswith("| ")]
    assert [(r[0].strip(), r[1].strip()) for r in rows[1:]] == [
        ("storm", "fme-ai-resilience"), ("storm", "naive"),
        ("outage", "fme-ai-resilience"), ("outage", "naive")]
    assert " / " in rows[3][8]                          # outage calls against the probe bound
    assert "storm 6 submissions" in bench and "`naive`:" in bench
    repeat = _between(docs, "<!-- drill-repeat: start -->\n", "<!-- drill-repeat: end -->")
    runs = [line for line in repeat.splitlines() if re.match(r"\| \d \|", line)]
    assert len(runs) == 2 and all("verdict: " in line for line in runs)
    assert f"fme-ai-resilience drill {TINY}" in repeat
    missed = [line for line in bench.splitlines() if line.startswith("- MISSED")]
    failed_runs = [line for line in runs if not line.startswith(f"| {line[2]} | 0 |")]
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    cut = _between(readme, START, END)
    assert cut.startswith("\n```text\ndrill: scenario storm, seed 1, 4 submissions")
    assert CHECKLIST_TITLE in cut and SPEED_TITLE in cut
    assert cut.rstrip("\n`").splitlines()[-1].startswith("verdict: ")
    if done.returncode == 0:
        assert not missed and not failed_runs and "verdict: PASS" in cut
    assert readme.split(START)[0] == before.split(START)[0]
    assert readme.split(END)[1] == before.split(END)[1]


def _labels(block):
    lines = block.strip("\n").strip("`").strip().splitlines()
    assert lines[0].startswith("drill: scenario storm, seed ") and lines[1] == ""
    lines = lines[4:]
    rows = lines[:lines.index("...")]
    return [re.split(r"\s{2,}", line.strip())[0] for line in rows], lines[lines.index("...") + 1:]


def test_the_excerpt_is_cut_from_what_the_command_prints():
    """The excerpt's every line is a line the command printed, in its order: the heading,
    the header and rule, the chosen rows, then all from the targets to the verdict."""
    report = sample_report()
    printed = render_report([report]).splitlines()
    cut = render_excerpt(report).splitlines()
    assert cut == excerpt("\n".join(printed)).splitlines()
    kept = [line for line in cut if line not in ("", "...")]
    positions = [printed.index(line) for line in kept]
    assert positions == sorted(positions)
    assert printed[printed.index(CHECKLIST_TITLE):] == cut[cut.index(CHECKLIST_TITLE):]
    assert cut[-1].startswith("verdict: ")


def test_the_readmes_excerpt_is_the_shape_the_drill_prints():
    """The README's excerpt has the storm's heading, the header, the rows in the order
    the excerpt cuts them, every target of a storm's checklist (ok or BAD), the speed and
    the verdict last."""
    block = _between((ROOT / "README.md").read_text(encoding="utf-8"), START, END)
    body = block.strip("\n")
    assert body.startswith("```text\n") and body.endswith("```")
    header = body.splitlines()[3].split()
    assert header[:3] == ["figure", "target", "fme-ai-resilience"]
    report = sample_report()
    report.outage, report.scenario = None, "storm"
    want_rows, want_rest = _labels(render_excerpt(report))
    got_rows, got_rest = _labels(body[len("```text\n"):-3])
    assert got_rows == want_rows
    assert got_rest[0] == want_rest[0] == CHECKLIST_TITLE
    got_checks = got_rest[1:got_rest.index(SPEED_TITLE)]
    want_checks = want_rest[1:want_rest.index(SPEED_TITLE)]
    assert len(got_checks) == len(targets(report))
    assert all(line[:3] in ("ok ", "BAD") for line in got_checks)
    words = [re.sub(r"[\d.]+", "#", line[5:]) for line in got_checks]
    assert words == [re.sub(r"[\d.]+", "#", line[5:]) for line in want_checks]
    assert got_rest[-1].startswith("verdict: ")
