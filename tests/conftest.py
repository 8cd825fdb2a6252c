"""Shared fixtures: a fake clock, a seeded random source, and a throw-away PostgreSQL database.

PostgreSQL tests run against ``FAIR_TEST_PG_URL`` (default: the local server at
127.0.0.1:5432, user postgres, database test). Each test session gets its own database,
dropped afterwards. Without a reachable server they skip with the reason, except under
``CI=true``, where a missing PostgreSQL fails the run.
"""
from __future__ import annotations

import os
import random
import uuid

import pytest

from fme_ai_resilience.core.clock import FakeClock

PG_ADMIN_URL = os.environ.get("FAIR_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture
def clock() -> FakeClock:
    """A clock that moves only when the test (or a sleep) moves it."""
    return FakeClock()


@pytest.fixture
def rng() -> random.Random:
    """A seeded random source, so jitter is reproducible."""
    return random.Random(1234)


def _pg_unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"PostgreSQL is required under CI=true: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL not available ({reason}); set FAIR_TEST_PG_URL to run these tests")


@pytest.fixture(scope="session")
def pg_url():
    """URL of a fresh PostgreSQL database for this test session (dropped at the end)."""
    try:
        import psycopg2
    except ImportError:
        _pg_unavailable("psycopg2 is not installed: pip install 'fme-ai-resilience[postgres]'")
    try:
        admin = psycopg2.connect(PG_ADMIN_URL, connect_timeout=3)
    except psycopg2.Error as exc:
        _pg_unavailable(f"cannot connect to {PG_ADMIN_URL}: {str(exc).strip()}")
    admin.autocommit = True
    name = f"fair_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(scope="session")
def pg_store_url(pg_url):
    """The session's PostgreSQL database with the ledger schema in place."""
    from fme_ai_resilience.store import open_store

    with open_store(pg_url, init_schema=True):
        pass
    return pg_url


def pg_run(url: str, sql, params=()):
    """Run one statement as the admin connection (autocommit) and return its rows, if any.

    For tests that look at or change the database behind the store's back."""
    import psycopg2

    conn = psycopg2.connect(url, connect_timeout=5)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description is not None else []
    finally:
        conn.close()


STORE_BACKENDS = ("sqlite", "sqlite-memory", "postgresql", "postgresql-pg8000")


def pg8000_url(url: str) -> str:
    """The same PostgreSQL database through the pure-Python driver."""
    return "postgresql+pg8000://" + url.split("://", 1)[1]


@pytest.fixture(params=STORE_BACKENDS)
def store(request, tmp_path):
    """An initialised, empty ledger on each backend: a SQLite file, SQLite :memory:, PostgreSQL."""
    from fme_ai_resilience.store import open_store

    if request.param == "postgresql":
        url = request.getfixturevalue("pg_store_url")
    elif request.param == "postgresql-pg8000":
        url = pg8000_url(request.getfixturevalue("pg_store_url"))
    elif request.param == "sqlite-memory":
        url = "sqlite:///:memory:"
    else:
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
    s = open_store(url, init_schema=True)
    s.clear()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(params=("sqlite", "postgresql", "postgresql-pg8000"))
def shared_ledger_url(request, tmp_path):
    """URL of an initialised, empty ledger that several connections can share, on each backend."""
    from fme_ai_resilience.store import open_store

    if request.param == "postgresql":
        url = request.getfixturevalue("pg_store_url")
    elif request.param == "postgresql-pg8000":
        url = pg8000_url(request.getfixturevalue("pg_store_url"))
    else:
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_store(url, init_schema=True) as s:
        s.clear()
    return url
