"""Fetch a survey photo without opening an SSRF door.

The photo URL comes from an unauthenticated webhook body, so before any request (and again
before following each redirect) the URL must pass :func:`check_url` against a
:class:`DownloadPolicy`:

- scheme ``https`` (plain ``http`` only for hosts in ``allow_http_hosts``), no credentials in
  the URL, no non-canonical numeric host (``2130706433``, ``0x7f.1``);
- the host is on the allow-list (default: the survey's ``serviceUrl`` host plus configured
  hosts; an entry ``.example.com`` also admits its subdomains);
- every address the host resolves to is public: loopback, private, link-local, multicast,
  unspecified, reserved and IPv4-mapped IPv6 addresses are refused unless the host is listed in
  ``allow_private_hosts`` (an on-premises ArcGIS Enterprise, a loopback test server).

Both the check's lookup and the connection's are bounded by ``connect_s`` (a late one is
CONNECT_TIMEOUT), the check's time taken off the connect that follows. The default session
checks each connection's peer address again once connected, so a name
that resolves differently the second time (DNS rebinding) is refused too. While downloading:
at most ``max_redirects`` redirects, at most ``max_bytes`` read (enforced
while streaming), ``Content-Type`` must be ``image/*``. Violations raise
:class:`~fme_ai_resilience.errors.UnsafeURL`; other failures (timeouts, HTTP errors, ArcGIS's
HTTP-200 ``{"error": {"code": 498}}``) raise :class:`~fme_ai_resilience.errors.DownloadError`
with their ErrorClass. The portal token goes only in ``X-Esri-Authorization: Bearer``, only to
the first URL's origin (scheme, host and port), never into a URL (the portal-token query
parameters ``token=`` and ``access_token=`` are stripped before the request), log line or
exception. Other query
parameters, including storage signatures (Azure SAS ``sig=``, S3 ``X-Amz-Signature=``, GCS
``X-Goog-Signature=``, ``key=``), stay in the URL requested, since the storage needs them;
every secret-looking parameter is still redacted wherever the URL is shown.
"""
from __future__ import annotations

import ipaddress
import json
import logging
import socket
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple, Union
from urllib.parse import urljoin, urlsplit

import requests

from ...backoff import retry_after_from_headers
from ...checks import count, finite
from ...classification import classify_status
from ...clock import Clock, SystemClock
from ...errors import DownloadError, ErrorClass, UnsafeURL
from ...redact import PORTAL_TOKEN_PARAMS, redact_text, redact_url, without_token_params
from ...settings import DownloadSettings
from .phases import (LATE_HEADERS, HeaderWatch, Resolver, connect_recorder, read_body,
                     resolve_within, send_failure, system_resolver, timed_session)
from .providers import detect_error

__all__ = ["DownloadPolicy", "Photo", "check_url", "check_peer", "fetch_photo",
           "PORTAL_TOKEN_PARAMS"]

log = logging.getLogger("fme_ai_resilience.vision.download")

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
_JSON_ERROR_LIMIT = 64 * 1024


@dataclass(frozen=True)
class DownloadPolicy:
    """What ``fetch_photo`` may fetch. Sizes in bytes, times in seconds."""

    allowed_hosts: Tuple[str, ...] = ()
    allow_http_hosts: Tuple[str, ...] = ()
    max_bytes: int = 20 * 1024 * 1024
    max_redirects: int = 3
    resolver: Optional[Resolver] = None
    allow_private_hosts: Tuple[str, ...] = ()
    connect_s: float = 5.0
    ttfb_s: float = 30.0
    body_s: float = 60.0

    def __post_init__(self) -> None:
        for name in ("allowed_hosts", "allow_http_hosts", "allow_private_hosts"):
            hosts = tuple(h.strip().lower().strip("[]").rstrip(".")
                          for h in getattr(self, name) if h.strip().rstrip("."))
            object.__setattr__(self, name, hosts)
        count("download.max_bytes", self.max_bytes, minimum=1)
        count("download.max_redirects", self.max_redirects)
        for name in ("connect_s", "ttfb_s", "body_s"):
            finite(f"download.{name}", getattr(self, name), above=0)

    @classmethod
    def for_service(cls, service_url: str, settings: Optional[DownloadSettings] = None,
                    **overrides: Any) -> "DownloadPolicy":
        """The policy for one survey: its ``serviceUrl`` host plus the configured hosts."""
        settings = settings or DownloadSettings()
        host = (urlsplit(service_url).hostname or "").lower()
        hosts = tuple(dict.fromkeys(((host,) if host else ()) + settings.allowed_hosts))
        values = dict(allowed_hosts=hosts, allow_http_hosts=settings.allow_http_hosts,
                      max_bytes=settings.max_photo_bytes, max_redirects=settings.max_redirects)
        values.update(overrides)
        return cls(**values)

    def host_allowed(self, host: str) -> bool:
        return _listed(host, self.allowed_hosts)


def _listed(host: str, entries: Sequence[str]) -> bool:
    return any(host == e or (e.startswith(".") and host.endswith(e)) for e in entries)


@dataclass(frozen=True)
class Photo:
    """A downloaded photo: its bytes, content type and the (redacted) URL it came from."""

    content: bytes
    content_type: str
    url: str

    def __repr__(self) -> str:
        return f"Photo({self.content_type}, {len(self.content)} bytes, {self.url!r})"


def _address_problem(addr: IPAddress) -> Optional[str]:
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return "an IPv4-mapped IPv6 address"
    for attr, name in (("is_loopback", "loopback"), ("is_unspecified", "unspecified"),
                       ("is_link_local", "link-local"), ("is_multicast", "multicast"),
                       ("is_private", "private"), ("is_reserved", "reserved")):
        if getattr(addr, attr):
            return f"a {name} address"
    if not addr.is_global:
        return "not a public address"
    return None


def _legacy_numeric(host: str) -> bool:
    """``2130706433``, ``0x7f.1``, ``017700000001``: forms inet_aton reads as an address."""
    try:
        socket.inet_aton(host)
    except (OSError, ValueError):
        return False
    return True


def check_url(url: str, policy: DownloadPolicy,
              secrets: Sequence[str] = ()) -> Tuple[str, int]:
    """``(host, port)`` of ``url`` if the policy allows fetching it; raises UnsafeURL if not.

    The host is compared without a trailing dot (``example.com.`` is ``example.com``).
    ``secrets`` (the portal token) are redacted from the URL wherever a message shows it.
    """
    shown = redact_url(str(url), secrets)
    try:
        parts = urlsplit(str(url))
        host = (parts.hostname or "").lower().rstrip(".")
        port = parts.port
    except ValueError:
        raise UnsafeURL(f"{shown}: not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise UnsafeURL(f"{shown}: scheme {scheme or '(none)'!r} is not allowed")
    if not host:
        raise UnsafeURL(f"{shown}: no host")
    if scheme == "http" and not _listed(host, policy.allow_http_hosts):
        raise UnsafeURL(f"{shown}: plain http is not allowed for {host}")
    if parts.username is not None or parts.password is not None:
        raise UnsafeURL(f"{shown}: credentials in the URL")
    if not policy.host_allowed(host):
        raise UnsafeURL(f"{shown}: host {host} is not on the allow-list")
    port = port or (443 if scheme == "https" else 80)
    private_ok = _listed(host, policy.allow_private_hosts)
    try:
        literal: Optional[IPAddress] = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is None and _legacy_numeric(host):
        raise UnsafeURL(f"{shown}: non-canonical numeric host {host!r}")
    if literal is not None:
        addresses: Sequence[str] = (str(literal),)
    else:
        try:
            addresses = resolve_within(policy.resolver or system_resolver, host, port,
                                       policy.connect_s)
        except socket.timeout:
            raise DownloadError(ErrorClass.CONNECT_TIMEOUT,
                                f"resolving {host} took longer than {policy.connect_s:g} s") \
                from None
        except (OSError, UnicodeError) as exc:
            raise DownloadError(ErrorClass.CONNECTION_ERROR,
                                f"cannot resolve {host}: {type(exc).__name__}") from None
        if not addresses:
            raise DownloadError(ErrorClass.CONNECTION_ERROR, f"{host} resolves to nothing")
    for text in addresses:
        try:
            addr = ipaddress.ip_address(str(text).split("%", 1)[0])
        except ValueError:
            raise UnsafeURL(f"{shown}: resolver gave a non-address {text!r}") from None
        problem = _address_problem(addr)
        if problem and not private_ok:
            raise UnsafeURL(f"{shown}: {host} resolves to {addr}, {problem}")
    return host, port


def check_peer(host: str, peer: str, policy: DownloadPolicy) -> None:
    """Refuse a connection to ``host`` that reached a non-public ``peer`` address.

    Run on each new connection of the default session: the name may resolve differently
    than when :func:`check_url` looked (DNS rebinding). Raises UnsafeURL.
    """
    if _listed(host.rstrip("."), policy.allow_private_hosts):
        return
    try:
        addr = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        raise UnsafeURL(f"connection to {host} has no checkable peer address") from None
    problem = _address_problem(addr)
    if problem:
        raise UnsafeURL(f"connection to {host} reached {addr}, {problem}")


def _without_token_params(url: str) -> str:
    """``url`` minus the portal-token query parameters; signatures and other keys stay."""
    try:
        return without_token_params(url)
    except ValueError:
        return url


def _origin(url: str) -> Tuple[str, str, Optional[int]]:
    """``(scheme, host, port)`` of ``url``, the default port filled in; empty if unparsable."""
    try:
        parts = urlsplit(str(url))
        scheme, host = parts.scheme.lower(), (parts.hostname or "").lower().rstrip(".")
        port = parts.port or {"https": 443, "http": 80}.get(scheme)
    except ValueError:
        return "", "", None
    return scheme, host, port


def _arcgis_error(body: bytes) -> Optional[Tuple[ErrorClass, str]]:
    try:
        payload = json.loads(body.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    return detect_error("arcgis", 200, payload)


def fetch_photo(url: str, token: Optional[str], policy: DownloadPolicy, *,
                session: Optional[requests.Session] = None,
                clock: Optional[Clock] = None) -> Photo:
    """Download the photo at ``url`` under ``policy``; ``token`` is the portal token or None.

    Raises UnsafeURL for a policy violation and DownloadError (with its ErrorClass) for any
    other failure. Never sends the token anywhere but the first URL's origin (same scheme,
    host and port: not to another port of that host, nor over http after https).
    """
    clock = clock or SystemClock()
    if session is None:
        session = timed_session(clock=clock,
                                peer_check=lambda host, peer: check_peer(host, peer, policy))
    secrets = (token,) if token else ()
    token_origin = _origin(url)
    current, hops = _without_token_params(url), 0
    while True:
        looked_up_at = clock.monotonic()
        host, _ = check_url(current, policy, secrets)
        # the name lookup counts in the connect phase: the connect gets what is left
        connect_s = max(0.001, policy.connect_s - (clock.monotonic() - looked_up_at))
        headers = {"Accept": "image/*", "Accept-Encoding": "identity"}
        if token and token_origin[1] and _origin(current) == token_origin:
            headers["X-Esri-Authorization"] = f"Bearer {token}"
        shown = redact_url(current, secrets)
        recorder = connect_recorder(current, session=session)
        watch = HeaderWatch(recorder, connect_s + policy.ttfb_s)
        try:
            try:
                resp = session.get(current, headers=headers, stream=True,
                                   allow_redirects=False, timeout=(connect_s, policy.ttfb_s))
            finally:
                overdue = watch.cancel()
        except (requests.exceptions.RequestException, OSError) as exc:
            failure = send_failure(exc, recorder, overdue)
            raise DownloadError(failure.error_class, f"{shown}: {failure.detail}") from None
        if overdue:   # the headers came as the watchdog fired
            resp.close()
            raise DownloadError(ErrorClass.TTFB_TIMEOUT, f"{shown}: {LATE_HEADERS}")
        try:
            if resp.is_redirect:
                hops += 1
                if hops > policy.max_redirects:
                    raise UnsafeURL(f"{shown}: more than {policy.max_redirects} redirects")
                current = _without_token_params(
                    urljoin(current, resp.headers.get("Location", "")))
                continue
            return _read_photo(resp, shown, policy, secrets, clock=clock)
        finally:
            resp.close()


def _read_photo(resp: requests.Response, shown: str, policy: DownloadPolicy,
                secrets: Sequence[str], *, clock: Clock) -> Photo:
    status = resp.status_code
    ctype = resp.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
    if status >= 400:
        error_class = classify_status(status) or ErrorClass.SERVER_ERROR
        wait = None
        if error_class in (ErrorClass.RATE_LIMITED, ErrorClass.SERVER_ERROR):
            wait = retry_after_from_headers(resp.headers, None, now=clock.now())
        raise DownloadError(error_class, f"{shown}: HTTP {status}", status_code=status,
                            retry_after_s=wait)
    if not 200 <= status < 300:
        raise DownloadError(ErrorClass.BAD_REQUEST, f"{shown}: unexpected HTTP {status}",
                            status_code=status)
    declared = resp.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > policy.max_bytes:
        raise UnsafeURL(f"{shown}: {declared} bytes announced, limit {policy.max_bytes}")
    limit = policy.max_bytes if ctype.startswith("image/") else _JSON_ERROR_LIMIT
    read = read_body(resp.raw, clock.monotonic() + policy.body_s, limit, clock=clock)
    if not ctype.startswith("image/"):
        found = _arcgis_error(read.body) if "json" in ctype or ctype.startswith("text/") \
            else None
        if found is not None:
            error_class, message = found
            raise DownloadError(error_class, f"{shown}: {redact_text(message, secrets)}",
                                status_code=status)
        raise UnsafeURL(f"{shown}: Content-Type {ctype or '(none)'!r} is not image/*")
    if read.oversize:
        raise UnsafeURL(f"{shown}: larger than {policy.max_bytes} bytes")
    if read.timed_out:
        raise DownloadError(ErrorClass.BODY_TIMEOUT, f"{shown}: {read.detail}",
                            status_code=status)
    if read.truncated or read.reset:
        raise DownloadError(ErrorClass.CONNECTION_ERROR, f"{shown}: {read.detail}",
                            status_code=status)
    log.debug("photo %s: %d bytes %s", shown, len(read.body), ctype)
    return Photo(read.body, ctype, shown)
