"""The PostgreSQL ledger (psycopg2): shared by every engine on every host.

One connection per store, reused, guarded by a lock, autocommit off with one explicit
transaction per operation. A connection found dead is replaced and the operation run again
once, but only when nothing can have been committed (the failure came before ``COMMIT``);
a deadlock or serialisation failure (the server rolled the transaction back) is retried too.
Every other driver error leaves as :class:`StoreError` or :class:`StoreUnavailable`.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Type

from ..errors import StoreError, StoreUnavailable
from ..redact import redact_url
from .sqlbase import SqlStore, T, Tx, decide, translate

try:  # the extra: pip install 'fme-ai-resilience[postgres]'
    import psycopg2
    import psycopg2.extensions
    import psycopg2.extras
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg2 = None

log = logging.getLogger(__name__)

#: Server-side causes that mean "the server cannot serve us now" (SQLSTATE class or code).
_UNAVAILABLE_CODES = ("08", "53", "57P01", "57P02", "57P03")
_RETRIES = 3


def _driver_errors() -> Mapping[type, Type[StoreError]]:
    if psycopg2 is None:
        return {}
    ext = psycopg2.extensions
    return {
        psycopg2.Warning: StoreError,
        psycopg2.Error: StoreError,
        psycopg2.InterfaceError: StoreUnavailable,
        psycopg2.DatabaseError: StoreError,
        psycopg2.DataError: StoreError,
        psycopg2.OperationalError: StoreError,
        psycopg2.IntegrityError: StoreError,
        psycopg2.InternalError: StoreError,
        psycopg2.ProgrammingError: StoreError,
        psycopg2.NotSupportedError: StoreError,
        ext.QueryCanceledError: StoreError,
        ext.TransactionRollbackError: StoreError,
    }


#: Every exception class psycopg2 exports, mapped once (a test checks none is missing); the
#: hundreds in ``psycopg2.errors`` subclass these and resolve through their MRO.
DRIVER_ERRORS: Mapping[type, Type[StoreError]] = _driver_errors()


def _unavailable(exc: BaseException) -> bool:
    """No server answer at all (connect failed, connection lost) or a server refusing work."""
    if not isinstance(exc, psycopg2.OperationalError):
        return False
    code = getattr(exc, "pgcode", None)
    return code is None or code.startswith(_UNAVAILABLE_CODES)


def translate_error(exc: BaseException) -> StoreError:
    """The library exception for a psycopg2 exception."""
    return translate(exc, DRIVER_ERRORS, _unavailable)


class PostgresStore(SqlStore):
    """The ledger in a PostgreSQL database (``postgresql://user@host:port/db``)."""

    dialect = "postgresql"

    def __init__(self, url: str, connect_timeout_s: float = 5.0,
                 application_name: str = "fme-ai-resilience") -> None:
        if psycopg2 is None:
            raise StoreError("PostgreSQL needs psycopg2: pip install 'fme-ai-resilience[postgres]'")
        super().__init__()
        self.url = url
        self.connect_timeout_s = connect_timeout_s
        self.application_name = application_name
        self._lock = threading.RLock()
        self._conn: Optional[Any] = None
        self._pid: Optional[int] = None

    def __repr__(self) -> str:
        return f"PostgresStore({redact_url(self.url)!r})"

    def _connect(self) -> Any:
        if self._conn is not None and not self._conn.closed and self._pid == os.getpid():
            return self._conn
        self._conn = None
        options: Dict[str, Any] = {}
        if "connect_timeout" not in self.url:
            options["connect_timeout"] = max(1, int(round(self.connect_timeout_s)))
        if "application_name" not in self.url:
            options["application_name"] = self.application_name
        try:
            conn = psycopg2.connect(self.url, **options)
        except psycopg2.Error as exc:
            raise translate_error(exc) from exc
        conn.autocommit = False
        # JSON columns come back as text, as from SQLite; the shared code decodes them.
        psycopg2.extras.register_default_jsonb(conn, loads=lambda text: text)
        self._conn, self._pid = conn, os.getpid()
        return conn

    def close(self) -> None:
        """Close the connection (a later operation opens a new one)."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None and not conn.closed and self._pid == os.getpid():
                conn.close()

    def _transact(self, fn: Callable[[Tx], T], write: bool = True) -> T:
        with self._lock:
            for attempt in range(1, _RETRIES + 1):
                reused = self._conn is not None and not self._conn.closed
                conn = self._connect()
                try:
                    with conn.cursor() as cur:
                        out = fn(Tx(cur, self._queries))
                except psycopg2.Error as exc:
                    lost = bool(conn.closed)
                    self._abandon(conn)
                    rolled_back = isinstance(exc, psycopg2.extensions.TransactionRollbackError)
                    if attempt < _RETRIES and ((lost and reused) or rolled_back):
                        log.info("retrying a ledger operation after %s", type(exc).__name__)
                        continue
                    raise translate_error(exc) from exc
                except BaseException:
                    self._abandon(conn)
                    raise
                try:
                    conn.commit()
                except psycopg2.Error as exc:
                    # The outcome is unknown: never run a write twice on a guess.
                    self._abandon(conn)
                    raise translate_error(exc) from exc
                return out
        raise AssertionError("unreachable")  # pragma: no cover

    def _abandon(self, conn: Any) -> None:
        """Roll back, or drop a connection that is gone."""
        if not conn.closed:
            try:
                conn.rollback()
                return
            except psycopg2.Error:
                pass
        try:
            conn.close()
        except psycopg2.Error:
            pass
        if conn is self._conn:
            self._conn = None

    def _register_row(self, params: Dict[str, Any]) -> Dict[str, Any]:
        def work(tx: Tx) -> Dict[str, Any]:
            # A concurrent registration of the same key that committed after this statement's
            # snapshot is invisible to it: neither inserted nor found. Ask again (rare).
            for _ in range(5):
                row = tx.run("register", params).rows[0]
                refused = decide(int(row["backlog"]), params["ceiling"], params["park"],
                                 params["park_ceiling"]) is None
                if row["inserted"] is not None or row["status"] is not None or refused:
                    return row
            raise StoreError(f"registration of {params['key']!r} kept racing; try again")
        return self._transact(work)

    def _claim_rows(self, params: Dict[str, Any]) -> List[Dict[str, Any]]:
        return self._transact(lambda tx: tx.run("claim", params).rows)

