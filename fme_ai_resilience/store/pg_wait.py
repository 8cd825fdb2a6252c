"""psycopg2's bounded wait: the wait callback that gives every wait of the store's psycopg2
connections for the server's answer a deadline (psycopg2 has none of its own).

A server that stops answering (a hung proxy, a stalled network path) keeps the socket open and
acknowledges every byte, so neither TCP keepalives nor libpq's timeouts notice. The store's
connections are of :func:`bounded_connection_class`; :func:`install_wait_callback` has psycopg2
wait through :func:`wait_with_deadline` (once per process, unless another callback is
installed), which polls the connection until ``fair_wait_s`` (the store's statement timeout
plus a margin) or, while connecting, the connect timeout :func:`connecting` sets for the
thread. A wait that ends is the driver's error caused by :class:`socket.timeout`
(:func:`no_answer`); psycopg2 then closes the connection. Other psycopg2 connections in the
process wait as before, without a deadline.
"""
from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
import time
from typing import Any, Iterator, List, Optional, Type

__all__ = ["bounded_connection_class", "connecting", "install_wait_callback", "no_answer",
           "wait_with_deadline"]

log = logging.getLogger(__name__)

#: The connect timeout of the psycopg2 connection this thread is opening (libpq ignores its
#: own ``connect_timeout`` once a wait callback polls the connection).
_CONNECTING = threading.local()


@contextlib.contextmanager
def connecting(timeout_s: Optional[float]) -> Iterator[None]:
    """While this thread opens a psycopg2 connection: its connect timeout (None: no bound)."""
    _CONNECTING.timeout_s = timeout_s
    try:
        yield
    finally:
        _CONNECTING.timeout_s = None


def no_answer(what: str, seconds: float, error: Type[BaseException]) -> BaseException:
    """The driver's ``error`` for a server that did not answer in time, caused by a
    :class:`socket.timeout` (what :meth:`Driver.timed_out` recognises)."""
    exc = error(f"{what}: no answer from the server within {seconds:g} s")
    exc.__cause__ = socket.timeout(f"no answer within {seconds:g} s")
    return exc


def bounded_connection_class(ext: Any, error: Type[BaseException]) -> type:
    """psycopg2's connection class with a deadline the wait callback reads: ``fair_wait_s``
    (None: wait without one); while connecting, the thread's connect timeout."""

    class BoundedConnection(ext.connection):  # type: ignore[misc, name-defined]
        fair_error = error

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.fair_wait_s = getattr(_CONNECTING, "timeout_s", None)
            self.fair_connecting = True
            super().__init__(*args, **kwargs)
            self.fair_connecting = False

    return BoundedConnection


def wait_with_deadline(conn: Any) -> None:
    """psycopg2's wait callback: poll ``conn`` until its operation completes, as psycopg2's
    own ``wait_select`` does, but for the store's connections only until their deadline,
    when it raises (psycopg2 then closes the connection)."""
    import psycopg2
    import psycopg2.extensions as ext

    error = getattr(conn, "fair_error", psycopg2.OperationalError)
    limit = getattr(conn, "fair_wait_s", None)
    deadline = None if limit is None else time.monotonic() + limit
    fileno = conn.fileno()
    while True:
        try:
            state = conn.poll()
            if state == ext.POLL_OK:
                return
            if state not in (ext.POLL_READ, ext.POLL_WRITE):
                raise error(f"unexpected state from poll: {state}")  # pragma: no cover
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0 or not _ready(fileno, state == ext.POLL_READ,
                                                             left):
                what = "connect" if getattr(conn, "fair_connecting", False) else "statement"
                raise no_answer(what, limit or 0.0, error)
        except KeyboardInterrupt:
            # as psycopg2's own wait_select: the server stops the statement (Ctrl-C on a
            # long migration must not leave it running, holding its locks)
            if not getattr(conn, "fair_connecting", False):
                try:
                    conn.cancel()
                except psycopg2.Error:
                    pass
            raise


def _ready(fileno: int, read: bool, timeout_s: Optional[float]) -> bool:
    """Whether ``fileno`` became readable (``read``) or writable within ``timeout_s``
    (None: for ever). poll() where there is one: select() cannot watch a descriptor numbered
    1024 or above, which a server with hundreds of connections gives out."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fileno, select.POLLIN if read else select.POLLOUT)
        return bool(poller.poll(None if timeout_s is None else max(0, timeout_s) * 1000))
    watched = [fileno]
    ready = select.select(watched if read else [], [] if read else watched, [], timeout_s)
    return bool(ready[0] or ready[1])


_CALLBACK_LOCK = threading.Lock()
#: A wait callback found installed in the store's place (logged once).
_FOREIGN_CALLBACK: List[Any] = []


def install_wait_callback(ext: Any) -> None:
    """Have psycopg2 wait through :func:`wait_with_deadline`, unless the process already
    waits through a callback of its own (gevent's, say): then the store's statements have no
    client-side bound, and the log says so once."""
    with _CALLBACK_LOCK:
        current = ext.get_wait_callback()
        if current is None:
            ext.set_wait_callback(wait_with_deadline)
        elif current is not wait_with_deadline and not _FOREIGN_CALLBACK:
            _FOREIGN_CALLBACK.append(current)
            log.warning("psycopg2 waits through another wait callback (%r): a ledger that "
                        "stops answering is waited for without a deadline", current)
