"""Shared fixtures (a fake clock, a seeded random source, a throw-away PostgreSQL database) and
how a run is laid out: the tiers' order and the number of workers.

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

from helpers.postgres import IN_CI, PG_ADMIN_URL, pg8000_url
from helpers.tiers import TIERS


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: at least six workers, since most tests wait on a server, a process or a
    database rather than compute (on 2 cores, with four workers the cores were idle 23 % of
    a run, with six 9 %: docs/benchmarks.md, "The test suite")."""
    return max(6, os.cpu_count() or 1)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """The ``long`` tests first, then the slow tiers, so the quick ones fill the workers'
    last minutes."""
    def rank(item):
        parts = item.path.parts
        tier = next((p for p in parts[::-1] if p in TIERS), TIERS[-1])
        return (item.get_closest_marker("long") is None, TIERS.index(tier))
    items.sort(key=rank)


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


@pytest.fixture
def pg_ledger_url(pg_store_url):
    """The session's PostgreSQL ledger, emptied for this test (the session's tests share the
    database): its URL."""
    from fme_ai_resilience.store import open_store

    with open_store(pg_store_url) as store:
        store.clear()
    return pg_store_url


@pytest.fixture
def pg_ledger(pg_ledger_url):
    """The session's PostgreSQL ledger, emptied for this test, open."""
    from fme_ai_resilience.store import open_store

    with open_store(pg_ledger_url) as store:
        yield store


STORE_BACKENDS = ("sqlite", "sqlite-memory", "postgresql", "postgresql-pg8000")


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
