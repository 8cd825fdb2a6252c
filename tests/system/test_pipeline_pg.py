"""The pipeline end to end on PostgreSQL: the gateway, four ``process`` processes, and a Vision
AI, photo host and feature layer on loopback that fail the way real ones do.

What is asserted is what the stand-ins counted: every submission ends SUCCEEDED or DEAD with
its cause, none is lost, no photo is analysed again after its ``analyzed`` checkpoint, and no
feature is written twice.
"""
from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from fme_ai_resilience.drill.standins import FaultSchedule, Survey123Sender
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.survey123 import parse_webhook

from helpers.pipeline_world import (GatewayServer, World, loopback_settings,
                            spawn_processes, stop_processes, wait_until_settled)


pytestmark = pytest.mark.postgres


def keys_of(bodies):
    return [sub.idempotency_key for body in bodies for sub in parse_webhook(body)]


def analysed_once_at_most(log):
    """Per photo: no call reached the stand-in after the one whose answer was valid (the
    task's ``analyzed``); a drifted answer is no analysis and may be asked again once."""
    answered = {}
    for at_s, sha, outcome in log:
        assert sha not in answered, (
            f"photo {sha[:12]} called again ({outcome}) after its answer at {answered[sha]}")
        if outcome == "ok":
            answered[sha] = at_s
    return answered


@pytest.mark.long
def test_two_hundred_submissions_under_faults_end_succeeded_or_dead_with_their_cause(
        pg_ledger_url):
    schedule = FaultSchedule(latency_s=0.02, error_rate=0.3, rate_limit_per_s=20.0,
                             rate_limit_burst=4, drift_rate=0.08)
    with World(schedule) as world, open_store(pg_ledger_url) as store:
        # the fleet's retry budget and the wait before a drifted answer's retry in proportion
        # to the test's short backoffs (0.2 retries a second and a 30 s cooldown leave the
        # last failed tasks a minute in line)
        store.set_config(loopback_settings(world, **{"retry.fleet_retry_floor_per_s": "2",
                                                     "breaker.cooldown_s": "1",
                                                     "breaker.cooldown_max_s": "3"}),
                         now=time.time())
        bodies = world.bodies(200, missing_every=25)
        with GatewayServer(pg_ledger_url) as gateway:
            deliveries = Survey123Sender(gateway.url).burst(bodies, concurrency=8)
        assert Counter(d.status for d in deliveries) == {202: 200}
        keys = keys_of(bodies)
        procs = spawn_processes(pg_ledger_url, 4)
        try:
            statuses = wait_until_settled(store, keys, timeout_s=240, procs=procs)
        finally:
            outputs = stop_processes(procs)
        assert [code for code, _, _ in outputs] == [0, 0, 0, 0], outputs[0][2][-2000:]
        for _, stdout, stderr in outputs:
            logged = [json.loads(line) for line in stderr.splitlines() if line.strip()]
            assert all("trace_id" in line and line["level"] != "CRITICAL" for line in logged)
            assert "Traceback" not in stderr and "stand-in-portal-token" not in stderr
            batches = [json.loads(line) for line in stdout.splitlines()]
            assert batches and all(b["stopped"] != "LEDGER_DOWN" for b in batches)
        records = {k: store.get(k) for k in keys}
        vision = world.vision.snapshot()
        layer = world.layer.snapshot()

    # None lost: every webhook's task ended, each DEAD one with its cause.
    assert len(records) == 200 and set(statuses.values()) <= {"SUCCEEDED", "DEAD"}
    causes = Counter(r.failure_class.value for r in records.values() if r.status.value == "DEAD")
    assert causes["NOT_FOUND"] == 8                           # the photos that 404
    assert causes["FORMAT"] >= 1                              # the drifted answers
    assert all(r.failure_class is not None and r.last_error
               for r in records.values() if r.status.value == "DEAD")
    # The faults really happened.
    assert vision["by_outcome"]["server_error"] >= 30 and vision["by_outcome"]["rate_limited"] > 0
    # No Vision call for a photo after its whole answer, and one answer per photo.
    answered = analysed_once_at_most(vision["log"])
    succeeded = [r for r in records.values() if r.status.value == "SUCCEEDED"]
    assert len(answered) == len(succeeded)
    # No answer written twice: at most the interim AWAITING_ANALYSIS flag (a photo behind an
    # open circuit) and then its answer; every succeeded feature written.
    written = {gid.strip("{}").lower(): n for gid, n in layer["writes"].items()}
    assert set(written.values()) <= {1, 2}
    assert set(r.payload["feature_global_id"] for r in succeeded) <= set(written)
    for record in succeeded:
        attributes = world.layer.attributes_of(record.payload["feature_global_id"])
        assert attributes["ai_condition"] == record.result["condition"]
        assert attributes["ai_trace_id"] == record.trace_id


def test_the_same_photos_under_new_globalids_cost_no_second_vision_call(pg_ledger_url):
    """Survey123 re-created the features (new GlobalIDs, the same photo bytes): the second
    round reuses the first round's analyses, so the Vision stand-in sees one call per photo."""
    with World(FaultSchedule(latency_s=0.01)) as world, open_store(pg_ledger_url) as store:
        store.set_config(loopback_settings(world), now=time.time())
        first = world.bodies(5)
        sender = Survey123Sender("http://127.0.0.1:9/unused")
        again = [sender.body_for(world.layer.recreate(f)) for f in world.features]
        procs = spawn_processes(pg_ledger_url, 2)
        try:
            with GatewayServer(pg_ledger_url) as gateway:
                Survey123Sender(gateway.url).burst(first)
                wait_until_settled(store, keys_of(first), timeout_s=60, procs=procs)
                Survey123Sender(gateway.url).burst(again)
                wait_until_settled(store, keys_of(again), timeout_s=60, procs=procs)
        finally:
            stop_processes(procs)
        second = [store.get(k) for k in keys_of(again)]
        vision = world.vision.snapshot()
    assert set(keys_of(first)).isdisjoint(keys_of(again))
    assert vision["total"] == 5 and len(vision["by_sha256"]) == 5
    assert all(r.status.value == "SUCCEEDED" and r.result["reused"] for r in second)
