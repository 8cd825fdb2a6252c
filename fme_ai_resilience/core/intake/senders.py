"""Who sent a webhook delivery, and what in it is for the ledger. Pure: no I/O, no clock.

One intake takes four senders (docs/intake.md, "Senders"):

* the Survey123 app: one JSON object with the whole feature;
* an ArcGIS Online feature-layer webhook: a JSON array of notifications, or the same array
  form-encoded as ``payload=<json>`` (``application/x-www-form-urlencoded``);
* an ArcGIS Enterprise service webhook: one JSON object with a ``changesUrl``;
* a CloudEvent (1.0, HTTP binding) wrapping any of them: structured mode
  (``application/cloudevents+json``, the attributes and ``data`` or ``data_base64`` in the JSON)
  or binary mode (the attributes in ``ce-*`` headers, the body the data).

:func:`read_delivery` says which, and hands back the :class:`Delivery`: the sender, the bytes
its parser reads, the signature it carries and its delivery id. What it cannot read as any of
them raises :class:`Unsupported` (answered 415: the batch mode of CloudEvents, a CloudEvent
whose data is not JSON, a form without ``payload``, any other media type); a body in a known
format but broken (not JSON, a notification without ``changesUrl``) goes on to its parser,
which refuses it with :class:`~fme_ai_resilience.core.errors.InvalidPayload` (a dead letter).
Recognising a Survey123 body costs one substring search: it is decoded once, by its parser.
"""
from __future__ import annotations

import base64
import binascii
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple
from urllib.parse import parse_qsl, unquote

from ..errors import InvalidPayload, ResilienceError
from ..text.caseless import get_ignoring_case
from ..text.printable import printable
from ..text.untrusted_json import Body, body_bytes, decode_object, decode_value
from .arcgis_webhook import SIGNATURE_HEADER, is_layer_notification, signature_matches
from .survey123 import DELIVERY_HEADER

__all__ = ["Sender", "Delivery", "CloudEvent", "Unsupported", "read_delivery",
           "CLOUDEVENTS_JSON", "CLOUDEVENTS_BATCH", "FORM"]

CLOUDEVENTS_JSON = "application/cloudevents+json"
CLOUDEVENTS_BATCH = "application/cloudevents-batch+json"
FORM = "application/x-www-form-urlencoded"
_MAX_ATTRIBUTE = 256


class Sender(str, enum.Enum):
    """Who sent a delivery (the ``source`` of the tasks it makes)."""

    SURVEY123 = "survey123"
    ARCGIS_ONLINE = "arcgis_online"
    ARCGIS_ENTERPRISE = "arcgis_enterprise"

    @property
    def is_arcgis(self) -> bool:
        """An ArcGIS server: it deactivates a webhook after failed deliveries, so it is never
        answered with a refusal while the ledger is up."""
        return self is not Sender.SURVEY123


class Unsupported(ResilienceError):
    """A delivery in no format the intake reads (answered 415 with the reason)."""


@dataclass(frozen=True)
class CloudEvent:
    """The attributes of the CloudEvent a delivery came in (``source`` + ``id`` name it)."""

    id: str
    source: str
    type: str
    mode: str   # "structured" or "binary"


@dataclass(frozen=True)
class Delivery:
    """One delivery, read: ``body`` is what the sender's parser reads (the Survey123 body,
    the notification JSON, a CloudEvent's data), ``data`` its decoded value for an ArcGIS
    sender (None for Survey123: its parser decodes it), ``raw`` the bytes as received.
    """

    sender: Sender
    body: Body
    raw: bytes
    data: Any = None
    signature: Optional[str] = None
    delivery_id: Optional[str] = None
    event: Optional[CloudEvent] = None

    def __repr__(self) -> str:   # bodies may carry a portal token: never in a repr
        return (f"Delivery({self.sender.value}, {len(self.raw)} bytes, "
                f"event={self.event.id if self.event else None!r})")

    def signed_by(self, key: str) -> bool:
        """Whether the delivery carries a valid ArcGIS signature made with ``key``: over the
        body as received, or over the notification JSON (a form's ``payload`` value, a
        CloudEvent's data), as Esri's own receivers compute it."""
        own = body_bytes(self.body)
        candidates = (self.raw,) if own == self.raw else (self.raw, own)
        return any(signature_matches(key, self.signature, signed) for signed in candidates)

    def headers_for_parser(self, headers: Optional[Mapping]) -> Dict[str, Any]:
        """``headers`` with the delivery id under ``X-Survey123-Delivery`` (a CloudEvent's
        id when the sender gave none)."""
        out = dict(headers or {})
        if self.delivery_id and get_ignoring_case(out, DELIVERY_HEADER) is None:
            out[DELIVERY_HEADER] = self.delivery_id
        return out


def read_delivery(body: Body, headers: Optional[Mapping] = None, *, max_bytes: int,
                  max_depth: int) -> Delivery:
    """The delivery ``body`` is, by its ``Content-Type`` (JSON when none is given) and shape.

    Raises :class:`Unsupported` for a format the intake does not read, and
    :class:`InvalidPayload` for a CloudEvent missing a required attribute.
    """
    if isinstance(body, Mapping):   # already decoded (a caller that parsed the JSON itself)
        raw = body_bytes(body)
        return _of_json(body, raw, dict(body), headers, None)
    raw = body_bytes(body)
    media = _media_type(get_ignoring_case(headers, "Content-Type"))
    if media == CLOUDEVENTS_BATCH:
        raise Unsupported("the CloudEvents batch mode is not read: send one event per request")
    if media == CLOUDEVENTS_JSON:
        return _structured(raw, headers, max_bytes=max_bytes, max_depth=max_depth)
    event = _binary_event(headers)
    if media == FORM:
        inner, signature = _form(raw)
        return _of_json(inner, raw, None, headers, event, signature, max_bytes=max_bytes,
                        max_depth=max_depth)
    if media and not _is_json(media):
        raise Unsupported(f"{printable(media)[:80]} is not read: send JSON "
                          "(application/json), a form with payload=<json>, or a CloudEvent")
    return _of_json(raw, raw, None, headers, event, max_bytes=max_bytes, max_depth=max_depth)


def _of_json(inner: Body, raw: bytes, decoded: Any, headers: Optional[Mapping],
             event: Optional[CloudEvent], signature: Optional[str] = None, *,
             max_bytes: int = 0, max_depth: int = 0) -> Delivery:
    """The delivery whose JSON is ``inner``: an ArcGIS notification or a Survey123 body."""
    signature = signature or _header(headers, SIGNATURE_HEADER)
    delivery_id = event.id if event is not None else None
    if decoded is None:
        if b"changesUrl" not in body_bytes(inner):
            return Delivery(Sender.SURVEY123, inner, raw, None, signature, delivery_id, event)
        try:
            decoded = decode_value(body_bytes(inner), max_bytes=max_bytes, max_depth=max_depth)
        except InvalidPayload:   # broken JSON: its parser refuses it with the reason
            return Delivery(Sender.SURVEY123, inner, raw, None, signature, delivery_id, event)
    if not is_layer_notification(decoded):
        return Delivery(Sender.SURVEY123, inner, raw, None, signature, delivery_id, event)
    sender = Sender.ARCGIS_ONLINE if isinstance(decoded, list) else Sender.ARCGIS_ENTERPRISE
    return Delivery(sender, inner, raw, decoded, signature, delivery_id, event)


def _structured(raw: bytes, headers: Optional[Mapping], *, max_bytes: int,
                max_depth: int) -> Delivery:
    envelope = decode_object(raw, max_bytes=max_bytes, max_depth=max_depth)
    event = _event(envelope, "structured")
    kind = _media_type(envelope.get("datacontenttype")) or "application/json"
    if not _is_json(kind):
        raise Unsupported(f"the CloudEvent's data is {printable(kind)[:80]}, not JSON")
    if "data_base64" in envelope:
        try:
            inner: Body = base64.b64decode(str(envelope["data_base64"]), validate=True)
        except (binascii.Error, ValueError):
            raise InvalidPayload("data_base64 is not base64", field="data_base64") from None
        return _of_json(inner, raw, None, headers, event, max_bytes=max_bytes,
                        max_depth=max_depth)
    if "data" not in envelope:
        raise InvalidPayload("the CloudEvent carries no data", field="data")
    data = envelope["data"]
    if isinstance(data, str):   # JSON carried as a string
        return _of_json(data, raw, None, headers, event, max_bytes=max_bytes,
                        max_depth=max_depth)
    inner = json.dumps(data, separators=(",", ":")).encode("utf-8")
    return _of_json(data if isinstance(data, Mapping) else inner, raw, data, headers, event)


def _binary_event(headers: Optional[Mapping]) -> Optional[CloudEvent]:
    if _header(headers, "ce-specversion") is None:
        return None
    attributes = {name: _header(headers, f"ce-{name}")
                  for name in ("specversion", "id", "source", "type")}
    return _event(attributes, "binary")


def _event(attributes: Mapping[str, Any], mode: str) -> CloudEvent:
    if attributes.get("specversion") != "1.0":
        version = printable(str(attributes.get("specversion")))[:20]
        raise Unsupported(f"CloudEvents specversion {version!r} is not read (1.0 is)")
    values = []
    for name in ("id", "source", "type"):
        value = attributes.get(name)
        if not isinstance(value, str) or not value:
            raise InvalidPayload(f"the CloudEvent has no {name}", field=name)
        values.append(printable(value)[:_MAX_ATTRIBUTE])
    return CloudEvent(values[0], values[1], values[2], mode)


def _form(raw: bytes) -> Tuple[bytes, Optional[str]]:
    """The ``payload`` field of a form-encoded body, and a signature sent as a field."""
    try:
        fields = dict(parse_qsl(raw.decode("utf-8"), keep_blank_values=True))
    except UnicodeDecodeError:
        raise InvalidPayload("the form is not UTF-8 text") from None
    payload = fields.get("payload")
    if payload is None:
        raise Unsupported("a form-encoded delivery must carry payload=<json> (an ArcGIS "
                          "webhook's form content type)")
    signature = get_ignoring_case(fields, SIGNATURE_HEADER)
    if signature is not None:   # base64's '+' sent unencoded reads as a space in a form
        signature = signature.replace(" ", "+")
    return payload.encode("utf-8"), signature


def _header(headers: Optional[Mapping], name: str) -> Optional[str]:
    value = get_ignoring_case(headers, name)
    if value is None:
        return None
    text = str(value).strip()
    return unquote(text) if name.lower().startswith("ce-") else text


def _media_type(value: Any) -> str:
    return str(value or "").split(";", 1)[0].strip().lower()


def _is_json(media: str) -> bool:
    return media in ("application/json", "text/json") or (
        media.startswith("application/") and media.endswith("+json")
        and media not in (CLOUDEVENTS_JSON, CLOUDEVENTS_BATCH))
