"""The drill at a small size, every scenario, asserting on its JSON report: the library loses
nothing, analyses and writes nothing twice, keeps its engines within N and its backlog within
the ceiling, gives every dead letter its cause and, in an outage, calls no more than the
breaker's probe bound. The figures come from the stand-ins' counters and the ledger."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fme_ai_resilience.drill.run import run_drill
from fme_ai_resilience.drill.scenarios import SCENARIOS

pytestmark = pytest.mark.integration

SMALL = dict(submissions=24, engines=2, time_scale=0.04, compare=())


def holds(report):
    """The library's invariants, by name, each True when it held."""
    lib = report.library
    return {
        "nothing lost": lib.lost == 0,
        "no duplicate analysis": lib.duplicate_analyses == 0,
        "no duplicate write": lib.duplicate_writes == 0,
        "engines within N": lib.peak_concurrent_engines <= report.engines,
        "backlog within the ceiling": lib.peak_backlog <= report.hard_ceiling,
        "every dead letter has a cause": all(lib.dead_by_cause.values())
        and "UNKNOWN" not in lib.dead_by_cause,
        "every fact accounted for": lib.succeeded_total + sum(lib.dead_by_cause.values())
        == lib.distinct_facts,
        "the run completed": not any("timed out" in n for n in lib.notes),
    }


@pytest.mark.parametrize("scenario", sorted(set(SCENARIOS) - {"chaos"}))
def test_every_scenario_keeps_the_library_whole(scenario):
    """Each scenario at a small size on SQLite: every invariant holds."""
    report = run_drill(scenario, **SMALL)
    failed = [name for name, ok in holds(report).items() if not ok]
    assert not failed, (failed, report.library.as_dict())
    if report.outage:
        assert report.library.outage_ai_calls <= report.probe_bound


def test_the_storm_collapses_redeliveries_reuses_recreated_photos_and_backfills():
    """The storm's redeliveries are collapsed at intake, its re-created features cost no
    Vision call, its missing photos are NOT_FOUND dead letters and its lost webhooks are
    found by reconciliation."""
    report = run_drill("storm", submissions=60, engines=2, time_scale=0.04, compare=())
    lib = report.library
    assert lib.duplicates_collapsed > 0 and lib.analyses_reused > 0
    assert lib.backfilled == SCENARIOS["storm"].never_delivered
    assert set(lib.dead_by_cause) <= {"NOT_FOUND"}
    assert lib.ai_calls <= lib.distinct_facts * 1.6        # retries of 10 % flaky calls


def test_chaos_kills_an_engine_and_cuts_the_database_yet_nothing_is_lost(pg_url):
    """On PostgreSQL: an engine SIGKILLed right after a paid analysis and every connection
    cut mid-run; the survivors finish every task, without a second analysis or write."""
    report = run_drill("chaos", db_url=pg_url, **SMALL)
    failed = [name for name, ok in holds(report).items() if not ok]
    assert not failed, (failed, report.library.as_dict())
    assert any("SIGKILL" in n for n in report.library.notes)


def test_the_command_prints_the_json_report_with_its_keys(tmp_path):
    """``drill --json`` from a child process: the documented top-level keys, an HTML page."""
    page = tmp_path / "drill.html"
    done = subprocess.run(
        [sys.executable, "-m", "fme_ai_resilience", "drill", "--scenario", "calm",
         "--submissions", "12", "--engines", "2", "--compare", "none", "--json",
         "--html", str(page)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    for key in ("lost", "duplicate_analyses", "duplicate_writes", "ai_calls",
                "outage_ai_calls", "probe_bound", "peak_concurrent_engines", "engines",
                "dead_by_cause", "drain_s", "drain_bound_s", "baselines"):
        assert key in report, key
    assert report["lost"] == 0 and report["engines"] == 2
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
