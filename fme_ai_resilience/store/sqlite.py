"""The embedded SQLite ledger: one file shared by every FME engine on the host.

WAL mode (readers never block the writer), ``synchronous=FULL`` (an acknowledged submission
survives a power cut), a busy timeout so engines queue for the write lock instead of failing,
and ``BEGIN IMMEDIATE`` for every write so two processes never both read-then-write. One
connection per store, guarded by a lock (and reopened after a ``fork``).
"""
from __future__ import annotations

import os
import sqlite3
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Mapping, Optional, Type

from ..core.clock import Clock, SystemClock
from ..core.errors import ConfigurationError, StoreError, StoreUnavailable
from .sqlbase import SqlStore, T, Tx, status_of_new_task, translate

__all__ = ["SQLiteStore", "DRIVER_ERRORS", "translate_error"]

#: Every exception class the sqlite3 module defines, mapped once (a test checks none is missing).
DRIVER_ERRORS: Mapping[type, Type[StoreError]] = {
    sqlite3.Warning: StoreError,
    sqlite3.Error: StoreError,
    sqlite3.InterfaceError: StoreError,
    sqlite3.DatabaseError: StoreError,
    sqlite3.DataError: StoreError,
    sqlite3.OperationalError: StoreError,
    sqlite3.IntegrityError: StoreError,
    sqlite3.InternalError: StoreError,
    sqlite3.ProgrammingError: StoreError,
    sqlite3.NotSupportedError: StoreError,
}

_UNAVAILABLE_SIGNS = ("database is locked", "database table is locked", "unable to open",
                      "disk i/o error", "database is busy")


def _unavailable(exc: BaseException) -> bool:
    """The file cannot be opened, or the write lock was not granted within the busy timeout."""
    return isinstance(exc, sqlite3.OperationalError) and any(
        sign in str(exc).lower() for sign in _UNAVAILABLE_SIGNS)


def translate_error(exc: BaseException) -> StoreError:
    """The library exception for a sqlite3 exception."""
    return translate(exc, DRIVER_ERRORS, _unavailable)


class SQLiteStore(SqlStore):
    """The ledger in one SQLite file (or ``:memory:``, private to this store, for tests).

    ``busy_timeout_s`` is how long a writer waits for another process's write lock;
    with ``create=False`` a missing file is StoreUnavailable instead of a new empty ledger, and
    ``create_parents`` also creates the file's missing directories. With ``auto_schema`` (the
    default) each new connection brings the schema up to date first, with the migrations
    ``init_schema`` applies (dated by ``clock``): an embedded ledger is ready on first open,
    and processes opening a new file at once serialise on SQLite's write lock.
    """

    dialect = "sqlite"

    def __init__(self, path: str, busy_timeout_s: float = 30.0, create: bool = True, *,
                 create_parents: bool = False, auto_schema: bool = True,
                 clock: Optional[Clock] = None) -> None:
        super().__init__()
        if not path:
            raise ConfigurationError("path", path, "must name a file or be ':memory:'")
        self.path = path
        self.create = create
        self.create_parents = create_parents
        self.auto_schema = auto_schema
        self.clock = clock or SystemClock()
        self.busy_timeout_s = float(busy_timeout_s)
        self._lock = threading.RLock()
        self._conn = None
        self._pid = None

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    def describe(self) -> str:
        """``sqlite file=<absolute path>`` (or ``sqlite :memory:``)."""
        if self.path == ":memory:":
            return "sqlite :memory:"
        return f"sqlite file={os.path.abspath(self.path)}"

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        try:
            if self.create_parents and self.path != ":memory:":
                os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            target, uri = self.path, False
            if not self.create and self.path != ":memory:":
                # Open an existing file only; never leave an empty ledger behind.
                target, uri = f"file:{urllib.parse.quote(self.path)}?mode=rw", True
            conn = sqlite3.connect(target, timeout=self.busy_timeout_s, uri=uri,
                                   isolation_level=None, check_same_thread=False)
        except (sqlite3.Error, ValueError) as exc:  # ValueError: a NUL in the path
            raise translate_error(exc) from exc
        except OSError as exc:  # the directory could not be created
            raise StoreUnavailable(f"cannot create the ledger's directory: {exc}") from exc
        try:
            if self.path != ":memory:":
                self._granted(conn, self._queries["journal_wal"])
            conn.execute(self._queries["synchronous_full"])
        except sqlite3.Error as exc:
            conn.close()  # a connection that failed its setup is never kept nor leaked
            raise translate_error(exc) from exc
        self._conn, self._pid = conn, os.getpid()
        if self.auto_schema:
            try:
                self._bring_schema_up_to_date()
            except BaseException:
                self.close()  # the next operation connects, and checks, again
                raise
        return conn

    def _granted(self, conn: sqlite3.Connection, sql: str) -> None:
        """Run a statement that needs the file's lock, asking again while another connection
        holds it, for at most ``busy_timeout_s``: SQLite may refuse the switch to WAL at once,
        without waiting, when several processes open a new file at the same moment."""
        deadline = time.monotonic() + self.busy_timeout_s
        pause = 0.005
        while True:
            try:
                conn.execute(sql)
                return
            except sqlite3.OperationalError as exc:
                if not _unavailable(exc) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(2 * pause, 0.2)

    def _bring_schema_up_to_date(self) -> None:
        """Apply the migrations this file lacks (a read when it has them all)."""
        if self.schema_version() < self.latest_schema_version(self.dialect):
            self.init_schema(now=self.clock.now())

    def close(self) -> None:
        """Close the connection (a later operation opens a new one)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def _transact(self, fn: Callable[[Tx], T], write: bool = True) -> T:
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as exc:
                raise translate_error(exc) from exc
            try:
                out = fn(Tx(conn.cursor(), self._queries))
                conn.execute("COMMIT")
                return out
            except sqlite3.Error as exc:
                self._rollback(conn)
                raise translate_error(exc) from exc
            except BaseException:
                self._rollback(conn)
                raise

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def _register_row(self, params: Dict[str, Any]) -> Dict[str, Any]:
        def work(tx: Tx) -> Dict[str, Any]:
            backlog = int(tx.run("backlog", params).rows[0]["n"])
            existing = tx.run("existing", params).rows
            if existing:
                return {"inserted": None, "backlog": backlog, **existing[0]}
            status = status_of_new_task(backlog, params["ceiling"], params["park"],
                                        params["park_ceiling"])
            if status is not None:
                tx.run("insert_task", dict(params, status=status.value))
            return {"inserted": None if status is None else status.value, "backlog": backlog,
                    "status": None, "outcome": None}
        return self._transact(work)

    def _claim_rows(self, params: Dict[str, Any]) -> List[Dict[str, Any]]:
        def work(tx: Tx) -> List[Dict[str, Any]]:
            rows = []
            for due in tx.run("due_keys", params).rows:
                tx.run("lease_one", dict(params, key=due["task_key"]))
                rows.extend(dict(row, due=due["due"])
                            for row in tx.run("get", {"key": due["task_key"]}).rows)
            return rows
        return self._transact(work)
