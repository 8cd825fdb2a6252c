"""A timed HTTP exchange: connect, time to first byte and body read, each under its own limit.

``requests`` gives the first two through its ``(connect, read)`` timeout tuple with
``stream=True``: the connect part bounds the TCP handshake, the read part each wait for
response header bytes; a :class:`HeaderWatch` bounds the wait for the headers as a whole (a
trickle of header bytes cannot outlast connect + TTFB budgets). The body is then read chunk by chunk under its own deadline, taken from
the injected clock: before every read the socket timeout is set to the time left, so neither
one blocked read nor a slow trickle of small chunks can outlast the body budget. The size
limit is enforced while reading. Nothing here raises for a remote failure: every exchange ends
in an :class:`Exchange` saying what came back, how long each phase took and which ran out.

:class:`PhaseAdapter` (mounted on the default session) also measures the TCP connect itself
and records whether it (TLS handshake included) finished: urllib3 reports a stalled handshake
as a read timeout, which is then a CONNECT_TIMEOUT in the connect phase, not a TTFB one. With
another session (or a mocked one) the connect phase reads 0 and its time counts as TTFB.
"""
from __future__ import annotations

import http.client
import ipaddress
import socket
import threading
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from ...clock import Clock
from ...errors import ErrorClass

__all__ = ["CONNECT", "TTFB", "BODY", "HeaderWatch", "PhaseAdapter", "timed_session",
           "system_resolver", "resolve_within", "Exchange", "BodyRead", "read_body",
           "LATE_HEADERS", "connect_recorder", "connect_unfinished", "SendFailure",
           "send_failure", "exchange", "Resolver", "AddressCheck"]

CONNECT, TTFB, BODY = "connect", "ttfb", "body"

_TIMEOUTS: Tuple[type, ...] = (socket.timeout, TimeoutError,
                               urllib3.exceptions.ReadTimeoutError,
                               requests.exceptions.ReadTimeout)
_TRUNCATED: Tuple[type, ...] = (http.client.IncompleteRead, urllib3.exceptions.ProtocolError,
                                requests.exceptions.ChunkedEncodingError)


class _ConnectRecorder(threading.local):
    """The last TCP (+TLS) connect on this thread: its duration (s) and whether it finished.

    ``finished`` is None when no connect ran since :meth:`reset` (a pooled connection was
    reused), False while one runs or after it failed, True once it succeeded.
    ``send_timed_out`` says that sending the request (the image upload) ran out of time.
    """

    value = 0.0
    finished: Optional[bool] = None
    watch: Optional["HeaderWatch"] = None
    send_timed_out = False

    def reset(self) -> None:
        self.value, self.finished, self.watch = 0.0, None, None
        self.send_timed_out = False


class HeaderWatch:
    """A watchdog bounding the whole wait for response headers, not each socket read.

    Armed before the request with ``limit_s`` (connect + TTFB budgets, seconds): if the
    headers are not in by then it shuts the request's socket down, so a server trickling its
    headers a byte at a time cannot hold the call beyond the budget. :meth:`cancel` disarms
    it (always call it); once cancelled it never touches a socket again, so a connection that
    goes back to the pool is safe. The connection classes of :class:`PhaseAdapter` hand it
    their socket, fresh or reused, through the thread's connect recorder, and send the
    request under ``send_s`` (the TTFB budget: urllib3 would send it under the connect
    timeout, so a large upload failed as a connection error).
    """

    def __init__(self, recorder: Optional[_ConnectRecorder], limit_s: float,
                 send_s: Optional[float] = None) -> None:
        self.send_s = send_s
        self._lock = threading.Lock()
        self._sock: Optional[socket.socket] = None
        self._done = False
        self.fired = False
        self._timer: Optional[threading.Timer] = None
        if recorder is not None:
            recorder.watch = self
            self._timer = threading.Timer(max(0.0, limit_s), self._fire)
            self._timer.daemon = True
            self._timer.start()

    def attach(self, sock: Any) -> None:
        """The socket the request now uses (shut at once if the deadline already passed)."""
        with self._lock:
            if self._done:
                return
            self._sock = sock
            if self.fired:
                _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.fired = True
            if self._sock is not None:
                _shut(self._sock)

    def cancel(self) -> bool:
        """Disarm; returns whether the deadline had passed (the socket may have been shut)."""
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._done, self._sock = True, None
            return self.fired


def _shut(sock: Any) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError, ValueError):
        pass


AddressCheck = Callable[[str, str], None]
Resolver = Callable[[str, int], Sequence[str]]


def system_resolver(host: str, port: int) -> Sequence[str]:
    """Every address ``host`` resolves to (IPv4 and IPv6), as strings, in the order the system
    prefers them (``getaddrinfo``'s)."""
    infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos))


def resolve_within(resolver: Resolver, host: str, port: int,
                   timeout_s: Optional[float]) -> Sequence[str]:
    """``resolver(host, port)`` given at most ``timeout_s`` seconds (None: no limit).

    The lookup runs on a worker thread, since ``getaddrinfo`` takes no timeout; raises
    ``socket.timeout`` when it is late (the worker is left to finish on its own) and whatever
    the resolver raises.
    """
    box: Dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = resolver(host, port)
        except BaseException as exc:   # handed to the caller below
            box["error"] = exc

    worker = threading.Thread(target=work, name=f"resolve {host}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise socket.timeout(f"resolving {host} took longer than {timeout_s:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def _resolve_for(conn: Any, resolver: Resolver, start: float, *,
                 clock: Clock) -> Sequence[str]:
    """Resolve ``conn``'s host within its connect timeout: the addresses its socket may go to,
    in order (empty for an IP literal, which urllib3 connects to itself).

    The time spent is taken off the timeout left for the TCP (+TLS) connect, so the name
    lookup counts in the connect phase. A late lookup raises ConnectTimeoutError, a failed one
    NewConnectionError (urllib3's, so requests classifies them as for a connect).
    """
    host = str(getattr(conn, "_dns_host", "") or conn.host)
    if _is_literal(host):
        return ()
    limit = conn.timeout if isinstance(conn.timeout, (int, float)) else None
    try:
        addresses = resolve_within(resolver, host, conn.port, limit)
    except socket.timeout:
        raise urllib3.exceptions.ConnectTimeoutError(
            conn, f"resolving {host} took longer than the connect budget") from None
    except (OSError, UnicodeError) as exc:
        raise urllib3.exceptions.NewConnectionError(
            conn, f"cannot resolve {host}: {type(exc).__name__}") from None
    if not addresses:
        raise urllib3.exceptions.NewConnectionError(conn, f"{host} resolves to nothing")
    if limit is not None:
        conn.timeout = max(0.001, limit - (clock.monotonic() - start))
    return tuple(str(a) for a in addresses)


def _timed_connection(base: type, recorder: _ConnectRecorder,
                      address_check: Optional[AddressCheck], resolver: Optional[Resolver], *,
                      clock: Clock) -> type:
    def connect(self: Any) -> None:
        start = clock.monotonic()
        recorder.finished = False
        try:
            addresses = () if resolver is None else _resolve_for(self, resolver, start,
                                                                  clock=clock)
            if address_check is not None:   # before any socket opens: no port is touched
                name = str(self.host).lower().strip("[]")
                for address in addresses or (name,):
                    address_check(name, address)
            self._fme_addresses = addresses
            base.connect(self)
            recorder.finished = True
        finally:
            recorder.value = clock.monotonic() - start
        _attach(self)
        _send_timeout(self)

    def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "sock", None) is not None:   # connected already (https, or reused)
            _attach(self)
            _send_timeout(self)
        try:
            return base.request(self, *args, **kwargs)
        except (socket.timeout, TimeoutError):
            if recorder.finished is not False:   # connected: the upload ran out of time
                recorder.send_timed_out = True
            raise

    def _attach(conn: Any) -> None:
        watch = recorder.watch
        if watch is not None and getattr(conn, "sock", None) is not None:
            watch.attach(conn.sock)

    def _send_timeout(conn: Any) -> None:
        # the request (the image) is sent under the TTFB budget, not the connect timeout
        watch = recorder.watch
        if watch is None or watch.send_s is None or getattr(conn, "sock", None) is None:
            return
        conn.timeout = watch.send_s   # urllib3 2 sets the socket's timeout from it on send
        try:
            conn.sock.settimeout(watch.send_s)
        except OSError:
            pass

    def new_conn(self: Any) -> Any:
        # the socket goes to the looked-up addresses, in order, and nowhere else; Host, SNI and
        # certificate checks keep the name (urllib3 reads ``_dns_host`` only here)
        addresses = self.__dict__.pop("_fme_addresses", ())
        if not addresses:
            return base._new_conn(self)
        name = self._dns_host
        try:
            for address in addresses[:-1]:
                self._dns_host = address
                try:
                    return base._new_conn(self)
                except urllib3.exceptions.NewConnectionError:
                    continue   # refused or unreachable there: the next address
            self._dns_host = addresses[-1]
            return base._new_conn(self)
        finally:
            self._dns_host = name

    return type(f"Timed{base.__name__}", (base,),
                {"connect": connect, "request": request, "_new_conn": new_conn})


class PhaseAdapter(HTTPAdapter):
    """An HTTPAdapter whose connections record how long their connect took.

    ``resolver`` looks host names up within the connect timeout (None: urllib3 resolves,
    unbounded), and the socket goes only to the addresses it gave, tried in order.
    ``address_check(host, address)``, when given, runs on each of them (on the literal for an
    IP host) before any socket opens, and may raise to refuse the connection.
    """

    def __init__(self, *, clock: Clock, address_check: Optional[AddressCheck] = None,
                 resolver: Optional[Resolver] = system_resolver, **kwargs: Any) -> None:
        self.clock = clock
        self.recorder = _ConnectRecorder()
        self.address_check = address_check
        self.resolver = resolver
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        timed = {scheme: _timed_connection(conn, self.recorder, self.address_check,
                                           self.resolver, clock=self.clock)
                 for scheme, conn in (("http", HTTPConnection), ("https", HTTPSConnection))}
        http_cls = type("TimedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": timed["http"]})
        https_cls = type("TimedHTTPSPool", (HTTPSConnectionPool,),
                         {"ConnectionCls": timed["https"]})
        self.poolmanager.pool_classes_by_scheme = {"http": http_cls, "https": https_cls}

    def __repr__(self) -> str:
        return f"PhaseAdapter(clock={self.clock!r})"


def timed_session(*, clock: Clock, address_check: Optional[AddressCheck] = None,
                  resolver: Optional[Resolver] = system_resolver) -> requests.Session:
    """A ``requests.Session`` measuring connect times, ignoring proxy settings from the env.

    Host names are looked up with ``resolver`` (``(host, port) -> addresses``) within the
    connect budget, the lookup counted in the connect phase, and connected to only at the
    addresses found; ``address_check`` vets each before the socket opens (see PhaseAdapter).
    """
    session = requests.Session()
    session.trust_env = False
    adapter = PhaseAdapter(clock=clock, address_check=address_check, resolver=resolver)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


@dataclass(frozen=True)
class Exchange:
    """What one HTTP exchange produced (``error_class`` only for transport failures).

    ``oversize``: the body passed ``max_bytes`` and was cut there. ``truncated``: the
    connection ended before the announced body did.
    """

    status_code: Optional[int]
    headers: Mapping[str, str]
    body: bytes
    phases: Mapping[str, float]
    error_class: Optional[ErrorClass] = None
    timed_out_phase: Optional[str] = None
    detail: str = ""
    oversize: bool = False
    truncated: bool = False

    def __repr__(self) -> str:
        return (f"Exchange(status={self.status_code}, error={self.error_class}, "
                f"body={len(self.body)} bytes, phases={dict(self.phases)})")


@dataclass(frozen=True)
class BodyRead:
    """The result of :func:`read_body`: the bytes and how the read ended."""

    body: bytes
    timed_out: bool = False
    oversize: bool = False
    truncated: bool = False
    reset: bool = False
    detail: str = ""


def _socket_of(raw: Any) -> Optional[socket.socket]:
    """The socket under a urllib3 response, when there is one (not for mocked bodies)."""
    fp = getattr(getattr(raw, "_fp", None), "fp", None)
    sock = getattr(getattr(fp, "raw", None), "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


def _reader(raw: Any) -> Tuple[Callable[[int], bytes], Any]:
    """How to read ``raw`` one system call at a time, and the http.client response read
    directly when urllib3 (1.26) has no ``read1`` of its own (else None)."""
    read1 = getattr(raw, "read1", None)
    if read1 is not None:
        return read1, None
    fp = getattr(raw, "_fp", None)   # urllib3 1.26: go to http.client, which has read1
    if getattr(fp, "read1", None) is not None:
        return fp.read1, fp
    return raw.read, None


def _ended(raw: Any, fp: Any) -> bool:
    """At the end of a body read straight from http.client (urllib3 1.26): whether it was cut
    short. http.client ends a body shorter than its Content-Length quietly, and urllib3 does
    not see the read end, so a whole body's connection is given back to the pool here."""
    if fp is None:
        return False
    left = getattr(fp, "length", None)
    if isinstance(left, int) and left > 0:
        return True
    fp.close()
    release = getattr(raw, "release_conn", None)
    if callable(release):
        release()
    return False


def read_body(raw: Any, deadline: float, max_bytes: int, chunk_size: int = 65536, *,
              clock: Clock) -> BodyRead:
    """Read ``raw`` (a urllib3 response) until EOF, ``deadline`` (monotonic s) or ``max_bytes``.

    Never raises for network trouble; the returned :class:`BodyRead` says how it ended.
    """
    sock, (read, direct) = _socket_of(raw), _reader(raw)
    chunks: List[bytes] = []
    total = 0
    while True:
        remaining = deadline - clock.monotonic()
        if remaining <= 0:
            return BodyRead(b"".join(chunks), timed_out=True, detail="body deadline passed")
        if sock is not None:
            try:
                sock.settimeout(remaining)
            except OSError:
                sock = None
        try:
            chunk = read(min(chunk_size, max_bytes + 1 - total))
        except _TRUNCATED as exc:
            if any(isinstance(a, (ConnectionResetError, BrokenPipeError)) for a in exc.args):
                return BodyRead(b"".join(chunks), reset=True, detail="connection reset")
            return BodyRead(b"".join(chunks), truncated=True,
                            detail="connection ended before the body did")
        except _TIMEOUTS:
            return BodyRead(b"".join(chunks), timed_out=True, detail="body read timed out")
        except OSError as exc:
            return BodyRead(b"".join(chunks), reset=True, detail=type(exc).__name__)
        except ValueError:   # a closed stream: requests reads a redirect's body itself
            return BodyRead(b"".join(chunks))
        if not chunk:
            if _ended(raw, direct):
                return BodyRead(b"".join(chunks), truncated=True,
                                detail="connection ended before the body did")
            return BodyRead(b"".join(chunks))
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            body = b"".join(chunks)[:max_bytes]
            return BodyRead(body, oversize=True, detail=f"body larger than {max_bytes} bytes")


#: Why a request whose response headers did not come in time failed.
LATE_HEADERS = "no response headers within the budget"


def connect_recorder(url: str, *, session: Any) -> Optional[_ConnectRecorder]:
    """The (reset) connect recorder of the adapter serving ``url``, if it is a PhaseAdapter."""
    adapter = session.get_adapter(url) if hasattr(session, "get_adapter") else None
    recorder = getattr(adapter, "recorder", None)
    if not isinstance(recorder, _ConnectRecorder):
        return None
    recorder.reset()
    return recorder


def connect_unfinished(recorder: Optional[_ConnectRecorder]) -> bool:
    """Whether a timeout came while connecting: a connect started and did not finish.

    urllib3 reports a TLS handshake that stalls after the TCP connect as a *read* timeout;
    this tells it apart from a late answer.
    """
    return recorder is not None and recorder.finished is False


@dataclass(frozen=True)
class SendFailure:
    """Why sending a request and waiting for its headers failed: the error class, the phase
    that ran out (None when it was not a timeout) and a short reason without secrets."""

    error_class: ErrorClass
    phase: Optional[str]
    detail: str


def send_failure(exc: BaseException, recorder: Optional[_ConnectRecorder],
                 overdue: bool) -> SendFailure:
    """The one classifier of a request that failed before its response headers arrived.

    ``recorder`` is the adapter's connect recorder (None for another session) and ``overdue``
    whether the :class:`HeaderWatch` fired. A read timeout while the connect (TLS included)
    had not finished is a CONNECT_TIMEOUT; a socket error after the watchdog shut the socket is
    a TTFB_TIMEOUT; a request that cannot be sent at all is BAD_REQUEST.
    """
    rq = requests.exceptions
    if recorder is not None and recorder.send_timed_out:
        return SendFailure(ErrorClass.TTFB_TIMEOUT, TTFB,
                           "the request (the image) was not sent within the budget")
    if isinstance(exc, rq.ConnectTimeout):
        return SendFailure(ErrorClass.CONNECT_TIMEOUT, CONNECT, "no connection within the budget")
    if isinstance(exc, rq.ReadTimeout):
        if connect_unfinished(recorder):   # the TLS handshake stalled: still connecting
            return SendFailure(ErrorClass.CONNECT_TIMEOUT, CONNECT,
                               "no connection (TCP + TLS) within the budget")
        return SendFailure(ErrorClass.TTFB_TIMEOUT, TTFB, LATE_HEADERS)
    if isinstance(exc, (rq.InvalidURL, rq.MissingSchema, rq.InvalidSchema)):
        return SendFailure(ErrorClass.BAD_REQUEST, None,
                           f"request not sendable: {type(exc).__name__}")
    if overdue:
        return SendFailure(ErrorClass.TTFB_TIMEOUT, TTFB, LATE_HEADERS)
    return SendFailure(ErrorClass.CONNECTION_ERROR, None,
                       f"connection failed: {type(exc).__name__}")


def exchange(method: str, url: str, headers: Mapping[str, str], body: bytes, *,
             connect_s: float, ttfb_s: float, body_s: float, max_bytes: int,
             session: requests.Session, clock: Clock) -> Exchange:
    """Send one request and read its answer under the three phase limits (seconds).

    The TTFB phase runs from the end of the connect to the response headers, so it includes
    sending the request body (the image) and the service's queueing and inference.
    """
    recorder = connect_recorder(url, session=session)
    start = clock.monotonic()

    def timings(**more: float) -> Mapping[str, float]:
        connect = recorder.value if recorder is not None else 0.0
        out = {CONNECT: connect, TTFB: max(0.0, clock.monotonic() - start - connect)}
        out.update(more)
        return MappingProxyType(out)

    watch = HeaderWatch(recorder, connect_s + ttfb_s, send_s=ttfb_s)
    try:
        try:
            resp = session.request(method, url, headers=dict(headers), data=body or None,
                                   stream=True, allow_redirects=False,
                                   timeout=(connect_s, ttfb_s))
        finally:
            overdue = watch.cancel()
    except (requests.exceptions.RequestException, OSError) as exc:
        failure = send_failure(exc, recorder, overdue)
        phases = (MappingProxyType({CONNECT: clock.monotonic() - start})
                  if failure.phase == CONNECT else timings())
        return Exchange(None, {}, b"", phases, failure.error_class, failure.phase,
                        failure.detail)
    if overdue:   # the headers came as the watchdog fired: the socket may be shut
        resp.close()
        return Exchange(None, {}, b"", timings(), ErrorClass.TTFB_TIMEOUT, TTFB, LATE_HEADERS)
    until_headers = timings()
    headers_at = clock.monotonic()
    try:
        read = read_body(resp.raw, headers_at + body_s, max_bytes, clock=clock)
    finally:
        resp.close()
    phases = MappingProxyType({**until_headers, BODY: clock.monotonic() - headers_at})
    args = (resp.status_code, {str(k): str(v) for k, v in resp.headers.items()}, read.body,
            phases)
    if read.timed_out:
        return Exchange(*args, ErrorClass.BODY_TIMEOUT, BODY, read.detail)
    if read.reset:
        return Exchange(*args, ErrorClass.CONNECTION_ERROR, None, read.detail)
    return Exchange(*args, None, None, read.detail, oversize=read.oversize,
                    truncated=read.truncated)
