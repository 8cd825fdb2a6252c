"""The intake gateway: a WSGI application that gives webhooks the full status contract.

``make_app(store=store)`` answers ``POST`` (any path but the health path) with the answer of
:func:`fme_ai_resilience.services.intake.webhook.decide`, ``GET /healthz`` with whether the ledger
is reachable, and ``GET /metrics`` with the ledger's counters, histograms and levels and the
gateway's own request metrics in the Prometheus text format. Before
the body reaches the parser it checks, in order: the method (405 with ``Allow``), the content
type (415 unless JSON, a CloudEvent or an ArcGIS webhook's form), the length (413 over the
limit, reading at most limit + 1 bytes; 411 without a length), and, when configured, the
sender's credentials (401, constant-time comparison): an ArcGIS layer webhook's
``x-esriHook-Signature``, else a shared-secret header or a Standard Webhooks signature.
``GET <path>?crc_token=T`` answers ArcGIS's challenge. Every answer but the metrics is JSON.

Run it with ``fme-ai-resilience serve`` (waitress, :mod:`fme_ai_resilience.gateway.server`) or
under any WSGI server (see docs/intake.md).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import re
from http import HTTPStatus
from urllib.parse import parse_qsl
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from .. import __version__
from ..core.checks import finite
from ..core.clock import Clock, SystemClock
from ..core.errors import (SCHEMA_MISSING, ConfigurationError, InvalidPayload, SchemaMissing,
                           StoreError)
from ..core.text.printable import printable
from ..core.text.redact import redact_text
from ..core.intake.arcgis_webhook import SIGNATURE_HEADER, crc_answer
from ..core.intake.senders import FORM, Delivery, Unsupported, read_delivery
from ..core.ledger import BAD_SIGNATURE
from ..services.intake.webhook import receive, ledger_retry_after_s
from ..services.config.settings import LiveSettings
from ..services.observe.signals import read_signals
from ..core.config.settings import Settings
from ..core.observe.metrics import prometheus_text
from .metrics import RequestMetrics
from ..store import Store

__all__ = ["make_app", "sign", "DEFAULT_SECRET_HEADER"]

log = logging.getLogger("fme_ai_resilience.gateway")

DEFAULT_SECRET_HEADER = "X-FAIR-Secret"
SIGNATURE_TOLERANCE_S = 300.0
_JSON = ("application/json", "text/json")
#: Content-Length: ASCII digits only (``int`` also takes "+12", " 12", "1_2", other scripts'
#: digits); a webhook-timestamp likewise, and without leading zeros.
_LENGTH = re.compile(r"[0-9]+")
_TIMESTAMP = re.compile(r"0|[1-9][0-9]*")
#: A header name the secret may travel in: letters, digits and dashes. An underscore would
#: collide with the dash in the WSGI environ (X_A and X-A are both HTTP_X_A).
_HEADER_NAME = re.compile(r"[A-Za-z0-9]+(-[A-Za-z0-9]+)*")

StartResponse = Callable[..., Any]
Answer = Tuple[int, Dict[str, str], Dict[str, Any]]

#: The error name a store failure's message starts with (``LockNotAvailable: ...``).
_ERROR_NAME = re.compile(r"[A-Z][A-Za-z]{2,40}(?=:)")

def make_app(settings: Union[None, Settings, LiveSettings] = None, *, store: Store,
             clock: Optional[Clock] = None,
             flow_health: Optional[Callable[[], Any]] = None,
             shared_secret: Optional[str] = None,
             secret_header: str = DEFAULT_SECRET_HEADER,
             signing_secret: Union[None, str, bytes] = None,
             signature_tolerance_s: float = SIGNATURE_TOLERANCE_S,
             health_path: str = "/healthz",
             monitor_token: Optional[str] = None,
             arcgis_signature_key: Optional[str] = None
             ) -> Callable[[Dict[str, Any], StartResponse], Iterable[bytes]]:
    """A WSGI application writing webhook deliveries into ``store``.

    ``settings`` is fixed :class:`Settings` or :class:`LiveSettings` (the ``resilience_config``
    table followed at run time; each request uses the settings in force when it arrives).
    ``flow_health`` is e.g. ``FlowClient(...).health`` (503 when FME Flow has no engine
    capacity). ``shared_secret`` requires ``secret_header`` to carry it; ``signing_secret``
    (``whsec_<base64>`` or raw bytes) requires a valid Standard Webhooks signature
    (``webhook-id``, ``webhook-timestamp`` within ``signature_tolerance_s`` seconds,
    ``webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">``).
    ``monitor_token`` guards the monitoring answers (``Authorization: Bearer <token>``):
    ``/metrics`` and the detail of ``/healthz`` (why the ledger is unreachable, FME Flow's
    engines). Without it the detail is never shown, and ``/metrics`` is open only on a gateway
    that has no shared or signing secret either (401 otherwise). Plain liveness (ledger
    reachable or not, backlog and watermark) stays open.
    ``arcgis_signature_key`` is the ``signatureKey`` of the ArcGIS layer webhooks that deliver
    here: their deliveries must carry a valid ``x-esriHook-Signature`` (and need neither the
    shared secret nor a Standard Webhooks signature, which ArcGIS cannot send), and the
    challenge ``GET <path>?crc_token=T`` is answered on any webhook path.
    Raises :class:`~fme_ai_resilience.core.errors.ConfigurationError` for an unusable secret.
    """
    gateway = _Gateway(settings or Settings(), flow_health, shared_secret, secret_header,
                       _signing_key(signing_secret), signature_tolerance_s, health_path,
                       store=store, clock=clock or SystemClock())
    if monitor_token is not None and not (
            monitor_token and all("!" <= c <= "~" for c in monitor_token)):
        raise ConfigurationError("monitor_token", "[REDACTED]", "must be printable ASCII "
                                 "without spaces, and not empty (a Bearer token a request "
                                 "can present)")
    gateway.monitor_token = monitor_token.encode("utf-8") if monitor_token else None
    if arcgis_signature_key is not None and not arcgis_signature_key:
        raise ConfigurationError("arcgis_signature_key", "", "must not be empty")
    gateway.arcgis_key = arcgis_signature_key or None
    return gateway


class _Gateway:
    """The WSGI callable (a class so its configuration is visible and its secrets are not)."""

    def __init__(self, settings: Union[Settings, LiveSettings],
                 flow_health: Optional[Callable[[], Any]], shared_secret: Optional[str],
                 secret_header: str, signing_key: Optional[bytes], tolerance_s: float,
                 health_path: str, *, store: Store, clock: Clock) -> None:
        if shared_secret is not None and not shared_secret:
            raise ConfigurationError("shared_secret", "", "must not be empty")
        if not _HEADER_NAME.fullmatch(secret_header):
            raise ConfigurationError("secret_header", secret_header,
                                     "must be letters, digits and dashes: a server maps '_' and "
                                     "'-' to the same name, so the secret would be accepted "
                                     "from another header")
        finite("signature_tolerance_s", tolerance_s, above=0)
        self.store = store
        self.settings = settings
        self._settings_now: Callable[[], Settings] = (
            settings.get if isinstance(settings, LiveSettings) else lambda: settings)
        self.clock = clock
        self.flow_health = flow_health
        self._secret = shared_secret.encode("utf-8") if shared_secret else None
        self._secret_env = "HTTP_" + secret_header.upper().replace("-", "_")
        self._signing_key = signing_key
        self.tolerance_s = tolerance_s
        self.health_path = health_path
        self.metrics_path = "/metrics"
        self.monitor_token: Optional[bytes] = None
        self.arcgis_key: Optional[str] = None
        self.requests = RequestMetrics()

    def __repr__(self) -> str:
        return (f"<intake gateway store={getattr(self.store, 'dialect', '?')} "
                f"secret={'yes' if self._secret else 'no'} "
                f"signature={'yes' if self._signing_key else 'no'} "
                f"arcgis_signature={'yes' if self.arcgis_key else 'no'}>")

    def __call__(self, environ: Dict[str, Any], start_response: StartResponse) -> List[bytes]:
        """Answer one request and count it (handler, code, duration; a webhook's answer)."""
        started = self.clock.monotonic()
        arrived = self.clock.now()   # the webhook's arrival: intake latency starts here
        seen: Dict[str, Any] = {"handler": "webhook", "code": 500}

        def recording(status: str, headers: List[Tuple[str, str]], *rest: Any) -> Any:
            seen["code"] = int(status.split(" ", 1)[0])
            return start_response(status, headers, *rest)

        try:
            return self._route(environ, recording, arrived, seen)
        finally:
            self.requests.observe(seen["handler"], seen["code"],
                                  self.clock.monotonic() - started, seen.get("answer"))

    def _route(self, environ: Dict[str, Any], start_response: StartResponse, arrived: float,
               seen: Dict[str, Any]) -> List[bytes]:
        method = environ.get("REQUEST_METHOD", "GET").upper()
        path = environ.get("PATH_INFO", "") or "/"
        if path == self.metrics_path and method in ("GET", "HEAD") and self._monitoring(environ):
            seen["handler"] = "metrics"
            return self._metrics(method, start_response)
        try:
            if path == self.metrics_path and method in ("GET", "HEAD"):
                seen["handler"] = "metrics"
                status, headers, body = _unauthorized("the metrics need the monitor token "
                                                      "(Authorization: Bearer)")
            elif path == self.health_path:
                seen["handler"] = "health"
                status, headers, body = self._health(method, self._monitoring(environ,
                                                                              detail=True))
            else:
                status, headers, body = self._webhook(method, environ, arrived)
        except Exception as exc:  # the gateway must answer even when something breaks
            log.error("gateway: %s %s failed: %s: %s", method, printable(path),
                      type(exc).__name__, printable(redact_text(str(exc))))
            status, headers, body = 500, {}, {"status": "error", "reason": "internal error"}
        if seen["handler"] == "webhook":
            seen["answer"] = str(body.get("status", status))
        payload = json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8")
        out = [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
        out.extend(headers.items())
        start_response(f"{status} {HTTPStatus(status).phrase}", out)
        log.debug("gateway: %s %s -> %d", method, printable(path), status)
        return [b"" if method == "HEAD" else payload]

    def _monitoring(self, environ: Dict[str, Any], detail: bool = False) -> bool:
        """Whether the request may see monitoring answers (``detail``: the health detail)."""
        if self.monitor_token is None:
            return not detail and self._secret is None and self._signing_key is None
        given = environ.get("HTTP_AUTHORIZATION", "")
        scheme, _, value = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            value.strip().encode("utf-8"), self.monitor_token)

    # -- routes -------------------------------------------------------------------------------
    def _metrics(self, method: str, start_response: StartResponse) -> List[bytes]:
        """The ledger's metrics and the gateway's own in the Prometheus text format; while the
        ledger is unreachable, the gateway's own with ``fair_ledger_up 0`` (still 200: the
        gateway is up, and Prometheus keeps scraping what it can)."""
        settings = self._settings_now()
        try:
            signals = read_signals(settings, store=self.store, now=self.clock.now())
        except StoreError as exc:
            log.warning("gateway: metrics: ledger unreachable: %s",
                        printable(redact_text(str(exc))))
            signals = None
        text = prometheus_text(settings, signals=signals,
                               ledger=None if signals is None else signals.metrics,
                               gateway=self.requests.snapshot(), version=__version__)
        status = 200
        payload = text.encode("utf-8")
        start_response(f"{status} {HTTPStatus(status).phrase}",
                       [("Content-Type", "text/plain; version=0.0.4; charset=utf-8"),
                        ("Content-Length", str(len(payload)))])
        return [b"" if method == "HEAD" else payload]

    def _health(self, method: str, detail: bool) -> Answer:
        if method not in ("GET", "HEAD"):
            return 405, {"Allow": "GET, HEAD"}, {"status": "method_not_allowed"}
        body: Dict[str, Any] = {}
        headers: Dict[str, str] = {}
        settings = self._settings_now()
        intake = settings.intake
        try:
            # Cheap at any ledger size: counts in-progress rows through their index, capped.
            body["backlog"] = self.store.backlog(intake.park_ceiling + 1)
            body["watermark"] = intake.capacity.watermark
            body["ledger"] = "reachable"
        except StoreError as exc:
            reason = printable(redact_text(str(exc)))
            log.warning("gateway: health check: ledger unreachable: %s", reason)
            if isinstance(exc, SchemaMissing):
                body.update(ledger="schema_missing", reason=SCHEMA_MISSING)
            else:   # the reason may name the database's host and port: only with the token
                body.update(ledger="unreachable", reason=reason if detail else _kind_of(reason))
            headers["Retry-After"] = str(ledger_retry_after_s(settings))
        if self.flow_health is not None and detail:
            try:
                health = self.flow_health()
                body["flow"] = {"reachable": health.reachable, "has_capacity": health.has_capacity,
                                "queued": health.queued, "engines": health.engines,
                                "busy_engines": health.busy_engines}
            except Exception as exc:  # a failing probe is reported, not raised
                body["flow"] = {"reachable": False, "error": type(exc).__name__}
        return (200 if body["ledger"] == "reachable" else 503), headers, body

    def _webhook(self, method: str, environ: Dict[str, Any], arrived: float) -> Answer:
        if method in ("GET", "HEAD") and "crc_token" in dict(
                parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)):
            return self._challenge(environ)
        if method != "POST":
            return 405, {"Allow": "POST"}, {"status": "method_not_allowed"}
        if not _is_readable(environ.get("CONTENT_TYPE", "")):
            return 415, {}, {"status": "unsupported_media_type",
                             "reason": "the body must be JSON (application/json), a CloudEvent "
                                       "or an ArcGIS webhook's form (payload=<json>)"}
        if self.arcgis_key is None and self._secret is not None and not hmac.compare_digest(
                environ.get(self._secret_env, "").encode("utf-8"), self._secret):
            return _unauthorized("missing or wrong shared secret")   # before reading a byte
        settings = self._settings_now()
        limit = settings.intake.max_body_bytes
        raw, refusal = _read_body(environ, limit)
        if refusal is not None:
            return refusal
        headers = _request_headers(environ)
        try:
            delivery = read_delivery(raw, headers, max_bytes=limit,
                                     max_depth=settings.intake.max_depth)
        except (Unsupported, InvalidPayload):
            delivery = None   # answered by receive, after the sender's checks below
        problem = self._sender_problem(environ, raw, delivery)
        if problem:
            return _unauthorized(problem)
        answer = receive(delivery or raw, headers, settings, store=self.store,
                         now=self.clock.now(), flow_health=self.flow_health,
                         received_at=arrived)
        return answer.status_code, dict(answer.headers), dict(answer.body)

    def _sender_problem(self, environ: Dict[str, Any], raw: bytes,
                        delivery: Optional[Delivery]) -> Optional[str]:
        """Why a delivery is refused as unauthenticated, or None. An ArcGIS sender's is
        checked by its own signature when its key is configured (it can send no other); every
        other delivery by the shared secret and the Standard Webhooks signature."""
        if self.arcgis_key is not None and delivery is not None and delivery.sender.is_arcgis:
            if delivery.signed_by(self.arcgis_key):
                return None
            try:
                self.store.record_sender(delivery.sender.value, BAD_SIGNATURE,
                                         now=self.clock.now())
            except StoreError as exc:
                log.warning("gateway: a refused signature could not be counted: %s",
                            type(exc).__name__)
            return f"missing or wrong {SIGNATURE_HEADER}"
        if self.arcgis_key is not None and self._secret is not None and not hmac.compare_digest(
                environ.get(self._secret_env, "").encode("utf-8"), self._secret):
            return "missing or wrong shared secret"   # (without a key: checked before reading)
        if self._signing_key is not None:
            return self._signature_problem(environ, raw)
        return None

    def _challenge(self, environ: Dict[str, Any]) -> Answer:
        """ArcGIS's challenge: ``{"response_token": "sha256=<HMAC of the token>"}``."""
        token = dict(parse_qsl(environ.get("QUERY_STRING", ""))).get("crc_token", "")
        if self.arcgis_key is None:
            return 400, {}, {"status": "bad_request",
                             "reason": "no ArcGIS signature key is configured: a webhook "
                                       "registered with a signatureKey cannot be confirmed"}
        try:
            answer = crc_answer(self.arcgis_key, token)
        except InvalidPayload as exc:   # also what could be a body: never signed here
            return 400, {}, {"status": "bad_request", "reason": exc.reason}
        log.info("gateway: answered an ArcGIS webhook challenge")
        return 200, {}, answer

    def _signature_problem(self, environ: Dict[str, Any], raw: bytes) -> Optional[str]:
        """Why a Standard Webhooks signature does not hold, or None when it does."""
        msg_id = environ.get("HTTP_WEBHOOK_ID", "")
        stamp = environ.get("HTTP_WEBHOOK_TIMESTAMP", "")
        signatures = environ.get("HTTP_WEBHOOK_SIGNATURE", "")
        if not (msg_id and stamp and signatures):
            return "missing webhook-id, webhook-timestamp or webhook-signature"
        if not _TIMESTAMP.fullmatch(stamp):
            return "webhook-timestamp is not an integer in ASCII digits"
        try:
            skew = abs(self.clock.now() - int(stamp))  # OverflowError: too large for a float
        except (ValueError, OverflowError):  # ValueError: more digits than int() converts
            return "webhook-timestamp outside the tolerance window"
        if skew > self.tolerance_s:
            return "webhook-timestamp outside the tolerance window"
        signed = f"{msg_id}.{stamp}.".encode("utf-8") + raw
        expected = base64.b64encode(
            hmac.new(self._signing_key or b"", signed, hashlib.sha256).digest())
        ok = False
        for candidate in signatures.split():
            version, _, value = candidate.partition(",")
            if version == "v1" and hmac.compare_digest(value.encode("ascii", "replace"), expected):
                ok = True
        return None if ok else "webhook-signature does not match"


def sign(signing_secret: Union[str, bytes], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value a Standard Webhooks sender would send for ``body``."""
    key = _signing_key(signing_secret) or b""
    signed = f"{msg_id}.{timestamp}.".encode("utf-8") + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def _signing_key(secret: Union[None, str, bytes]) -> Optional[bytes]:
    if secret is None:
        return None
    if isinstance(secret, bytes):
        key = secret
    elif secret.startswith("whsec_"):
        try:
            key = base64.b64decode(secret[len("whsec_"):], validate=True)
        except (binascii.Error, ValueError):
            raise ConfigurationError("signing_secret", "[REDACTED]",
                                     "is not whsec_<base64>") from None
    else:
        key = secret.encode("utf-8")
    if not key:
        raise ConfigurationError("signing_secret", "", "must not be empty")
    return key


def _is_readable(content_type: str) -> bool:
    """JSON (``+json`` types included: a structured CloudEvent) or a form."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media in _JSON or media == FORM or (
        media.startswith("application/") and media.endswith("+json"))


def _read_body(environ: Mapping[str, Any], limit: int) -> Tuple[bytes, Optional[Answer]]:
    """The request body, or the refusal: 413 over ``limit`` (reads at most limit + 1 bytes)."""
    stream = environ["wsgi.input"]
    declared = environ.get("CONTENT_LENGTH", "")
    if declared:
        if not _LENGTH.fullmatch(declared):
            # also two Content-Length headers, which a server joins with a comma
            return b"", (400, {}, {"status": "bad_request",
                                   "reason": "Content-Length must be one number in ASCII digits"})
        length = int(declared)
        if length > limit:
            return b"", _too_large(limit)
        wanted = length
    elif environ.get("wsgi.input_terminated"):
        wanted = limit + 1
    else:
        return b"", (411, {}, {"status": "length_required",
                               "reason": "send Content-Length"})
    chunks: List[bytes] = []
    got = 0
    while got < wanted:
        chunk = stream.read(min(65536, wanted - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    raw = b"".join(chunks)
    if len(raw) > limit:
        return b"", _too_large(limit)
    return raw, None


def _too_large(limit: int) -> Answer:
    return 413, {}, {"status": "too_large", "reason": f"the body is over {limit} bytes"}


def _kind_of(reason: str) -> str:
    """An unreachable ledger as an unauthenticated answer tells it: the kind of failure (the
    driver's error name, such as LockNotAvailable), never the server's address."""
    kind = _ERROR_NAME.match(reason)
    return f"the ledger is unreachable ({kind.group(0)})" if kind else "the ledger is unreachable"


def _unauthorized(reason: str) -> Answer:
    log.warning("gateway: refused an unauthenticated delivery: %s", reason)
    return 401, {}, {"status": "unauthorized", "reason": reason}


def _request_headers(environ: Mapping[str, Any]) -> Dict[str, str]:
    """HTTP request headers from a WSGI environ, as ``Title-Case`` names."""
    out = {}
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            out[key[5:].replace("_", "-").title()] = value
    if environ.get("CONTENT_TYPE"):
        out["Content-Type"] = environ["CONTENT_TYPE"]
    return out

