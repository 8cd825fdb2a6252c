"""The processor bench runs both subjects on SQLite and reports throughput and round trips."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import REPO


ROOT = REPO


def test_a_small_run_completes_every_task_of_both_subjects():
    """Two engines, three tasks each: every task completed by both subjects, the processor's
    statements and operations per task printed (the figures themselves are the bench's)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "processor.py"), "--backends", "sqlite",
         "--engines", "2", "--tasks-per-engine", "3", "--latency", "0.05", "--rounds", "1"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr    # 1: the target missed on a tiny run
    rows = {line.split("|")[2].strip(): line for line in done.stdout.splitlines()
            if line.startswith("| sqlite |")}
    assert set(rows) == {"bare loop", "processor"}, done.stdout + done.stderr
    assert all(row.rstrip().endswith("| all |") for row in rows.values())
    statements, cpu_ms = rows["processor"].split("|")[5:7]
    assert float(statements) > 0 and float(cpu_ms) > 0
    operations = next(line for line in done.stdout.splitlines()
                      if line.startswith("sqlite: store operations per completed task: "))
    assert "checkpoint 2.00" in operations and "limit_release 1.00" in operations
    assert "target: the processor at >= 0.9 of N/L" in done.stdout
