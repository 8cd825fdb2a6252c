"""The threaded loopback HTTP server every stand-in runs on, and the request and reply it speaks.

A stand-in subclasses :class:`StandInServer` and implements :meth:`StandInServer.handle`, a
function of one :class:`Request` that returns one :class:`Reply`; the base does the sockets:

- it listens on 127.0.0.1 only (``port=0`` picks a free port), HTTP/1.1 with keep-alive, one
  daemon thread per connection; :meth:`~StandInServer.start` (or ``with``) starts it and
  :meth:`~StandInServer.stop` shuts every connection down and joins every thread it started,
  so no thread outlives ``stop()``; a stopped stand-in can be started again on the same port
  (its ``url`` stays the same; in between, connections are refused);
- it measures schedule time: seconds since ``start()`` (or the last ``reset()``) read from
  ``time.monotonic()``, divided by ``time_scale`` (real seconds per schedule second: with
  ``time_scale=0.01`` an outage from 10 s to 40 s runs from 0.1 s to 0.4 s after start);
- a reply may wait before it is sent (``delay_s``, real seconds, cut short by ``stop()``) and
  may send only the first bytes of its body and then close the connection (a truncated answer
  whose ``Content-Length`` promised more); a client that closes its connection during the
  wait is seen leaving (:meth:`StandInServer.client_left` hears of it, with the reply it
  will never read), :meth:`StandInServer.reply_sent` hears of every reply sent whole, and
  :meth:`StandInServer.client_closed` of the replies sent whole on a connection whose
  client then closed it (a process that dies closes every socket it held; a living client
  keeps its connections for its next calls).

Counters live in the subclasses, behind :attr:`StandInServer.lock`; each has ``snapshot()``
(plain dicts and lists, copied) and ``reset()``. A handler that fails answers 500 with an
ArcGIS-style error body and is logged, never printed.
"""
from __future__ import annotations

import json
import logging
import select
import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple, TypeVar
from urllib.parse import parse_qsl, urlsplit

from ...core.checks import count, finite
from ...core.errors import ResilienceError

__all__ = ["StandInServer", "StandInError", "Request", "Reply", "HOST", "THREAD_PREFIX",
           "LOOPBACK_HOSTS"]

log = logging.getLogger("fme_ai_resilience.drill.standins")

#: The only address a stand-in listens on.
HOST = "127.0.0.1"
#: Every thread a stand-in starts has a name starting with this.
THREAD_PREFIX = "standin-"
#: The hosts a stand-in sends to (an image URL it fetches, a webhook receiver).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_JOIN_S = 5.0
#: The longest a waiting reply goes without looking whether it is stopping (real s); a
#: client leaving, and stop() shutting the connection down, wake it at once.
_WATCH_S = 0.25
_S = TypeVar("_S", bound="StandInServer")


class StandInError(ResilienceError):
    """A stand-in could not do what it was asked (start on its port, build a body)."""


@dataclass(frozen=True)
class Request:
    """One HTTP request as a stand-in sees it.

    ``headers`` has lower-case names; ``params`` holds the query string and, for a
    form-encoded body, the form fields (a form field wins over a query parameter of the same
    name; the last of repeated names wins).
    """

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: bytes = b""
    params: Mapping[str, str] = field(default_factory=dict)

    def header(self, name: str, default: Optional[str] = None) -> Optional[str]:
        """The value of header ``name`` (any case), else ``default``."""
        return self.headers.get(name.lower(), default)

    @property
    def content_type(self) -> str:
        """The media type without parameters, lower-case (``application/json``)."""
        return (self.header("content-type") or "").split(";", 1)[0].strip().lower()


@dataclass(frozen=True)
class Reply:
    """What a stand-in answers.

    ``delay_s`` waits that many real seconds before answering. ``send_bytes`` sends only the
    first that many bytes of ``body`` (the ``Content-Length`` header still says
    ``len(body)``) and closes the connection; so does ``close``, after the whole body.
    ``tag`` is the stand-in's own note on the call, handed back to
    :meth:`StandInServer.client_left` if the client leaves during ``delay_s``, else to
    :meth:`StandInServer.reply_sent`.
    """

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: Tuple[Tuple[str, str], ...] = ()
    delay_s: float = 0.0
    send_bytes: Optional[int] = None
    close: bool = False
    tag: Any = None

    @classmethod
    def json(cls, status: int, obj: Any, headers: Tuple[Tuple[str, str], ...] = (),
             delay_s: float = 0.0) -> "Reply":
        """A JSON reply (``application/json; charset=utf-8``)."""
        return cls(status, json.dumps(obj, separators=(",", ":")).encode("utf-8"),
                   "application/json; charset=utf-8", headers, delay_s)


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer that remembers its connections and threads so stop() can end them."""

    daemon_threads = True
    # A burst of deliveries arrives within milliseconds: the default accept queue of 5 can drop
    # a SYN on a loaded machine.
    request_queue_size = 128
    # Never share a port with another listener (newer Pythons turn SO_REUSEPORT on here).
    allow_reuse_port = False

    def __init__(self, address: Tuple[str, int], handler: type, owner: "StandInServer") -> None:
        self.owner = owner
        self.connections: Set[socket.socket] = set()
        self.threads: Set[threading.Thread] = set()
        self.connection_lock = threading.Lock()
        self.serial = 0
        super().__init__(address, handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind asks the resolver for the host's FQDN, which can take seconds
        # on a machine whose DNS is broken; the name is only used in CGI environments.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connection_lock:
            self.serial += 1
            thread = threading.Thread(
                target=self._serve_connection, args=(request, client_address), daemon=True,
                name=f"{THREAD_PREFIX}{self.owner.kind}-conn-{self.serial}")
            self.connections.add(request)
            self.threads.add(thread)
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 (a client that went away is not the stand-in's fault)
            log.debug("connection from %s ended with an error", client_address, exc_info=True)
        finally:
            self.shutdown_request(request)
            with self.connection_lock:
                self.connections.discard(request)
                self.threads.discard(threading.current_thread())

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("error on a connection from %s", client_address, exc_info=True)

    def end_connections(self) -> None:
        """Shut every open connection down, waking handlers blocked reading a keep-alive."""
        with self.connection_lock:
            connections = list(self.connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def live_threads(self) -> Set[threading.Thread]:
        with self.connection_lock:
            return set(self.threads)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fme-ai-resilience-standin/1"
    timeout = 30  # a client that opens a connection and says nothing does not hold a thread
    # Headers and body go out in two writes: with Nagle's algorithm the second waits for the
    # client's delayed ACK of the first, 40 ms on Linux, on every keep-alive answer.
    disable_nagle_algorithm = True
    server: _Server

    def handle(self) -> None:
        """Serve the connection's requests, then tell the stand-in which replies went out
        whole on it if its client is the one that closed it."""
        self._sent_whole: List[Reply] = []
        self._client_gone = False
        try:
            super().handle()
        except ConnectionResetError:
            self._client_gone = True
        # An empty request line: the client closed the connection (a timeout, or the stand-in
        # closing it after a reply, leaves the last request line in place).
        gone = self._client_gone or getattr(self, "raw_requestline", None) == b""
        owner = self.server.owner
        if gone and self._sent_whole and not owner.wait(0):
            owner.client_closed(tuple(self._sent_whole))

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._dispatch()

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch()

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch()

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch()

    def do_HEAD(self) -> None:  # noqa: N802
        self._dispatch()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
        log.debug("%s %s", self.address_string(), format % args)

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _dispatch(self) -> None:
        # A call leaves the in-flight count before its answer is sent, so a client holding
        # its answer never sees itself still counted.
        owner = self.server.owner
        owner._entered()
        try:
            reply = self._answer(owner)
        finally:
            owner._left()
        if reply is not None and self._send(reply) and reply.send_bytes is None:
            owner.reply_sent(reply)
            if reply.tag is not None:
                self._sent_whole.append(reply)

    def _answer(self, owner: "StandInServer") -> Optional[Reply]:
        body = self._read_body()
        parts = urlsplit(self.path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        headers = {name.lower(): value for name, value in self.headers.items()}
        params = dict(query)
        if headers.get("content-type", "").lower().startswith(
                "application/x-www-form-urlencoded"):
            params.update(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        request = Request(self.command, parts.path, query, headers, body, params)
        try:
            reply = owner.handle(request)
        except Exception as exc:  # noqa: BLE001 (a stand-in bug answers 500, and is logged)
            log.exception("the %s stand-in failed on %s %s", owner.kind, self.command, parts.path)
            reply = Reply.json(500, {"error": {"code": 500, "message": f"stand-in failure: {exc}",
                                               "details": []}})
        if reply.delay_s > 0 and not self._wait(owner, reply):
            self.close_connection = True  # stopping, or nobody left to answer
            return None
        return reply

    def _wait(self, owner: "StandInServer", reply: Reply) -> bool:
        """Wait ``reply.delay_s`` watching the connection: False when the stand-in stops
        first or the client closes its end (a process killed mid-call closes every socket
        it held), which :meth:`StandInServer.client_left` hears."""
        until = time.monotonic() + reply.delay_s
        watching = True
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return True
            if not watching:
                return not owner.wait(left)
            try:
                readable, _, _ = select.select([self.connection], [], [], min(left, _WATCH_S))
                gone = bool(readable) and not self.connection.recv(1, socket.MSG_PEEK)
            except (OSError, ValueError):
                gone = True
            if owner.wait(0):
                return False
            if gone:
                self._client_gone = True
                owner.client_left(reply)
                return False
            watching = not readable   # bytes of a next request: the client is still there

    def _send(self, reply: Reply) -> bool:
        """Send ``reply``; False when the client was gone."""
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers:
                self.send_header(name, value)
            if reply.send_bytes is not None or reply.close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if self.command != "HEAD":
                body = reply.body if reply.send_bytes is None else reply.body[:reply.send_bytes]
                self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = self._client_gone = True
            return False
        return True


class StandInServer:
    """A loopback HTTP server run in threads; subclasses implement :meth:`handle`.

    ``port=0`` picks a free port. ``time_scale`` is real seconds per schedule second (see the
    module docstring). Use ``with Subclass(...) as s:`` or ``start()`` / ``stop()``.
    Raises :class:`StandInError` when the port cannot be bound.
    """

    #: A short name for thread names and log lines; subclasses set it.
    kind = "server"

    def __init__(self, *, port: int = 0, time_scale: float = 1.0) -> None:
        self.port = count("port", port, maximum=65535)
        self.time_scale = finite("time_scale", time_scale, above=0)
        self.lock = threading.RLock()
        self._stopping = threading.Event()
        self._server: Optional[_Server] = None
        self._thread: Optional[threading.Thread] = None
        self._started_at: Optional[float] = None
        self._in_flight = 0
        self._peak_in_flight = 0

    # --- concurrency ------------------------------------------------------------------------

    def concurrency(self) -> Dict[str, int]:
        """Requests being answered now (``in_flight``) and the most at once since the start or
        the last :meth:`reset_concurrency` (``peak_in_flight``)."""
        with self.lock:
            return {"in_flight": self._in_flight, "peak_in_flight": self._peak_in_flight}

    def reset_concurrency(self) -> None:
        with self.lock:
            self._peak_in_flight = self._in_flight

    def _entered(self) -> None:
        with self.lock:
            self._in_flight += 1
            self._peak_in_flight = max(self._peak_in_flight, self._in_flight)

    def _left(self) -> None:
        with self.lock:
            self._in_flight -= 1

    # --- lifecycle -------------------------------------------------------------------------

    def start(self: _S) -> _S:
        """Start serving (a no-op when already serving); returns the stand-in itself."""
        with self.lock:
            if self._server is not None:
                return self
            try:
                server = _Server((HOST, self.port), _Handler, self)
            except OSError as exc:
                raise StandInError(f"the {self.kind} stand-in cannot listen on "
                                   f"{HOST}:{self.port}: {exc}") from None
            self.port = server.server_address[1]
            self._stopping.clear()
            self._server = server
            self._thread = threading.Thread(target=server.serve_forever, kwargs={
                "poll_interval": 0.02}, daemon=True, name=f"{THREAD_PREFIX}{self.kind}-serve")
            if self._started_at is None:
                self._started_at = time.monotonic()
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: close the listener and every connection, join every thread.

        Waits at most a few seconds per thread; a no-op when not serving.
        """
        with self.lock:
            server, thread = self._server, self._thread
            self._server = self._thread = None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        server.end_connections()
        for worker in server.live_threads():
            worker.join(_JOIN_S)
        if thread is not None:
            thread.join(_JOIN_S)

    @property
    def running(self) -> bool:
        """Whether the stand-in is serving."""
        return self._server is not None

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The base URL, ``http://127.0.0.1:<port>``.

        Raises :class:`StandInError` before the first start when the port is 0 (not known yet).
        """
        if self.port == 0:
            raise StandInError(f"the {self.kind} stand-in has no port yet: start it first")
        return f"http://{HOST}:{self.port}"

    def client_left(self, reply: Reply) -> None:
        """A client closed its connection while ``reply`` waited to be sent; subclasses that
        count what nobody received override this."""

    def reply_sent(self, reply: Reply) -> None:
        """``reply`` went out whole; subclasses that time their answers override this."""

    def client_closed(self, replies: Tuple[Reply, ...]) -> None:
        """A client closed the connection on which ``replies`` (those with a ``tag``) went
        out whole, not while the stand-in was stopping; subclasses that follow where their
        answers went override this."""

    def wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` real seconds unless stopped first; True when stopping cut it short."""
        return self._stopping.wait(seconds)

    # --- schedule time ---------------------------------------------------------------------

    def schedule_time(self) -> float:
        """Schedule seconds since ``start()`` or the last ``reset()`` (0 before the start)."""
        started = self._started_at
        if started is None:
            return 0.0
        return (time.monotonic() - started) / self.time_scale

    def real_seconds(self, schedule_s: float) -> float:
        """How many real seconds ``schedule_s`` schedule seconds take."""
        return schedule_s * self.time_scale

    def restart_schedule(self) -> None:
        """Schedule time starts again from 0 now."""
        with self.lock:
            self._started_at = time.monotonic() if self._server is not None else None

    # --- what subclasses implement ---------------------------------------------------------

    def handle(self, request: Request) -> Reply:
        """The reply to ``request``; called on the connection's thread."""
        return Reply.json(404, {"error": {"code": 404, "message": "Not Found", "details": []}})

    def snapshot(self) -> Dict[str, Any]:
        """The counters, as plain dicts and lists (a copy)."""
        return {}

    def reset(self) -> None:
        """Counters back to zero and schedule time back to 0."""
        self.restart_schedule()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"{type(self).__name__}(port={self.port}, {state})"
