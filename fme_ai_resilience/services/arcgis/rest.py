"""One ArcGIS REST exchange, the same for the token providers and the feature layer client.

:func:`send` makes one request (``GET`` with the parameters in the query string, or ``POST``
with them as a form) under a connect, an answer and a body-read limit, reads at most
``max_bytes`` of the answer, decodes it with the library's bounded JSON decoder and classifies
what came back. ArcGIS reports many failures inside an HTTP 200 body
(``{"error": {"code": 498, "message": "Invalid token.", "details": []}}``), so every answer is
checked for an ``error`` key; the error object is classified by
:func:`~fme_ai_resilience.core.vision.providers.detect_error` (498/499 AUTH, 403 AUTH,
404 NOT_FOUND, 400 BAD_REQUEST, 429 RATE_LIMITED, 5xx SERVER_ERROR), an HTTP 498/499 status
counts as AUTH too, and transport failures get their class from
:func:`~fme_ai_resilience.services.vision.phases.send_failure`. A redirect is not followed
(a request carrying a token goes nowhere but where it was sent).

Nothing here raises for a remote failure: the :class:`Reply` carries an
:class:`~fme_ai_resilience.core.errors.ArcGISError` whose message has every secret handed in
(``secrets``: the token, a client secret, a password) replaced by ``[REDACTED]``, and so is
every secret a good answer echoes (in any escaped form), so a row error quoting the token
reaches no ledger row or log line.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import urlencode

import requests

from ...core.resilience.backoff import retry_after_from_headers
from ...core.checks import finite
from ...core.clock import Clock
from ...core.errors import ArcGISError, ErrorClass, InvalidPayload
from ...core.text.redact import redact_text, redact_url, scrub_secrets
from ...core.text.untrusted_json import decode_object
from ..vision.phases import exchange
from ...core.vision.providers import detect_error

__all__ = ["Reply", "Timeout", "TOKEN_CODES", "send", "split_timeout"]

#: ArcGIS's own codes for a token that is invalid (498) or missing (499), as HTTP status or
#: as the ``code`` of an error body.
TOKEN_CODES = frozenset({498, 499})
#: How deep an ArcGIS answer may nest (features -> attributes is four levels).
_MAX_DEPTH = 32
_REASON_LIMIT = 400

Timeout = Union[float, Tuple[float, float]]


def split_timeout(field: str, timeout_s: Any) -> Tuple[float, float]:
    """``(connect_s, read_s)`` from one number (both) or a pair; raises ConfigurationError."""
    if isinstance(timeout_s, (tuple, list)) and len(timeout_s) == 2:
        connect, read = timeout_s
    else:
        connect = read = timeout_s
    return (finite(f"{field}[connect]", connect, above=0),
            finite(f"{field}[read]", read, above=0))


@dataclass(frozen=True)
class Reply:
    """What one request produced: the decoded answer, or the error it amounts to.

    ``status_code`` is None when no answer came; ``duration_s`` is measured on the monotonic
    clock and ``phases`` holds the seconds of each phase (``connect``, ``ttfb``, ``body``).
    """

    status_code: Optional[int]
    payload: Optional[dict]
    error: Optional[ArcGISError]
    duration_s: float
    phases: Mapping[str, float]

    def result(self) -> dict:
        """The decoded answer; raises the :class:`ArcGISError` when there is none."""
        if self.error is not None:
            raise self.error
        return self.payload if self.payload is not None else {}


def send(method: str, url: str, params: Mapping[str, Any], *, operation: str, now: float,
         headers: Optional[Mapping[str, str]] = None, secrets: Iterable[Optional[str]] = (),
         timeout_s: Tuple[float, float], max_bytes: int, session: requests.Session,
         clock: Clock) -> Reply:
    """Send one ArcGIS REST request and classify its answer (see the module docstring).

    ``now`` (epoch seconds) dates a ``Retry-After`` given as an HTTP date; ``clock`` is read
    only through ``monotonic()``, for the body deadline and the duration.
    """
    known = tuple(s for s in secrets if s)
    form = urlencode({k: v for k, v in params.items() if v is not None})
    sent = dict(headers or {})
    sent.setdefault("Accept", "application/json")
    if method == "GET":
        target, body = (f"{url}?{form}" if form else url), b""
    else:
        target, body = url, form.encode("utf-8")
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    connect_s, read_s = timeout_s
    start = clock.monotonic()
    done = exchange(method, target, sent, body, connect_s=connect_s, ttfb_s=read_s,
                    body_s=read_s, max_bytes=max_bytes, session=session, clock=clock)
    duration = max(0.0, clock.monotonic() - start)

    def failed(error_class: ErrorClass, reason: str, code: Optional[int] = None,
               wait: Optional[float] = None) -> Reply:
        error = ArcGISError(error_class, _clean(reason, known), operation=operation,
                            status_code=done.status_code, code=code, retry_after_s=wait)
        return Reply(done.status_code, None, error, duration, done.phases)

    if done.error_class is not None:
        return failed(done.error_class, f"{redact_url(url, known)}: {done.detail}")
    status = done.status_code or 0
    if 300 <= status < 400:
        location = redact_url(str(done.headers.get("Location", "")), known)
        return failed(ErrorClass.BAD_REQUEST, f"redirected to {location or '(nowhere)'}; "
                                              "configure the URL it points to")
    payload, problem = _decoded(done.body, max_bytes, done.oversize or done.truncated)
    found = _failure(status, payload)
    if found is not None:
        error_class, code, reason = found
        wait = None
        if error_class in (ErrorClass.RATE_LIMITED, ErrorClass.SERVER_ERROR):
            wait = retry_after_from_headers(done.headers, reason, now=now)
        return failed(error_class, reason, code, wait)
    if payload is None:
        return failed(ErrorClass.BAD_FORMAT, f"the answer is not a JSON object: {problem}")
    # an answer echoing a secret (a row error quoting the token) keeps it nowhere
    return Reply(status, scrub_secrets(payload, known), None, duration, done.phases)


def _decoded(body: bytes, max_bytes: int, cut: bool) -> Tuple[Optional[dict], str]:
    if cut:
        return None, f"the body was cut off (larger than {max_bytes} bytes, or truncated)"
    try:
        return decode_object(body, max_bytes=max_bytes, max_depth=_MAX_DEPTH), ""
    except InvalidPayload as exc:
        return None, exc.reason


def _failure(status: int, payload: Optional[dict]
             ) -> Optional[Tuple[ErrorClass, Optional[int], str]]:
    """``(error class, ArcGIS code, reason)`` of a failed answer, None for a good one."""
    err = payload.get("error") if payload is not None else None
    if isinstance(err, str) and err:   # the plain OAuth 2.0 form: {"error": "invalid_client"}
        described = payload.get("error_description") if payload is not None else None
        return (ErrorClass.BAD_REQUEST if status < 400 else _status_class(status), None,
                f"{err}: {described}" if described else err)
    obj: Mapping[str, Any] = err if isinstance(err, Mapping) else {}
    code = obj.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    reason = _reason(obj)
    if status in TOKEN_CODES or code in TOKEN_CODES:
        return ErrorClass.AUTH, code if code is not None else status, reason or "invalid token"
    found = detect_error("arcgis", status, payload)
    if found is None:
        return None
    return found[0], code, reason or found[1]


def _status_class(status: int) -> ErrorClass:
    found = detect_error("arcgis", status, None)
    return found[0] if found is not None else ErrorClass.SERVER_ERROR


def _reason(err: Mapping[str, Any]) -> str:
    """The message of an ArcGIS error object and its details, in one line."""
    parts = [str(err[name]) for name in ("message", "error_description", "description")
             if isinstance(err.get(name), (str, int)) and str(err[name])]
    details = err.get("details")
    if isinstance(details, Sequence) and not isinstance(details, str):
        parts.extend(str(d) for d in details if isinstance(d, (str, int)) and str(d))
    return "; ".join(dict.fromkeys(parts))


def _clean(text: str, secrets: Sequence[str]) -> str:
    cleaned = redact_text(text, secrets)
    return cleaned if len(cleaned) <= _REASON_LIMIT else cleaned[:_REASON_LIMIT - 1] + "…"
