"""A timed HTTP exchange: connect, time to first byte and body read, each under its own limit.

The session's adapters measure the connect and arm the header watchdog
(:mod:`fme_ai_resilience.services.http.sessions`); a session handed in without them is given them
first (:func:`~fme_ai_resilience.services.http.sessions.bounded`). ``requests`` gives the first two
through its ``(connect, read)`` timeout tuple with ``stream=True``: the connect part bounds the
TCP handshake, the read part each wait for response header bytes; a :class:`HeaderWatch` bounds
the wait for the headers as a whole (a trickle of header bytes cannot outlast connect + TTFB
budgets). The body is then read chunk by chunk under its own deadline, taken from the injected
clock: before every read the socket timeout is set to the time left, so neither one blocked
read nor a slow trickle of small chunks can outlast the body budget. The size limit is enforced
while reading. Nothing here raises for a remote failure: every exchange ends in an
:class:`Exchange` saying what came back, how long each phase took and which ran out.

:class:`PhaseAdapter` (mounted on the default session) also measures the TCP connect itself
and records whether it (TLS handshake included) finished: urllib3 reports a stalled handshake
as a read timeout, which is then a CONNECT_TIMEOUT in the connect phase, not a TTFB one. With
a mocked session the connect phase reads 0 and its time counts as TTFB.
"""
from __future__ import annotations

import http.client
import socket
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, List, Mapping, Optional, Tuple

import requests
import urllib3

from ...core.clock import Clock
from ...core.errors import ErrorClass
from ..http.sessions import (AddressCheck, HeaderWatch, PhaseAdapter, Resolver, ConnectRecorder,
                             connect_recorder, connect_unfinished, resolve_within,
                             system_resolver, timed_session)

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


@dataclass(frozen=True)
class SendFailure:
    """Why sending a request and waiting for its headers failed: the error class, the phase
    that ran out (None when it was not a timeout) and a short reason without secrets."""

    error_class: ErrorClass
    phase: Optional[str]
    detail: str


def send_failure(exc: BaseException, recorder: Optional[ConnectRecorder],
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
    if overdue and connect_unfinished(recorder):   # a trickled CONNECT answer or handshake
        return SendFailure(ErrorClass.CONNECT_TIMEOUT, CONNECT,
                           "no connection (TCP + TLS) within the budget")
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
    recorder = connect_recorder(url, session=session, clock=clock)
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
