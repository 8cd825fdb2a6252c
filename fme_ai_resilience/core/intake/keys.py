"""Idempotency keys: one stable key per business fact (one photo of one submitted feature).

The key is built from normalised GlobalIDs only, so every redelivery of the same fact yields
the same key. Delivery ids, receive times and random values never enter it.

Formats (GlobalIDs lower-case, without braces)::

    <feature>/<attachment>                    a photo of an addData submission
    <feature>/attachments-unknown             the body carried no photo list for the feature
    <feature>/<attachment>@edit-<fingerprint> the same for an editData submission
    body:sha256:<hex>                         the dead letter of a body that could not be parsed

Each key has one W3C trace id (:func:`trace_id_for`, 32 lowercase hex digits), the same in the
ledger, every log line and the ``traceparent`` sent to the Vision AI service.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Mapping, Optional

from ..errors import InvalidPayload

__all__ = ["UNKNOWN_ATTACHMENTS", "normalise_global_id", "edit_marker", "idempotency_key",
           "compose_key", "body_key", "trace_id_for", "as_trace_id"]

#: The stand-in for the attachment GlobalID when the webhook listed no photos.
UNKNOWN_ATTACHMENTS = "attachments-unknown"

_GUID = re.compile(
    r"^\{?([0-9a-fA-F]{8})-?([0-9a-fA-F]{4})-?([0-9a-fA-F]{4})-?([0-9a-fA-F]{4})-?"
    r"([0-9a-fA-F]{12})\}?$")


def normalise_global_id(value: Any, field: str = "globalId") -> str:
    """A GlobalID as lower-case hyphenated hex without braces (``{AB-..}`` == ``ab-..``).

    Raises :class:`InvalidPayload` naming ``field`` when ``value`` is not a GUID.
    """
    if not isinstance(value, str):
        raise InvalidPayload(f"GlobalID must be a string, got {type(value).__name__}",
                             field=field)
    match = _GUID.match(value.strip())
    if match is None:
        raise InvalidPayload("GlobalID is not a GUID", field=field)
    return "-".join(match.groups()).lower()


def edit_marker(attributes: Optional[Mapping[str, Any]]) -> str:
    """The marker that tells one edit of a feature from another, from the edit's content.

    The same edit redelivered has the same attributes and so the same marker; a later edit
    with different values gets a new one. Only the edited values enter it.
    """
    canonical = json.dumps(dict(attributes or {}), sort_keys=True, separators=(",", ":"),
                           ensure_ascii=True, default=str)
    return "edit-" + hashlib.sha256(canonical.encode("ascii")).hexdigest()[:16]


def idempotency_key(feature_global_id: Any, attachment_global_id: Any = None,
                    marker: Optional[str] = None) -> str:
    """The ledger key of one photo (or of an unknown photo list when no attachment is given).

    ``marker`` is the :func:`edit_marker` of an editData submission (``None`` for addData).
    Raises :class:`InvalidPayload` when a GlobalID is not a GUID.
    """
    feature = normalise_global_id(feature_global_id, "feature.globalId")
    attachment = None if attachment_global_id is None else normalise_global_id(
        attachment_global_id, "attachment.globalId")
    return compose_key(feature, attachment, marker)


def compose_key(feature: str, attachment: Optional[str], marker: Optional[str] = None) -> str:
    """The key from GlobalIDs already passed through :func:`normalise_global_id`."""
    key = f"{feature}/{attachment or UNKNOWN_ATTACHMENTS}"
    return f"{key}@{marker}" if marker else key


def body_key(body: bytes) -> str:
    """The dead-letter key of a body that could not be parsed: its SHA-256."""
    return "body:sha256:" + hashlib.sha256(body).hexdigest()


_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_UUID_HEX = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
                       r"[0-9a-fA-F]{12}$")
_INVALID_TRACE_ID = "0" * 32


def trace_id_for(key: str) -> str:
    """The W3C trace id of a key (32 lowercase hex digits): the first half of its SHA-256.

    Derived from the key, so the same fact keeps one trace across redeliveries; never the
    all-zero id W3C Trace Context forbids.
    """
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    return digest[:32] if digest[:32] != _INVALID_TRACE_ID else digest[32:]


def as_trace_id(value: str) -> str:
    """``value`` as a W3C trace id: as it is when it already is one (32 lowercase hex, not all
    zeros), the same digits when it is a UUID or upper-case hex, else :func:`trace_id_for`."""
    text = str(value)
    if _TRACE_ID.match(text) and text != _INVALID_TRACE_ID:
        return text
    if _UUID_HEX.match(text):
        digits = text.replace("-", "").lower()
        if digits != _INVALID_TRACE_ID:
            return digits
    return trace_id_for(text)
