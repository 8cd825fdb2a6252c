"""The two PostgreSQL drivers the ledger speaks through: psycopg2 (compiled, the ``postgres``
extra) and pg8000 (pure Python, the one an FME Package can ship).

A URL picks its driver by scheme: ``postgresql+psycopg2://`` or ``postgresql+pg8000://``; a
plain ``postgresql://`` (or ``postgres://``) takes psycopg2 when it is installed and pg8000
otherwise. :class:`Driver` is what :class:`~.postgres.PostgresStore` needs of either: connect,
the driver's exception classes, the SQLSTATE of an error, whether a connection is closed, and
the URL read as libpq reads it (host, port, database, user).

pg8000 reads the URL here: user, password, host, port and database, and the query parameters
``host`` (a path: the Unix socket directory, as for libpq), ``port``, ``dbname``, ``user``,
``password``, ``connect_timeout``, ``application_name`` and ``sslmode`` (``require``
encrypts, ``verify-ca`` and ``verify-full`` also check the server's certificate; anything
else, as libpq's default ``prefer`` cannot be had, connects without TLS). libpq's keepalive parameters are accepted
and read as "keepalives on", which pg8000 always is. pg8000 takes ``%(name)s`` parameters
through its module-wide ``paramstyle``, which the store sets to ``pyformat`` (the only style
it accepts as well).

A server that stops answering (a hung proxy, a stalled network path: the socket stays open
and every byte is acknowledged, so neither TCP keepalives nor libpq's timeouts notice) is a
bounded wait on both drivers: every wait for the server's answer ends after
``read_timeout_s`` (the store passes its statement timeout plus a margin, since the server's
``statement_timeout`` cancels a statement first), the connection is closed, and the error
is one :meth:`Driver.timed_out` recognises, never run again. pg8000 gets it as its socket
timeout (its timeouts, raw socket errors, become its ``InterfaceError``); psycopg2, which has
no such bound, waits through the wait callback of :mod:`.pg_wait`, which polls the connection
with that deadline, the connect's with ``connect_timeout``.
"""
from __future__ import annotations

import abc
import importlib
import socket
import ssl
import struct
from typing import Any, Dict, List, Mapping, Optional, Tuple, Type, Union
from urllib.parse import parse_qsl, unquote, urlsplit

from ..core.errors import ConfigurationError, StoreError, StoreUnavailable
from ..core.text.redact import redact_url
from .pg_wait import bounded_connection_class, connecting, install_wait_callback, no_answer

__all__ = ["Driver", "driver_for", "PSYCOPG2", "PG8000", "SCHEMES", "TERMINATED", "libpq_url"]

#: SQLSTATEs of a session the server ended (an administrator's pg_terminate_backend, a
#: shutdown, a server still starting): whatever the session was doing did not take effect,
#: and a new connection may well be served.
TERMINATED = ("57P01", "57P02", "57P03")
PSYCOPG2 = "psycopg2"
PG8000 = "pg8000"
SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg2://", "postgresql+pg8000://")
#: libpq's sslmode values; pg8000 encrypts for the last three.
_SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
#: The names psycopg2 gives the SQLSTATEs the store meets, for pg8000's errors.
_CONDITIONS = {"55P03": "LockNotAvailable", "57014": "QueryCanceled",
               "40P01": "DeadlockDetected", "40001": "SerializationFailure",
               "57P01": "AdminShutdown", "57P02": "CrashShutdown", "57P03": "CannotConnectNow",
               "23505": "UniqueViolation", "42P01": "UndefinedTable",
               "53300": "TooManyConnections"}
#: JSON column types come back as text from either driver (the shared code decodes them).
_JSON_OIDS = (114, 3802)
_PG8000_PARAMS = frozenset({"host", "port", "dbname", "user", "password", "connect_timeout",
                            "application_name", "sslmode", "keepalives", "keepalives_idle",
                            "keepalives_interval", "keepalives_count"})


def _import(name: str) -> Optional[Any]:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def libpq_url(url: str) -> str:
    """``url`` with a driver-naming scheme written as libpq knows it (``postgresql://``)."""
    scheme = _scheme(url)
    return "postgresql" + url[len(scheme):] if scheme.startswith("postgresql+") else url


class Driver(abc.ABC):
    """One PostgreSQL driver behind the store (see the module docstring)."""

    name = ""
    Error: Type[BaseException] = Exception
    OperationalError: Type[BaseException] = Exception
    InterfaceError: Type[BaseException] = Exception
    #: The driver's exception classes and the library exception each becomes.
    errors: Mapping[type, Type[StoreError]] = {}

    @abc.abstractmethod
    def connect(self, url: str, options: Mapping[str, Any], *,
                read_timeout_s: Optional[float]) -> Any:
        """A connection to ``url`` (``options``: libpq's keyword parameters) on which every
        wait for the server's answer ends after ``read_timeout_s`` seconds."""

    @abc.abstractmethod
    def bound(self, conn: Any, read_timeout_s: Optional[float]) -> None:
        """Change how long ``conn`` waits for an answer (None: without a deadline)."""

    def timed_out(self, exc: BaseException) -> bool:
        """The server did not answer within the connection's bound (the connection is
        closed): nothing says whether the work took effect, and running it again would only
        wait as long once more."""
        seen = 0
        cause: Optional[BaseException] = exc
        while cause is not None and seen < 10:
            if isinstance(cause, socket.timeout):
                return True
            cause, seen = cause.__cause__ or cause.__context__, seen + 1
        return False

    @abc.abstractmethod
    def target(self, url: str) -> Dict[str, str]:
        """The URL's connection parameters: ``host``, ``port``, ``dbname``, ``user`` ..."""

    @abc.abstractmethod
    def code(self, exc: BaseException) -> Optional[str]:
        """The SQLSTATE the server gave, if any."""

    @abc.abstractmethod
    def closed(self, conn: Any) -> bool:
        """Whether ``conn`` is closed (by us, or found lost)."""

    def describe(self, exc: BaseException) -> str:
        """``exc`` in one line: its name and the server's first line."""
        first = (str(exc)[:4096].strip().splitlines() or [""])[0]
        return f"{type(exc).__name__}: {first}"

    @abc.abstractmethod
    def lost(self, exc: BaseException) -> bool:
        """No server answer at all: the connection failed or was lost, or the server ended
        the session (:data:`TERMINATED`: a restart, ``pg_terminate_backend``)."""


class _Psycopg2(Driver):
    name = PSYCOPG2

    def __init__(self, module: Any) -> None:
        import psycopg2.extensions
        import psycopg2.extras

        self.module = module
        self.Error, self.OperationalError = module.Error, module.OperationalError
        self.InterfaceError = module.InterfaceError
        ext = psycopg2.extensions
        self._ext, self._extras = ext, psycopg2.extras
        self._bounded = bounded_connection_class(ext, module.OperationalError)
        self._parse_dsn = ext.parse_dsn
        self.errors = {
            module.Warning: StoreError, module.Error: StoreError,
            module.InterfaceError: StoreUnavailable, module.DatabaseError: StoreError,
            module.DataError: StoreError, module.OperationalError: StoreError,
            module.IntegrityError: StoreError, module.InternalError: StoreError,
            module.ProgrammingError: StoreError, module.NotSupportedError: StoreError,
            ext.QueryCanceledError: StoreError, ext.TransactionRollbackError: StoreError,
        }

    def connect(self, url: str, options: Mapping[str, Any], *,
                read_timeout_s: Optional[float]) -> Any:
        install_wait_callback(self._ext)
        connect_s = options.get("connect_timeout") or self._parse_dsn(
            libpq_url(url)).get("connect_timeout")
        # libpq: 0 waits as long as the system lets it
        with connecting(float(connect_s) if connect_s and float(connect_s) else None):
            conn = self.module.connect(libpq_url(url), connection_factory=self._bounded,
                                       **options)
        conn.fair_wait_s = read_timeout_s
        self._extras.register_default_jsonb(conn, loads=lambda text: text)
        return conn

    def bound(self, conn: Any, read_timeout_s: Optional[float]) -> None:
        conn.fair_wait_s = read_timeout_s

    def target(self, url: str) -> Dict[str, str]:
        params = self._parse_dsn(libpq_url(url))
        return {k: str(v) for k, v in params.items()}

    def code(self, exc: BaseException) -> Optional[str]:
        return getattr(exc, "pgcode", None)

    def closed(self, conn: Any) -> bool:
        return bool(conn.closed)

    def lost(self, exc: BaseException) -> bool:
        return isinstance(exc, self.OperationalError) and (
            self.code(exc) is None or self.code(exc) in TERMINATED)


class _Pg8000Connection:
    """A pg8000 connection with what the store uses of psycopg2's: ``closed``, ``fileno()``,
    ``autocommit`` and cursors usable as context managers; a socket error or timeout on it
    closes it and is pg8000's ``InterfaceError``."""

    read_timeout_s: Optional[float] = None

    def __init__(self, raw: Any, interface_error: Type[BaseException]) -> None:
        self.raw = raw
        self.interface_error = interface_error

    def bound(self, read_timeout_s: Optional[float]) -> None:
        self.read_timeout_s = read_timeout_s
        self.raw._usock.settimeout(read_timeout_s)

    def failed(self, exc: BaseException) -> None:
        """Close the connection after ``exc`` (a socket error or timeout mid-exchange leaves
        its stream at an unknown point; pg8000 cannot read a timed-out socket again);
        raise it as pg8000's ``InterfaceError``."""
        usock = getattr(self.raw, "_usock", None)
        if usock is not None:
            try:
                usock.close()
            except OSError:
                pass
        self.raw._sock = self.raw._usock = None
        if isinstance(exc, self.interface_error):
            raise exc
        if isinstance(exc, socket.timeout):
            raise no_answer("statement", self.read_timeout_s or 0.0,
                             self.interface_error) from exc
        raise self.interface_error(f"network error ({type(exc).__name__})") from exc

    @property
    def closed(self) -> bool:
        return getattr(self.raw, "_sock", None) is None

    @property
    def autocommit(self) -> bool:
        return bool(self.raw.autocommit)

    @autocommit.setter
    def autocommit(self, value: bool) -> None:
        self.raw.autocommit = value

    def fileno(self) -> int:
        return self.raw._usock.fileno()

    def get_backend_pid(self) -> int:
        """The server process serving this connection (as psycopg2's connection says)."""
        return int(struct.unpack("!i", bytes(self.raw._backend_key_data[:4]))[0])

    def cursor(self) -> "_Pg8000Cursor":
        return _Pg8000Cursor(self.raw.cursor(), self)

    def close(self) -> None:
        if not self.closed:
            self.raw.close()


class _Pg8000Cursor:
    def __init__(self, raw: Any, conn: _Pg8000Connection) -> None:
        self.raw = raw
        self.conn = conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)

    def execute(self, sql: str, params: Any = None) -> None:
        try:
            if params:
                self.raw.execute(sql, params)
            else:
                self.raw.execute(sql)
        except OSError as exc:  # raised past pg8000's wrapping, on its first read
            self.conn.failed(exc)
        except self.conn.interface_error as exc:
            if isinstance(exc.__cause__, OSError):   # a network error mid-exchange
                self.conn.failed(exc)
            raise

    def __enter__(self) -> "_Pg8000Cursor":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.raw.close()
        except Exception:  # noqa: BLE001 - a cursor of a lost connection
            pass


class _Pg8000(Driver):
    name = PG8000

    def __init__(self, module: Any) -> None:
        dbapi = importlib.import_module("pg8000.dbapi")
        dbapi.paramstyle = "pyformat"
        self.module = dbapi
        self.Error, self.OperationalError = dbapi.Error, dbapi.OperationalError
        self.InterfaceError = dbapi.InterfaceError
        self.errors = {
            dbapi.Warning: StoreError, dbapi.Error: StoreError,
            dbapi.InterfaceError: StoreUnavailable, dbapi.DatabaseError: StoreError,
            dbapi.OperationalError: StoreError, dbapi.IntegrityError: StoreError,
            dbapi.InternalError: StoreError, dbapi.ProgrammingError: StoreError,
            dbapi.NotSupportedError: StoreError,
            **{getattr(dbapi, name): StoreError for name in (
                "DataError", "ArrayContentNotSupportedError") if hasattr(dbapi, name)},
        }

    def connect(self, url: str, options: Mapping[str, Any], *,
                read_timeout_s: Optional[float]) -> Any:
        params = self._params(url)
        # as for libpq, 0 waits as long as the system lets it
        connect_s = float(params.get("connect_timeout") or options.get("connect_timeout", 10)) \
            or None
        context = _ssl_context(params.get("sslmode", ""))
        host, port = params["host"], int(params.get("port") or 5432)
        # A host that is a path is libpq's Unix socket directory.
        where = {"unix_sock": f"{host.rstrip('/')}/.s.PGSQL.{port}"} if host.startswith("/") \
            else {"host": host, "port": port}
        try:
            raw = self.module.connect(
                user=params.get("user") or "postgres", password=params.get("password"),
                **where, database=params["dbname"], timeout=connect_s,
                tcp_keepalive=True, ssl_context=context,
                application_name=params.get("application_name")
                or options.get("application_name"))
        except (OSError, ssl.SSLError) as exc:  # raised before pg8000 wraps it, on some paths
            raise StoreUnavailable(f"PostgreSQL at {params['host']}: cannot connect "
                                   f"({type(exc).__name__})") from None
        for oid in _JSON_OIDS:
            raw.register_in_adapter(oid, str)
        conn = _Pg8000Connection(raw, self.InterfaceError)
        conn.bound(read_timeout_s)
        return conn

    def bound(self, conn: Any, read_timeout_s: Optional[float]) -> None:
        conn.bound(read_timeout_s)

    def _params(self, url: str) -> Dict[str, str]:
        shown = redact_url(url)
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            raise ConfigurationError("store URL", shown, "has a port that is no number") from None
        params: Dict[str, str] = {}
        if parts.hostname:
            params["host"] = unquote(parts.hostname)
        if port:
            params["port"] = str(port)
        if parts.username:
            params["user"] = unquote(parts.username)
        if parts.password is not None:
            params["password"] = unquote(parts.password)
        if parts.path.strip("/"):
            params["dbname"] = unquote(parts.path.strip("/"))
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key not in _PG8000_PARAMS:
                raise ConfigurationError("store URL", shown, f"has ?{key}=, which the pure "
                                         f"PostgreSQL driver (pg8000) does not take")
            params[key] = value
        if params.get("sslmode", "prefer") not in _SSLMODES:
            raise ConfigurationError("store URL", shown, f"has ?sslmode={params['sslmode']}: "
                                     f"write one of {', '.join(_SSLMODES)}")
        return params

    def target(self, url: str) -> Dict[str, str]:
        return self._params(url)

    def code(self, exc: BaseException) -> Optional[str]:
        detail = exc.args[0] if exc.args else None
        return detail.get("C") if isinstance(detail, dict) else None

    def describe(self, exc: BaseException) -> str:
        """As psycopg2 names it: the condition of the SQLSTATE and the server's message,
        not pg8000's dictionary of the server's fields."""
        detail = exc.args[0] if exc.args else None
        if not isinstance(detail, dict):
            return super().describe(exc)
        code = str(detail.get("C", ""))
        name = _CONDITIONS.get(code, type(exc).__name__)
        return f"{name}: {str(detail.get('M', ''))[:4096]} (SQLSTATE {code[:5]})"

    def closed(self, conn: Any) -> bool:
        return bool(conn.closed)

    def lost(self, exc: BaseException) -> bool:
        return isinstance(exc, self.InterfaceError) or self.code(exc) in TERMINATED or (
            isinstance(exc, self.Error) and self.code(exc) is None
            and not isinstance(exc, self.module.ProgrammingError))


def _ssl_context(mode: str) -> Union[ssl.SSLContext, bool]:
    """pg8000's ``ssl_context`` for libpq's ``sslmode``: False, not None, for no TLS (None
    makes pg8000 ask the server for TLS on every connect, loading the system's certificates
    each time: about 50 ms a connection)."""
    if mode in ("verify-ca", "verify-full"):
        context = ssl.create_default_context()
        context.check_hostname = mode == "verify-full"
        return context
    if mode == "require":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return False


_LOADED: Dict[str, Driver] = {}
_KINDS: Tuple[Tuple[str, type], ...] = ((PSYCOPG2, _Psycopg2), (PG8000, _Pg8000))


def driver_for(url: str) -> Driver:
    """The driver ``url`` names by its scheme, or the first one installed for a plain
    ``postgresql://``. Raises StoreError naming the extra when none is installed."""
    scheme = _scheme(url)
    wanted: List[str] = [scheme.split("+", 1)[1]] if "+" in scheme else [PSYCOPG2, PG8000]
    for name, kind in _KINDS:
        if name not in wanted:
            continue
        if name not in _LOADED:
            module = _import(name)
            if module is None:
                continue
            _LOADED[name] = kind(module)
        return _LOADED[name]
    if wanted == [PG8000]:
        raise StoreError("postgresql+pg8000:// needs pg8000: pip install pg8000")
    raise StoreError("PostgreSQL needs a driver: pip install 'fme-ai-resilience[postgres]' "
                     "(psycopg2) or pg8000 (pure Python, as the FME Package ships)")
