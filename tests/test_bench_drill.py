"""The drill bench runs its scenarios for the library and the baselines asked for, and judges
the library's figures against their targets."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_small_run_reports_every_subject_and_the_librarys_targets():
    """A tiny outage: a row per subject with its figures, then one line per target."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "drill.py"), "--scenarios", "outage",
         "--submissions", "6", "--engines", "1", "--time-scale", "0.04", "--compare", "naive"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr    # 1: a target missed on a tiny run
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines()
            if line.startswith("| outage |")]
    assert [r[1].strip() for r in rows] == ["fme-ai-resilience", "naive"], done.stdout
    library = rows[0]
    assert library[2].strip() == "6 / 6" and library[3].strip() == "0"
    assert " / " in library[6]                       # outage calls against the probe bound
    targets = [line for line in done.stdout.splitlines() if line.startswith(("met", "MISSED"))]
    assert [t.split(": ", 1)[1].split(" ")[0] for t in targets] == [
        "lost", "duplicate", "outage", "drain"]
    assert "naive made" in done.stdout
