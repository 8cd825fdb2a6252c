"""The drill at a small size, every scenario, asserting on its JSON report: the library loses
nothing, analyses and writes nothing twice, keeps its engines within N and its backlog within
the ceiling, gives every dead letter its cause and, in an outage, calls no more than the
breaker's probe bound. The figures come from the stand-ins' counters and the ledger."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
         "--time-scale", "0.04",
         "--html", str(page)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    for key in ("lost", "duplicate_analyses", "duplicate_writes", "ai_calls",
                "outage_ai_calls", "probe_bound", "peak_concurrent_engines", "engines",
                "dead_by_cause", "drain_s", "drain_bound_s", "baselines"):
        assert key in report, key
    assert report["lost"] == 0 and report["engines"] == 2
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_the_baselines_meet_the_same_plan_with_figures_and_timelines():
    """Each baseline runs the library's plan on its own fresh stand-ins: the same facts and
    deliveries, its own Vision AI calls (priced as the library's) and its sampled timeline."""
    report = run_drill("storm", submissions=12, engines=2, time_scale=0.04,
                       compare=("naive", "httpcaller"))
    lib = report.library
    assert list(report.baselines) == ["naive", "httpcaller"]
    for result in report.baselines.values():
        assert result.skipped is None and result.notes
        assert (result.submitted, result.distinct_facts) == (lib.submitted, lib.distinct_facts)
        assert result.ai_calls > 0 and result.ai_spend == round(result.ai_calls * 0.01, 4)
        assert result.timeline is not None and result.timeline.t
        assert max(result.timeline.in_flight) <= report.engines
        assert sum(map(sum, result.timeline.ai_calls.values())) <= result.ai_calls
        # nothing keeps what the storm loses: its missing photos and its lost webhooks
        assert result.lost >= SCENARIOS["storm"].never_delivered


def test_the_command_runs_the_baselines_asked_for_and_refuses_unknown_ones(tmp_path):
    """``--compare naive`` reports that baseline beside the library; an unknown name is a usage
    error of one line, before anything runs."""
    line = [sys.executable, "-m", "fme_ai_resilience", "drill", "--scenario", "calm",
            "--submissions", "6", "--engines", "1", "--time-scale", "0.04", "--json"]
    done = subprocess.run(line + ["--compare", "naive"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    baselines = json.loads(done.stdout)["baselines"]
    assert list(baselines) == ["naive"] and baselines["naive"]["succeeded_total"] == 6
    bad = subprocess.run(line + ["--compare", "naive,retry-forever"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("error: --compare='naive,retry-forever': choose among naive")


def test_the_drill_refuses_a_ledger_holding_a_pipelines_work(tmp_path):
    """Given a real pipeline's ledger by mistake, the drill empties nothing: exit 1, one line."""
    from fme_ai_resilience import open_store, parse_webhook

    url = f"sqlite:///{tmp_path / 'production.db'}"
    body = (Path(__file__).parents[1] / "data" / "survey123_add.json").read_bytes()
    with open_store(url, init_schema=True, create=True) as store:
        store.set_config({"vision.endpoint": "https://vision.example.com/analyze"}, now=1.0)
        for submission in parse_webhook(body):
            store.register(submission, 100, now=1.0)
        held = sum(store.counts().values())
    done = subprocess.run([sys.executable, "-m", "fme_ai_resilience", "drill", "--db", url,
                           "--compare", "none", "--submissions", "2"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 2       # the ledger's name, then why not
    assert f"holds {held} task(s) that are not a drill's" in done.stderr
    with open_store(url) as store:
        assert held > 0 and sum(store.counts().values()) == held


def test_on_a_terminal_the_drill_shows_its_progress_live(tmp_path):
    """stderr a terminal: a line per phase, and the running subject's time, backlog and busy
    engines rewritten in place; the report on stdout all the same."""
    import os
    import pty

    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "fme_ai_resilience", "drill", "--scenario", "calm",
             "--submissions", "6", "--engines", "1", "--compare", "naive", "--time-scale",
             "0.04"],
            stderr=follower, stdout=subprocess.PIPE, text=True, timeout=300)
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:                     # the terminal's other end is closed
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    text = shown.decode("utf-8", "replace")
    assert done.returncode == 0, text[-2000:]
    assert "calm: submissions spread over two minutes" in text
    assert "\r    fme-ai-resilience: " in text and "backlog " in text and "engines busy " in text
    assert "\r    naive: " in text
    assert "LOST" in done.stdout
