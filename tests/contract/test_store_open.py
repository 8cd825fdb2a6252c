"""open_store: the URL picks the backend; the Store protocol is implemented in full."""
from __future__ import annotations

import inspect

import pytest

from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.store import SqlStore, Store, open_store
from fme_ai_resilience.store.sqlite import SQLiteStore


def test_sqlite_urls(tmp_path):
    """sqlite:///relative, sqlite:////absolute and sqlite:///:memory: open SQLite stores."""
    absolute = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    assert isinstance(absolute, SQLiteStore) and absolute.path == str(tmp_path / "a.db")
    assert open_store("sqlite:///:memory:").path == ":memory:"
    assert open_store("sqlite:///rel/x.db").path == "rel/x.db"


def test_init_schema_on_open(tmp_path):
    """open_store(init_schema=True) leaves a ready ledger file in WAL mode."""
    store = open_store(f"sqlite:///{tmp_path / 'w.db'}", init_schema=True)
    assert store.schema_version() == SqlStore.latest_schema_version("sqlite")
    mode = store._connection().execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    store.close()


@pytest.mark.parametrize("url", ["", "mysql://x", "sqlite:/x.db", "sqlite://", None])
def test_bad_urls_are_refused(url):
    """An unknown scheme or a malformed SQLite URL is a ValueError naming the problem."""
    with pytest.raises(ValueError):
        open_store(url)


def test_postgres_url_opens_lazily():
    """A PostgreSQL store connects on first use, so opening one never blocks."""
    pytest.importorskip("psycopg2")
    store = open_store("postgresql://postgres@127.0.0.1:1/none")
    assert store.dialect == "postgresql"


def _protocol_methods():
    return {name: member for name, member in vars(Store).items()
            if callable(member) and not name.startswith("_")}


@pytest.mark.parametrize("name", sorted(_protocol_methods()))
def test_sql_store_implements_the_protocol(name):
    """Every Store method exists with the protocol's parameters, in order, as a prefix."""
    wanted = list(inspect.signature(_protocol_methods()[name]).parameters)
    got = list(inspect.signature(getattr(SqlStore, name)).parameters)
    assert got[:len(wanted)] == wanted


@pytest.mark.parametrize("url, missing", [
    ("postgresql://", "database"),
    ("postgres://", "database"),
    ("postgresql://db.internal", "database"),
    ("postgresql://db.internal:5432/", "database"),
    ("postgresql://fme:pw-SECRET-3@db.internal", "database"),
    ("postgresql:///ledger", "host"),
    ("postgresql://:5432/ledger", "host"),
])
def test_a_postgresql_url_must_name_its_host_and_database(url, missing):
    """No libpq defaults stand in for the ledger: a URL without an explicit database (or host)
    is refused, naming what is missing, without the password."""
    pytest.importorskip("psycopg2")
    with pytest.raises(ConfigurationError) as err:
        open_store(url)
    assert f"no {missing}" in str(err.value) and "pw-SECRET-3" not in str(err.value)


@pytest.mark.parametrize("url, described", [
    ("postgresql://fme:pw-SECRET-3@db.internal:6543/ledger",
     "postgresql host=db.internal port=6543 database=ledger user=fme"),
    ("postgres://db.internal/ledger", "postgresql host=db.internal port=5432 database=ledger"),
    ("postgresql:///ledger?host=/var/run/postgresql",
     "postgresql host=/var/run/postgresql port=5432 database=ledger"),
    ("postgresql://db.internal?dbname=ledger&user=fme&password=pw-SECRET-3",
     "postgresql host=db.internal port=5432 database=ledger user=fme"),
])
def test_a_store_says_which_database_it_is_without_the_password(url, described):
    """describe() names dialect, host, port and database (and user), never a password."""
    pytest.importorskip("psycopg2")
    assert open_store(url).describe() == described


def test_a_sqlite_store_says_which_file_it_is(tmp_path, monkeypatch):
    """A SQLite store names its file as an absolute path (or says it is in memory)."""
    monkeypatch.chdir(tmp_path)
    assert open_store("sqlite:///rel/x.db").describe() == f"sqlite file={tmp_path / 'rel' / 'x.db'}"
    assert open_store("sqlite:///:memory:").describe() == "sqlite :memory:"
