"""The drill bench runs its scenarios for the library and the baselines asked for, judges the
library on its targets, and writes its figures into the docs and the README itself."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from fme_ai_resilience.drill.invariants import targets
from fme_ai_resilience.drill.table import CHECKLIST_TITLE, render_excerpt

from helpers.drill_reports import sample_report
from helpers import REPO


ROOT = REPO
START, END = "<!-- drill-excerpt: start -->", "<!-- drill-excerpt: end -->"


def _between(text, start, end):
    return text.split(start, 1)[1].split(end, 1)[0]


def test_a_small_run_writes_its_figures_between_the_markers(tmp_path):
    """A tiny storm and outage: a row per subject, every target in the checklist, and --write
    replaces the benchmark block and the README's excerpt with them, nothing else."""
    (tmp_path / "docs").mkdir()
    for name in ("README.md", "docs/benchmarks.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    before = (tmp_path / "README.md").read_text(encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "drill.py"), "--scenarios", "storm,outage",
         "--submissions", "6", "--engines", "1", "--time-scale", "0.01", "--compare", "naive",
         "--write", "--root", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr    # 1: a target missed on a tiny run
    bench = _between((tmp_path / "docs/benchmarks.md").read_text(encoding="utf-8"),
                     "<!-- drill-bench: start -->\n", "<!-- drill-bench: end -->")
    rows = [line.split("|")[1:-1] for line in bench.splitlines() if line.startswith("| ")]
    assert [(r[0].strip(), r[1].strip()) for r in rows[1:]] == [
        ("storm", "fme-ai-resilience"), ("storm", "naive"),
        ("outage", "fme-ai-resilience"), ("outage", "naive")]
    assert " / " in rows[3][8]                          # outage calls against the probe bound
    missed = [line for line in bench.splitlines() if line.startswith("- MISSED")]
    assert done.returncode == (1 if missed else 0)
    assert "storm 6 submissions" in bench and "`naive`:" in bench
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    excerpt = _between(readme, START, END)
    assert excerpt.startswith("\n```text\ndrill: scenario storm, seed 1, 6 submissions")
    assert CHECKLIST_TITLE in excerpt
    assert readme.split(START)[0] == before.split(START)[0]
    assert readme.split(END)[1] == before.split(END)[1]


def _labels(block):
    lines = block.strip("\n").strip("`").strip().splitlines()
    assert lines[0].startswith("drill: scenario storm, seed ") and lines[1] == ""
    lines = lines[4:]
    rows = lines[:lines.index("...")]
    return [re.split(r"\s{2,}", line.strip())[0] for line in rows], lines[lines.index("...") + 1:]


def test_the_readmes_excerpt_is_the_shape_the_drill_prints():
    """The README's excerpt has the storm's heading, the header, the rows in the order
    render_excerpt prints them, then every target of a storm's checklist, each ok or BAD."""
    block = _between((ROOT / "README.md").read_text(encoding="utf-8"), START, END)
    body = block.strip("\n")
    assert body.startswith("```text\n") and body.endswith("```")
    header = body.splitlines()[3].split()
    assert header[:3] == ["figure", "target", "fme-ai-resilience"]
    report = sample_report()
    report.outage, report.scenario = None, "storm"
    want_rows, want_checks = _labels(render_excerpt(report))
    got_rows, got_checks = _labels(body[len("```text\n"):-3])
    assert got_rows == want_rows
    assert got_checks[0] == want_checks[0] == CHECKLIST_TITLE
    assert len(got_checks) - 1 == len(targets(report))
    assert all(line[:3] in ("ok ", "BAD") for line in got_checks[1:])
    words = [re.sub(r"[\d.]+", "#", line[5:]) for line in got_checks[1:]]
    assert words == [re.sub(r"[\d.]+", "#", line[5:]) for line in want_checks[1:]]
