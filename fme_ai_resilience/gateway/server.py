"""The HTTP server ``serve`` runs the gateway on: waitress, with deadlines and a graceful stop.

waitress is pure Python and runs on Windows, where FME Flow usually runs. One I/O thread reads
every connection and hands each request, once it is complete, to a pool of worker threads, so
an idle or trickling client holds a socket, never a worker. :class:`GatewayServer` adds:

* a listen backlog (2048 by default) so a burst waits in the kernel instead of being refused;
* per-connection deadlines, so no client can keep a connection slot for long whatever it
  sends: a connection that sends nothing at all is closed after ``silent_timeout_s`` (5 s);
  the request line and headers must arrive in full within ``header_timeout_s`` (5 s) of the
  connection opening (a later request on a kept-alive connection: of its first byte), or the
  request is answered 408 and its connection closed, one byte or a header line at a time
  alike; a request not received in full within ``read_timeout_s`` of its first byte is
  answered 408 likewise, and while the server is at its ``connection_limit`` already
  ``header_timeout_s`` after it; a connection with no request in progress is closed after
  ``idle_timeout_s``, and at once (a second after its last answer) while the server is at its
  ``connection_limit``, so kept-alive connections give their slots to new ones;
* :meth:`GatewayServer.stop` (``serve`` calls it on SIGTERM and Ctrl-C): accept what already
  waits in the backlog, close the listening socket, finish every request being received or
  processed and send its answer, then close (bounded by ``shutdown_timeout_s``; a second stop
  closes at once);
* every answer in JSON, the server's own refusals too (a malformed request, two
  ``Content-Length`` headers, a control character in a header, a body over the server's limit:
  waitress answers these before the application sees them), each logged, escaped and redacted;
* one log line per request (method, path without its query string, status), escaped.

The application stays a plain WSGI callable: the gateway runs under any WSGI server as well.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import threading
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import ClientDisconnected, HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask, ThreadedTaskDispatcher

from ..core.checks import count, finite
from ..core.text.printable import printable
from ..core.text.redact import redact_text

__all__ = ["GatewayServer", "DEFAULT_BACKLOG", "serving"]

log = logging.getLogger("fme_ai_resilience.gateway")

#: The listen backlog: room in the kernel for a burst of connections not yet accepted.
DEFAULT_BACKLOG = 2048
#: How long one turn of the I/O loop may wait; a stop is noticed within it.
_TICK_S = 0.2
#: While stopping, a connection is closed as idle only after this long without a byte: one
#: that has just connected (or just been answered) may be sending a delivery right now.
_IDLE_GRACE_S = 1.0
_TIMEOUT_BODY = b'{"reason":"the request was not received in time","status":"request_timeout"}'
_TIMEOUT_ANSWER = (b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
                   b"Content-Type: application/json\r\nContent-Length: "
                   + str(len(_TIMEOUT_BODY)).encode("ascii") + b"\r\n\r\n" + _TIMEOUT_BODY)

#: The ``status`` word of the server's own refusals, by HTTP status.
_REFUSALS = {400: "bad_request", 413: "too_large", 431: "header_too_large",
             501: "not_implemented"}

WSGIApp = Callable[[Dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _JsonErrorTask(ErrorTask):
    """A request waitress refused before the application saw it, answered in JSON like every
    gateway answer; its reason (which may quote a header or the request line) is escaped and
    redacted, in the answer and in the log."""

    def execute(self) -> None:
        error = self.request.error
        reason = printable(redact_text(f"{error.reason}: {error.body}"))
        log.warning("gateway: %s refused by the server: %d %s",
                    self.channel.addr[0] if self.channel.addr else "-", error.code, reason)
        body = json.dumps({"status": _REFUSALS.get(error.code, "error"), "reason": reason},
                          separators=(",", ":"), sort_keys=True).encode("utf-8")
        self.status = f"{error.code} {error.reason}"
        self.response_headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class _Channel(HTTPChannel):
    """A connection that remembers when it opened and when the request it is receiving began
    (monotonic s), whether a request of its own was served and when it was last answered, and
    answers the server's own refusals in JSON."""

    error_task_class = _JsonErrorTask
    reading_since: Optional[float] = None
    spoke = False
    served = False
    answered_at = 0.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.opened_at = time.monotonic()
        super().__init__(*args, **kwargs)

    def received(self, data: bytes) -> bool:
        if data:
            self.spoke = True
        before = self.request
        result = super().received(data)
        if self.request is None:
            self.reading_since = None
        elif self.request is not before or self.reading_since is None:
            self.reading_since = time.monotonic()
        return result

    def service(self) -> None:  # on a worker thread: one request received in full
        self.served = True
        try:
            super().service()
        finally:
            self.answered_at = time.monotonic()

    def head_deadline_from(self) -> Optional[float]:
        """Since when (monotonic s) the request head this connection owes has been awaited,
        or None when none is owed against a deadline: from the opening until its first
        request is served, from a later request's first byte, never while a head is complete
        (the body's own deadline runs) or while nothing is in progress after an answer."""
        request = self.request
        if request is not None and request.headers_finished:
            return None
        if not self.served:
            return self.opened_at
        return self.reading_since if request is not None else None


class _Server(TcpWSGIServer):
    """waitress's TCP server, whose periodic maintenance also enforces the connection
    deadlines of the module docstring."""

    channel_class = _Channel
    read_timeout_s = 60.0
    header_timeout_s = 5.0
    silent_timeout_s = 5.0

    def maintenance(self, wall_time: float) -> None:  # waitress passes time.time()
        super().maintenance(wall_time)  # closes connections idle past channel_timeout
        now = time.monotonic()
        full = self.in_connection_overflow or len(self._map) >= self.adj.connection_limit
        for channel in list(self.active_channels.values()):
            if (channel.requests or channel.will_close or channel.close_when_flushed
                    or not isinstance(channel, _Channel)):
                continue
            if not channel.spoke:
                # a connection that has sent nothing holds a slot for nobody: closed within
                # silent_timeout_s (+ the 1 s maintenance tick)
                if now - channel.opened_at > min(self.silent_timeout_s, self.header_timeout_s):
                    channel.will_close = True
                continue
            head_since, since = channel.head_deadline_from(), channel.reading_since
            if head_since is not None and now - head_since > self.header_timeout_s:
                self._time_out(channel, "no complete request head", self.header_timeout_s)
            elif since is not None and now - since > self.read_timeout_s:
                self._time_out(channel, "no complete request", self.read_timeout_s)
            elif full and since is not None and now - since > self.header_timeout_s:
                # while others wait for a slot, a body may take as long as a head does
                self._time_out(channel, "no complete request", self.header_timeout_s,
                               " while the server was full")
            if head_since is not None or since is not None:
                continue
            # kept alive with nothing in progress: its slot goes to a new connection when the
            # server is full (a second after its answer, which the client may still be reading)
            if full and not channel.total_outbufs_len \
                    and now - channel.answered_at > _IDLE_GRACE_S:
                channel.will_close = True

    @staticmethod
    def _time_out(channel: _Channel, what: str, limit_s: float, why: str = "") -> None:
        """Answer 408 on ``channel`` and close it once the answer is out."""
        channel.reading_since = None
        log.warning("gateway: %s sent %s within %gs%s; answered 408 and closed",
                    channel.addr[0] if channel.addr else "-", what, limit_s, why)
        try:
            channel.write_soon(_TIMEOUT_ANSWER)
        except ClientDisconnected:
            channel.will_close = True
            return
        channel.close_when_flushed = True


class GatewayServer:
    """``app`` served on ``host:port`` until :meth:`stop`; see the module docstring.

    ``threads`` run the application; ``connection_limit`` connections are open at most (more
    wait in the backlog); ``max_request_bytes`` is the largest body the server buffers before
    the application sees it (the gateway's own limit answers 413 below it).
    Raises ConfigurationError for a bad number and OSError when the address cannot be bound.
    """

    def __init__(self, app: WSGIApp, host: str = "127.0.0.1", port: int = 8080, *,
                 threads: int = 8, backlog: int = DEFAULT_BACKLOG, connection_limit: int = 500,
                 idle_timeout_s: float = 30.0, read_timeout_s: float = 60.0,
                 silent_timeout_s: float = 5.0, header_timeout_s: float = 5.0,
                 shutdown_timeout_s: float = 20.0,
                 max_request_bytes: int = 4 * 1024 * 1024) -> None:
        count("threads", threads, minimum=1, maximum=1000)
        count("backlog", backlog, minimum=1)
        count("connection_limit", connection_limit, minimum=1)
        count("port", port, maximum=65535)
        count("max_request_bytes", max_request_bytes, minimum=1)
        self.idle_timeout_s = finite("idle_timeout_s", idle_timeout_s, above=0)
        self.read_timeout_s = finite("read_timeout_s", read_timeout_s, above=0)
        self.silent_timeout_s = finite("silent_timeout_s", silent_timeout_s, above=0)
        self.header_timeout_s = finite("header_timeout_s", header_timeout_s, above=0)
        self.shutdown_timeout_s = finite("shutdown_timeout_s", shutdown_timeout_s, minimum=0)
        # poll() has no descriptor ceiling; Windows has only select() (up to 512 sockets).
        self._poll = os.name != "nt"
        adj = Adjustments(host=host, port=port, threads=threads, backlog=backlog,
                          connection_limit=connection_limit,
                          channel_timeout=max(1, math.ceil(idle_timeout_s)), cleanup_interval=1,
                          asyncore_use_poll=self._poll, max_request_body_size=max_request_bytes,
                          ident="fme-ai-resilience", expose_tracebacks=False)
        self._map: Dict[int, Any] = {}
        self._dispatcher = ThreadedTaskDispatcher()
        self._servers: List[_Server] = []
        try:
            for sockinfo in adj.listen:
                server = _Server(_access_logged(app), map=self._map,
                                 dispatcher=self._dispatcher, adj=adj, sockinfo=sockinfo)
                server.read_timeout_s = self.read_timeout_s
                server.silent_timeout_s = self.silent_timeout_s
                server.header_timeout_s = self.header_timeout_s
                self._servers.append(server)
        except BaseException:
            wasyncore.close_all(self._map)
            raise
        self._dispatcher.set_thread_count(threads)
        self._stop = threading.Event()
        self._hurry = threading.Event()
        self._closed = False

    def __repr__(self) -> str:
        host, port = self.address
        return f"<GatewayServer http://{host}:{port}/>"

    @property
    def address(self) -> Tuple[str, int]:
        """``(host, port)`` the first listening socket is bound to (port 0 resolved)."""
        server = self._servers[0]
        return str(server.effective_host), int(server.effective_port)

    def serve(self) -> None:
        """Serve until :meth:`stop`, then finish what is in flight and close everything."""
        try:
            while not self._stop.is_set():
                wasyncore.loop(timeout=_TICK_S, use_poll=self._poll, map=self._map, count=1)
            self._drain()
        finally:
            self.close()

    def stop(self) -> None:
        """Ask :meth:`serve` to stop gracefully; asked again, to stop now. Safe to call from a
        signal handler or another thread."""
        (self._hurry if self._stop.is_set() else self._stop).set()
        for server in self._servers:
            try:
                server.pull_trigger()  # wake the I/O loop
            except OSError:
                pass

    def close(self) -> None:
        """Close every socket and stop the worker threads (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._dispatcher.shutdown(cancel_pending=True, timeout=5)
        wasyncore.close_all(self._map, ignore_all=True)

    # -- the graceful stop ------------------------------------------------------------------
    def _drain(self) -> None:
        for server in self._servers:
            server.accepting = False
            for _ in range(100_000):  # take the connections already waiting in the backlog
                before = len(self._map)
                server.handle_accept()
                if len(self._map) == before:
                    break
            wasyncore.dispatcher.close(server)  # the listening socket; its trigger stays
        # read what has already arrived before telling busy connections from idle ones
        wasyncore.loop(timeout=0.05, use_poll=self._poll, map=self._map, count=1)
        busy = self._busy()
        log.info("gateway: stopping: no longer accepting; finishing %d request(s) in progress "
                 "(at most %gs)", busy, self.shutdown_timeout_s)
        deadline = time.monotonic() + self.shutdown_timeout_s
        while busy and not self._hurry.is_set() and time.monotonic() < deadline:
            wasyncore.loop(timeout=0.05, use_poll=self._poll, map=self._map, count=1)
            for server in self._servers:
                server.maintenance(time.time())  # the deadlines still hold while stopping
            busy = self._busy()
        if busy:
            log.warning("gateway: stopped with %d request(s) unfinished", busy)
        else:
            log.info("gateway: stopped; every request in progress was answered")

    def _busy(self) -> int:
        """Connections with a request being received, processed or answered, or too recently
        active to call idle; the idle ones are marked to close at the next turn of the loop."""
        busy = 0
        quiet_since = time.time() - _IDLE_GRACE_S  # waitress stamps activity with time.time()
        for server in self._servers:
            for channel in list(server.active_channels.values()):
                if (channel.requests or channel.request is not None or channel.total_outbufs_len
                        or (channel.last_activity > quiet_since and not channel.will_close)):
                    busy += 1
                elif not channel.will_close:
                    channel.will_close = True
        return busy


@contextlib.contextmanager
def serving(app: WSGIApp, host: str = "127.0.0.1", port: int = 0, *,
            threads: int = 8) -> Iterator[str]:
    """``app`` served by a :class:`GatewayServer` on a thread of this process for the block:
    yields its base URL (``http://host:port/``), stops it gracefully on the way out. What the
    drill and the tests run the intake on; ``serve`` runs the server in the foreground."""
    server = GatewayServer(app, host, port, threads=threads)
    thread = threading.Thread(target=server.serve, name="fair-gateway", daemon=True)
    thread.start()
    try:
        bound_host, bound_port = server.address
        yield f"http://{bound_host}:{bound_port}/"
    finally:
        server.stop()
        thread.join(30)
        server.close()


def _access_logged(app: WSGIApp) -> WSGIApp:
    """``app`` with one log line per request: the path without its query string (a token may
    ride there), escaped."""
    def logged(environ: Dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        def start(status: str, headers: Any, exc_info: Any = None) -> Any:
            log.info("%s %s %s -> %s", environ.get("REMOTE_ADDR") or "-",
                     printable(environ.get("REQUEST_METHOD") or "-"),
                     printable(environ.get("PATH_INFO") or "/"), status.split(" ", 1)[0])
            return start_response(status, headers, exc_info)
        return app(environ, start)
    return logged
