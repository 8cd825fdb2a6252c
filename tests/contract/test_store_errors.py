"""Driver exceptions leave the store only as StoreError / StoreUnavailable."""
from __future__ import annotations

import sqlite3

import pytest

from fme_ai_resilience.core.errors import StoreError, StoreUnavailable
from fme_ai_resilience.store import open_store, sqlite as sqlite_backend
from fme_ai_resilience.core.intake.submission import Submission

T0 = 1_790_000_000.0


def _exception_classes(*modules):
    found = set()
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException) \
                    and value.__module__.split(".")[0] in ("sqlite3", "psycopg2"):
                found.add(value)
    return found


def test_every_sqlite3_exception_is_mapped():
    """Each exception class sqlite3 defines has an explicit entry in the translation table."""
    missing = _exception_classes(sqlite3) - set(sqlite_backend.DRIVER_ERRORS)
    assert not missing, f"unmapped sqlite3 exceptions: {sorted(c.__name__ for c in missing)}"


def test_every_psycopg2_exception_is_mapped():
    """Each exception class psycopg2 exports has an entry; psycopg2.errors resolve by MRO."""
    psycopg2 = pytest.importorskip("psycopg2")
    import psycopg2.errors
    import psycopg2.extensions

    from fme_ai_resilience.store import postgres

    exported = _exception_classes(psycopg2, psycopg2.extensions)
    missing = exported - set(postgres.DRIVER_ERRORS)
    assert not missing, f"unmapped psycopg2 exceptions: {sorted(c.__name__ for c in missing)}"
    for klass in _exception_classes(psycopg2.errors):
        assert any(base in postgres.DRIVER_ERRORS for base in klass.__mro__), klass


@pytest.mark.parametrize("exc, expected", [
    (sqlite3.OperationalError("database is locked"), StoreUnavailable),
    (sqlite3.OperationalError("unable to open database file"), StoreUnavailable),
    (sqlite3.OperationalError("no such column: x"), StoreError),
    (sqlite3.IntegrityError("CHECK constraint failed"), StoreError),
    (sqlite3.ProgrammingError("closed"), StoreError),
])
def test_sqlite_translation_picks_the_specific_class(exc, expected):
    """Locked or unopenable files are StoreUnavailable; everything else StoreError."""
    translated = sqlite_backend.translate_error(exc)
    assert type(translated) is expected
    assert str(exc) in str(translated)


def test_translated_messages_are_redacted():
    """A secret inside a driver message does not survive translation."""
    exc = sqlite3.OperationalError("near token=abcdef123456: syntax error")
    assert "abcdef123456" not in str(sqlite_backend.translate_error(exc))


def test_missing_tables_say_to_run_db_init(tmp_path):
    """Using a store before `db init` names the command that fixes it (a SQLite store that
    does not create its schema on opening, as PostgreSQL never does)."""
    store = open_store(f"sqlite:///{tmp_path / 'empty.db'}", auto_schema=False)
    with pytest.raises(StoreError, match="db init"):
        store.counts()
    assert store.schema_version() == 0


def test_sqlite_unreachable_file_is_unavailable(tmp_path):
    """A database file in a directory that does not exist is StoreUnavailable."""
    store = open_store(f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}")
    with pytest.raises(StoreUnavailable):
        store.counts()


def test_sqlite_write_lock_timeout_is_unavailable(tmp_path):
    """A writer that cannot get the lock within the busy timeout gets StoreUnavailable."""
    url = f"sqlite:///{tmp_path / 'busy.db'}"
    open_store(url, init_schema=True).close()
    holder = sqlite3.connect(str(tmp_path / "busy.db"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        store = open_store(url, busy_timeout_s=0.05)
        with pytest.raises(StoreUnavailable):
            store.register(Submission("k", "F", "t"), 10, now=T0)
        assert store.counts()["PENDING"] == 0  # readers are not blocked by the writer (WAL)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_failed_operation_rolls_back_and_the_store_keeps_working(store):
    """An error mid-transaction leaves nothing half-written and the connection usable."""
    with pytest.raises(ValueError):
        store.set_config({"a": "1", "": "2"}, now=T0)
    assert store.get_config() == {}
    store.set_config({"a": "1"}, now=T0)
    assert store.get_config() == {"a": "1"}


#: A loopback port nothing listens on (a port the system gave out and took back may be
#: another test worker's server by the time it is dialled).
CLOSED_PORT = 1


def test_postgres_server_down_is_unavailable():
    """Pointing at a closed loopback port raises StoreUnavailable, not a driver error."""
    pytest.importorskip("psycopg2")
    store = open_store(f"postgresql://postgres@127.0.0.1:{CLOSED_PORT}/nothing",
                       connect_timeout_s=1)
    with pytest.raises(StoreUnavailable):
        store.counts()
    with pytest.raises(StoreUnavailable):
        open_store(f"postgresql://postgres@127.0.0.1:{CLOSED_PORT}/x", init_schema=True)


def test_postgres_repr_hides_the_password():
    """The URL's password never shows in the store's repr."""
    pytest.importorskip("psycopg2")
    store = open_store("postgresql://fair:hunter2-secret@127.0.0.1:1/db")
    assert "hunter2-secret" not in repr(store)


def test_postgres_constraint_violation_is_store_error(pg_store_url):
    """A server-side error that is not about reachability is a plain StoreError."""
    import psycopg2

    from fme_ai_resilience.store import postgres

    exc = psycopg2.errors.CheckViolation("new row violates check constraint")
    assert type(postgres.translate_error(exc)) is StoreError
    assert type(postgres.translate_error(psycopg2.OperationalError("server closed"))) \
        is StoreUnavailable


def test_sqlite_connection_failing_its_setup_is_closed(tmp_path, monkeypatch):
    """A connection whose PRAGMA setup fails is closed, not leaked, and the error is StoreError."""
    path = tmp_path / "notadb.db"
    path.write_bytes(b"this is not a database" * 100)
    opened = []
    real_connect = sqlite3.connect

    def connect(*args, **kwargs):
        opened.append(real_connect(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(sqlite_backend.sqlite3, "connect", connect)
    store = sqlite_backend.SQLiteStore(str(path))
    for _ in range(2):
        with pytest.raises(StoreError):
            store.counts()
    assert len(opened) == 2
    for conn in opened:
        with pytest.raises(sqlite3.ProgrammingError):  # "Cannot operate on a closed database"
            conn.execute("SELECT 1")


def test_a_nul_in_the_location_is_store_error(tmp_path):
    """A SQLite path or PostgreSQL URL with a NUL comes out as StoreError, not ValueError."""
    with pytest.raises(StoreError):
        sqlite_backend.SQLiteStore(str(tmp_path / "a\x00b.db")).counts()
    pytest.importorskip("psycopg2")
    from fme_ai_resilience.store.postgres import PostgresStore
    with pytest.raises(StoreError):
        PostgresStore("postgresql://postgres@127.0.0.1:5432/te\x00st").counts()


def test_switching_a_new_file_to_wal_asks_again_while_another_opener_holds_it(tmp_path,
                                                                              monkeypatch):
    """SQLite may answer the switch to WAL "database is locked" at once, without waiting,
    while another process opens the same new file: the store asks again (within its busy
    timeout) instead of failing."""
    real_connect = sqlite_backend.sqlite3.connect
    refusals = []

    class Contended:
        def __init__(self, conn):
            self._conn = conn

        def execute(self, sql, *args):
            if "journal_mode" in sql and len(refusals) < 2:
                refusals.append(sql)
                raise sqlite3.OperationalError("database is locked")
            return self._conn.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self._conn, name)

    monkeypatch.setattr(sqlite_backend.sqlite3, "connect",
                        lambda *a, **k: Contended(real_connect(*a, **k)))
    store = sqlite_backend.SQLiteStore(str(tmp_path / "new.db"), busy_timeout_s=5)
    assert store.counts()["PENDING"] == 0 and len(refusals) == 2
    store.close()
