"""Survey123 webhook bodies -> :class:`Submission` values, one per photo.

Pure: no I/O, no clock. The shapes are those in shared/reference/survey123.md: ``feature``
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

import functools
import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Iterator, List, NamedTuple, Optional, Tuple, Union
from urllib.parse import urlsplit, urlunsplit

from .errors import InvalidPayload
from .keys import compose_key, edit_marker, normalise_global_id, trace_id_for
from .redact import scrub_secrets, without_secret_params
from .submission import Submission

EVENT_TYPES = ("addData", "editData")
DEFAULT_MAX_BYTES = 1024 * 1024
DEFAULT_MAX_DEPTH = 32
DEFAULT_MAX_ATTACHMENTS = 200

DELIVERY_HEADER = "X-Survey123-Delivery"
EVENT_HEADER = "X-Survey123-Event"

_ATTACHMENT_URL = re.compile(r"^(?P<service>.+)/(?P<layer>\d+)/(?P<oid>\d+)/attachments/\d+/?$")
_MAX_DELIVERY_ID = 128
_SCALARS = frozenset({str, int, float, bool, type(None)})
_JSON_WHITESPACE = re.compile(r"[ \t\n\r]*")  # what JSON allows around a value
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_EMPTY: Mapping[str, Any] = MappingProxyType({})
_BOM = b"\xef\xbb\xbf"
_SOURCE = "survey123"

Body = Union[bytes, bytearray, str, Mapping[str, Any]]


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
    data = _decode(body, max_bytes, max_depth)
    event_type = _event_type(data, header_value(headers, EVENT_HEADER))
    delivery_id = delivery_id_of(headers)
    feature = data.get("feature")
    if type(feature) is not dict and not isinstance(feature, Mapping):
        raise InvalidPayload("no feature object", field="feature")
    token = _portal_token(data)
    service_url = _service_url(data, feature)
    # A body decoded here is ours alone: its attribute objects can be kept without a copy.
    context = _Context(event_type, delivery_id, token, service_url, asset_type_field,
                       max_attachments, owned=data is not body)
    out: List[Submission] = []
    root = _record(feature, "feature", context, out, inherited_asset_type=None)
    if context.listed == 0 and not context.root_unknown:
        # No photo listed anywhere: the feature's photos may still exist on the layer.
        out.append(_unknown(root, context, "feature"))
    return out


class _Context:
    """What every record of one body shares while it is walked.

    ``submissions`` counts every submission made (the ``max_attachments`` limit), ``listed``
    the photos the body listed, ``root_unknown`` whether the feature got an unknown-list one;
    ``owned`` says the body was decoded here (nobody else holds its objects).
    """

    __slots__ = ("event_type", "delivery_id", "token", "service_url", "asset_type_field",
                 "max_attachments", "owned", "submissions", "listed", "root_unknown")

    def __init__(self, event_type: str, delivery_id: Optional[str], token: Optional[str],
                 service_url: Optional[str], asset_type_field: str, max_attachments: int,
                 owned: bool = False) -> None:
        self.event_type = event_type
        self.delivery_id = delivery_id
        self.token = token
        self.service_url = service_url
        self.asset_type_field = asset_type_field
        self.max_attachments = max_attachments
        self.owned = owned
        self.submissions = 0
        self.listed = 0
        self.root_unknown = False

    def __repr__(self) -> str:  # the token stays out
        return (f"_Context(event_type={self.event_type!r}, submissions={self.submissions}, "
                f"listed={self.listed})")


class _Rec(NamedTuple):
    """One record (feature or repeat record) reduced to what its submissions need.

    ``attributes`` is one read-only mapping shared by every submission of the record.
    """

    global_id: str
    object_id: Optional[int]
    layer_url: Optional[str]
    attributes: Mapping[str, Any]
    asset_type: Optional[str]
    marker: Optional[str]


#: ``_Rec`` from a tuple of its fields, without the generated ``__new__``'s Python frame.
_new_rec = functools.partial(tuple.__new__, _Rec)


def _record(record: Mapping[str, Any], where: str, ctx: _Context, out: List[Submission],
            inherited_asset_type: Optional[str]) -> _Rec:
    attributes = record.get("attributes")
    if attributes is None:
        attributes = {}
    elif type(attributes) is not dict and not isinstance(attributes, Mapping):
        raise InvalidPayload("attributes must be an object", field=f"{where}.attributes")
    layer_info = record.get("layerInfo")
    if layer_info is not None and type(layer_info) is not dict and not isinstance(layer_info,
                                                                                  Mapping):
        raise InvalidPayload("layerInfo must be an object", field=f"{where}.layerInfo")
    layer_info = layer_info or _EMPTY
    result = record.get("result")
    if type(result) is not dict and not isinstance(result, Mapping):
        result = _EMPTY
    attachments = record.get("attachments")

    gid_field = _field_name(layer_info, "globalIdField", "globalid")
    oid_field = _field_name(layer_info, "objectIdField", "objectid")
    raw_gid = _get_ci(attributes, gid_field)
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
    object_id = _get_ci(attributes, oid_field)
    if object_id is not None and type(object_id) is not int:
        object_id = _int_or_none(object_id, f"{where}.attributes.{oid_field}")
    if object_id is None:
        object_id = _int_or_none(result.get("objectId"), f"{where}.result.objectId")

    layer_id = layer_info.get("id")
    if layer_id is not None and type(layer_id) is not int:
        layer_id = _int_or_none(layer_id, f"{where}.layerInfo.id")
    service = ctx.service_url or _service_from_photos(attachments)
    layer_url = f"{service}/{layer_id}" if service and layer_id is not None else None
    if ctx.owned and type(attributes) is dict:
        as_sent = attributes  # decoded from JSON here: string keys, and no other holder
    else:
        as_sent = {str(k): v for k, v in attributes.items()}
    clean = scrub_secrets(as_sent, [ctx.token]) if _mentions(as_sent, ctx.token) else as_sent
    asset_type = clean.get(ctx.asset_type_field)
    if not isinstance(asset_type, str):
        asset_type = inherited_asset_type
    rec = _new_rec((global_id, object_id, layer_url, MappingProxyType(clean), asset_type,
                    edit_marker(as_sent) if ctx.event_type == "editData" else None))

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
                 keyed_by: str) -> Iterator[Tuple[Any, int, Mapping[str, Any]]]:
    """``(key, index, item)`` for each object in an object of lists (``{question: [photo]}``,
    ``{table: [record]}``); an item's path, ``<where>.<name>.<key>[<index>]``, is only spelled
    out for an error."""
    if type(container) is not dict and not isinstance(container, Mapping):
        raise InvalidPayload(f"{name} must be an object keyed by {keyed_by}",
                             field=f"{where}.{name}")
    for key, items in container.items():
        if items is None:
            continue
        if not isinstance(items, list):
            raise InvalidPayload("must be a list", field=f"{where}.{name}.{key}")
        for index, item in enumerate(items):
            if type(item) is not dict and not isinstance(item, Mapping):
                raise InvalidPayload("must be an object", field=f"{where}.{name}.{key}[{index}]")
            yield key, index, item


def _photo(photo: Mapping[str, Any], question: Any, index: int, rec: _Rec, ctx: _Context,
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
    attachment_id = photo.get("id")
    if attachment_id is not None and type(attachment_id) is not int:
        attachment_id = _int_or_none(attachment_id, f"{_photo_path(where, question, index)}.id")
    url = photo.get("url")
    if url is not None and not isinstance(url, str):
        raise InvalidPayload("attachment url must be a string",
                             field=f"{_photo_path(where, question, index)}.url")
    if url:
        url = _without_token(url)
    elif rec.layer_url and rec.object_id is not None and attachment_id is not None:
        url = f"{rec.layer_url}/{rec.object_id}/attachments/{attachment_id}"
    content_type = photo.get("contentType")
    # Every field, in declaration order: the values are checked here, the attributes shared.
    return Submission._from_checked({
        "idempotency_key": key, "feature_global_id": rec.global_id,
        "trace_id": trace_id_for(key), "object_id": rec.object_id,
        "attachment_global_id": attachment_gid, "attachment_id": attachment_id,
        "attachment_url": url or None,
        "content_type": content_type if isinstance(content_type, str) else None,
        "question": question if type(question) is str else str(question),
        "event_type": ctx.event_type, "delivery_id": ctx.delivery_id,
        "layer_url": rec.layer_url, "service_url": ctx.service_url,
        "asset_type": rec.asset_type, "attributes": rec.attributes,
        "attachments_unknown": False, "source": _SOURCE, "portal_token": ctx.token})


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


def _unknown(rec: _Rec, ctx: _Context, where: str) -> Submission:
    _count(ctx, f"{where}.attachments")
    key = compose_key(rec.global_id, None, rec.marker)
    return Submission._from_checked({
        "idempotency_key": key, "feature_global_id": rec.global_id,
        "trace_id": trace_id_for(key), "object_id": rec.object_id,
        "attachment_global_id": None, "attachment_id": None, "attachment_url": None,
        "content_type": None, "question": None, "event_type": ctx.event_type,
        "delivery_id": ctx.delivery_id, "layer_url": rec.layer_url,
        "service_url": ctx.service_url, "asset_type": rec.asset_type,
        "attributes": rec.attributes, "attachments_unknown": True, "source": _SOURCE,
        "portal_token": ctx.token})


# -- decoding -----------------------------------------------------------------------------------

def _reject_constant(name: str) -> Any:
    raise InvalidPayload(f"not JSON: {name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise InvalidPayload("a number is out of range")
    return value


def _decode(body: Body, max_bytes: int, max_depth: int) -> Mapping[str, Any]:
    shallow = False  # True when the text cannot nest deeper than max_depth
    if type(body) is not bytes and isinstance(body, Mapping):
        data: Any = body
    else:
        if type(body) is bytes:
            raw = body
        elif isinstance(body, str):
            raw = body.encode("utf-8", errors="surrogatepass")
        elif isinstance(body, (bytes, bytearray, memoryview)):
            raw = bytes(body)
        else:
            raise InvalidPayload(f"body must be bytes, text or an object, got {type(body).__name__}")
        if len(raw) > max_bytes:
            raise InvalidPayload(f"body of {len(raw)} bytes is over the limit of {max_bytes}")
        if not raw or raw.isspace():  # bytes.isspace: the ASCII whitespace bytes.strip() drops
            raise InvalidPayload("empty body")
        try:
            # utf-8-sig only drops a leading BOM; plain utf-8 decodes the rest alike, faster.
            text = raw.decode("utf-8-sig" if raw.startswith(_BOM) else "utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidPayload(f"not UTF-8 text (byte {exc.start})") from None
        # Nesting can be no deeper than the number of openers: most bodies skip the walk.
        shallow = text.count("{") + text.count("[") <= max_depth
        if "\x00" in text:
            raise InvalidPayload("contains a NUL character")
        try:
            data = _loads(text)
        except RecursionError:
            raise InvalidPayload(f"nesting deeper than {max_depth} levels") from None
        except ValueError as exc:
            if isinstance(exc, InvalidPayload):
                raise
            raise InvalidPayload(f"not JSON: {_json_reason(exc)}") from None
        if "\\" in text and "\\u" in text:  # a one-character search first: most have neither
            if "\\u0000" in text and _has_nul(data):
                # PostgreSQL text and jsonb cannot hold NUL; a literal backslash-u0000 is fine.
                raise InvalidPayload("contains a NUL character")
            if _SURROGATE_ESCAPE.search(text):
                try:
                    json.dumps(data, ensure_ascii=False).encode("utf-8")
                except UnicodeEncodeError:
                    raise InvalidPayload("contains an unpaired UTF-16 surrogate escape") from None
    if type(data) is not dict and not isinstance(data, Mapping):
        raise InvalidPayload(f"not a JSON object but {_json_type(data)}")
    if not shallow and _depth_over(data, max_depth):
        raise InvalidPayload(f"nesting deeper than {max_depth} levels")
    return data


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def _loads(text: str) -> Any:
    """``_DECODER.decode(text)``, without its whitespace wrapper for the usual body (one JSON
    value from the first character to the last).

    Leading blanks, trailing text and every error go through ``decode`` itself, so the answer
    and the error message are always exactly ``decode``'s.
    """
    try:
        data, end = _DECODER.raw_decode(text)
    except json.JSONDecodeError:
        return _DECODER.decode(text)
    if end != len(text) and _JSON_WHITESPACE.match(text, end).end() != len(text):
        return _DECODER.decode(text)
    return data


def _json_reason(exc: ValueError) -> str:
    msg = getattr(exc, "msg", None)
    pos = getattr(exc, "pos", None)
    return f"{msg} at character {pos}" if msg is not None else type(exc).__name__


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number" if isinstance(value, (int, float)) else type(value).__name__


def _has_nul(data: Any) -> bool:
    """Whether any decoded string (key or value) holds a NUL character (iterative)."""
    stack: List[Any] = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return True
        elif isinstance(value, Mapping):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return False


def _depth_over(data: Any, max_depth: int) -> bool:
    """Whether containers nest deeper than ``max_depth`` (iterative: no recursion limit)."""
    stack: List[Tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > max_depth:
            return True
        children = value.values() if isinstance(value, Mapping) else value
        for child in children:
            kind = type(child)
            if kind is dict or kind is list or (
                    kind not in _SCALARS and isinstance(child, (Mapping, list, tuple))):
                stack.append((child, depth + 1))
    return False


# -- small readers ------------------------------------------------------------------------------

def header_value(headers: Optional[Mapping[str, Any]], name: str) -> Any:
    """The value of header ``name`` in ``headers`` (names compared without case), or None."""
    return _get_ci(headers, name) if headers else None


def _event_type(data: Mapping[str, Any], header: Any) -> str:
    value = data.get("eventType") or header
    if value is None:
        return "addData"
    if value not in EVENT_TYPES:
        raise InvalidPayload(f"eventType must be one of {EVENT_TYPES}", field="eventType")
    return str(value)


def delivery_id_of(headers: Optional[Mapping[str, Any]]) -> Optional[str]:
    """The ``X-Survey123-Delivery`` header, bounded to 128 characters (it is stored and logged)."""
    value = header_value(headers, DELIVERY_HEADER)
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()[:_MAX_DELIVERY_ID]


def _portal_token(data: Mapping[str, Any]) -> Optional[str]:
    portal = data.get("portalInfo")
    if isinstance(portal, Mapping):
        token = portal.get("token")
        if isinstance(token, str) and token:
            return token
    return None


def _service_url(data: Mapping[str, Any], feature: Mapping[str, Any]) -> Optional[str]:
    info = data.get("surveyInfo")
    url = info.get("serviceUrl") if type(info) is dict or isinstance(info, Mapping) else None
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


def _photos(attachments: Any):
    if isinstance(attachments, Mapping):
        for photos in attachments.values():
            if isinstance(photos, list):
                for photo in photos:
                    if isinstance(photo, Mapping):
                        yield photo


def _field_name(layer_info: Mapping[str, Any], key: str, default: str) -> str:
    value = layer_info.get(key)
    return value if isinstance(value, str) and value else default


def _get_ci(mapping: Mapping[str, Any], name: str) -> Any:
    """``mapping[name]``, falling back to a case-insensitive match (``GlobalID``/``globalid``)."""
    if name in mapping:
        return mapping[name]
    lowered = name.lower()
    for key, value in mapping.items():
        if isinstance(key, str) and key.lower() == lowered:
            return value
    return None


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
    """``url`` without secret query parameters (the attachment URL must carry no token)."""
    if _is_plain(url):
        # No query, fragment, credentials or brackets: nothing to drop and nothing urlsplit
        # could refuse, so the URL is returned as it came (as without_secret_params would).
        return url
    try:
        return without_secret_params(url)
    except ValueError:
        raise InvalidPayload("attachment url is not a URL") from None


def _is_plain(url: str) -> bool:
    """Whether ``url`` is ASCII with no query, fragment, credentials or IPv6 brackets."""
    return (type(url) is str and url.isascii() and "?" not in url and "#" not in url
            and "@" not in url and "[" not in url and "]" not in url)


def _service_base(url: str) -> str:
    """A FeatureServer URL without query, fragment or trailing slash: layer and attachment
    URLs are built by appending path segments to it."""
    if _is_plain(url):
        return _plain_service_base(url)  # nothing secret in it: safe to remember
    return _split_service_base(url)


@functools.lru_cache(maxsize=256)
def _plain_service_base(url: str) -> str:
    """:func:`_split_service_base` remembered for the few survey services a gateway sees."""
    return _split_service_base(url)


def _split_service_base(url: str) -> str:
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
        elif type(v) not in _SCALARS and token in json.dumps(v, default=str):
            return True
    return False
