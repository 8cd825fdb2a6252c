"""The pipeline on PostgreSQL when processes die, connections drop and webhooks never come.

Processors are real OS processes (``fme-ai-resilience process`` or a worker that SIGKILLs
itself at a stage boundary); the Vision AI, the photos and the feature layer are the drill's
loopback stand-ins, whose counters are the evidence.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from fme_ai_resilience.drill.standins import FaultSchedule, Survey123Sender
from fme_ai_resilience.core.ledger import Status
from fme_ai_resilience.core.intake.survey123 import parse_webhook

from helpers.postgres import pg_run
from helpers import script
from helpers.pipeline_world import (GatewayServer, World, loopback_settings, printed, spawn,
                            spawn_processes, stop_processes, wait_until_settled)


pytestmark = pytest.mark.postgres


def register(store, bodies):
    subs = [sub for body in bodies for sub in parse_webhook(body)]
    for sub in subs:
        store.register(sub, 10_000, now=time.time())
    return [sub.idempotency_key for sub in subs]


def run_cli(*args, timeout=120):
    done = subprocess.run([sys.executable, "-m", "fme_ai_resilience", *args],
                          capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def ok_calls(vision):
    return Counter(sha for _, sha, outcome in vision.snapshot()["log"] if outcome == "ok")


BOUNDARIES = ["claimed", "downloaded", "analyzed", "written-back", "before-complete"]


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_a_processor_killed_at_a_stage_boundary_leaves_the_survivor_one_clean_finish(
        pg_ledger, pg_store_url, boundary):
    """SIGKILL at the boundary; after the lease lapses the compensator hands the task back
    and a survivor finishes it: one valid Vision answer whenever ``analyzed`` was recorded,
    and a second (identical) write only when ``written`` was not."""
    with World(FaultSchedule(latency_s=0.01)) as world:
        pg_ledger.set_config(loopback_settings(world, **{"processing.lease_s": "1",
                                                      "processing.claim_limit": "1"}),
                          now=time.time())
        (key,) = register(pg_ledger, world.bodies(1))
        doomed = subprocess.run([sys.executable, script("pipeline_worker.py"), pg_store_url,
                                 boundary], capture_output=True, text=True, timeout=120)
        assert doomed.returncode == -9, doomed.stderr[-2000:]
        before = pg_ledger.get(key)
        assert before.status is Status.PROCESSING
        writes_before = sum(world.layer.snapshot()["writes"].values())
        time.sleep(1.2)                                       # the lease lapses
        assert run_cli("compensate", "--db", pg_store_url, "--no-reconcile")[0] == 0
        code, out, err = run_cli("process", "--db", pg_store_url, "--once")
        assert code == 0, err[-2000:]
        record = pg_ledger.get(key)
        calls = ok_calls(world.vision)
        writes = world.layer.snapshot()["writes"]

    assert record.status is Status.SUCCEEDED, (record.status, record.last_error)
    analyzed_first = "analyzed" in before.checkpoints
    assert analyzed_first == (boundary in ("analyzed", "written-back", "before-complete"))
    assert list(calls.values()) == [1]                        # one paid answer, either way
    (written,) = writes.values()
    assert writes_before == (1 if boundary in ("written-back", "before-complete") else 0)
    assert written == (2 if boundary == "written-back" else 1)
    attrs = world.layer.attributes_of(record.payload["feature_global_id"])
    assert attrs["ai_condition"] == record.result["condition"]


def test_a_slow_task_keeps_its_lease_while_its_worker_lives(pg_ledger, pg_store_url):
    """A Vision call three times the lease: the worker's renewals keep a second process from
    claiming the task, so the photo is asked once. A lease of 4 s is renewed every 1.33 s: a
    busy machine may pause a process for a second and more without letting the lease run
    out."""
    with World(FaultSchedule(latency_s=12.0)) as world:
        pg_ledger.set_config(loopback_settings(world, **{"processing.lease_s": "4"}),
                          now=time.time())
        (key,) = register(pg_ledger, world.bodies(1))
        procs = spawn_processes(pg_store_url, 2)
        try:
            wait_until_settled(pg_ledger, [key], timeout_s=60, procs=procs)
        finally:
            stop_processes(procs)
        record = pg_ledger.get(key)
        total = world.vision.snapshot()["total"]
    assert record.status is Status.SUCCEEDED and record.attempt_count == 0
    assert record.lease_token == 1                            # claimed once, renewed since
    assert total == 1


def test_terminated_backends_mid_run_lose_and_repeat_nothing(pg_ledger, pg_store_url):
    """pg_terminate_backend on every processor connection, three times during the run: each
    task ends once, one valid answer per photo, one write per feature. The run is under way
    first (every processor has claimed, the compensator has made a pass): a ledger lost while
    a command starts is exit 1 by design, for its supervisor to start it again. The lease,
    4 s, outlasts a busy machine's stall: a task is taken from its worker only when the
    worker is gone."""
    with World(FaultSchedule(latency_s=0.05, error_rate=0.1)) as world:
        pg_ledger.set_config(loopback_settings(world, **{"processing.lease_s": "4"}),
                          now=time.time())
        keys = register(pg_ledger, world.bodies(80))
        procs = spawn_processes(pg_store_url, 4)
        compensator = spawn([sys.executable, "-m", "fme_ai_resilience", "compensate", "--db",
                             pg_store_url, "--loop", "--interval", "0.5", "--no-reconcile",
                             "--json"])
        killed = []

        def terminate():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (
                    len(pg_run(pg_store_url, "SELECT DISTINCT lease_owner FROM ai_task_registry "
                                             "WHERE lease_owner LIKE 'proc-%%'")) == len(procs)
                    and printed(compensator)):
                time.sleep(0.05)
            for _ in range(3):
                time.sleep(0.7)
                killed.append(len(pg_run(pg_store_url, (
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND application_name LIKE 'fme-ai-resilience%%'"))))

        chaos = threading.Thread(target=terminate)
        chaos.start()
        try:
            statuses = wait_until_settled(pg_ledger, keys, timeout_s=180, procs=procs)
        finally:
            chaos.join()
            outputs = stop_processes(procs + [compensator])
        records = [pg_ledger.get(k) for k in keys]
        calls = ok_calls(world.vision)
        writes = world.layer.snapshot()["writes"]

    assert len(killed) == 3 and min(killed) >= 1             # connections really went
    assert set(statuses.values()) == {"SUCCEEDED"}
    failed = [f"process {i} exited {code}:\n{err[-3000:]}"
              for i, (code, _, err) in enumerate(outputs) if code != 0]
    if failed:   # in full: an assertion's repr would cut the stderr that says why
        pytest.fail("\n\n".join(failed), pytrace=False)
    assert len(calls) == 80 and set(calls.values()) == {1}
    assert len(writes) == 80 and set(writes.values()) == {1}
    assert all(r.result["condition"] for r in records)


def test_reconciliation_finds_five_webhooks_that_never_came_and_backfills_them(
        pg_ledger, pg_store_url):
    """Twenty features on the layer, fifteen webhooks delivered: reconcile reports the five
    by day, asset type and crew, and with --backfill the processors take them to SUCCEEDED."""
    with World(FaultSchedule(latency_s=0.01)) as world:
        pg_ledger.set_config(loopback_settings(world), now=time.time())
        features = [world.layer.add_feature(photos=1) for _ in range(20)]
        sender = Survey123Sender("http://127.0.0.1:9/unused")
        bodies = [sender.body_for(f) for f in features]
        with GatewayServer(pg_store_url) as gateway:
            delivered = Survey123Sender(gateway.url).burst(bodies[:15])
        assert [d.status for d in delivered] == [202] * 15
        since, until = str(time.time() - 3600), str(time.time() + 60)
        args = ("reconcile", "--db", pg_store_url, "--layer", world.layer.layer_url,
                "--since", since, "--until", until, "--json")
        code, out, err = run_cli(*args)
        assert code == 0, err[-2000:]
        report = json.loads(out)
        missing = features[15:]
        assert (report["features"], report["expected"], report["missing"]) == (20, 20, 5)
        assert sum(report["by_day"].values()) == 5
        assert report["by_crew"] == dict(Counter(f.attributes["crew"] for f in missing))
        assert report["by_asset_type"] == dict(Counter(f.attributes["asset_type"]
                                                       for f in missing))
        code, out, err = run_cli(*args, "--backfill")
        assert code == 0 and json.loads(out)["backfilled"] == 5, err[-2000:]
        keys = [sub.idempotency_key for body in bodies for sub in parse_webhook(body)]
        procs = spawn_processes(pg_store_url, 2)
        try:
            wait_until_settled(pg_ledger, keys, timeout_s=60, procs=procs)
        finally:
            stop_processes(procs)
        backfilled = [pg_ledger.get(k) for k in keys[15:]]
        again = json.loads(run_cli(*args)[1])
    assert all(r.status is Status.SUCCEEDED and r.source == "reconcile" for r in backfilled)
    assert again["missing"] == 0
