"""A feature layer (or table) of an ArcGIS feature service: query, attachments and applyEdits.

``FeatureLayer(url, token=provider)`` speaks the three operations the reconciler, the
attachment lookup and the write-back need (docs/pipeline.md):

- :meth:`FeatureLayer.query` - attribute dicts (or object ids) matching a where clause and an
  optional time window on a date field, every page of them;
- :meth:`FeatureLayer.query_attachments` - each feature's attachments, falling back to the
  per-feature ``<layer>/<oid>/attachments`` listing on layers without ``queryAttachments``;
- :meth:`FeatureLayer.apply_edits` - updates and adds, matched by GlobalID, with a result
  per row.

The token travels only in the ``X-Esri-Authorization: Bearer`` header (never ``token=``), and
a provider's ``referer`` in the ``Referer`` header. An answer reporting an invalid or missing
token (498/499) invalidates the provider; when the provider then gives a different token the
request is sent once more with it, otherwise the call fails with AUTH. Every HTTP request is
reported to ``on_call`` as a :class:`~fme_ai_resilience.core.ledger.CallRecord` of service
``"arcgis"``; every failure raises :class:`~fme_ai_resilience.core.errors.ArcGISError` with its
error class (see :mod:`fme_ai_resilience.services.arcgis.rest`), free of secrets.

The layer URL is used as given, with the token attached: a URL taken from a webhook body must
pass the download policy's host check first.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import requests

from ...core.text.caseless import get_ignoring_case
from ...core.checks import count, finite
from ...core.clock import Clock, SystemClock
from ...core.errors import ArcGISError, ConfigurationError, ErrorClass, InvalidPayload
from ...core.intake.keys import normalise_global_id
from ...core.ledger import CallRecord
from ...core.text.redact import redact_url
from .rest import TOKEN_CODES, Reply, Timeout, send, split_timeout
from .credentials import TokenProvider
from ..http.sessions import session_for
from ..vision.url_guard import origin_of

__all__ = ["FeatureLayer", "AttachmentInfo", "AttachmentGroup", "EditResult", "EditResults",
           "SERVICE", "where_since", "DEFAULT_MAX_RESPONSE_BYTES"]

log = logging.getLogger("fme_ai_resilience.arcgis")

#: The service name of every call in ``ai_call_log``.
SERVICE = "arcgis"
#: The largest answer read: a page of a few thousand features with many fields.
DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
#: Longer query strings go as a POST form (URL limits of proxies and IIS sit near 2 KB).
_GET_LIMIT = 1800
#: Ids per queryAttachments request or per id-lookup query.
_ID_BATCH = 100

_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_LAYER_URL = re.compile(r"^https?://[^?#]+/\d+$")
#: What a layer without queryAttachments says when asked for it.
_UNSUPPORTED = ("queryattachments", "not supported", "not a supported", "unsupported",
                "invalid url")


@dataclass(frozen=True)
class AttachmentInfo:
    """One attachment of a feature; ``url`` is where its bytes are (token not included)."""

    id: int
    global_id: Optional[str]
    name: str
    content_type: str
    size: Optional[int]
    url: str


@dataclass(frozen=True)
class AttachmentGroup:
    """A feature's attachments: its object id, its GlobalID (None without one), the photos."""

    parent_object_id: int
    parent_global_id: Optional[str]
    attachments: Tuple[AttachmentInfo, ...]


@dataclass(frozen=True)
class EditResult:
    """The result of one added or updated row (``error_*`` set only when it failed)."""

    global_id: Optional[str]
    object_id: Optional[int]
    success: bool
    error_code: Optional[int] = None
    error_description: Optional[str] = None


@dataclass(frozen=True)
class EditResults:
    """Per-row results of one applyEdits call, in the order the rows were sent."""

    updates: Tuple[EditResult, ...] = ()
    adds: Tuple[EditResult, ...] = ()

    @property
    def failed(self) -> Tuple[EditResult, ...]:
        return tuple(r for r in self.updates + self.adds if not r.success)

    @property
    def ok(self) -> bool:
        return not self.failed


def _timestamp(field: str, epoch_ms: Any) -> str:
    seconds = finite(field, epoch_ms, minimum=0) / 1000.0
    moment = datetime.fromtimestamp(int(seconds), tz=timezone.utc)
    return moment.strftime("timestamp '%Y-%m-%d %H:%M:%S'")


def where_since(where: str = "1=1", *, date_field: Optional[str] = None,
                since_ms: Optional[float] = None, until_ms: Optional[float] = None) -> str:
    """``where`` narrowed to ``since_ms <= date_field < until_ms`` (epoch ms, UTC, whole
    seconds: both ends round down, so consecutive windows tile without a gap)."""
    if not isinstance(where, str) or not where.strip():
        raise ConfigurationError("where", where, "must be a non-empty SQL expression")
    if since_ms is None and until_ms is None:
        return where
    if not (isinstance(date_field, str) and _FIELD.fullmatch(date_field)):
        raise ConfigurationError("date_field", date_field, "a time window needs a field name")
    clauses = [] if where.strip() == "1=1" else [f"({where})"]
    if since_ms is not None:
        clauses.append(f"{date_field} >= {_timestamp('since_ms', since_ms)}")
    if until_ms is not None:
        clauses.append(f"{date_field} < {_timestamp('until_ms', until_ms)}")
    if since_ms is not None and until_ms is not None and until_ms < since_ms:
        raise ConfigurationError("until_ms", until_ms, "must not be before since_ms")
    return " AND ".join(clauses)


def _guid(value: Any) -> str:
    """A GlobalID as ArcGIS writes it: ``{8-4-4-4-12}`` in upper case."""
    try:
        return "{" + normalise_global_id(value).upper() + "}"
    except InvalidPayload:
        raise ConfigurationError("global_ids", value, "must be GUIDs") from None


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class FeatureLayer:
    """One layer or table of a feature service (``.../FeatureServer/0``).

    ``token`` hands out the token of each request (None: a public layer); ``timeout_s`` is
    ``(connect, read)`` seconds, the read part bounding both the wait for the answer and its
    body; ``on_call`` receives a :class:`CallRecord` per HTTP request.
    """

    def __init__(self, url: str, *, token: Optional[TokenProvider] = None,
                 session: Optional[requests.Session] = None, clock: Optional[Clock] = None,
                 timeout_s: Timeout = (5.0, 30.0),
                 on_call: Optional[Callable[[CallRecord], None]] = None,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> None:
        text = url.strip().rstrip("/") if isinstance(url, str) else url
        if not (isinstance(text, str) and _LAYER_URL.match(text)):
            raise ConfigurationError("url", redact_url(str(url)),
                                     "must be a layer or table URL such as "
                                     "https://host/.../FeatureServer/0, without a query string")
        self.url = text
        self._token = token
        self._clock = clock or SystemClock()
        self._session = session_for(session=session, clock=self._clock)
        self.timeout_s = split_timeout("timeout_s", timeout_s)
        self._on_call = on_call
        self.max_response_bytes = count("max_response_bytes", max_response_bytes, minimum=1)
        self._attachment_query: Optional[bool] = None   # None: not known yet
        self._info: Optional[Mapping[str, Any]] = None

    def __repr__(self) -> str:
        kind = type(self._token).__name__ if self._token is not None else None
        return f"FeatureLayer({self.url!r}, token={kind})"

    # -- query ----------------------------------------------------------------------------------
    def query(self, where: str = "1=1", *, out_fields: Sequence[str] = ("*",),
              date_field: Optional[str] = None, since_ms: Optional[float] = None,
              until_ms: Optional[float] = None, order_by: Optional[str] = None,
              page_size: Optional[int] = None, return_ids_only: bool = False) -> list:
        """Every feature's attributes (or every object id) matching ``where`` and the window.

        Pages through ``resultOffset``/``resultRecordCount`` while the layer reports
        ``exceededTransferLimit``; give ``order_by`` (``"objectid"``) for pages in a stable
        order. Raises ArcGISError.
        """
        fields = [out_fields] if isinstance(out_fields, str) else list(out_fields)
        if not fields or not all(isinstance(f, str) and (f == "*" or _FIELD.fullmatch(f))
                                 for f in fields):
            raise ConfigurationError("out_fields", out_fields, "must be field names or '*'")
        if page_size is not None:
            count("page_size", page_size, minimum=1)
        params: Dict[str, Any] = {
            "where": where_since(where, date_field=date_field, since_ms=since_ms,
                                 until_ms=until_ms),
            "outFields": ",".join(fields), "returnGeometry": "false", "f": "json",
            "orderByFields": order_by or None,
            "returnIdsOnly": "true" if return_ids_only else None,
            "resultRecordCount": page_size}
        found: list = []
        last: Optional[list] = None
        while True:
            page = dict(params, resultOffset=len(found) if found or page_size else None)
            answer = self._call("/query", page, "query")
            items = _ids(answer) if return_ids_only else _attributes(answer)
            if items and items == last:
                raise _no_paging("query")
            found.extend(items)
            if answer.get("exceededTransferLimit") is not True:
                return found
            if not items:
                raise _bad("query", "exceededTransferLimit on an empty page: the rest cannot "
                           "be reached")
            last = items

    # -- attachments ----------------------------------------------------------------------------
    def query_attachments(self, *, object_ids: Optional[Iterable[int]] = None,
                          global_ids: Optional[Iterable[str]] = None,
                          content_types: Optional[Sequence[str]] = ("image/jpeg", "image/png")
                          ) -> List[AttachmentGroup]:
        """The attachments of the features named by object id or GlobalID (or both).

        Only attachments of ``content_types`` are listed (None or empty: every type); features
        without one are left out. Raises ArcGISError, or ConfigurationError for bad ids.
        """
        oids = [count("object_ids", i) for i in (object_ids or ())]
        gids = [_guid(g) for g in (global_ids or ())]
        if not oids and not gids:
            raise ConfigurationError("object_ids", None, "give object_ids or global_ids")
        types = tuple(t.strip().lower() for t in (content_types or ()) if t.strip())
        if self._attachment_query is not False:
            try:
                groups = self._query_attachments(oids, gids, types)
                self._attachment_query = True
                return groups
            except ArcGISError as exc:
                if self._attachment_query or not _unsupported(exc):
                    raise
                log.info("%s has no queryAttachments (%s); listing each feature's "
                         "attachments instead", self.url, exc.reason)
                self._attachment_query = False
        return self._attachments_per_feature(oids, gids, types)

    def _query_attachments(self, oids: Sequence[int], gids: Sequence[str],
                           types: Tuple[str, ...]) -> List[AttachmentGroup]:
        merged: Dict[int, AttachmentGroup] = {}
        for key, ids in (("objectIds", [str(i) for i in oids]), ("globalIds", gids)):
            for start in range(0, len(ids), _ID_BATCH):
                self._attachment_pages({key: ",".join(ids[start:start + _ID_BATCH]),
                                        "returnUrl": "true",
                                        "attachmentTypes": ",".join(types) or None,
                                        "f": "json"}, types, merged)
        return list(merged.values())

    def _attachment_pages(self, params: Mapping[str, Any], types: Tuple[str, ...],
                          merged: Dict[int, AttachmentGroup]) -> None:
        """Every page of one queryAttachments request, merged by feature into ``merged``."""
        offset, seen = 0, set()
        while True:
            answer = self._call("/queryAttachments", dict(params, resultOffset=offset or None),
                                "queryAttachments")
            groups = answer.get("attachmentGroups")
            if not isinstance(groups, list):
                raise _bad("queryAttachments", "the answer has no attachmentGroups")
            listed = {(raw.get("parentObjectId"), info.get("id"))
                      for raw in groups if isinstance(raw, Mapping)
                      for info in raw.get("attachmentInfos") or () if isinstance(info, Mapping)}
            for raw in groups:
                group = self._group(raw, types)
                if group.attachments:
                    _merge(merged, group)
            if answer.get("exceededTransferLimit") is not True or not listed:
                return
            if listed <= seen:
                raise _no_paging("queryAttachments")
            seen |= listed
            offset += len(listed)

    def _attachments_per_feature(self, oids: Sequence[int], gids: Sequence[str],
                                 types: Tuple[str, ...]) -> List[AttachmentGroup]:
        groups = []
        for oid, gid in self._id_pairs(oids, gids):
            answer = self._call(f"/{oid}/attachments", {"f": "json"}, "attachment listing")
            group = self._group({"parentObjectId": oid, "parentGlobalId": gid,
                                 "attachmentInfos": answer.get("attachmentInfos")}, types)
            if group.attachments:
                groups.append(group)
        return groups

    def _id_pairs(self, oids: Sequence[int], gids: Sequence[str]
                  ) -> List[Tuple[int, Optional[str]]]:
        """``(object id, GlobalID)`` of the features named either way, from one query each
        batch (the layer's own id field names come from its description)."""
        info = self._layer_info()
        oid_field = info.get("objectIdField")
        gid_field = info.get("globalIdField") or None
        if not (isinstance(oid_field, str) and _FIELD.fullmatch(oid_field)):
            raise _bad("layer description", "no objectIdField")
        if gids and not (isinstance(gid_field, str) and _FIELD.fullmatch(gid_field)):
            raise ArcGISError(ErrorClass.BAD_REQUEST, "the layer has no GlobalID field",
                              operation="query")
        clauses = [f"{oid_field} IN ({','.join(str(i) for i in oids[s:s + _ID_BATCH])})"
                   for s in range(0, len(oids), _ID_BATCH)]
        quoted = [f"'{g}'" for g in gids]   # each checked to be a GUID: nothing to escape
        clauses += [f"{gid_field} IN ({','.join(quoted[s:s + _ID_BATCH])})"
                    for s in range(0, len(quoted), _ID_BATCH)]
        fields = (oid_field,) + ((gid_field,) if gid_field else ())
        pairs: Dict[int, Optional[str]] = {}
        for clause in clauses:
            for row in self.query(clause, out_fields=fields, order_by=oid_field):
                oid = _int(get_ignoring_case(row, oid_field))
                gid = get_ignoring_case(row, gid_field) if gid_field else None
                if oid is not None:
                    pairs[oid] = gid if isinstance(gid, str) else None
        return sorted(pairs.items())

    def _layer_info(self) -> Mapping[str, Any]:
        if self._info is None:
            self._info = self._call("", {"f": "json"}, "layer description")
        return self._info

    def _group(self, raw: Any, types: Tuple[str, ...]) -> AttachmentGroup:
        if not isinstance(raw, Mapping) or _int(raw.get("parentObjectId")) is None:
            raise _bad("queryAttachments", "an attachment group without parentObjectId")
        oid = int(raw["parentObjectId"])
        infos = raw.get("attachmentInfos")
        if not isinstance(infos, list):
            raise _bad("queryAttachments", f"feature {oid} has no attachmentInfos list")
        attachments = []
        for info in infos:
            if not isinstance(info, Mapping) or _int(info.get("id")) is None:
                raise _bad("queryAttachments", f"an attachment of feature {oid} has no id")
            ctype = str(info.get("contentType") or "").strip().lower()
            if types and ctype not in types:
                continue
            aid = int(info["id"])
            url = info.get("url")
            gid = info.get("globalId")
            attachments.append(AttachmentInfo(
                id=aid, global_id=gid if isinstance(gid, str) and gid else None,
                name=str(info.get("name") or ""), content_type=ctype,
                size=_int(info.get("size")),
                url=url if isinstance(url, str) and url.startswith(("https://", "http://"))
                else f"{self.url}/{oid}/attachments/{aid}"))
        gid = raw.get("parentGlobalId")
        return AttachmentGroup(oid, gid if isinstance(gid, str) and gid else None,
                               tuple(attachments))

    # -- applyEdits -----------------------------------------------------------------------------
    def apply_edits(self, updates: Iterable[Mapping[str, Any]] = (),
                    adds: Iterable[Mapping[str, Any]] = (), *, use_global_ids: bool = True,
                    rollback_on_failure: bool = True,
                    fence: Optional[Callable[[], None]] = None) -> EditResults:
        """Apply ``updates`` and ``adds`` (attribute mappings, or features with an
        ``attributes`` key) and return a result per row.

        A row the layer refused is a failed :class:`EditResult`, not an exception; a call
        that failed as a whole raises ArcGISError (BAD_FORMAT when the answer does not list
        one result per row sent). Updating the same attributes twice is harmless, and with
        ``use_global_ids`` an add carrying its own GlobalID is refused the second time, so a
        retried call is safe. ``fence`` runs just before each request is sent (the token
        already in hand): the processor's lease check, which raises LeaseLost instead of
        letting a holder whose lease lapsed write.
        """
        rows = {"updates": [_feature(r, "updates") for r in updates],
                "adds": [_feature(r, "adds") for r in adds]}
        if not rows["updates"] and not rows["adds"]:
            return EditResults()
        params = {key: _json(key, value) for key, value in rows.items() if value}
        params.update(useGlobalIds="true" if use_global_ids else "false",
                      rollbackOnFailure="true" if rollback_on_failure else "false", f="json")
        answer = self._call("/applyEdits", params, "applyEdits", post=True, fence=fence)
        results = {}
        for key, name in (("updates", "updateResults"), ("adds", "addResults")):
            listed = answer.get(name) if rows[key] else []
            if not isinstance(listed, list) or len(listed) != len(rows[key]):
                raise _bad("applyEdits", f"{len(rows[key])} {key} sent, {name} lists "
                           f"{len(listed) if isinstance(listed, list) else 'none'}")
            results[key] = tuple(_edit_result(r) for r in listed)
        return EditResults(updates=results["updates"], adds=results["adds"])

    # -- one request ----------------------------------------------------------------------------
    def call_url(self, url: str, params: Mapping[str, Any], label: str) -> dict:
        """The decoded answer of one request to ``url``, a resource of the layer's own server
        (scheme, host and port: an ``extractChanges`` job's status or result), with the
        layer's token. Raises ArcGISError (BAD_REQUEST for a URL on another server: the token
        goes nowhere else)."""
        origin = origin_of(url)
        if not origin or origin != origin_of(self.url):
            raise ArcGISError(ErrorClass.BAD_REQUEST, f"{redact_url(str(url))[:200]} is not on "
                              f"the server of {redact_url(self.url)}: nothing is sent there",
                              operation=label)
        parts = urlsplit(url.strip())
        merged = dict(parse_qsl(parts.query, keep_blank_values=True))   # its own query kept
        merged.update(params)
        return self._call_url(urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")),
                              merged, label)

    def _call(self, path: str, params: Mapping[str, Any], label: str, *,
              post: bool = False, fence: Optional[Callable[[], None]] = None) -> dict:
        return self._call_url(self.url + path, params, label, post=post, fence=fence)

    def _call_url(self, url: str, params: Mapping[str, Any], label: str, *,
                  post: bool = False, fence: Optional[Callable[[], None]] = None) -> dict:
        """The decoded answer of one request, sent again once with a renewed token when the
        first was refused for its token (498/499)."""
        method = "POST" if post or len(urlencode(
            {k: v for k, v in params.items() if v is not None})) > _GET_LIMIT else "GET"
        provider = self._token
        token = provider.token(now=self._clock.now()) if provider is not None else None
        reply = self._send(method, url, params, label, token, fence)
        if reply.error is None or provider is None or not _token_refused(reply.error):
            return reply.result()
        provider.invalidate()
        fresh = provider.token(now=self._clock.now())
        if fresh == token:   # nothing to renew (a static token): asking again cannot help
            return reply.result()
        log.info("ArcGIS %s: the token was refused; sending once more with a new one", label)
        reply = self._send(method, url, params, label, fresh, fence)
        if reply.error is not None and _token_refused(reply.error):
            provider.invalidate()
        return reply.result()

    def _send(self, method: str, url: str, params: Mapping[str, Any], label: str,
              token: Optional[str], fence: Optional[Callable[[], None]] = None) -> Reply:
        headers = {}
        secrets: Tuple[str, ...] = ()
        if token is not None and self._token is not None:
            headers["X-Esri-Authorization"] = f"Bearer {token}"
            referer = getattr(self._token, "referer", None)
            if isinstance(referer, str) and referer:
                headers["Referer"] = referer
            secrets = (token,) + tuple(self._token.secrets)
        if fence is not None:
            fence()   # last: nothing between this check and the request leaving but its send
        started_at = self._clock.now()
        reply = send(method, url, params, operation=label, now=started_at, headers=headers,
                     secrets=secrets, timeout_s=self.timeout_s,
                     max_bytes=self.max_response_bytes, session=self._session,
                     clock=self._clock)
        if self._on_call is not None:
            error_class = reply.error.error_class.value if reply.error else None
            record = CallRecord(service=SERVICE, started_at=started_at,
                                duration_s=reply.duration_s, error_class=error_class,
                                status_code=reply.status_code, phases=reply.phases)
            try:
                self._on_call(record)
            except Exception as exc:  # a failing log hook must not fail the call it logs
                log.warning("on_call failed for an ArcGIS %s: %s", label, type(exc).__name__)
        return reply




def _token_refused(error: ArcGISError) -> bool:
    return error.error_class is ErrorClass.AUTH and (
        error.code in TOKEN_CODES or error.status_code in TOKEN_CODES)


def _unsupported(error: ArcGISError) -> bool:
    """Whether a queryAttachments failure says the layer does not have the operation."""
    if error.error_class not in (ErrorClass.BAD_REQUEST, ErrorClass.NOT_FOUND):
        return False
    reason = error.reason.lower()
    return any(hint in reason for hint in _UNSUPPORTED)


def _bad(operation: str, reason: str) -> ArcGISError:
    return ArcGISError(ErrorClass.BAD_FORMAT, reason, operation=operation)


def _no_paging(operation: str) -> ArcGISError:
    """The layer answered the next page with the same rows: it ignores resultOffset."""
    return ArcGISError(ErrorClass.BAD_REQUEST, "the layer does not page (resultOffset is "
                       "ignored): ask for fewer rows, a narrower window or fewer ids",
                       operation=operation)


def _attributes(answer: Mapping[str, Any]) -> List[dict]:
    features = answer.get("features")
    if not isinstance(features, list):
        raise _bad("query", "the answer has no features list")
    rows = [f.get("attributes") if isinstance(f, Mapping) else None for f in features]
    if not all(isinstance(r, dict) for r in rows):
        raise _bad("query", "a feature without attributes")
    return rows


def _ids(answer: Mapping[str, Any]) -> List[int]:
    ids = answer.get("objectIds")
    if ids is None:   # an empty layer answers "objectIds": null
        return []
    if not isinstance(ids, list) or not all(_int(i) is not None for i in ids):
        raise _bad("query", "objectIds is not a list of integers")
    return ids


def _merge(merged: Dict[int, AttachmentGroup], group: AttachmentGroup) -> None:
    known = merged.get(group.parent_object_id)
    if known is None:
        merged[group.parent_object_id] = group
        return
    seen = {a.id for a in known.attachments}
    extra = tuple(a for a in group.attachments if a.id not in seen)
    merged[group.parent_object_id] = AttachmentGroup(
        known.parent_object_id, known.parent_global_id or group.parent_global_id,
        known.attachments + extra)


def _feature(row: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(row, Mapping):
        raise ConfigurationError(field, type(row).__name__, "each row must be a mapping")
    return row if isinstance(row.get("attributes"), Mapping) else {"attributes": dict(row)}


def _json(field: str, value: Any) -> str:
    try:
        return json.dumps(value, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(field, type(value).__name__,
                                 f"must be JSON-ready ({type(exc).__name__})") from None


def _edit_result(raw: Any) -> EditResult:
    if not isinstance(raw, Mapping):
        raise _bad("applyEdits", "a row result that is not an object")
    error = raw.get("error") if isinstance(raw.get("error"), Mapping) else {}
    gid = raw.get("globalId")
    description = error.get("description") or error.get("message")
    return EditResult(global_id=gid if isinstance(gid, str) and gid else None,
                      object_id=_int(raw.get("objectId")), success=raw.get("success") is True,
                      error_code=_int(error.get("code")),
                      error_description=str(description) if description else None)
