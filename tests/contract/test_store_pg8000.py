"""The pure-Python PostgreSQL driver (pg8000) behind the ledger: how it reads a URL, and
failures as the library's errors, free of the password."""
from __future__ import annotations


import pytest

from fme_ai_resilience.core.errors import ConfigurationError, StoreUnavailable
from fme_ai_resilience.store import open_store
from fme_ai_resilience.store.pg_drivers import driver_for, libpq_url

pytest.importorskip("pg8000")


#: A loopback port nothing listens on (a port the system gave out and took back may be
#: another test worker's server by the time it is dialled).
CLOSED_PORT = 1


def test_the_url_is_read_as_libpq_reads_it():
    """User, password, host, port and database from the URL, query parameters winning."""
    driver = driver_for("postgresql+pg8000://")
    assert driver.target("postgresql+pg8000://fair:p%40ss@db.internal:6543/ledger") == {
        "host": "db.internal", "port": "6543", "user": "fair", "password": "p@ss",
        "dbname": "ledger"}
    assert driver.target("postgresql+pg8000://u@h/d?host=other&application_name=x")[
        "host"] == "other"
    assert libpq_url("postgresql+pg8000://u@h/d") == "postgresql://u@h/d"


def test_a_parameter_pg8000_cannot_honour_is_refused_without_the_password():
    """A libpq parameter pg8000 has no equivalent for is a ConfigurationError naming it."""
    with pytest.raises(ConfigurationError, match="target_session_attrs") as info:
        open_store("postgresql+pg8000://fair:s3cret-pw@127.0.0.1/ledger"
                   "?target_session_attrs=read-write")
    assert "s3cret-pw" not in str(info.value)


def test_an_unreachable_server_is_store_unavailable_without_the_password():
    """Nothing listening: StoreUnavailable, and the password appears nowhere."""
    store = open_store(f"postgresql+pg8000://fair:s3cret-pw@127.0.0.1:{CLOSED_PORT}/ledger",
                       connect_timeout_s=2)
    with pytest.raises(StoreUnavailable) as info:
        store.counts()
    assert "s3cret-pw" not in str(info.value) and "s3cret-pw" not in repr(store)
    store.close()


def test_every_pg8000_exception_class_is_mapped():
    """Each exception class pg8000's DB-API module exports becomes a library error."""
    import pg8000.dbapi as dbapi

    exported = {v for v in vars(dbapi).values()
                if isinstance(v, type) and issubclass(v, Exception)}
    errors = driver_for("postgresql+pg8000://").errors
    assert exported and exported <= set(errors)


@pytest.mark.postgres
def test_a_unix_socket_url_reaches_the_server_as_under_psycopg2(pg_store_url):
    """?host=/socket/dir is libpq's Unix socket directory: pg8000 connects through
    DIR/.s.PGSQL.PORT, as psycopg2 does, instead of resolving the path as a host name."""
    from pathlib import Path

    sockets = Path("/var/run/postgresql")
    if not (sockets / ".s.PGSQL.5432").exists():
        pytest.skip("no PostgreSQL Unix socket on this machine")
    database = pg_store_url.rsplit("/", 1)[1]
    store = open_store(f"postgresql+pg8000://postgres@/{database}?host={sockets}")
    assert store.driver == "pg8000" and store.schema_version() >= 1
    store.close()


def test_what_pg8000_refuses_in_a_url_is_said_when_the_store_opens():
    """The store's own check keeps pg8000's reason: the parameter it does not take, a port
    that is no number; never the generic "not a PostgreSQL URL"."""
    with pytest.raises(ConfigurationError, match="does not take") as info:
        open_store("postgresql+pg8000://fair:s3cret-pw@127.0.0.1/ledger?sslrootcert=/x.pem")
    assert "s3cret-pw" not in str(info.value)
    with pytest.raises(ConfigurationError, match="no number"):
        open_store("postgresql+pg8000://fair:s3cret-pw@127.0.0.1:99999/ledger")


def test_an_sslmode_libpq_does_not_know_is_refused_not_read_as_no_tls():
    """sslmode=requir (a typo) is a ConfigurationError, as libpq refuses it, rather than a
    connection without TLS."""
    with pytest.raises(ConfigurationError, match="sslmode"):
        open_store("postgresql+pg8000://fair:s3cret-pw@127.0.0.1/ledger?sslmode=requir")



def test_a_url_without_a_tls_mode_connects_in_clear_as_the_page_says():
    """No sslmode (or prefer, allow, disable): pg8000 is told not to ask for TLS (False; its
    None would negotiate TLS and load the system's certificates on every connect, about 50 ms
    each); require asks for it without checking the certificate."""
    from fme_ai_resilience.store.pg_drivers import _ssl_context

    assert [_ssl_context(mode) for mode in ("", "prefer", "allow", "disable")] == [False] * 4
    required = _ssl_context("require")
    assert required is not False and required.verify_mode.name == "CERT_NONE"
