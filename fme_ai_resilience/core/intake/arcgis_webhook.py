"""ArcGIS feature-layer webhooks (ArcGIS Online and Enterprise): their notifications, their
signature and challenge, and the changes ``extractChanges`` answers with. Pure: no I/O, no clock.

A notification is thin: it names a feature service, a layer and a range of server generations
(``changesUrl``), never a feature or a photo. :func:`parse_notifications` turns one delivery
into :class:`LayerNotification` values, each keyed by its service, layer and generation range
(:attr:`LayerNotification.key`), so a redelivery of the same notification is a duplicate;
:meth:`LayerNotification.submission` is the task the ledger keeps for it, which the processor
resolves through ``extractChanges`` into one task per photo, keyed as the Survey123 path keys
them (``<record GlobalID>/<attachment GlobalID>``: see
:mod:`fme_ai_resilience.core.intake.keys`). :func:`changed_features` reads the features an
``extractChanges`` result names.

Shapes (docs/intake.md, "Senders"):

* ArcGIS Online: a JSON array of ``{name, layerId, orgId, serviceName, lastUpdatedTime,
  changesUrl, events: ["FeaturesCreated", ...]}``, or the same array form-encoded as
  ``payload=<json>``;
* ArcGIS Enterprise 11.1+: one object ``{serviceType: "FeatureServer", id, name, folderName,
  serviceName, changesUrl, events: [{eventType, when}]}``.

``changesUrl`` arrives percent-encoded and is decoded once. The signature is
``x-esriHook-Signature: sha256=<base64 HMAC-SHA256(signatureKey, raw body)>`` (the header value
may itself arrive percent-encoded); the challenge ``GET <hook>?crc_token=T`` is answered with
``{"response_token": "sha256=<base64 HMAC-SHA256(signatureKey, T)>"}``.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from ..errors import InvalidPayload
from ..text.caseless import get_ignoring_case
from ..text.printable import printable
from .keys import normalise_global_id, trace_id_for
from .policy import service_identity
from .submission import Submission

__all__ = ["LayerNotification", "ChangedFeature", "ONLINE", "ENTERPRISE", "PHOTO_EVENTS",
           "SIGNATURE_HEADER", "parse_notifications", "is_layer_notification",
           "changed_features", "esri_signature", "signature_matches", "crc_answer",
           "NOTIFICATION_KEY_PREFIX", "MAX_NOTIFICATIONS", "CRC_TOKEN"]

#: The ``source`` of a notification's task, by sender.
ONLINE = "arcgis_online"
ENTERPRISE = "arcgis_enterprise"
#: The header (and form field) ArcGIS signs a delivery in.
SIGNATURE_HEADER = "x-esriHook-Signature"
#: The events that can bring a photo to analyse; a notification of none of them (a deletion,
#: a schema change) is answered and not kept.
PHOTO_EVENTS = frozenset({"FeaturesCreated", "FeaturesUpdated", "FeaturesEdited",
                          "AttachmentsCreated", "AttachmentsUpdated"})
#: Every notification key starts with it; no photo key does (those start with a GlobalID).
NOTIFICATION_KEY_PREFIX = "changes:"

#: The most notifications one delivery may hold (each is a small object; ArcGIS batches a
#: schedule interval's notifications, one per layer).
MAX_NOTIFICATIONS = 1000
_MAX_URL = 4096
_GENS = re.compile(r"^\s*\[\s*(\d{1,18})\s*,\s*(\d{1,18})\s*\]\s*$")
_SERVICE = re.compile(r"^(?P<service>.+/FeatureServer)/extractChanges/?$", re.IGNORECASE)


@dataclass(frozen=True)
class LayerNotification:
    """One notification of a feature-layer webhook: which changes to read and where.

    ``service_url`` is the FeatureServer ``changes_url`` belongs to; ``layer_id`` the layer the
    notification is for (None from Enterprise, which notifies per service);
    ``server_gens`` the generation range ``changes_url`` asks for.
    """

    source: str
    service_url: str
    server_gens: Tuple[int, int]
    events: Tuple[str, ...]
    layer_id: Optional[int] = None
    name: Optional[str] = None
    webhook_id: Optional[str] = None
    layers: Optional[Tuple[int, ...]] = None

    @property
    def requested_layers(self) -> Optional[Tuple[int, ...]]:
        """The layers whose changes are read: those ``changesUrl`` names, else the
        notification's own layer, else None (every layer: Enterprise notifies per service)."""
        if self.layers:
            return self.layers
        return None if self.layer_id is None else (self.layer_id,)

    @property
    def key(self) -> str:
        """``changes:<service>/<layers, or *>/gens-<from>-<to>``: what is read, and nothing
        else, so the same notification sent again (or once per layer for one submission) has
        the same key, and no other query can take a range's key."""
        layers = self.requested_layers
        named = "*" if layers is None else ",".join(str(n) for n in layers)
        low, high = self.server_gens
        return (f"{NOTIFICATION_KEY_PREFIX}{service_identity(self.service_url)}/{named}"
                f"/gens-{low}-{high}")

    @property
    def changes_url(self) -> str:
        """The ``extractChanges`` request the processor makes: built here from the service,
        the layers and the range, never the sender's own query (a delivery chooses the
        range, not what is asked for or how)."""
        low, high = self.server_gens
        query = {"serverGens": f"[{low},{high}]", "returnInserts": "true",
                 "returnUpdates": "true", "returnDeletes": "false",
                 "returnAttachments": "true", "returnAttachmentsDataByUrl": "true",
                 "async": "true", "dataFormat": "json"}
        layers = self.requested_layers
        if layers is not None:
            query["layers"] = "[" + ",".join(str(n) for n in layers) + "]"
        return f"{self.service_url}/extractChanges?" + urlencode(query, safe="[],")

    @property
    def brings_photos(self) -> bool:
        """Whether any of its events can bring a photo to analyse."""
        return any(e in PHOTO_EVENTS for e in self.events)

    def submission(self, delivery_id: Optional[str] = None) -> Submission:
        """The task the ledger keeps for this notification (resolved by the processor)."""
        key = self.key
        first = self.requested_layers
        layer = None if first is None else f"{self.service_url}/{first[0]}"
        return Submission(idempotency_key=key, feature_global_id=key,
                          trace_id=trace_id_for(key), event_type="layerChanges",
                          delivery_id=delivery_id, layer_url=layer,
                          service_url=self.service_url, source=self.source,
                          changes_url=self.changes_url,
                          attributes={"events": list(self.events), "name": self.name,
                                      "webhook_id": self.webhook_id,
                                      "server_gens": list(self.server_gens)})


def is_layer_notification(data: Any) -> bool:
    """Whether a decoded JSON value is an ArcGIS layer webhook's body (either platform)."""
    if isinstance(data, list):   # one odd item must not turn ArcGIS's array into a refusal
        return any(isinstance(d, dict) and "changesUrl" in d for d in data)
    return isinstance(data, dict) and "changesUrl" in data and "feature" not in data


def parse_notifications(data: Any) -> Tuple[List[LayerNotification], List[InvalidPayload]]:
    """Every notification of an ArcGIS layer webhook body (a decoded JSON value), and what is
    wrong with each item that is none.

    An array is ArcGIS Online's, an object ArcGIS Enterprise's. An array's items are read one
    by one, so one odd item does not lose the others: each item that cannot be read (no
    ``changesUrl``, one that is no ``extractChanges`` URL or names no ``serverGens`` range)
    is one :class:`InvalidPayload` in the second list. Raises :class:`InvalidPayload` when
    nothing can be read: not an array or object, an empty array, more than
    :data:`MAX_NOTIFICATIONS` items, an Enterprise object that is none.
    """
    if isinstance(data, list):
        if not data:
            raise InvalidPayload("an ArcGIS Online notification array with no notification")
        if len(data) > MAX_NOTIFICATIONS:
            raise InvalidPayload(f"{len(data)} notifications in one delivery (at most "
                                 f"{MAX_NOTIFICATIONS})")
        found: List[LayerNotification] = []
        problems: List[InvalidPayload] = []
        for i, item in enumerate(data):
            try:
                found.append(_online(item, f"[{i}]"))
            except InvalidPayload as exc:
                problems.append(exc)
        return found, problems
    if isinstance(data, dict):
        return [_enterprise(data)], []
    raise InvalidPayload("an ArcGIS notification must be an array or an object")


def _online(item: Any, where: str) -> LayerNotification:
    if not isinstance(item, dict):
        raise InvalidPayload("a notification must be an object", field=where)
    service, layers, gens = _changes(item.get("changesUrl"), f"{where}.changesUrl")
    layer = item.get("layerId")
    if layer is not None and (isinstance(layer, bool) or not isinstance(layer, int)
                              or layer < 0):
        raise InvalidPayload("layerId must be a layer number", field=f"{where}.layerId")
    events = item.get("events")
    if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
        raise InvalidPayload("events must be a list of event names", field=f"{where}.events")
    return LayerNotification(ONLINE, service, gens, tuple(events), layer,
                             _text(item.get("name")), None, layers)


def _enterprise(data: Mapping[str, Any]) -> LayerNotification:
    service, layers, gens = _changes(data.get("changesUrl"), "changesUrl")
    events = data.get("events")
    if not isinstance(events, list):
        raise InvalidPayload("events must be a list", field="events")
    names = []
    for i, event in enumerate(events):
        kind = event.get("eventType") if isinstance(event, dict) else event
        if not isinstance(kind, str):
            raise InvalidPayload("an event must name its eventType", field=f"events[{i}]")
        names.append(kind)
    return LayerNotification(ENTERPRISE, service, gens, tuple(names), None,
                             _text(data.get("name")), _text(data.get("id")), layers)


def _changes(value: Any, where: str
             ) -> Tuple[str, Optional[Tuple[int, ...]], Tuple[int, int]]:
    """The service, the layers named (None: not named) and the generation range of a
    ``changesUrl``."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidPayload("no changesUrl", field=where)
    if len(value) > _MAX_URL:
        raise InvalidPayload(f"changesUrl is over {_MAX_URL} characters", field=where)
    url = value.strip()
    if "://" not in url:   # percent-encoded as ArcGIS Online sends it: decode once
        url = unquote(url)
    try:
        parts = urlsplit(url)
    except ValueError:
        raise InvalidPayload("changesUrl is not a URL", field=where) from None
    match = _SERVICE.match(urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")))
    if parts.scheme.lower() not in ("http", "https") or match is None:
        raise InvalidPayload("changesUrl is not a FeatureServer extractChanges URL",
                             field=where)
    service = match.group("service")
    if service_identity(service) is None:
        raise InvalidPayload("changesUrl names no usable feature service", field=where)
    query = dict(parse_qsl(parts.query))
    return service, _layers(get_ignoring_case(query, "layers"), where), _server_gens(query, where)


def _layers(raw: Optional[str], where: str) -> Optional[Tuple[int, ...]]:
    """``[0,1]`` (or ``0,1``) as layer numbers, in order, each once; None when not named."""
    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    numbers = [p.strip() for p in text.split(",") if p.strip()]
    if not numbers or len(numbers) > 1000 or not all(n.isdigit() and len(n) <= 9
                                                     for n in numbers):
        raise InvalidPayload("layers is not a list of layer numbers", field=where)
    return tuple(sorted({int(n) for n in numbers}))


def _server_gens(query: Mapping[str, str], where: str) -> Tuple[int, int]:
    raw = get_ignoring_case(query, "serverGens")
    if raw is not None:
        match = _GENS.match(raw)
        if match is None:
            raise InvalidPayload("serverGens is not [from, to]", field=where)
        low, high = int(match.group(1)), int(match.group(2))
    else:
        raw = get_ignoring_case(query, "layerServerGens")
        gens = _layer_gens(raw)
        if gens is None:
            raise InvalidPayload("changesUrl names no serverGens range", field=where)
        low, high = gens
    if low > high:
        raise InvalidPayload("serverGens runs backwards", field=where)
    return low, high


def _layer_gens(raw: Optional[str]) -> Optional[Tuple[int, int]]:
    """``[{"id": 0, "serverGen": n}, ...]`` as the range (lowest, highest)."""
    try:
        items = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(items, list):
        return None
    gens = [g.get("serverGen") for g in items if isinstance(g, dict)]
    if not gens or not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0
                           for g in gens):
        return None
    return min(gens), max(gens)


def _text(value: Any) -> Optional[str]:
    return printable(value)[:200] if isinstance(value, str) and value else None


# -- what extractChanges answers ----------------------------------------------------------------

@dataclass(frozen=True)
class ChangedFeature:
    """A feature (or a repeat's record) added or updated within a notification's range.

    ``global_id`` is normalised (None when the layer answered object ids only);
    ``root_global_id`` is the top record it belongs to, followed through ``parentglobalid``
    within the same changes (itself for a top record, the nearest known ancestor otherwise).
    """

    layer_id: int
    object_id: Optional[int]
    global_id: Optional[str]
    attributes: Mapping[str, Any]
    root_global_id: Optional[str] = None


def changed_features(result: Mapping[str, Any]) -> List[ChangedFeature]:
    """The features an ``extractChanges`` result adds or updates, each once, in layer order.

    Reads ``edits[].features.adds/updates`` (or ``edits[].objectIds.adds/updates`` when the
    service answered ids only); deletions bring no photo. Raises :class:`InvalidPayload` when
    the result is not one.
    """
    edits = result.get("edits")
    if not isinstance(edits, list):
        raise InvalidPayload("the extractChanges result has no edits list", field="edits")
    found: Dict[Tuple[int, Any], ChangedFeature] = {}
    for i, edit in enumerate(edits):
        if not isinstance(edit, dict) or not _is_id(edit.get("id")):
            raise InvalidPayload("an edit must name its layer id", field=f"edits[{i}]")
        layer = int(edit["id"])
        for feature in _edited(edit, f"edits[{i}]") + _attachment_parents(edit, f"edits[{i}]"):
            key = (layer, feature.global_id or feature.object_id)
            found.setdefault(key, ChangedFeature(layer, feature.object_id, feature.global_id,
                                                 feature.attributes))
    return _with_roots(list(found.values()))


def _attachment_parents(edit: Mapping[str, Any], where: str) -> List[ChangedFeature]:
    """The features whose attachments were added or updated (``returnAttachments``): a photo
    added to a feature not otherwise edited still brings its feature."""
    attachments = edit.get("attachments")
    if attachments is None:
        return []
    if not isinstance(attachments, dict):
        raise InvalidPayload("attachments must be an object", field=f"{where}.attachments")
    out = []
    for kind in ("adds", "updates"):
        rows = attachments.get(kind)
        if rows is None:
            continue
        if not isinstance(rows, list):
            raise InvalidPayload(f"{kind} must be a list", field=f"{where}.attachments")
        for j, row in enumerate(rows):
            parent = get_ignoring_case(row, "parentGlobalId") if isinstance(row, dict) else None
            if parent is None:
                raise InvalidPayload("an attachment must name its parentGlobalId",
                                     field=f"{where}.attachments.{kind}[{j}]")
            out.append(ChangedFeature(-1, None, normalise_global_id(
                parent, f"{where}.attachments.{kind}[{j}].parentGlobalId"),
                MappingProxyType({})))
    return out


def _edited(edit: Mapping[str, Any], where: str) -> List[ChangedFeature]:
    features = edit.get("features")
    if isinstance(features, dict):
        out = []
        for kind in ("adds", "updates"):
            rows = features.get(kind)
            rows = [] if rows is None else rows
            if not isinstance(rows, list):
                raise InvalidPayload(f"{kind} must be a list", field=f"{where}.features")
            for j, row in enumerate(rows):
                out.append(_feature(row, f"{where}.features.{kind}[{j}]"))
        return out
    ids = edit.get("objectIds")
    if isinstance(ids, dict):
        out = []
        for kind in ("adds", "updates"):
            listed = ids.get(kind)
            if not isinstance(listed, (list, type(None))):
                raise InvalidPayload(f"{kind} must be a list", field=f"{where}.objectIds")
            for oid in listed or []:
                if not _is_id(oid):
                    raise InvalidPayload("an object id must be a number",
                                         field=f"{where}.objectIds.{kind}")
                out.append(ChangedFeature(-1, int(oid), None, MappingProxyType({})))
        return out
    if "attachments" in edit:   # attachments only: their features come from them
        return []
    raise InvalidPayload("an edit holds neither features nor objectIds", field=where)


def _feature(row: Any, where: str) -> ChangedFeature:
    attributes = row.get("attributes") if isinstance(row, dict) else None
    if not isinstance(attributes, dict):
        raise InvalidPayload("a feature must carry attributes", field=where)
    oid = get_ignoring_case(attributes, "objectid")
    gid = get_ignoring_case(attributes, "globalid")
    if gid is None and not _is_id(oid):
        raise InvalidPayload("a feature names neither its GlobalID nor its object id",
                             field=where)
    return ChangedFeature(-1, int(oid) if _is_id(oid) else None,
                          None if gid is None else normalise_global_id(gid, f"{where}.globalid"),
                          MappingProxyType(dict(attributes)))


def _with_roots(features: Sequence[ChangedFeature]) -> List[ChangedFeature]:
    """Each feature with its root record, followed through ``parentglobalid`` as far as the
    changes themselves reach (a cycle stops where it closes)."""
    parent: Dict[str, Optional[str]] = {}
    for f in features:
        if f.global_id is not None:
            raw = get_ignoring_case(f.attributes, "parentglobalid")
            try:
                parent[f.global_id] = None if raw is None else normalise_global_id(raw)
            except InvalidPayload:
                parent[f.global_id] = None
    out = []
    for f in features:
        root, seen = f.global_id, set()
        while root is not None and parent.get(root) in parent and root not in seen:
            seen.add(root)
            root = parent[root]
        out.append(ChangedFeature(f.layer_id, f.object_id, f.global_id, f.attributes, root))
    return out


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# -- the signature and the challenge -------------------------------------------------------------

def esri_signature(key: Union[str, bytes], data: Union[str, bytes]) -> str:
    """``sha256=<base64 HMAC-SHA256(key, data)>``: a delivery's signature, or a challenge's
    answer."""
    secret = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    message = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    digest = hmac.new(secret, message, hashlib.sha256).digest()
    return "sha256=" + base64.b64encode(digest).decode("ascii")


def signature_matches(key: Union[str, bytes], header: Optional[str], signed: bytes) -> bool:
    """Whether ``header`` (``sha256=<base64>``, perhaps percent-encoded; or ``sha256=<hex>``,
    as one of Esri's pages describes it) signs ``signed``; constant-time."""
    if not header:
        return False
    given = header.strip()
    if "%" in given:
        given = unquote(given)
    secret = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    digest = hmac.new(secret, signed, hashlib.sha256).digest()
    value = given.encode("utf-8", "replace")
    return (hmac.compare_digest(value, b"sha256=" + base64.b64encode(digest))
            | hmac.compare_digest(value.lower(), b"sha256=" + digest.hex().encode("ascii")))


#: What a challenge's token may be: letters, digits and ``._~-``, at most 256 of them. The
#: answer signs the token with the key deliveries are signed with, so a token that could be
#: a body (JSON needs brackets and quotes, a form ``=``) would let anyone have a forged
#: delivery signed.
CRC_TOKEN = re.compile(r"[A-Za-z0-9._~-]{1,256}")


def crc_answer(key: Union[str, bytes], token: str) -> Dict[str, str]:
    """The answer to ArcGIS's challenge ``GET <hook>?crc_token=<token>``; raises
    :class:`InvalidPayload` for a token outside :data:`CRC_TOKEN`."""
    if not isinstance(token, str) or not CRC_TOKEN.fullmatch(token):
        raise InvalidPayload("crc_token must be 1 to 256 letters, digits or ._~-",
                             field="crc_token")
    return {"response_token": esri_signature(key, token)}
