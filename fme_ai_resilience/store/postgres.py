"""The PostgreSQL ledger: shared by every engine on every host, through psycopg2 or pg8000
(the pure-Python driver an FME Package ships; :mod:`.pg_drivers` says which a URL gets).

One connection per store, reused, guarded by a lock. Transactions are explicit: an operation
that is one statement (register, claim, every fenced write) runs as its own transaction in a
single round trip; an operation of several statements runs inside ``BEGIN ... COMMIT``.
A connection the server has hung up on is replaced before use. After a failure an operation
is run again only when nothing can have taken effect: a read, a transaction that failed
before ``COMMIT``, or work the server rolled back (deadlock, serialisation failure).
Every driver error leaves as :class:`StoreError` or :class:`StoreUnavailable`.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import select
import threading
from typing import (Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Set,
                    Tuple, Type)

from ..core.errors import ConfigurationError, StoreError, StoreUnavailable
from ..core.text.redact import redact_url
from ..core.config.settings import DatabaseSettings
from .pg_drivers import Driver, driver_for
from .sqlbase import Result, SqlStore, T, Tx, status_of_new_task, translate
from .text import clean_value

try:  # the extra: pip install 'fme-ai-resilience[postgres]'
    import psycopg2
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg2 = None

__all__ = ["PostgresStore", "PREPARED", "DRIVER_ERRORS", "translate_error", "Prepared",
           "prepared_forms", "ANSWER_MARGIN_S"]

log = logging.getLogger(__name__)

#: Hot statements prepared once per connection (planning would otherwise cost as much as
#: running them). Where PostgreSQL cannot infer a parameter's type from a column (a SELECT
#: list, a comparison with an expression), the SQL casts it.
PREPARED = ("register", "claim", "complete", "fail", "defer", "bury",
            "checkpoint_downloaded", "checkpoint_analyzed", "checkpoint_written")

_PYFORMAT = re.compile(r"%\((\w+)\)s")

#: Server-side causes that mean "the server cannot serve us now" (SQLSTATE class or code):
#: connection trouble, no resources, shutting down, and a statement cancelled by the session's
#: statement_timeout (57014) or lock_timeout (55P03): the work waits behind someone else's.
_UNAVAILABLE_CODES = ("08", "53", "57P01", "57P02", "57P03", "57014", "55P03")
_RETRIES = 3
#: How long past the session's statement_timeout the store still waits for an answer (the
#: server cancels a statement at its timeout; the answer then crosses the network).
ANSWER_MARGIN_S = 2.0


def _psycopg2_errors() -> Mapping[type, Type[StoreError]]:
    if psycopg2 is None:
        return {}
    return driver_for("postgresql+psycopg2://").errors


#: Every exception class psycopg2 exports, mapped once (a test checks none is missing); the
#: hundreds in ``psycopg2.errors`` subclass these and resolve through their MRO. pg8000's
#: table is its driver's (:mod:`.pg_drivers`).
DRIVER_ERRORS: Mapping[type, Type[StoreError]] = _psycopg2_errors()


def _unavailable(exc: BaseException, driver: Driver) -> bool:
    """No server answer at all (connect failed, connection lost) or a server refusing work."""
    if driver.lost(exc):
        return True
    code = driver.code(exc)
    return bool(code) and code.startswith(_UNAVAILABLE_CODES)  # type: ignore[union-attr]


def translate_error(exc: BaseException, driver: Optional[Driver] = None) -> StoreError:
    """The library exception for a driver exception (psycopg2's unless ``driver`` says)."""
    driver = driver or driver_for("postgresql+psycopg2://")
    return translate(exc, driver.errors, lambda e: _unavailable(e, driver), driver.describe)


class PostgresStore(SqlStore):
    """The ledger in a PostgreSQL database (``postgresql://user@host:port/db``).

    ``settings`` (a :class:`~fme_ai_resilience.core.config.settings.DatabaseSettings`) limits every
    connection: connect timeout, ``statement_timeout``, ``lock_timeout`` and TCP keepalives; a
    statement cancelled by either limit is StoreUnavailable. ``connect_timeout_s`` overrides the
    setting. Parameters written in the URL (``?connect_timeout=``, ``?keepalives_idle=``) win.

    A server that stops answering is waited for at most ``statement_timeout_s`` +
    :data:`ANSWER_MARGIN_S` per statement, with either driver (migrations excepted), and an
    operation waits as long at most for another thread's operation on the shared connection:
    then it is StoreUnavailable, never run again (whether a write took effect is unknown).
    """

    dialect = "postgresql"

    def __init__(self, url: str, connect_timeout_s: Optional[float] = None,
                 application_name: str = "fme-ai-resilience", prepare: bool = True, *,
                 settings: Optional[DatabaseSettings] = None) -> None:
        self._driver = driver_for(url)
        super().__init__()
        self._target = _target_of(url, self._driver)
        self.url = url
        self.settings = settings or DatabaseSettings()
        self.connect_timeout_s = (self.settings.connect_timeout_s if connect_timeout_s is None
                                  else connect_timeout_s)
        self.application_name = application_name
        self._lock = threading.RLock()
        #: The bound on every wait for the server's answer (None while a migration runs).
        self._wait_s: Optional[float] = self.settings.statement_timeout_s + ANSWER_MARGIN_S
        self._conn: Optional[Any] = None
        self._cursor: Optional[Any] = None  # the connection's cursor for one-statement work
        self._pid: Optional[int] = None
        # prepare=False for poolers that cannot keep prepared statements (PgBouncer in
        # transaction mode).
        self._prepare: Dict[str, Prepared] = {
            name: prepared_forms(name, self._queries[name])
            for name in PREPARED} if prepare and self._driver.name == "psycopg2" else {}
        self._prepared: Set[str] = set()

    def __repr__(self) -> str:
        return f"PostgresStore({redact_url(self.url)!r})"

    @property
    def driver(self) -> str:
        """The driver this store speaks through: ``psycopg2`` or ``pg8000``."""
        return self._driver.name

    def describe(self) -> str:
        """``postgresql host=... port=... database=... user=...``: never the password."""
        return "postgresql " + " ".join(f"{k}={v}" for k, v in self._target.items() if v)

    def _connect(self) -> Any:
        driver = self._driver
        if self._conn is not None and not driver.closed(self._conn) and self._pid == os.getpid():
            return self._conn
        self._conn = None
        limits = self.settings
        # libpq takes whole seconds here (and treats 1 as 2)
        wanted = {"connect_timeout": self.connect_timeout_s, "keepalives": 1,
                  "keepalives_idle": limits.keepalives_idle_s,
                  "keepalives_interval": limits.keepalives_interval_s,
                  "keepalives_count": limits.keepalives_count,
                  "application_name": self.application_name}
        options: Dict[str, Any] = {
            name: value if isinstance(value, str) else max(1, int(round(value)))
            for name, value in wanted.items() if name not in self.url}
        for attempt in (1, 2):
            try:
                conn = driver.connect(self.url, options, read_timeout_s=self._wait_s)
            except (driver.Error, ValueError) as exc:  # ValueError: a NUL in the URL
                raise translate_error(exc, driver) from exc
            try:
                # Autocommit at the driver: a one-statement operation is one round trip;
                # operations of several statements open an explicit transaction (_transact).
                conn.autocommit = True
                with conn.cursor() as cur:
                    cur.execute(self._queries["session_setup"])
                    cur.execute(self._queries["session_limits"], {
                        "statement_timeout": _ms(limits.statement_timeout_s),
                        "lock_timeout": _ms(limits.lock_timeout_s)})
                break
            except driver.Error as exc:
                ended = driver.closed(conn) or driver.lost(exc)
                with contextlib.suppress(driver.Error):
                    conn.close()
                # The server ended the new session before it was set up (a restart,
                # pg_terminate_backend during a failover): nothing was done on it, one more
                # connect; a server that refuses or does not answer fails at the connect.
                if attempt == 1 and ended and not driver.timed_out(exc):
                    log.info("the ledger ended a new session before its setup: connecting "
                             "again")
                    continue
                raise translate_error(exc, driver) from exc
        # JSON columns come back as text, as from SQLite (the driver's connect sees to it);
        # the shared code decodes them.
        self._conn, self._pid, self._prepared = conn, os.getpid(), set()
        self._cursor = conn.cursor()
        return conn

    def terminate_other_sessions(self) -> int:
        """Cut every other connection to this database (what a restart or a failover does to
        the engines); returns how many were cut."""
        return len(self._statement("terminate_other_sessions").rows)

    def close(self) -> None:
        """Close the connection (a later operation opens a new one)."""
        with self._lock:
            if self._conn is not None:
                self._drop(self._conn)

    def init_schema(self, *, now: float) -> List[int]:
        """As :meth:`SqlStore.init_schema`; a migration may build an index over a large table,
        so the store waits for its answer without a deadline."""
        with self._held():
            self._wait_s = None
            try:
                if self._conn is not None and not self._driver.closed(self._conn):
                    self._driver.bound(self._conn, None)
                return super().init_schema(now=now)
            finally:
                self._wait_s = self.settings.statement_timeout_s + ANSWER_MARGIN_S
                if self._conn is not None and not self._driver.closed(self._conn):
                    self._driver.bound(self._conn, self._wait_s)

    @contextlib.contextmanager
    def _held(self) -> Iterator[None]:
        """The connection's lock, waited for as long as one statement may wait for the server:
        past that, the operation holding it is waiting on a server that does not answer."""
        wait_s = self._wait_s
        if not self._lock.acquire(timeout=-1 if wait_s is None else wait_s):
            raise StoreUnavailable(f"the ledger did not answer another operation within "
                                   f"{wait_s:g} s")
        try:
            yield
        finally:
            self._lock.release()

    def _live_connection(self) -> Any:
        """The connection, replaced first if it is gone or the server has hung up on it.

        An idle connection has nothing to read; when it does, the server has sent its
        goodbye (restart, ``pg_terminate_backend``), so nothing is sent on it.
        """
        conn = self._conn
        if conn is not None:
            if not self._driver.closed(conn) and self._pid == os.getpid() \
                    and not _readable(conn, self._driver):
                return conn
            self._drop(conn)
        return self._connect()

    def _statement(self, name: str, params: Optional[Mapping[str, Any]] = None,
                   write: bool = True, idempotent: bool = False) -> Result:
        """One statement, its own transaction (autocommit): one round trip on the live
        connection, run again after a failure only when nothing can have taken effect, or
        when running it twice is the same as once (``idempotent``: a fenced checkpoint)."""
        with self._held():
            for attempt in range(1, _RETRIES + 1):
                conn = self._live_connection()
                try:
                    return _PgTx(self._cursor, store=self).run(name, params)
                except self._driver.Error as exc:
                    lost = self._driver.closed(conn) or self._driver.lost(exc)
                    self._abandon(conn, in_transaction=False)
                    # A lost write may have committed: only reads, idempotent writes, and
                    # statements the server rolled back (deadlock, serialisation failure), are
                    # run again.
                    if attempt < _RETRIES and not self._driver.timed_out(exc) and (
                            self._rolled_back(exc) or (lost and (idempotent or not write))):
                        log.info("retrying ledger query %s after %s", name, type(exc).__name__)
                        continue
                    raise translate_error(exc, self._driver) from exc
                except StoreError:  # a value the driver refused to bind: nothing was sent
                    raise
                except BaseException:
                    # Interrupted mid-way (a signal, KeyboardInterrupt): the connection's state
                    # is not known, e.g. a statement prepared but not recorded as prepared.
                    # The next operation starts on a new connection.
                    self._drop(conn)
                    raise
        raise StoreError("no attempt was made")  # pragma: no cover - the loop always ends it

    def _transact(self, fn: Callable[[Tx], T], write: bool = True) -> T:
        """Several statements inside an explicit ``BEGIN ... COMMIT``."""
        with self._held():
            for attempt in range(1, _RETRIES + 1):
                conn = self._live_connection()
                try:
                    with conn.cursor() as cur:
                        cur.execute("BEGIN")
                        out = fn(_PgTx(cur, store=self))
                except self._driver.Error as exc:
                    lost = self._driver.closed(conn) or self._driver.lost(exc)
                    self._abandon(conn, in_transaction=True)
                    # Nothing was committed: the server rolls back a transaction it loses.
                    if attempt < _RETRIES and not self._driver.timed_out(exc) and (
                            self._rolled_back(exc) or lost):
                        log.info("retrying a ledger transaction after %s", type(exc).__name__)
                        continue
                    raise translate_error(exc, self._driver) from exc
                except BaseException:
                    self._abandon(conn, in_transaction=True)
                    raise
                try:
                    with conn.cursor() as cur:
                        cur.execute("COMMIT")
                except self._driver.Error as exc:
                    # The outcome is unknown: never run a write twice on a guess.
                    self._abandon(conn, in_transaction=True)
                    raise translate_error(exc, self._driver) from exc
                return out
        raise StoreError("no attempt was made")  # pragma: no cover - the loop always ends it

    def _abandon(self, conn: Any, in_transaction: bool) -> None:
        """End a failed transaction, or drop a connection that is gone."""
        if not self._driver.closed(conn):
            try:
                if in_transaction:
                    with conn.cursor() as cur:
                        cur.execute("ROLLBACK")
                return
            except self._driver.Error:
                pass
        self._drop(conn)

    def _rolled_back(self, exc: BaseException) -> bool:
        """The server aborted the work (deadlock, serialisation failure, SQLSTATE class 40):
        nothing took effect."""
        return (self._driver.code(exc) or "").startswith("40")

    def _drop(self, conn: Any) -> None:
        if conn is self._conn:
            self._conn = self._cursor = None
        if self._pid == os.getpid():
            try:
                conn.close()
            except self._driver.Error:
                pass

    def _register_row(self, params: Dict[str, Any]) -> Dict[str, Any]:
        # A concurrent registration of the same key that committed after this statement's
        # snapshot is invisible to it: neither inserted nor found. Ask again (rare).
        for _ in range(5):
            row = self._statement("register", params).rows[0]
            if row["inserted"] is not None or row["status"] is not None or status_of_new_task(
                    int(row["backlog"]), params["ceiling"], params["park"],
                    params["park_ceiling"]) is None:
                return row
        raise StoreError(f"registration of {params['key']!r} kept racing; try again")

    def _claim_rows(self, params: Dict[str, Any]) -> List[Dict[str, Any]]:
        return self._statement("claim", params).rows



def _ms(seconds: float) -> str:
    """A duration as PostgreSQL's millisecond setting text (at least 1 ms: 0 would disable)."""
    return str(max(1, int(round(seconds * 1000))))


#: The whole-number connection parameters a URL may carry, and their bounds (libpq's
#: ``connect_timeout`` in seconds: 0 waits as long as the system lets it).
_NUMBERS = {"port": (1, 65535), "connect_timeout": (0, 86400)}


def _check_numbers(params: Mapping[str, str], shown: str, *, lists: bool) -> None:
    """Raise ConfigurationError naming the parameter when a port or connect timeout in the URL
    is no whole number of ASCII digits within its bounds (``?connect_timeout=inf``,
    ``?port=abc``): the same for both drivers, before either tries to connect. With ``lists``
    (libpq's several hosts) a port may be a comma-separated list of them."""
    for name, (low, high) in _NUMBERS.items():
        value = params.get(name)
        if value is None:
            continue
        texts = str(value).split(",") if lists and name == "port" else [str(value)]
        if not all(t.strip().isascii() and t.strip().isdigit() and len(t.strip()) <= 6
                   and low <= int(t.strip()) <= high for t in texts):
            raise ConfigurationError("store URL", shown, f"has {name}={str(value)[:20]!r}: "
                                     f"write a whole number from {low} to {high}")


def _target_of(url: str, driver: Driver) -> Dict[str, str]:
    """Host, port, database and user a URL names, read as libpq reads it (query parameters
    such as ``?host=`` included). Raises ConfigurationError when the URL does not parse or
    leaves the host or the database to libpq's defaults (the environment, the user's name):
    the ledger is never a database nobody named."""
    shown = redact_url(url)
    try:
        params = driver.target(url)
    except ConfigurationError:  # the driver's own reason (pg8000: a parameter it lacks)
        raise
    except (driver.Error, ValueError):  # ValueError: a NUL in the URL
        raise ConfigurationError("store URL", shown, "is not a PostgreSQL URL: write "
                                 "postgresql://user@host:5432/database") from None
    if not params.get("dbname"):
        raise ConfigurationError("store URL", shown, "names no database: write "
                                 "postgresql://user@host:5432/DATABASE")
    _check_numbers(params, shown, lists=driver.name == "psycopg2")
    host = params.get("host") or params.get("hostaddr")
    if not host:
        raise ConfigurationError("store URL", shown, "names no host: write "
                                 "postgresql://user@HOST:5432/database (a Unix socket: "
                                 "postgresql:///database?host=/var/run/postgresql)")
    return {"host": host, "port": params.get("port") or "5432", "database": params["dbname"],
            "user": params.get("user", "")}


def _readable(conn: Any, driver: Driver) -> bool:
    """Whether an idle connection has something to read (the server hung up)."""
    try:
        ready, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError, AttributeError, driver.Error):
        return True
    return bool(ready)


class Prepared(NamedTuple):
    """A named query as a prepared statement: ``PREPARE`` once, then ``EXECUTE`` with the
    parameters in ``order`` (each once, positionally)."""

    prepare: str
    execute: str
    order: Tuple[str, ...]


def prepared_forms(name: str, sql: str) -> Prepared:
    """The :class:`Prepared` forms of a named query with ``%(name)s`` placeholders."""
    order: List[str] = []

    def number(match: "re.Match[str]") -> str:
        if match.group(1) not in order:
            order.append(match.group(1))
        return f"${order.index(match.group(1)) + 1}"

    body = _PYFORMAT.sub(number, sql)
    args = ", ".join("%s" for _ in order)
    return Prepared(f"PREPARE fair_{name} AS {body}", f"EXECUTE fair_{name} ({args})",
                    tuple(order))


class _PgTx(Tx):
    """A transaction that runs the hot statements through per-connection prepared plans."""

    def __init__(self, cursor: Any, *, store: PostgresStore) -> None:
        super().__init__(cursor, store._queries)
        self.store = store

    def run(self, name: str, params: Optional[Mapping[str, Any]] = None) -> Result:
        forms = self.store._prepare.get(name)
        if forms is None:
            return super().run(name, params)
        if name not in self.store._prepared:
            self.cursor.execute(forms.prepare)
            self.store._prepared.add(name)
        values = params or {}
        return self.fetch(forms.execute, tuple([clean_value(values[k]) for k in forms.order]))
