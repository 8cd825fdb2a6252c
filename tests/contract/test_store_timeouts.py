"""PostgreSQL operations have a time limit: a held lock or a stuck statement is StoreUnavailable.

A second connection holds a lock the store needs (a row lock, or the whole table); the store's
operation must give up with StoreUnavailable, which intake and /healthz answer 503 with
Retry-After, through either driver (psycopg2, pg8000). Each operation runs in a thread so a store without limits fails the test instead
of hanging it; the lock is always released.
"""
from __future__ import annotations

import contextlib
import io
import json
import socket
import threading

import pytest

from fme_ai_resilience.core.errors import StoreUnavailable
from fme_ai_resilience.gateway import make_app
from fme_ai_resilience.core.ledger import TaskOutcome
from fme_ai_resilience.services.intake.webhook import receive
from fme_ai_resilience.core.config.settings import Settings, DatabaseSettings
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission
from fme_ai_resilience.store.pg_drivers import libpq_url

from helpers.postgres import pg8000_url
from helpers import DATA


pytestmark = pytest.mark.postgres

T0 = 1_790_000_000.0
BODY = (DATA / "survey123_add.json").read_bytes()
KEY = "5c1e0a2b-9d3f-4e61-8a7b-0f2c3d4e5a6b/a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d"
#: Longer than any limit under test: past it the operation is taken to hang.
SAFETY_S = 60.0


@contextlib.contextmanager
def held(url: str, sql: str, params=()):
    """A second connection holding a lock (taken by ``sql`` in an open transaction)."""
    import psycopg2

    conn = psycopg2.connect(libpq_url(url), connect_timeout=5)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
        yield
    finally:
        conn.rollback()
        conn.close()


def outcome_of(operation):
    """What ``operation()`` returned or raised, run in a thread; fails if it never ends."""
    box = {}

    def run():
        try:
            box["value"] = operation()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(SAFETY_S)
    assert not thread.is_alive(), "the operation was still blocked by the held lock"
    return box.get("error", box.get("value"))


@pytest.fixture(params=("psycopg2", "pg8000"))
def pg(request, pg_store_url):
    """The test database's URL, through psycopg2 and through pg8000."""
    with open_store(pg_store_url) as store:
        store.clear()
    return pg_store_url if request.param == "psycopg2" else pg8000_url(pg_store_url)


def test_complete_behind_a_held_row_lock_is_unavailable_with_the_default_limits(pg):
    """With the default settings, complete() on a row another connection holds locked gives
    up with StoreUnavailable (lock not available) instead of waiting for as long as it is held."""
    with open_store(pg) as store:
        store.register(Submission(KEY, "f", "t"), 10, now=T0)
        (task,) = store.claim("engine-1", 1, 60.0, now=T0)
        with held(pg, "SELECT 1 FROM ai_task_registry WHERE task_key = %s FOR UPDATE", (KEY,)):
            got = outcome_of(lambda: store.complete(KEY, task.lease_token,
                                                    TaskOutcome.ACCEPTED, {}, now=T0))
        assert isinstance(got, StoreUnavailable) and "lock" in str(got)
        assert store.complete(KEY, task.lease_token, TaskOutcome.ACCEPTED, {}, now=T0)


def test_intake_behind_a_held_table_lock_answers_503_with_retry_after(pg):
    """register() waiting on a locked table times out: intake answers 503 + Retry-After."""
    settings = DatabaseSettings(lock_timeout_s=0.5)
    with open_store(pg, settings=settings) as store:
        with held(pg, "LOCK TABLE ai_task_registry IN ACCESS EXCLUSIVE MODE"):
            answer = outcome_of(lambda: receive(BODY, {}, Settings(), store=store, now=T0))
        assert answer.status_code == 503 and answer.retry_after_s >= 1
        assert receive(BODY, {}, Settings(), store=store, now=T0).status_code == 202


def test_healthz_behind_a_held_table_lock_answers_503_with_retry_after(pg):
    """/healthz does not hang on a locked table: 503 with Retry-After and the kind of failure."""
    with open_store(pg, settings=DatabaseSettings(lock_timeout_s=0.5)) as store:
        app = make_app(store=store)
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/healthz", "wsgi.input": io.BytesIO()}
        seen = {}

        def health():
            body = b"".join(app(environ, lambda status, headers: seen.update(
                status=status, headers=dict(headers))))
            return json.loads(body)

        with held(pg, "LOCK TABLE ai_task_registry IN ACCESS EXCLUSIVE MODE"):
            body = outcome_of(health)
        assert seen["status"].startswith("503") and int(seen["headers"]["Retry-After"]) >= 1
        assert body["ledger"] == "unreachable" and "lock" in body["reason"].lower()


def test_a_statement_past_its_time_limit_is_unavailable(pg):
    """A statement still waiting past statement_timeout is cancelled (57014): StoreUnavailable."""
    settings = DatabaseSettings(statement_timeout_s=0.5, lock_timeout_s=30.0)
    with open_store(pg, settings=settings) as store:
        with held(pg, "LOCK TABLE ai_task_registry IN ACCESS EXCLUSIVE MODE"):
            got = outcome_of(lambda: store.register(Submission("k2", "f", "t"), 10, now=T0))
        assert isinstance(got, StoreUnavailable) and "statement timeout" in str(got)


def test_the_limits_are_set_on_every_connection(pg):
    """statement_timeout, lock_timeout and TCP keepalives are in force on the store's session."""
    settings = DatabaseSettings(statement_timeout_s=7.0, lock_timeout_s=2.5,
                             keepalives_idle_s=11.0, keepalives_interval_s=4.0,
                             keepalives_count=5)
    with open_store(pg, settings=settings) as store:
        store.counts()
        with store._conn.cursor() as cur:
            cur.execute("SELECT current_setting('statement_timeout'), "
                        "current_setting('lock_timeout')")
            assert tuple(cur.fetchone()) == ("7s", "2500ms")
        if store.driver == "pg8000":   # pg8000 turns keepalives on with the system's timing
            sock = store._conn.raw._usock
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)
            return
        params = store._conn.get_dsn_parameters()
        assert (params["keepalives"], params["keepalives_idle"], params["keepalives_interval"],
                params["keepalives_count"]) == ("1", "11", "4", "5")


CTRL_C_CHILD = """
import os, signal, sys, threading
from fme_ai_resilience.store import open_store
store = open_store(sys.argv[1])
store.counts()
threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    with store._conn.cursor() as cur:
        cur.execute("SELECT pg_sleep(30), 'fair-ctrl-c-probe'")
except KeyboardInterrupt:
    print("interrupted", flush=True)
sys.stdin.readline()   # alive, its connection open, until the test has looked
"""


def test_ctrl_c_during_a_psycopg2_statement_stops_it_on_the_server(pg_ledger_url):
    """A statement the store's psycopg2 connection is waiting on when Ctrl-C comes is
    cancelled on the server (as psycopg2's own wait does), not left running with its locks
    while the process goes on."""
    import subprocess
    import sys
    import time

    from helpers.postgres import pg_run

    child = subprocess.Popen([sys.executable, "-c", CTRL_C_CHILD, pg_ledger_url],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "interrupted", child.stderr.read()
        deadline = time.monotonic() + 5
        while True:
            running = pg_run(pg_ledger_url, "SELECT count(*) FROM pg_stat_activity WHERE "
                             "state = 'active' AND query LIKE %s AND pid <> pg_backend_pid()",
                             ("%fair-ctrl-c-probe%",))[0][0]
            if running == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        child.communicate("\n", timeout=30)
    assert running == 0
