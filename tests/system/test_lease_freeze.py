"""No write reaches the layer from a holder whose lease lapsed.

A processor freezes (SIGSTOP) just before its write-back and sleeps past its lease; the
compensator reaps the task, a second processor completes it, a reviewer records "damaged"
and it is written on the layer; then the first wakes (SIGCONT) and would write its stale
answer over the verdict. It asks the ledger first and writes nothing. Judged at the layer
stand-in, on SQLite and on PostgreSQL.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from fme_ai_resilience.drill.standins import FaultSchedule
from fme_ai_resilience.core.ledger import Status
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.survey123 import parse_webhook

from helpers import script
from helpers.pipeline_world import World, loopback_settings, output_of, spawn


pytestmark = pytest.mark.integration

LEASE_S = 1.5


def frozen(proc, timeout_s=60.0):
    """Wait until ``proc`` has stopped itself (state T); fail when it exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the worker exited {proc.returncode} before freezing")
        with open(f"/proc/{proc.pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.02)
    raise AssertionError("the worker never froze")


def cli(*args, timeout=120):
    done = subprocess.run([sys.executable, "-m", "fme_ai_resilience", *args],
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'l.db'}"
    url = request.getfixturevalue("pg_store_url")
    with open_store(url) as store:
        store.clear()
    return url


def test_a_holder_frozen_past_its_lease_never_writes_over_the_verdict(db_url):
    """See the module docstring."""
    with World(FaultSchedule(latency_s=0.01)) as world, \
            open_store(db_url, init_schema=True) as store:
        store.set_config(loopback_settings(world, **{
            "processing.lease_s": str(LEASE_S),
            "validation.confidence_threshold": "0.999"}), now=time.time())  # all REVIEW
        (body,) = world.bodies(1)
        (sub,) = parse_webhook(body)
        store.register(sub, 10_000, now=time.time())
        key, feature = sub.idempotency_key, world.features[0].global_id
        first = spawn([sys.executable, script("freeze_worker.py"), db_url])
        try:
            frozen(first)
            time.sleep(LEASE_S + 0.5)                 # its lease lapses while it sleeps
            cli("compensate", "--db", db_url, "--no-reconcile")
            cli("process", "--db", db_url, "--once")
            assert store.get(key).status is Status.SUCCEEDED
            cli("review", "resolve", key, "--condition", "damaged", "--reviewer",
                "inspector 7", "--db", db_url)
            verdict = world.layer.attributes_of(feature)
            before = len(_history(world, feature))
            first.send_signal(signal.SIGCONT)
            assert first.wait(timeout=60) == 0
            woke_log = output_of(first)[1]
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
        after = world.layer.attributes_of(feature)
        writes = _history(world, feature)
        record = store.get(key)
    assert (verdict["ai_status"], verdict["ai_condition"]) == ("REVIEWED", "damaged")
    assert (after["ai_status"], after["ai_condition"]) == ("REVIEWED", "damaged"), (
        before, [(round(t, 3), row.get("ai_status"), row.get("ai_trace_id")) for t, row in writes],
        woke_log[-4000:])
    assert len(writes) == before, writes[before:]          # nothing written after waking
    assert record.status is Status.SUCCEEDED and record.review_verdict["condition"] == "damaged"


def _history(world, feature):
    """Every row written on the feature, in order."""
    history = world.layer.snapshot()["history"]
    (rows,) = [rows for gid, rows in history.items()
               if gid.strip("{}").lower() == feature.strip("{}").lower()]
    return rows
