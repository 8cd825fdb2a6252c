"""The HTTP sessions the library makes, and the phase limits every outbound call runs under.

One factory, :func:`new_session`, chosen once per process (:mod:`.session_choice`): inside
FME a session is Safe's ``fmetools.http.FMERequestsSession`` (the FME Package's copy), which
follows FME's network settings (proxies, PAC files, the proxy map, the Windows certificate
store); elsewhere, or when FME's cannot be made, it is the library's own
(:func:`timed_session`, which honours the environment's proxy variables and CA bundle). Either
way its adapters are :class:`PhaseAdapter`: they measure the TCP (+TLS) connect, look host names
up within the connect budget, send the request under the TTFB budget and hand their socket to
the :class:`HeaderWatch` that bounds the whole wait for the response headers.

:func:`bounded` makes any ``requests.Session`` handed in so: each mounted ``HTTPAdapter`` (or
subclass, such as fmetools' certificate-store adapter) is replaced by a phase-measuring one of
the same class and pool settings; a session that is not a ``requests.Session``, or an adapter
that is not an ``HTTPAdapter`` or cannot be rebuilt without arguments, is refused with a
ConfigurationError, since its calls could not be held to their budgets. Connections through an
HTTP(S) proxy are timed too (the proxy's name is looked up like any other, within the connect
budget); a SOCKS proxy is not.
"""
from __future__ import annotations

import ipaddress
import socket
import threading
from typing import Any, Callable, Dict, Optional, Sequence

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.poolmanager import ProxyManager

from ...core.clock import Clock
from ...core.errors import ConfigurationError
from .session_choice import (EnvironmentSession, fme_session_class, note_fme_session_failed,
                             reset_session_choice, without_netrc)

__all__ = ["HeaderWatch", "PhaseAdapter", "timed_session", "system_resolver", "resolve_within",
           "connect_recorder", "connect_unfinished", "Resolver", "AddressCheck", "bounded",
           "ConnectRecorder",
           "new_session", "session_for", "fme_session_class", "reset_session_choice"]


class ConnectRecorder(threading.local):
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

    def __init__(self, recorder: Optional[ConnectRecorder], limit_s: float,
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


def _timed_connection(base: type, recorder: ConnectRecorder,
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
        # the watch gets the socket as soon as it exists: a proxy's CONNECT answer or a TLS
        # handshake trickled a byte at a time is then bounded like late headers are
        sock = open_socket(self)
        watch = recorder.watch
        if watch is not None:
            watch.attach(sock)
        return sock

    def open_socket(self: Any) -> Any:
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


def _timed_pools(recorder: ConnectRecorder, address_check: Optional[AddressCheck],
                 resolver: Optional[Resolver], *, clock: Clock) -> Dict[str, type]:
    timed = {scheme: _timed_connection(conn, recorder, address_check, resolver, clock=clock)
             for scheme, conn in (("http", HTTPConnection), ("https", HTTPSConnection))}
    return {"http": type("TimedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": timed["http"]}),
            "https": type("TimedHTTPSPool", (HTTPSConnectionPool,),
                          {"ConnectionCls": timed["https"]})}


class PhaseAdapter(HTTPAdapter):
    """An HTTPAdapter whose connections record how long their connect took.

    ``resolver`` looks host names up within the connect timeout (None: urllib3 resolves,
    unbounded), and the socket goes only to the addresses it gave, tried in order.
    ``address_check(host, address)``, when given, runs on each of them (on the literal for an
    IP host) before any socket opens, and may raise to refuse the connection. Through an
    HTTP(S) proxy the connection goes to the proxy, which the configuration names: its name is
    looked up with the system resolver within the connect budget and not vetted.
    """

    def __init__(self, *, clock: Clock, address_check: Optional[AddressCheck] = None,
                 resolver: Optional[Resolver] = system_resolver, **kwargs: Any) -> None:
        self.clock = clock
        self.recorder = ConnectRecorder()
        self.address_check = address_check
        self.resolver = resolver
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _timed_pools(
            self.recorder, self.address_check, self.resolver, clock=self.clock)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        fresh = proxy not in self.proxy_manager
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if fresh and isinstance(manager, ProxyManager):
            manager.pool_classes_by_scheme = _timed_pools(self.recorder, None, system_resolver,
                                                          clock=self.clock)
        return manager

    def __repr__(self) -> str:
        return f"{type(self).__name__}(clock={self.clock!r})"


def timed_session(*, clock: Clock, address_check: Optional[AddressCheck] = None,
                  resolver: Optional[Resolver] = system_resolver) -> requests.Session:
    """A session measuring connect times that honours the environment's proxy variables
    (``HTTP_PROXY``, ``HTTPS_PROXY``, ``NO_PROXY``) and CA bundle (``REQUESTS_CA_BUNDLE``,
    ``CURL_CA_BUNDLE``), never ``~/.netrc`` (:class:`~.session_choice.EnvironmentSession`).

    Host names are looked up with ``resolver`` (``(host, port) -> addresses``) within the
    connect budget, the lookup counted in the connect phase, and connected to only at the
    addresses found; ``address_check`` vets each before the socket opens (see PhaseAdapter).
    """
    session = EnvironmentSession()
    adapter = PhaseAdapter(clock=clock, address_check=address_check, resolver=resolver)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


_PHASED: Dict[type, type] = {}
_PHASED_LOCK = threading.Lock()


def _phased_class(cls: type) -> type:
    """``cls`` (an HTTPAdapter subclass) measuring its phases: PhaseAdapter before it."""
    if issubclass(cls, PhaseAdapter):
        return cls
    if cls is HTTPAdapter:
        return PhaseAdapter
    with _PHASED_LOCK:
        found = _PHASED.get(cls)
        if found is None:
            found = _PHASED[cls] = type(f"Phased{cls.__name__}", (PhaseAdapter, cls), {})
        return found


def _refused(what: str, why: str) -> ConfigurationError:
    return ConfigurationError("session", what, f"{why}: the library cannot hold its calls to "
                              "their connect, TTFB and body limits; hand in a requests.Session "
                              "whose adapters are requests' HTTPAdapter (or a subclass)")


def bounded(*, session: Any, clock: Clock, address_check: Optional[AddressCheck] = None,
            resolver: Optional[Resolver] = system_resolver) -> requests.Session:
    """``session`` with every mounted adapter measuring its phases (changed in place).

    An adapter that already is a :class:`PhaseAdapter` stays; any other ``HTTPAdapter`` is
    replaced by a phase-measuring one of its own class, with its pool sizes and retries.
    Raises ConfigurationError for anything that cannot be bounded that way.
    """
    if not isinstance(session, requests.Session):
        raise _refused(type(session).__name__, "not a requests.Session")
    for prefix, adapter in list(session.adapters.items()):
        if isinstance(adapter, PhaseAdapter):
            continue
        if not isinstance(adapter, HTTPAdapter):
            raise _refused(type(adapter).__name__, f"the adapter for {prefix} is no HTTPAdapter")
        try:
            phased = _phased_class(type(adapter))(
                clock=clock, address_check=address_check, resolver=resolver,
                pool_connections=getattr(adapter, "_pool_connections", 10),
                pool_maxsize=getattr(adapter, "_pool_maxsize", 10),
                max_retries=adapter.max_retries,
                pool_block=getattr(adapter, "_pool_block", False))
        except TypeError as exc:
            raise _refused(type(adapter).__name__,
                           f"its adapter cannot be rebuilt ({exc})") from None
        adapter.close()
        session.mount(prefix, phased)
    return session


def new_session(*, clock: Clock, address_check: Optional[AddressCheck] = None,
                resolver: Optional[Resolver] = system_resolver) -> requests.Session:
    """A session for the library's outbound calls: FME's inside FME, the library's outside,
    phase-measuring either way. When FME's session cannot be made (an unsupported proxy
    authentication, say) the process goes on with the library's, and
    :func:`~.session_choice.session_choice` says why (the callers WARN once)."""
    maker = fme_session_class()
    if maker is not None:
        try:
            session = maker()
        except Exception as exc:   # noqa: BLE001 - FME's own proxy configuration refused
            note_fme_session_failed(exc)
        else:
            return bounded(session=without_netrc(session=session), clock=clock,
                           address_check=address_check, resolver=resolver)
    return timed_session(clock=clock, address_check=address_check, resolver=resolver)


def connect_recorder(url: str, *, session: Any, clock: Clock) -> ConnectRecorder:
    """The (reset) connect recorder of the phase adapter serving ``url``; a session whose
    adapter does not measure phases is :func:`bounded` first (ConfigurationError if it cannot
    be)."""
    adapter = session.get_adapter(url) if isinstance(session, requests.Session) else None
    if not isinstance(adapter, PhaseAdapter):
        bounded(session=session, clock=clock)
        adapter = session.get_adapter(url)
    recorder = adapter.recorder
    recorder.reset()
    return recorder


def connect_unfinished(recorder: Optional[ConnectRecorder]) -> bool:
    """Whether a timeout came while connecting: a connect started and did not finish.

    urllib3 reports a TLS handshake that stalls after the TCP connect as a *read* timeout;
    this tells it apart from a late answer.
    """
    return recorder is not None and recorder.finished is False


def session_for(*, session: Optional[requests.Session], clock: Clock) -> requests.Session:
    """``session`` made :func:`bounded`, or (None) a :func:`new_session`: what every client of
    the library calls with."""
    return new_session(clock=clock) if session is None else bounded(session=session, clock=clock)
