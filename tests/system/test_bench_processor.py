"""The processor bench runs both subjects on SQLite and PostgreSQL and reports throughput and
round trips."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import REPO


ROOT = REPO


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_small_run_completes_every_task_of_both_subjects(backend, request):
    """Two engines, three tasks each: every task completed by both subjects, the processor's
    statements and operations per task printed, on each backend (PostgreSQL's statements are
    the driver's, counted where the store sends them: never 0.0). The figures themselves are
    the bench's."""
    env = dict(os.environ)
    if backend == "postgresql":
        env["FAIR_BENCH_PG_URL"] = request.getfixturevalue("pg_url")   # skips without one
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "processor.py"), "--backends", backend,
         "--engines", "2", "--tasks-per-engine", "3", "--latency", "0.05", "--rounds", "1"],
        capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode in (0, 1), done.stderr    # 1: the target missed on a tiny run
    rows = {line.split("|")[2].strip(): line for line in done.stdout.splitlines()
            if line.startswith(f"| {backend} |")}
    assert set(rows) == {"bare loop", "processor"}, done.stdout + done.stderr
    assert all(row.rstrip().endswith("| all |") for row in rows.values())
    statements, cpu_ms = rows["processor"].split("|")[5:7]
    # a task is at least its claim, two checkpoints, two call-log rows and its completion
    assert float(statements) >= 6 and float(cpu_ms) > 0, rows["processor"]
    operations = next(line for line in done.stdout.splitlines()
                      if line.startswith(f"{backend}: store operations per completed task: "))
    assert "checkpoint 2.00" in operations and "limit_release 1.00" in operations
    assert "target: the processor at >= 0.9 of N/L" in done.stdout
