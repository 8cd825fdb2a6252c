"""Fetch a survey photo without opening an SSRF door.

Before any request, and again before following each redirect, the URL must pass the guard of
:mod:`.url_guard` under a :class:`DownloadPolicy` built from configuration only
(:meth:`DownloadPolicy.from_settings`): https (plain http only for ``allow_http_hosts``), a host
in the hostname grammar that every URL parser reads the same way, on the allow-list and on an
allowed port, resolving to public addresses only (unless listed in ``allow_private_hosts``).

The name is looked up once, within ``connect_s`` (a late lookup is CONNECT_TIMEOUT, its time
taken off the connect that follows), and the default session connects only to the addresses
that check approved (Host header, SNI and certificate still the name), each checked again
before its socket opens: a name answering differently the second time (DNS rebinding) never
reaches an internal port. While downloading: at most ``max_redirects`` redirects, at most
``max_bytes`` read (enforced while streaming), ``Content-Type`` must be ``image/*``. Violations
raise :class:`~fme_ai_resilience.core.errors.UnsafeURL`; other failures (timeouts, HTTP errors,
ArcGIS's HTTP-200 ``{"error": {"code": 498}}``, JSON that cannot be read within bounds) raise
:class:`~fme_ai_resilience.core.errors.DownloadError` with their ErrorClass. The portal token goes
only in ``X-Esri-Authorization: Bearer``, only to the first URL's origin (scheme, host and
port), and only when that origin is one of the policy's token origins (the configured feature
services and write-back layers, never a host that is only an allowed photo host; a photo host
gets its own ``download.host_headers`` instead, under the same rules), never into a URL (the
portal-token query parameters ``token=`` and ``access_token=`` are stripped before the
request), log line or exception. Other query parameters, including storage signatures (Azure
SAS ``sig=``, S3 ``X-Amz-Signature=``, GCS ``X-Goog-Signature=``, ``key=``), stay in the URL
requested, since the storage needs them; every secret-looking parameter is still redacted
wherever the URL is shown."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple
from urllib.parse import urljoin, urlsplit

import requests

from ...core.resilience.backoff import retry_after_from_headers
from ...core.resilience.classification import classify_status
from ...core.clock import Clock, SystemClock
from ...core.errors import DownloadError, ErrorClass, InvalidPayload, UnsafeURL
from ...core.text.redact import PORTAL_TOKEN_PARAMS, redact_text, redact_url, without_token_params
from ...core.text.untrusted_json import decode_value
from ..http.sessions import new_session
from .phases import LATE_HEADERS, HeaderWatch, connect_recorder, read_body, send_failure
from ...core.vision.providers import MAX_DEPTH, detect_error
from .url_guard import ApprovedURL, DownloadPolicy, approve_url, check_peer, check_url

__all__ = ["DownloadPolicy", "Photo", "check_url", "check_peer", "fetch_photo",
           "PORTAL_TOKEN_PARAMS"]

log = logging.getLogger("fme_ai_resilience.vision.download")

_JSON_ERROR_LIMIT = 64 * 1024


class _Approved:
    """The addresses the guard approved, by host: the default session's only name lookup."""

    def __init__(self) -> None:
        self._by_host: Dict[str, Tuple[str, ...]] = {}

    def add(self, approved: ApprovedURL) -> None:
        self._by_host[approved.host] = approved.addresses

    def resolve(self, host: str, port: int) -> Sequence[str]:
        found = self._by_host.get(str(host).lower().strip("[]").rstrip("."))
        if found is None:   # never looked up by the guard: no connection at all
            raise UnsafeURL(f"{host}: no approved address to connect to")
        return found


@dataclass(frozen=True)
class Photo:
    """A downloaded photo: its bytes, content type and the (redacted) URL it came from."""

    content: bytes
    content_type: str
    url: str

    def __repr__(self) -> str:
        return f"Photo({self.content_type}, {len(self.content)} bytes, {self.url!r})"


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


def _json_answer(body: bytes, ctype: str, shown: str, status: int) -> Optional[Any]:
    """The JSON value of a non-image answer (None when it is not JSON at all), decoded within
    bounds; JSON that cannot be read that way (too deep, a number no float holds, cut off) is
    a BAD_FORMAT DownloadError."""
    if "json" not in ctype and body.lstrip()[:1] not in (b"{", b"["):
        return None
    try:
        return decode_value(body, max_bytes=max(1, len(body)), max_depth=MAX_DEPTH)
    except InvalidPayload as exc:
        raise DownloadError(ErrorClass.BAD_FORMAT, f"{shown}: an answer in JSON that cannot "
                            f"be read ({exc.reason})", status_code=status) from None


def fetch_photo(url: str, token: Optional[str], policy: DownloadPolicy, *,
                session: Optional[requests.Session] = None,
                clock: Optional[Clock] = None) -> Photo:
    """Download the photo at ``url`` under ``policy``; ``token`` is the portal token or None.

    Raises UnsafeURL for a policy violation and DownloadError (with its ErrorClass) for any
    other failure. Never sends the token anywhere but the first URL's origin (same scheme,
    host and port: not to another port of that host, nor over http after https). The default
    session connects only to the addresses the guard approved; a ``session`` of your own
    resolves names itself, so pass one only where no lookup happens (tests with mocked HTTP).
    """
    clock = clock or SystemClock()
    approved = _Approved()
    if session is None:
        session = new_session(clock=clock, resolver=approved.resolve,
                              address_check=lambda host, address: check_peer(host, address,
                                                                             policy))
    secrets = ((token,) if token else ()) + policy.header_secrets()
    token_origin = _origin(url)
    credentials = policy.credentials_for(url, token)
    current, hops = _without_token_params(url), 0
    while True:
        looked_up_at = clock.monotonic()
        approved.add(approve_url(current, policy, secrets))
        # the name lookup counts in the connect phase: the connect gets what is left
        connect_s = max(0.001, policy.connect_s - (clock.monotonic() - looked_up_at))
        headers = {"Accept": "image/*", "Accept-Encoding": "identity"}
        if token_origin[1] and _origin(current) == token_origin:
            headers.update(credentials)
        shown = redact_url(current, secrets)
        recorder = connect_recorder(current, session=session, clock=clock)
        watch = HeaderWatch(recorder, connect_s + policy.ttfb_s, send_s=policy.ttfb_s)
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
        payload = _json_answer(read.body, ctype, shown, status)
        found = None if payload is None else detect_error("arcgis", 200, payload)
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
