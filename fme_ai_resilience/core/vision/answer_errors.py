"""The errors a Vision AI (or ArcGIS) answer reports: by HTTP status, or inside an HTTP 200 body.

:func:`detect_error` is the one place that reads them, for the client, ``normalize`` (so an
error in a 200 body never becomes an assessment, whichever entry point it reaches) and the
photo download. Values from an answer enter messages only through :func:`text_of` and
:func:`shown`, which never print 400 digits of a number or a structure's repr. Pure: no I/O.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Tuple

from ..resilience.classification import classify_status
from ..errors import ErrorClass

__all__ = ["detect_error", "shown", "text_of"]


def shown(value: Any) -> str:
    """A short repr of a value from an answer, for messages (never 400 digits of a number)."""
    if isinstance(value, int) and not isinstance(value, bool) and not -10 ** 18 < value < 10 ** 18:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = repr(value) if isinstance(value, (str, int, float, bool, type(None))) else \
        f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


_RPC_CODES = {3: ErrorClass.BAD_REQUEST, 5: ErrorClass.NOT_FOUND, 7: ErrorClass.AUTH,
              16: ErrorClass.AUTH, 8: ErrorClass.RATE_LIMITED, 4: ErrorClass.SERVER_ERROR,
              13: ErrorClass.SERVER_ERROR, 14: ErrorClass.SERVER_ERROR}
_RPC_STATUS = {"INVALID_ARGUMENT": ErrorClass.BAD_REQUEST, "NOT_FOUND": ErrorClass.NOT_FOUND,
               "PERMISSION_DENIED": ErrorClass.AUTH, "UNAUTHENTICATED": ErrorClass.AUTH,
               "RESOURCE_EXHAUSTED": ErrorClass.RATE_LIMITED}
_AWS_TYPES = {"ThrottlingException": ErrorClass.RATE_LIMITED,
              "ProvisionedThroughputExceededException": ErrorClass.RATE_LIMITED,
              "LimitExceededException": ErrorClass.RATE_LIMITED,
              "InternalServerError": ErrorClass.SERVER_ERROR,
              "ResourceNotReadyException": ErrorClass.SERVER_ERROR,
              "AccessDeniedException": ErrorClass.AUTH,
              "UnrecognizedClientException": ErrorClass.AUTH,
              "ImageTooLargeException": ErrorClass.BAD_REQUEST,
              "InvalidImageFormatException": ErrorClass.BAD_REQUEST,
              "InvalidParameterException": ErrorClass.BAD_REQUEST}


def text_of(value: Any, limit: int = 500) -> str:
    """Text from an answer for a message: a string as it is (cut at ``limit``), else shown."""
    if isinstance(value, str):
        return value[:limit]
    return "" if value is None else shown(value)


def _error_object(err: Mapping[str, Any]) -> Tuple[ErrorClass, str]:
    """Classify an ``{"error": {...}}`` object (Google, Azure, ArcGIS, OpenAI styles)."""
    code, status = err.get("code"), err.get("status")
    message = text_of(err.get("message") or err.get("description") or code or "error")
    if isinstance(status, str) and status in _RPC_STATUS:
        return _RPC_STATUS[status], message
    if isinstance(code, int) and not isinstance(code, bool):
        if code in (498, 499):
            return ErrorClass.AUTH, message
        if 400 <= code < 600:
            return classify_status(code) or ErrorClass.SERVER_ERROR, message
        return _RPC_CODES.get(code, ErrorClass.SERVER_ERROR), message
    return ErrorClass.SERVER_ERROR, message


def _reported(err: Any) -> Optional[Tuple[ErrorClass, str]]:
    """The error an ``error`` field reports: an object, a message, a list of them or ``true``.

    An absent or empty one (``null``, ``false``, ``""``, ``{}``, ``[]``) reports none; nor does
    a number (a service may report an error margin that way).
    """
    if isinstance(err, Mapping):
        return _error_object(err) if err else None
    if isinstance(err, str):
        return (ErrorClass.SERVER_ERROR, text_of(err)) if err.strip() else None
    if isinstance(err, list):
        if not err:
            return None
        first = err[0]
        return _error_object(first) if isinstance(first, Mapping) and first else \
            (ErrorClass.SERVER_ERROR, text_of(first) or "errors reported")
    return (ErrorClass.SERVER_ERROR, "error: true") if err is True else None


def detect_error(provider: str, status: int,
                 payload: Any) -> Optional[Tuple[ErrorClass, str]]:
    """The error a response reports, by status or inside an HTTP 200 body, else None.

    ``payload`` is the parsed JSON body (None when it was not JSON). Rekognition's
    ``__type`` refines the status (a ThrottlingException in a 500 is RATE_LIMITED); Google's
    per-image ``responses[i].error`` counts as much as a top-level ``error``.
    """
    aws_type = ""
    if isinstance(payload, Mapping):
        aws_type = text_of(payload.get("__type") or payload.get("code") or "").rpartition("#")[2]
    if provider == "rekognition" and aws_type in _AWS_TYPES:
        return _AWS_TYPES[aws_type], text_of(payload.get("message") or payload.get("Message")
                                           or aws_type)
    if status >= 400:
        err = payload.get("error") if isinstance(payload, Mapping) else None
        message = text_of(err.get("message") or "") if isinstance(err, Mapping) else ""
        return classify_status(status) or ErrorClass.SERVER_ERROR, message or f"HTTP {status}"
    if not isinstance(payload, Mapping):
        return None
    found = _reported(payload.get("error"))
    responses = payload.get("responses") if provider == "google" else None
    if found is None and isinstance(responses, list):
        found = next((f for f in (_reported(r.get("error")) for r in responses
                                  if isinstance(r, Mapping)) if f is not None), None)
    return found
