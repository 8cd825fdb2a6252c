"""The ledger store: the only place SQL lives (SQLite embedded default, PostgreSQL).

``open_store(url)`` picks the backend from the URL; both satisfy the :class:`Store` protocol
and are held to one contract test suite.
"""
from __future__ import annotations

from typing import Any, Optional

from ..core.clock import Clock, SystemClock
from ..core.errors import ConfigurationError
from ..core.text.redact import redact_text, redact_url
from ..core.config.settings import DatabaseSettings
from .base import Store
from .sqlbase import SqlStore

__all__ = ["Store", "SqlStore", "open_store", "display_url", "DEFAULT_URL"]

#: The embedded default: a SQLite file in the working directory.
DEFAULT_URL = "sqlite:///fme_ai_resilience.db"

_SQLITE = "sqlite://"
#: The PostgreSQL URL schemes: plain, or naming the driver (see :mod:`.pg_drivers`).
_POSTGRES = ("postgresql://", "postgres://", "postgresql+psycopg2://", "postgresql+pg8000://")


def open_store(url: str, *, init_schema: bool = False, create: bool = True,
               create_parents: bool = False, auto_schema: bool = True,
               clock: Optional[Clock] = None, settings: Optional[DatabaseSettings] = None,
               **options: Any) -> SqlStore:
    """A store for ``url``; with ``init_schema`` the tables are created or upgraded first.

    ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, ``sqlite:///:memory:``
    (private to this store) or ``postgresql://user@host:port/db`` (needs the ``postgres``
    extra, psycopg2, or pg8000; ``postgresql+pg8000://`` or ``postgresql+psycopg2://`` names
    the driver). With ``create=False`` a SQLite file must already exist (PostgreSQL databases are
    never created); ``create_parents`` also creates a new SQLite file's missing directories.
    A SQLite store creates or upgrades its schema when it first connects (``auto_schema``);
    a PostgreSQL store never does (a missing schema is :class:`SchemaMissing`: run
    ``db init``). ``clock`` dates the migrations either applies. ``settings`` (a
    :class:`DatabaseSettings`, ``Settings().database``) limits how long operations wait; ``options``
    go to the backend and win over it (``busy_timeout_s``, ``connect_timeout_s``,
    ``prepare``). Raises ConfigurationError for any other URL, StoreUnavailable when
    ``init_schema`` cannot reach the database.
    """
    limits = settings or DatabaseSettings()
    if not isinstance(url, str) or not url.strip():
        raise ConfigurationError("store URL", url if not isinstance(url, str) else "",
                                 "is required")
    url = url.strip()
    store: SqlStore
    if url.startswith(_SQLITE):
        from .sqlite import SQLiteStore

        path = url[len(_SQLITE):]
        if not path.startswith("/") or len(path) < 2:
            raise ConfigurationError("store URL", display_url(url),
                                     "a SQLite URL looks like sqlite:///path/to.db")
        store = SQLiteStore(path[1:], **{"busy_timeout_s": limits.busy_timeout_s,
                                         "create": create, "create_parents": create_parents,
                                         "auto_schema": auto_schema, "clock": clock,
                                         **options})
    elif url.startswith(_POSTGRES):
        from .postgres import PostgresStore

        store = PostgresStore(url, **{"settings": limits, **options})
    else:
        scheme = url.split(":", 1)[0]
        raise ConfigurationError("store URL", display_url(url),
                                 f"unsupported scheme {scheme!r}: use sqlite:/// or postgresql://")
    if init_schema:
        try:
            store.init_schema(now=(clock or SystemClock()).now())
        except BaseException:
            store.close()
            raise
    return store


def display_url(url: str) -> str:
    """``url`` fit for logs and messages: credentials and secret parameters removed."""
    if url.startswith(_SQLITE):
        return redact_text(url)
    return redact_url(url)
