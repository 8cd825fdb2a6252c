"""The photo download's SSRF guard: what a download may reach, and the checks that say so.

The photo URL comes from an unauthenticated webhook body, so the allow-list comes from
configuration only (:meth:`DownloadPolicy.from_settings`: the hosts of the feature services the
deployment serves and the configured photo hosts), never from the body. Before any request
(and again before following each redirect) :func:`approve_url` checks the URL:

- its text: no space, control character or backslash anywhere, and the same scheme, host, port
  and credentials whether ``urllib.parse`` or urllib3 (which opens the connection) reads it,
  and as requests prepares it;
- scheme ``https`` (plain ``http`` only for hosts in ``allow_http_hosts``), no credentials;
- the host is a DNS host name (letters, digits and hyphens in labels of 1-63 characters, 253 at
  most in all) or a canonical IP literal; no non-canonical numeric host (``2130706433``,
  ``0x7f.1``);
- the host is on the allow-list (an entry ``.example.com`` also admits its subdomains), on port
  443 (80 for plain http) unless an entry ``host:port`` names another port for it; an empty
  allow-list refuses every URL as the deployment's fault (CONFIGURATION), a URL outside a
  non-empty one is the request's (UNSAFE_URL);
- every address the host resolves to is public (:func:`address_problem`), unless the host is
  listed in ``allow_private_hosts`` (an on-premises ArcGIS Enterprise, a loopback test server).

The approved addresses are what the connection then uses (the name is looked up once), so a
name that answers differently the second time (DNS rebinding) never reaches an internal port.
"""
from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, Optional, Sequence, Tuple, Union
from urllib.parse import urlsplit

import requests
from urllib3.util import parse_url

from ...core.checks import count, finite, hostname_problem
from ...core.errors import ConfigurationError, DownloadError, ErrorClass, UnsafeURL
from ...core.text.redact import redact_url
from ...core.config.settings import Settings
from .phases import Resolver, resolve_within, system_resolver

__all__ = ["DownloadPolicy", "ApprovedURL", "approve_url", "check_url", "check_peer",
           "address_problem", "DEFAULT_PORTS", "origin_of"]

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
#: The port of each scheme when an allow-list entry names none.
DEFAULT_PORTS = {"https": 443, "http": 80}
_UNSAFE_TEXT = re.compile(r"[\x00-\x20\x7f\\]")
_ENTRY_FIELDS = ("allowed_hosts", "allow_http_hosts", "allow_private_hosts")


def _entry(field: str, text: str) -> Tuple[str, Optional[int]]:
    """``(host pattern, port or None)`` of one allow-list entry: ``host``, ``.suffix``,
    ``host:port``, ``[v6]:port`` or a bare v6 literal. Raises ConfigurationError."""
    raw = str(text).strip().lower()
    host, port = raw, None
    if raw.startswith("["):
        inside, closed, rest = raw[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            raise ConfigurationError(f"download.{field}", text, "expected [address]:port")
        host, port = inside, (rest[1:] if rest else None)
    elif raw.count(":") == 1:
        host, _, port = raw.partition(":")
    host = host.rstrip(".")
    literal = _literal(host)
    name = host[1:] if host.startswith(".") else host
    if literal is None and (not name or hostname_problem(name, numeric_last_label=True)):
        raise ConfigurationError(f"download.{field}", text,
                                 "expected a host name, .domain or IP address, optionally "
                                 "with :port")
    if port is not None:
        if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
            raise ConfigurationError(f"download.{field}", text, "the port must be 1-65535")
        if field != "allowed_hosts":
            raise ConfigurationError(f"download.{field}", text, "ports belong in allowed_hosts")
        return (str(literal) if literal else host), int(port)
    return (str(literal) if literal else host), None


def _literal(host: str) -> Optional[IPAddress]:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


@dataclass(frozen=True)
class DownloadPolicy:
    """What ``fetch_photo`` may fetch. Sizes in bytes, times in seconds.

    ``allowed_hosts`` entries are ``host``, ``.domain`` (its subdomains too) or either with
    ``:port`` (``gis.example.com:6443``); without a port a host gets 443 (80 when it is in
    ``allow_http_hosts``). Raises ConfigurationError for a malformed entry or limit.

    ``token_origins`` are the origins (``https://host:port``) the portal token may go to: the
    feature services and write-back layers of the configuration (:meth:`from_settings`);
    None, for a policy made by hand, means the first URL's origin, whatever allowed host it
    is. ``host_headers`` are ``(host, header, value)`` credentials of photo hosts, each sent
    only over https to that host.
    """

    allowed_hosts: Tuple[str, ...] = ()
    allow_http_hosts: Tuple[str, ...] = ()
    max_bytes: int = 20 * 1024 * 1024
    max_redirects: int = 3
    resolver: Optional[Resolver] = None
    allow_private_hosts: Tuple[str, ...] = ()
    connect_s: float = 5.0
    ttfb_s: float = 30.0
    body_s: float = 60.0
    token_origins: Optional[Tuple[str, ...]] = None
    host_headers: Tuple[Tuple[str, str, str], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        for name in _ENTRY_FIELDS:
            value = getattr(self, name)
            if isinstance(value, str):
                raise ConfigurationError(f"download.{name}", value, "must be a list of hosts")
            entries = [_entry(name, h) for h in value if str(h).strip().rstrip(".")]
            shown = tuple(dict.fromkeys(h if p is None else f"{_bracketed(h)}:{p}"
                                        for h, p in entries))
            object.__setattr__(self, name, shown)
        count("download.max_bytes", self.max_bytes, minimum=1)
        count("download.max_redirects", self.max_redirects)
        for name in ("connect_s", "ttfb_s", "body_s"):
            finite(f"download.{name}", getattr(self, name), above=0)

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> "DownloadPolicy":
        """The policy of a deployment: the hosts of ``intake.feature_services`` (with their
        port when it is not the default) and ``download.allowed_hosts``, the plain-http and
        private-address hosts and the limits of ``settings.download``.

        Nothing comes from a webhook body: with neither setting, every photo is refused.
        ``overrides`` (``resolver``, ``connect_s``, ...) replace single fields.
        """
        download = settings.download
        services = []
        for url in settings.intake.feature_services:
            parts = urlsplit(url)
            host = _bracketed(parts.hostname or "")
            default = DEFAULT_PORTS.get(parts.scheme)
            services.append(host if parts.port in (None, default) else f"{host}:{parts.port}")
        token_urls = (*settings.intake.feature_services, settings.writeback.layer_url,
                      settings.writeback.table_url)
        origins = tuple(dict.fromkeys(o for o in map(origin_of, token_urls) if o))
        headers = tuple((host, name, value)
                        for host, named in download.headers_by_host().items()
                        for name, value in named.items())
        values = dict(allowed_hosts=tuple(dict.fromkeys(services + list(download.allowed_hosts))),
                      token_origins=origins, host_headers=headers,
                      allow_http_hosts=download.allow_http_hosts,
                      allow_private_hosts=download.allow_private_hosts,
                      max_bytes=download.max_photo_bytes, max_redirects=download.max_redirects)
        values.update(overrides)
        return cls(**values)

    def credentials_for(self, url: str, token: Optional[str]) -> Dict[str, str]:
        """The credential headers a request to ``url`` (the photo's first URL) carries: the
        portal token when its origin is a token origin, a photo host's own headers over https
        to that host; empty for anything else."""
        headers: Dict[str, str] = {}
        origin = origin_of(url)
        if not origin:
            return headers
        allowed = (self.token_origins is None and self.host_allowed(urlsplit(url).hostname or "")
                   or origin in (self.token_origins or ()))
        if token and allowed:
            headers["X-Esri-Authorization"] = f"Bearer {token}"
        if origin.startswith("https://"):
            host = (urlsplit(url).hostname or "").lower().rstrip(".")
            headers.update({name: value for h, name, value in self.host_headers if h == host})
        return headers

    def header_secrets(self) -> Tuple[str, ...]:
        """The values of ``host_headers``, for redaction."""
        return tuple(value for _, _, value in self.host_headers)

    def host_allowed(self, host: str) -> bool:
        """Whether ``host`` (on some port) is on the allow-list."""
        return bool(self.ports_for(host, "https"))

    def ports_for(self, host: str, scheme: str) -> FrozenSet[int]:
        """The ports ``host`` may be fetched on over ``scheme`` (empty: not allowed)."""
        ports = {DEFAULT_PORTS.get(scheme, 443) if p is None else p
                 for h, p in self._entries("allowed_hosts") if _matches(host, h)}
        return frozenset(ports)

    def _entries(self, field: str) -> Sequence[Tuple[str, Optional[int]]]:
        return [_entry(field, e) for e in getattr(self, field)]


def origin_of(url: str) -> str:
    """``scheme://host:port`` of ``url`` (the default port filled in, host in lower case);
    empty when it has no http(s) origin."""
    try:
        parts = urlsplit(str(url).strip())
        scheme, host = parts.scheme.lower(), (parts.hostname or "").lower().rstrip(".")
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return ""
    if scheme not in DEFAULT_PORTS or not host:
        return ""
    return f"{scheme}://{_bracketed(host)}:{port}"


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _matches(host: str, pattern: str) -> bool:
    return host == pattern or (pattern.startswith(".") and host.endswith(pattern))


def _listed(host: str, entries: Sequence[str]) -> bool:
    """Whether ``host`` is in a list of port-less entries (plain http, private addresses)."""
    return any(_matches(host, e) for e in entries)


def _a(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" or word.startswith("IPv") else "a ") + word


# -- addresses ------------------------------------------------------------------------------

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_ISATAP_IDS = (0x00005EFE, 0x02005EFE)


def _low32(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)


def _embedded(addr: ipaddress.IPv6Address) -> Optional[Tuple[str, ipaddress.IPv4Address, bool]]:
    """``(form, embedded IPv4, refused whatever it holds)`` of an IPv6 address carrying one."""
    if addr.ipv4_mapped is not None:
        return "IPv4-mapped", addr.ipv4_mapped, True
    if addr.sixtofour is not None:
        return "6to4", addr.sixtofour, False
    if addr.teredo is not None:
        return "Teredo", addr.teredo[1], True
    if addr in _NAT64_LOCAL:
        return "local-use NAT64", _low32(addr), True
    if addr in _NAT64:
        return "NAT64", _low32(addr), False
    if addr in _TRANSLATED:
        return "IPv4-translated", _low32(addr), True
    if addr in _COMPATIBLE and int(addr) > 1:
        return "IPv4-compatible", _low32(addr), True
    if (int(addr) >> 32) & 0xFFFFFFFF in _ISATAP_IDS:
        return "ISATAP", _low32(addr), False
    return None


def address_problem(addr: IPAddress) -> Optional[str]:
    """Why a download must not connect to ``addr``, or None when it is a public address.

    Loopback, private, link-local, site-local, multicast, unspecified, reserved and shared
    (``100.64.0.0/10``) addresses are refused, and so is every IPv6 form carrying an IPv4
    address that is not public (6to4, NAT64, ISATAP); the IPv4-mapped, -compatible and
    -translated forms, Teredo and local-use NAT64 are refused whatever they carry. A 6to4 or
    NAT64 address of a public IPv4 address is judged by that address alone, the same on every
    Python version.
    """
    if isinstance(addr, ipaddress.IPv6Address):
        found = _embedded(addr)
        if found is not None:
            form, inner, always = found
            if always:
                return f"{_a(form)} address (of {inner})"
            problem = address_problem(inner)
            return f"{_a(form)} address of {inner}, {problem}" if problem else None
        if addr.is_site_local:
            return "a site-local address"
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


# -- URLs -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ApprovedURL:
    """A URL the policy allows: its host (lower case, no trailing dot), port and the public
    (or allowed private) addresses the connection must use."""

    host: str
    port: int
    addresses: Tuple[str, ...]


def _readings(url: str) -> Sequence[Tuple[str, str, Optional[int], bool]]:
    """``(scheme, host, port, has credentials)`` as each parser reads ``url``; raises
    ValueError (or urllib3's LocationParseError, a ValueError) when one cannot."""
    ours = urlsplit(url)
    theirs = parse_url(url)
    prepared = requests.models.PreparedRequest()
    prepared.prepare_url(url, None)
    sent = urlsplit(str(prepared.url))

    def host(name: Optional[str]) -> str:
        return (name or "").lower().strip("[]").rstrip(".")

    return [(ours.scheme.lower(), host(ours.hostname), ours.port,
             ours.username is not None or ours.password is not None),
            ((theirs.scheme or "").lower(), host(theirs.host), theirs.port,
             theirs.auth is not None),
            (sent.scheme.lower(), host(sent.hostname), sent.port,
             sent.username is not None or sent.password is not None)]


def approve_url(url: str, policy: DownloadPolicy, secrets: Sequence[str] = ()) -> ApprovedURL:
    """The host, port and approved addresses of ``url`` if the policy allows fetching it.

    Raises UnsafeURL when it does not (its class CONFIGURATION when the policy admits no host
    at all, whatever the URL: the deployment's fault, not the request's), and DownloadError
    (CONNECT_TIMEOUT or CONNECTION_ERROR) when the host cannot be looked up within
    ``policy.connect_s``. ``secrets`` (the portal token) are redacted from the URL wherever a
    message shows it.
    """
    text = str(url)
    shown = redact_url(text, secrets)
    if not policy.allowed_hosts:
        # No URL could pass: the deployment's setup refuses it, not the request (the same
        # refusal for every URL, checked before anything the URL says).
        raise UnsafeURL(f"{shown}: the allow-list is empty (intake.feature_services and "
                        "download.allowed_hosts name no host): the deployment refuses every "
                        "photo", configuration=True)
    if _UNSAFE_TEXT.search(text):
        raise UnsafeURL(f"{shown}: a space, control character or backslash in the URL")
    try:
        readings = _readings(text)
    except (ValueError, requests.exceptions.RequestException):
        raise UnsafeURL(f"{shown}: not a valid URL") from None
    if len(set(readings)) != 1:
        raise UnsafeURL(f"{shown}: the URL parsers read its host differently")
    scheme, host, port, credentials = readings[0]
    if scheme not in DEFAULT_PORTS:
        raise UnsafeURL(f"{shown}: scheme {scheme or '(none)'!r} is not allowed")
    if not host:
        raise UnsafeURL(f"{shown}: no host")
    literal = _literal(host)
    if literal is not None:
        host = str(literal)   # one spelling of an address, as in the allow-list
    if scheme == "http" and not _listed(host, policy.allow_http_hosts):
        raise UnsafeURL(f"{shown}: plain http is not allowed for {host}")
    if credentials:
        raise UnsafeURL(f"{shown}: credentials in the URL")
    if literal is None and _legacy_numeric(host):
        raise UnsafeURL(f"{shown}: non-canonical numeric host {host!r}")
    if literal is None and hostname_problem(host):
        raise UnsafeURL(f"{shown}: {host!r} is not a valid host name: {hostname_problem(host)}")
    port = port or DEFAULT_PORTS[scheme]
    ports = policy.ports_for(host, scheme)
    if not ports:
        raise UnsafeURL(f"{shown}: host {host} is not on the allow-list (a feature service "
                        "of intake.feature_services, or a photo host of download.allowed_hosts)")
    if port not in ports:
        raise UnsafeURL(f"{shown}: port {port} is not allowed for {host} "
                        f"(allowed: {', '.join(map(str, sorted(ports)))})")
    addresses = (str(literal),) if literal is not None else _resolve(host, port, policy)
    private_ok = _listed(host, policy.allow_private_hosts)
    for address in addresses:
        try:
            addr = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            raise UnsafeURL(f"{shown}: resolver gave a non-address {address!r}") from None
        problem = address_problem(addr)
        if problem and not private_ok:
            raise UnsafeURL(f"{shown}: {host} resolves to {addr}, {problem}")
    return ApprovedURL(host, port, addresses)


def _resolve(host: str, port: int, policy: DownloadPolicy) -> Tuple[str, ...]:
    try:
        found = resolve_within(policy.resolver or system_resolver, host, port, policy.connect_s)
    except socket.timeout:
        raise DownloadError(ErrorClass.CONNECT_TIMEOUT,
                            f"resolving {host} took longer than {policy.connect_s:g} s") from None
    except (OSError, UnicodeError) as exc:
        raise DownloadError(ErrorClass.CONNECTION_ERROR,
                            f"cannot resolve {host}: {type(exc).__name__}") from None
    addresses = tuple(dict.fromkeys(str(a) for a in found))
    if not addresses:
        raise DownloadError(ErrorClass.CONNECTION_ERROR, f"{host} resolves to nothing")
    return addresses


def check_url(url: str, policy: DownloadPolicy,
              secrets: Sequence[str] = ()) -> Tuple[str, int]:
    """``(host, port)`` of ``url`` if the policy allows fetching it (:func:`approve_url`);
    raises UnsafeURL if not. The host is compared without a trailing dot."""
    approved = approve_url(url, policy, secrets)
    return approved.host, approved.port


def check_peer(host: str, address: str, policy: DownloadPolicy) -> None:
    """Refuse connecting to ``host`` at a non-public ``address`` (unless the host may be
    private). The default download session runs it on every address before its socket
    connects. Raises UnsafeURL."""
    if _listed(host.strip("[]").rstrip("."), policy.allow_private_hosts):
        return
    try:
        addr = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        raise UnsafeURL(f"connection to {host} has no checkable peer address") from None
    problem = address_problem(addr)
    if problem:
        raise UnsafeURL(f"connection to {host} would reach {addr}, {problem}")
