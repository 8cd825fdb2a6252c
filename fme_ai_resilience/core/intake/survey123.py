"""Survey123 webhook bodies -> :class:`Submission` values, one per photo.

Pure: no I/O, no clock. The shapes are those in docs/intake.md: ``feature``
with ``attributes``, ``layerInfo``, ``result``, ``attachments`` (an object keyed by image
question, each a list of photos) and ``repeats`` (records of related tables, each with its own
``layerInfo`` and ``attachments``). Unknown keys are ignored.

Rules:

* one :class:`Submission` per listed photo, across every image question and repeat record;
* a record (the feature or a repeat record) whose ``attachments`` is ``null`` or absent yields
  one submission flagged ``attachments_unknown`` for that record, so the processor lists its
  photos through the layer's ``queryAttachments``; a body that lists no photo at all yields
  one for the feature (besides any for repeat records), so a submission whose photos went
  missing is never dropped;
* every submission counts toward ``max_attachments``, listed photos and unknown lists alike,
  so one body cannot create more than that many ledger rows;
* a repeat record without its own asset type inherits the nearest ancestor's, at any depth;
* attributes are stored as sent, except that the exact portal token value is scrubbed wherever
  it appears (survey fields named ``key`` or ``token`` are business data, not secrets); the
  edit marker of an editData key is computed from the attributes as sent (a one-way hash);
* the portal token travels only in ``Submission.portal_token`` (never in repr, payload, logs).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Iterator, List, Mapping, Optional, Tuple
from urllib.parse import urlsplit, urlunsplit

from ..text.caseless import get_ignoring_case
from ..errors import InvalidPayload
from .keys import compose_key, edit_marker, normalise_global_id, trace_id_for
from ..text.printable import printable
from ..text.redact import scrub_secrets, without_token_params
from .submission import Submission
from ..text.untrusted_json import Body, decode_object

__all__ = ["parse_webhook", "delivery_id_of", "EVENT_TYPES", "DELIVERY_HEADER", "EVENT_HEADER",
           "DEFAULT_MAX_BYTES", "DEFAULT_MAX_DEPTH", "DEFAULT_MAX_ATTACHMENTS"]

EVENT_TYPES = ("addData", "editData")
DEFAULT_MAX_BYTES = 1024 * 1024
DEFAULT_MAX_DEPTH = 32
DEFAULT_MAX_ATTACHMENTS = 200

DELIVERY_HEADER = "X-Survey123-Delivery"
EVENT_HEADER = "X-Survey123-Event"

_ATTACHMENT_URL = re.compile(r"^(?P<service>.+)/(?P<layer>\d+)/(?P<oid>\d+)/attachments/\d+/?$")
_MAX_DELIVERY_ID = 128
_SOURCE = "survey123"


def parse_webhook(body: Body, headers: Optional[Mapping[str, Any]] = None, *,
                  max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH,
                  max_attachments: int = DEFAULT_MAX_ATTACHMENTS,
                  asset_type_field: str = "asset_type") -> List[Submission]:
    """Every photo of a Survey123 webhook body as a :class:`Submission` (at least one).

    ``body`` is the raw request body (bytes or text) or an already decoded object;
    ``headers`` supplies ``X-Survey123-Delivery`` (kept as ``delivery_id``, never in the key)
    and ``X-Survey123-Event`` (used when the body has no ``eventType``).
    Raises :class:`InvalidPayload` saying what is wrong: not JSON, not an object, no feature or
    GlobalID, over ``max_bytes``, nested deeper than ``max_depth``, more than
    ``max_attachments`` photos.
    """
    data = decode_object(body, max_bytes=max_bytes, max_depth=max_depth)
    event_type = _event_type(data, get_ignoring_case(headers, EVENT_HEADER))
    delivery_id = delivery_id_of(headers)
    feature = data.get("feature")
    if not isinstance(feature, dict):
        raise InvalidPayload("no feature object", field="feature")
    token = _portal_token(data)
    service_url = _service_url(data, feature)
    context = _Context(event_type, delivery_id, token, service_url, asset_type_field,
                       max_attachments)
    out: List[Submission] = []
    root = _record(feature, "feature", context, out, inherited_asset_type=None)
    if context.listed == 0 and not context.root_unknown:
        # No photo listed anywhere: the feature's photos may still exist on the layer.
        out.append(_unknown(root, context, "feature"))
    return out


class _Context:
    """What every record of one body shares while it is walked.

    ``submissions`` counts every submission made (the ``max_attachments`` limit), ``listed``
    the photos the body listed, ``root_unknown`` whether the feature got an unknown-list one.
    """

    def __init__(self, event_type: str, delivery_id: Optional[str], token: Optional[str],
                 service_url: Optional[str], asset_type_field: str,
                 max_attachments: int) -> None:
        self.event_type = event_type
        self.delivery_id = delivery_id
        self.token = token
        self.service_url = service_url
        self.asset_type_field = asset_type_field
        self.max_attachments = max_attachments
        self.submissions = 0
        self.listed = 0
        self.root_unknown = False

    def __repr__(self) -> str:  # the token stays out
        return (f"_Context(event_type={self.event_type!r}, submissions={self.submissions}, "
                f"listed={self.listed})")


@dataclass(frozen=True)
class _Record:
    """One record (feature or repeat record) reduced to what its submissions need."""

    global_id: str
    object_id: Optional[int]
    layer_url: Optional[str]
    attributes: Mapping[str, Any]
    asset_type: Optional[str]
    marker: Optional[str]


def _record(record: dict, where: str, ctx: _Context, out: List[Submission],
            inherited_asset_type: Optional[str]) -> _Record:
    attributes = record.get("attributes")
    if attributes is None:
        attributes = {}
    elif not isinstance(attributes, dict):
        raise InvalidPayload("attributes must be an object", field=f"{where}.attributes")
    layer_info = record.get("layerInfo")
    if layer_info is None:
        layer_info = {}
    elif not isinstance(layer_info, dict):
        raise InvalidPayload("layerInfo must be an object", field=f"{where}.layerInfo")
    result = record.get("result")
    if not isinstance(result, dict):
        result = {}
    attachments = record.get("attachments")

    gid_field = _field_name(layer_info, "globalIdField", "globalid")
    oid_field = _field_name(layer_info, "objectIdField", "objectid")
    raw_gid = get_ignoring_case(attributes, gid_field)
    if raw_gid is None:
        raw_gid = result.get("globalId")
    if raw_gid is None:
        raw_gid = _parent_of_first_photo(attachments)
    if raw_gid is None:
        raise InvalidPayload("no GlobalID", field=f"{where}.attributes.{gid_field}")
    try:
        global_id = normalise_global_id(raw_gid)
    except InvalidPayload as exc:  # the field path is only spelled out for an error
        raise InvalidPayload(exc.reason, field=f"{where}.attributes.{gid_field}") from None
    object_id = _int_or_none(get_ignoring_case(attributes, oid_field),
                             f"{where}.attributes.{oid_field}")
    if object_id is None:
        object_id = _int_or_none(result.get("objectId"), f"{where}.result.objectId")

    layer_id = _int_or_none(layer_info.get("id"), f"{where}.layerInfo.id")
    service = ctx.service_url or _service_from_photos(attachments)
    layer_url = f"{service}/{layer_id}" if service and layer_id is not None else None
    clean = scrub_secrets(attributes, [ctx.token]) if _mentions(attributes, ctx.token) \
        else attributes
    asset_type = clean.get(ctx.asset_type_field)
    if not isinstance(asset_type, str):
        asset_type = inherited_asset_type
    rec = _Record(global_id, object_id, layer_url, MappingProxyType(clean), asset_type,
                  edit_marker(attributes) if ctx.event_type == "editData" else None)

    if attachments is None:
        out.append(_unknown(rec, ctx, where))
        ctx.root_unknown = ctx.root_unknown or where == "feature"
    else:
        for question, index, photo in _keyed_lists(attachments, where, "attachments",
                                                   "question"):
            out.append(_photo(photo, question, index, rec, ctx, where))
    repeats = record.get("repeats")
    if repeats is not None:
        for table, index, row in _keyed_lists(repeats, where, "repeats", "table"):
            _record(row, f"{where}.repeats.{table}[{index}]", ctx, out, rec.asset_type)
    return rec


def _keyed_lists(container: Any, where: str, name: str,
                 keyed_by: str) -> Iterator[Tuple[str, int, dict]]:
    """``(key, index, item)`` for each object in an object of lists (``{question: [photo]}``,
    ``{table: [record]}``); an item's path, ``<where>.<name>.<key>[<index>]``, is only spelled
    out for an error."""
    if not isinstance(container, dict):
        raise InvalidPayload(f"{name} must be an object keyed by {keyed_by}",
                             field=f"{where}.{name}")
    for key, items in container.items():
        if items is None:
            continue
        if not isinstance(items, list):
            raise InvalidPayload("must be a list", field=f"{where}.{name}.{key}")
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise InvalidPayload("must be an object", field=f"{where}.{name}.{key}[{index}]")
            yield key, index, item


def _photo(photo: dict, question: str, index: int, rec: _Record, ctx: _Context,
           where: str) -> Submission:
    """The submission of one listed photo (``where`` is its record's path: the photo's own
    path, ``<where>.attachments.<question>[<index>]``, is only spelled out for an error)."""
    ctx.submissions += 1
    if ctx.submissions > ctx.max_attachments:
        raise _too_many(ctx, _photo_path(where, question, index))
    ctx.listed += 1
    raw_gid = photo.get("globalId")
    if raw_gid is None:
        raise InvalidPayload("attachment has no globalId",
                             field=f"{_photo_path(where, question, index)}.globalId")
    try:
        attachment_gid = normalise_global_id(raw_gid)
    except InvalidPayload as exc:
        raise InvalidPayload(exc.reason, field=f"{_photo_path(where, question, index)}.globalId"
                             ) from None
    key = compose_key(rec.global_id, attachment_gid, rec.marker)
    attachment_id = _int_or_none(photo.get("id"), f"{_photo_path(where, question, index)}.id")
    url = photo.get("url")
    if url is not None and not isinstance(url, str):
        raise InvalidPayload("attachment url must be a string",
                             field=f"{_photo_path(where, question, index)}.url")
    if url:
        url = _without_token(url)
    elif rec.layer_url and rec.object_id is not None and attachment_id is not None:
        url = f"{rec.layer_url}/{rec.object_id}/attachments/{attachment_id}"
    content_type = photo.get("contentType")
    return Submission(
        idempotency_key=key, feature_global_id=rec.global_id, trace_id=trace_id_for(key),
        object_id=rec.object_id, attachment_global_id=attachment_gid,
        attachment_id=attachment_id, attachment_url=url or None,
        content_type=content_type if isinstance(content_type, str) else None,
        question=question, event_type=ctx.event_type, delivery_id=ctx.delivery_id,
        layer_url=rec.layer_url, service_url=ctx.service_url, asset_type=rec.asset_type,
        attributes=rec.attributes, attachments_unknown=False, source=_SOURCE,
        portal_token=ctx.token)


def _photo_path(where: str, question: Any, index: int) -> str:
    return f"{where}.attachments.{question}[{index}]"


def _count(ctx: _Context, where: str) -> None:
    """Count one more submission; raises :class:`InvalidPayload` past ``max_attachments``."""
    ctx.submissions += 1
    if ctx.submissions > ctx.max_attachments:
        raise _too_many(ctx, where)


def _too_many(ctx: _Context, where: str) -> InvalidPayload:
    return InvalidPayload(f"more than {ctx.max_attachments} attachments (the max_attachments "
                          f"limit counts every photo and every unlisted photo list)", field=where)


def _unknown(rec: _Record, ctx: _Context, where: str) -> Submission:
    _count(ctx, f"{where}.attachments")
    key = compose_key(rec.global_id, None, rec.marker)
    return Submission(
        idempotency_key=key, feature_global_id=rec.global_id, trace_id=trace_id_for(key),
        object_id=rec.object_id, event_type=ctx.event_type, delivery_id=ctx.delivery_id,
        layer_url=rec.layer_url, service_url=ctx.service_url, asset_type=rec.asset_type,
        attributes=rec.attributes, attachments_unknown=True, source=_SOURCE,
        portal_token=ctx.token)


# -- small readers ------------------------------------------------------------------------------

def _event_type(data: Mapping[str, Any], header: Any) -> str:
    value = data.get("eventType") or header
    if value is None:
        return "addData"
    if value not in EVENT_TYPES:
        raise InvalidPayload(f"eventType must be one of {EVENT_TYPES}", field="eventType")
    return str(value)


def delivery_id_of(headers: Optional[Mapping[str, Any]]) -> Optional[str]:
    """The ``X-Survey123-Delivery`` header with control characters escaped, bounded to 128
    characters (it is stored, answered and logged: a line break in it must not forge a line)."""
    value = get_ignoring_case(headers, DELIVERY_HEADER)
    if not isinstance(value, str) or not value.strip():
        return None
    return printable(value.strip())[:_MAX_DELIVERY_ID]


def _portal_token(data: Mapping[str, Any]) -> Optional[str]:
    portal = data.get("portalInfo")
    if isinstance(portal, dict):
        token = portal.get("token")
        if isinstance(token, str) and token:
            return token
    return None


def _service_url(data: Mapping[str, Any], feature: Mapping[str, Any]) -> Optional[str]:
    info = data.get("surveyInfo")
    url = info.get("serviceUrl") if isinstance(info, dict) else None
    if isinstance(url, str) and url.strip():
        return _service_base(url.strip())
    return _service_from_photos(feature.get("attachments"))


def _service_from_photos(attachments: Any) -> Optional[str]:
    for photo in _photos(attachments):
        url = photo.get("url")
        if isinstance(url, str):
            match = _ATTACHMENT_URL.match(url.split("?", 1)[0].split("#", 1)[0])
            if match:
                return match.group("service")
    return None


def _parent_of_first_photo(attachments: Any) -> Any:
    for photo in _photos(attachments):
        if photo.get("parentGlobalId") is not None:
            return photo.get("parentGlobalId")
    return None


def _photos(attachments: Any) -> Iterator[dict]:
    if isinstance(attachments, dict):
        for photos in attachments.values():
            if isinstance(photos, list):
                for photo in photos:
                    if isinstance(photo, dict):
                        yield photo


def _field_name(layer_info: Mapping[str, Any], key: str, default: str) -> str:
    value = layer_info.get(key)
    return value if isinstance(value, str) and value else default


def _int_or_none(value: Any, field: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidPayload("must be an integer, got a boolean", field=field)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        # ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
        if text.isascii() and text.isdigit() and len(text) < 20:
            return int(text)
    raise InvalidPayload("must be an integer", field=field)


def _without_token(url: str) -> str:
    """``url`` without its portal-token parameters and without credentials in the authority
    (the attachment URL must carry no secret of the submitter's). Every other parameter stays
    as sent, so a pre-signed photo URL keeps its signature and can still be downloaded."""
    try:
        parts = urlsplit(url)
        if "@" in parts.netloc:
            url = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
        return without_token_params(url)
    except ValueError:
        raise InvalidPayload("attachment url is not a URL") from None


def _service_base(url: str) -> str:
    """A FeatureServer URL without query, fragment or trailing slash: layer and attachment
    URLs are built by appending path segments to it."""
    try:
        parts = urlsplit(url)
    except ValueError:
        raise InvalidPayload("surveyInfo.serviceUrl is not a URL",
                             field="surveyInfo.serviceUrl") from None
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def _mentions(attributes: Mapping[str, Any], token: Optional[str]) -> bool:
    """Whether the portal token appears anywhere in ``attributes`` (keys or values)."""
    if not token:
        return False
    for k, v in attributes.items():
        if token in k:
            return True
        if isinstance(v, str):
            if token in v:
                return True
        elif isinstance(v, (dict, list)) and token in json.dumps(v, default=str):
            return True
    return False
