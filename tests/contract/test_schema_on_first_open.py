"""A ledger without tables: SQLite creates its schema on first open (even with several processes
opening a new file at once); PostgreSQL never does, and says so with a 503."""
from __future__ import annotations

import io
import json
import multiprocessing
import os
import sqlite3
import uuid

import pytest

from fme_ai_resilience.cli import main
from fme_ai_resilience.core.errors import SchemaMissing
from fme_ai_resilience.gateway import make_app
from fme_ai_resilience.services.intake.webhook import receive
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.store import SqlStore, open_store

from helpers import DATA, store_workers as w


BODY = (DATA / "survey123_add.json").read_bytes()
CTX = multiprocessing.get_context("spawn")
T0 = 1_790_000_000.0


def _call(app, method="POST", path="/", body=BODY):
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "wsgi.input": io.BytesIO(body),
               "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body))}
    seen = {}
    raw = b"".join(app(environ, lambda status, headers: seen.update(
        status=int(status.split()[0]), headers=dict(headers))))
    return seen["status"], seen["headers"], json.loads(raw)


@pytest.mark.parametrize("prepare", ["missing", "empty file"])
def test_a_sqlite_ledger_creates_its_schema_on_first_open(tmp_path, prepare):
    """A SQLite ledger with no tables (a new file, or an empty one) gets its schema when the
    store first connects: the gateway answers 202, not 500, and /healthz says reachable."""
    path = tmp_path / "ledger.db"
    if prepare == "empty file":
        sqlite3.connect(str(path)).close()
    with open_store(f"sqlite:///{path}") as store:
        status, _, body = _call(make_app(store=store))
        assert status == 202 and body["status"] == "accepted"
        assert _call(make_app(store=store), "GET", "/healthz", b"")[0] == 200
        assert store.schema_version() == SqlStore.latest_schema_version("sqlite")


def test_processes_opening_a_new_sqlite_file_at_once_share_one_schema(tmp_path):
    """Eight processes opening the same new SQLite file at the same moment: each registers its
    keys, every migration is recorded once."""
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    n, per = 8, 25
    results, barrier = CTX.Queue(), CTX.Barrier(n)
    procs = [CTX.Process(target=w.open_fresh_and_register,
                         args=(url, i * per, per, barrier, results)) for i in range(n)]
    for p in procs:
        p.start()
    try:
        out = [results.get(timeout=120) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    assert [p.exitcode for p in procs] == [0] * n
    assert sum(new for _, new in out) == n * per
    with sqlite3.connect(str(tmp_path / "fresh.db")) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM schema_version")]
    assert sorted(versions) == list(range(1, SqlStore.latest_schema_version("sqlite") + 1))


def test_db_init_creates_the_missing_directory_of_a_sqlite_file(tmp_path, capsys):
    """db init on sqlite:///<new dir>/<new dir>/ledger.db creates both directories and the
    schema; status on another missing file still creates nothing."""
    target = tmp_path / "new" / "deeper" / "ledger.db"
    assert main(["db", "init", "--db", f"sqlite:///{target}"]) == 0
    assert "0 ->" in capsys.readouterr().out
    with open_store(f"sqlite:///{target}", create=False) as store:
        assert store.schema_version() == SqlStore.latest_schema_version("sqlite")
    assert main(["status", "--db", f"sqlite:///{tmp_path / 'other' / 'l.db'}"]) == 1
    assert not (tmp_path / "other").exists()


@pytest.fixture
def empty_pg_url(pg_url):
    """A PostgreSQL database of its own, without any table."""
    from helpers.postgres import PG_ADMIN_URL, pg_run

    name = f"fair_empty_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    pg_run(PG_ADMIN_URL, f'CREATE DATABASE "{name}"')
    try:
        yield f"{PG_ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    finally:
        pg_run(PG_ADMIN_URL, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
def test_a_postgresql_ledger_without_tables_answers_503_and_says_run_db_init(empty_pg_url,
                                                                           capsys):
    """PostgreSQL never creates the schema by itself: intake answers 503 + Retry-After with
    the reason, /healthz says "schema missing: run db init", status exits 1 saying so."""
    with open_store(empty_pg_url) as store:
        answer = receive(BODY, {}, Settings(), store=store, now=T0)
        assert answer.status_code == 503 and answer.retry_after_s >= 1
        assert answer.body["reason"] == "schema missing: run db init"
        status, headers, body = _call(make_app(store=store))
        assert status == 503 and body["reason"] == "schema missing: run db init"
        status, headers, body = _call(make_app(store=store), "GET", "/healthz", b"")
        assert status == 503 and int(headers["Retry-After"]) >= 1
        assert body["ledger"] == "schema_missing"
        assert body["reason"] == "schema missing: run db init"
        with pytest.raises(SchemaMissing):
            store.counts()
        assert store.schema_version() == 0  # nothing was created behind the operator's back
    assert main(["status", "--db", empty_pg_url]) == 1
    assert "schema missing: run db init" in capsys.readouterr().err
