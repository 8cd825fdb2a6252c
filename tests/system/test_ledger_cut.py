"""A paid answer is kept before anything else can fail: the ledger cut between the Vision AI's
answer and the ``analyzed`` checkpoint buys no second paid call.

The pipeline on its default settings, time-compressed, with a ledger that refuses writes
quickly (a short busy or lock timeout): just as the Vision AI answers the first photo, another
session takes the ledger's write lock and holds it for a few seconds, so every write the
processor makes right after the answer fails. Counted at the Vision stand-in: every photo is
answered once, and every photo is analysed, on SQLite and on PostgreSQL. The Vision call's
phase limits are ``WIDE_PHASES``: the cut itself (a connection and a lock) runs before the
first answer leaves, and a call given up on would be paid again for another reason than
the cut.
"""
from __future__ import annotations

import sqlite3
import sys
import threading
import time

import pytest

from fme_ai_resilience.drill.standins import FaultSchedule, VisionStandIn
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.survey123 import parse_webhook

from helpers.pipeline_world import (spawn, spawn_processes, stop_processes,
                            wait_until_settled)
from helpers.pipeline_world import World
from helpers.scaled_world import WIDE_PHASES, scaled_defaults


pytestmark = pytest.mark.integration

SCALE = 0.02
#: Real seconds the ledger refuses writes once the first answer has gone out (50 production
#: seconds: within the third of the lease a paid answer is tried again for).
CUT_S = 50 * SCALE
#: The tables the processor writes right after a paid answer.
TABLES = ("analysis_cache", "ai_call_log", "ai_task_registry", "call_limit", "call_slot",
          "circuit_state", "call_pace", "analysis_claim")


class CuttingVision(VisionStandIn):
    """The Vision stand-in that, answering its first call, has the ledger cut: ``cut()`` runs
    before the answer leaves."""

    def __init__(self, *args, cut, **kwargs):
        super().__init__(*args, **kwargs)
        self._cut = cut
        self._done = threading.Event()

    def handle(self, request):
        reply = super().handle(request)
        if reply.status == 200 and not self._done.is_set():
            self._done.set()
            self._cut()
        return reply


def sqlite_cut(path):
    """Take the SQLite file's write lock now, give it back CUT_S later."""
    def cut():
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("BEGIN IMMEDIATE")
        threading.Timer(CUT_S, lambda: (conn.execute("ROLLBACK"), conn.close())).start()
    return cut


def postgres_cut(url):
    """Lock the ledger's tables against writes now (reads go on), release CUT_S later."""
    import psycopg2

    def cut():
        conn = psycopg2.connect(url)
        cur = conn.cursor()
        cur.execute("SELECT t FROM unnest(%s) AS t WHERE to_regclass(t) IS NOT NULL",
                    (list(TABLES),))
        tables = [row[0] for row in cur.fetchall()]
        cur.execute(f"LOCK TABLE {', '.join(tables)} IN EXCLUSIVE MODE")
        threading.Timer(CUT_S, lambda: (conn.rollback(), conn.close())).start()
    return cut


def compensate(url, env, stop):
    """WS-03 on its schedule: one ``compensate`` pass every minute (scaled), each its own
    process, as FME Flow's schedule starts one job after another (a pass the cut ledger
    fails is simply followed by the next)."""
    while not stop.wait(60 * SCALE):
        proc = spawn([sys.executable, "-m", "fme_ai_resilience", "compensate", "--db", url,
                      "--no-reconcile"], env=env)
        proc.wait(timeout=60)


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger(request, tmp_path):
    """``(url, cut, env)``: the ledger, how to cut it, and the quick timeout the processes
    get (a write waits that long for the lock, then fails)."""
    if request.param == "sqlite":
        path = tmp_path / "l.db"
        with open_store(f"sqlite:///{path}", init_schema=True):
            pass
        return f"sqlite:///{path}", sqlite_cut(str(path)), {
            "FAIR_DATABASE_BUSY_TIMEOUT_S": "0.2"}
    url = request.getfixturevalue("pg_store_url")
    with open_store(url) as store:
        store.clear()
    return url, postgres_cut(url), {"FAIR_DATABASE_LOCK_TIMEOUT_S": "0.2"}


def test_a_ledger_cut_right_after_a_paid_answer_buys_no_second_call(ledger):
    """See the module docstring."""
    url, cut, env = ledger
    photos = 4
    with World(FaultSchedule(latency_s=2.0), scale=SCALE) as world, \
            open_store(url) as store:
        world.vision.stop()
        world.vision = CuttingVision(FaultSchedule(latency_s=2.0), seed=7, time_scale=SCALE,
                                     cut=cut).start()
        store.set_config(scaled_defaults(world, SCALE, **WIDE_PHASES), now=time.time())
        subs = [sub for body in world.bodies(photos) for sub in parse_webhook(body)]
        for sub in subs:
            store.register(sub, 10_000, now=time.time())
        procs = spawn_processes(url, 2, env=env)
        stop = threading.Event()
        compensator = threading.Thread(target=compensate, args=(url, env, stop), daemon=True)
        compensator.start()
        try:
            statuses = wait_until_settled(store, [s.idempotency_key for s in subs],
                                          timeout_s=90, procs=procs)
            time.sleep(30 * SCALE)          # a second paid call would have come by now
        finally:
            stop.set()
            stop_processes(procs)
            compensator.join(30)
            world.vision.stop()
        vision = world.vision.snapshot()
    assert set(statuses.values()) == {"SUCCEEDED"}
    assert vision["analysed_by_sha256"] == {
        f.attachments[0].sha256: 1 for f in world.features}, vision["by_outcome"]
