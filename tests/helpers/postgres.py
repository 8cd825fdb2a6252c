"""The PostgreSQL server the tests use: where it is, and statements run behind the store's back."""
from __future__ import annotations

import os

#: The server and database the tests' own databases are made from (``FAIR_TEST_PG_URL``).
PG_ADMIN_URL = os.environ.get("FAIR_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
#: Under CI a missing PostgreSQL fails the run instead of skipping its tests.
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


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


def pg8000_url(url: str) -> str:
    """The same PostgreSQL database through the pure-Python driver."""
    return "postgresql+pg8000://" + url.split("://", 1)[1]
