"""An ArcGIS feature service on loopback: one layer holding what field crews submitted.

Paths under ``/arcgis/rest/services/<service_name>/FeatureServer`` (shapes in
docs/pipeline.md); every answer is JSON, and every error is ArcGIS's: HTTP 200
with ``{"error": {"code", "message", "details"}}`` (498 for a missing or wrong token when
``token`` is set, 400 for a parameter it cannot read, 404 for an unknown feature or
attachment):

- ``?f=json`` and ``/0?f=json``: the service and layer descriptions;
- ``/0/query`` (GET or POST form): ``where`` (see ``where``), ``objectIds``, ``outFields``
  (default: the object id only, as ArcGIS), ``returnGeometry`` (default true),
  ``orderByFields``, ``resultOffset``, ``resultRecordCount`` (capped at
  ``max_record_count``), ``returnIdsOnly``, ``returnCountOnly``; a page that leaves features
  behind says ``"exceededTransferLimit": true`` (the key is absent otherwise);
- ``/0/queryAttachments``: ``objectIds``, ``globalIds`` (of the parent features) or
  ``definitionExpression`` (at least one; together, they intersect), ``attachmentTypes``,
  ``keywords``, ``returnUrl``; answers ``attachmentGroups``;
- ``/0/<objectId>/attachments`` (the infos) and ``/0/<objectId>/attachments/<id>`` (the
  bytes, ``image/jpeg``);
- ``/0/applyEdits`` (POST): ``updates`` only (a non-empty ``adds`` or ``deletes`` is refused),
  matched by GlobalID with ``useGlobalIds=true``, else by object id. A row for an unknown
  feature fails with code 1019, a row naming a field the layer does not have with code 1000.
  With ``rollbackOnFailure`` (the default, true) one failed row means no row is written and
  every other row answers ``success: false`` with code 1003, "Operation rolled back.";
  without it the good rows are written.

:meth:`hide_until` keeps a feature out of every query and attachment list until a moment of
schedule time (a crew's submission reaches the layer when the phone sends it, not before).
``edit_refusals`` are ``(start_s, end_s)`` windows of schedule time (seconds since
``start()``, over ``time_scale``) in which the service refuses every ``applyEdits`` (layer
0 and table 1) with ArcGIS's error 503 in HTTP 200, as a hosted service does while it is
overwritten, in maintenance or overloaded; queries and photos are served meanwhile. Each
refusal is counted (``refused_edits``).

The token is read from ``X-Esri-Authorization: Bearer <token>`` only; a ``token=`` query
parameter does not count and is counted apart (``token_in_query``). GlobalIDs are made upper
case in braces, as Survey123 sends them; the editor-tracking fields (``CreationDate``,
``EditDate``, epoch milliseconds UTC, ``Creator``, ``Editor``) are set by the layer.

Change tracking (``changes``, a :class:`~.layer_changes.LayerChanges`): every feature added and
every ``applyEdits`` on layer 0 takes a server generation, and ``/extractChanges`` (with its
``/jobs/<id>`` and ``/replicafiles/<id>.json``) answers them as ArcGIS does; the first
``changes_failures`` jobs fail, and an async job is pending for ``changes_polls_pending`` polls.
"""
from __future__ import annotations

import json
import random
import re
import uuid
from collections import Counter
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ...core.checks import count, name
from ...core.clock import Clock, SystemClock
from ...core.errors import ConfigurationError
from .photos import fake_jpeg
from .records import CREATOR, GLOBAL_ID_FIELD, OBJECT_ID_FIELD, AttachmentRecord, FeatureRecord
from .layer_changes import EXTRACT_CHANGES_CAPABILITIES, LayerChanges
from .layer_edits import (TRACKING, attachment_info as _info, bad as _bad, error as _error,
                          esri_type as _esri_type, flag as _flag, resolve_update,
                          whole as _whole)
from .related_table import RelatedTable
from .server import Reply, Request, StandInServer
from .where import WhereError, braced_global_id, parse_where

__all__ = ["FeatureLayerStandIn"]

_ASSET_TYPES = ("hydrant", "valve", "pole", "manhole")
_CREWS = ("north-1", "north-2", "south-1", "east-3")
_ATTACHMENT_PATH = re.compile(r"^/(\d+)/(\d+)/attachments(?:/(\d+))?/?$")
_SR = {"wkid": 4326, "latestWkid": 4326}


class FeatureLayerStandIn(StandInServer):
    """A feature service with layer 0 (``service_name``) holding features and their photos.

    ``fields`` are extra attribute fields beyond the crew's (what a write-back may update);
    ``clock`` gives ``CreationDate`` / ``EditDate`` when none is given. Counters: see
    :meth:`snapshot`.
    """

    kind = "feature-layer"

    def __init__(self, *, seed: int = 0, token: Optional[str] = None,
                 max_record_count: int = 1000, service_name: str = "inspection",
                 fields: Sequence[str] = (), port: int = 0,
                 clock: Optional[Clock] = None, time_scale: float = 1.0,
                 edit_refusals: Sequence[Tuple[float, float]] = (),
                 changes_failures: int = 0, changes_polls_pending: int = 2) -> None:
        super().__init__(port=port, time_scale=time_scale)
        self.edit_refusals = tuple((float(a), float(b)) for a, b in edit_refusals)
        if any(not (0 <= a < b) for a, b in self.edit_refusals):
            raise ConfigurationError("edit_refusals", edit_refusals,
                                     "must be (start_s, end_s) windows with 0 <= start < end")
        self.seed = seed
        self.token = token
        self.max_record_count = count("max_record_count", max_record_count, minimum=1)
        self.service_name = name("service_name", service_name)
        if not re.fullmatch(r"[A-Za-z0-9_\-]+", service_name):
            raise ConfigurationError("service_name", service_name,
                                     "must be letters, digits, '_' or '-'")
        self.clock = clock or SystemClock()
        self._rng = random.Random(f"layer:{seed}")
        self._types: Dict[str, str] = {OBJECT_ID_FIELD: "esriFieldTypeOID",
                                       GLOBAL_ID_FIELD: "esriFieldTypeGlobalID", **TRACKING}
        for extra in fields:
            self._field(name("fields", extra), None)
        self._extra = tuple(fields)
        self._rows: Dict[int, Dict[str, Any]] = {}        # object id -> attributes
        self._geometry: Dict[int, Dict[str, Any]] = {}
        self._attachments: Dict[int, List[AttachmentRecord]] = {}
        self._next_oid = 1
        self._next_aid = 1
        self._gone: List[AttachmentRecord] = []
        self._hidden: Dict[int, float] = {}                # object id -> visible from (s)
        self.changes = LayerChanges(
            rows=self._rows, geometry=self._geometry, types=self._types, lock=self.lock,
            schedule_time=self.schedule_time, base_url=lambda: self.service_url,
            clock=self.clock, seed=seed, failures=changes_failures,
            polls_pending=changes_polls_pending)
        self._clear()

    # --- urls ------------------------------------------------------------------------------

    @property
    def service_url(self) -> str:
        """``<url>/arcgis/rest/services/<service_name>/FeatureServer``."""
        return f"{self.url}/arcgis/rest/services/{self.service_name}/FeatureServer"

    @property
    def layer_url(self) -> str:
        return f"{self.service_url}/0"

    # --- the ground truth ------------------------------------------------------------------

    def _field(self, field_name: str, value: Any) -> str:
        """The canonical spelling of ``field_name``, added to the layer when new."""
        for known in self._types:
            if known.lower() == field_name.lower():
                return known
        self._types[field_name] = _esri_type(value)
        return field_name

    def _global_id(self) -> str:
        return "{" + str(uuid.UUID(int=self._rng.getrandbits(128), version=4)).upper() + "}"

    def add_feature(self, attributes: Optional[Mapping[str, Any]] = None,
                    photos: Union[int, Sequence[bytes]] = 1, created_at_ms: Optional[int] = None,
                    global_id: Optional[str] = None, *, question: str = "photo") -> FeatureRecord:
        """Create a feature with its photos (a count, generated, or the bytes of each).

        ``attributes`` default to a seeded asset (``asset_id``, ``asset_type``, ``crew``);
        ``global_id`` (any GUID spelling) defaults to a seeded one; ``question`` is the image
        question the photos answer (their ``keywords``). Needs the port, so start first when
        ``port=0``.
        """
        base_url = self.layer_url
        with self.lock:
            oid = self._next_oid
            self._next_oid += 1
            gid = braced_global_id(global_id) if global_id is not None else self._global_id()
            if attributes is None:
                attributes = {"asset_id": f"A-{oid:05d}",
                              "asset_type": self._rng.choice(_ASSET_TYPES),
                              "crew": self._rng.choice(_CREWS)}
            if isinstance(photos, int) and not isinstance(photos, bool):
                count("photos", photos)
                data = [fake_jpeg(f"{self.service_name}/{gid}/{i}", seed=self.seed)
                        for i in range(photos)]
            else:
                data = [bytes(p) for p in photos]
            created = (int(self.clock.now() * 1000) if created_at_ms is None
                       else count("created_at_ms", created_at_ms))
            client = {self._field(k, v): v for k, v in attributes.items()
                      if k.lower() not in (OBJECT_ID_FIELD, GLOBAL_ID_FIELD)}
            row = {OBJECT_ID_FIELD: oid, GLOBAL_ID_FIELD: gid, **client,
                   "CreationDate": created, "Creator": CREATOR, "EditDate": created,
                   "Editor": CREATOR}
            geometry = {"x": round(116.2 + self._rng.random() * 0.3, 6),
                        "y": round(39.8 + self._rng.random() * 0.2, 6),
                        "spatialReference": {"wkid": 4326}}
            records = []
            for i, blob in enumerate(data):
                aid = self._next_aid
                self._next_aid += 1
                records.append(AttachmentRecord(
                    id=aid, global_id=self._global_id(), parent_global_id=gid,
                    parent_object_id=oid, name=f"{question}-{oid}-{i + 1}.jpg",
                    content_type="image/jpeg", keywords=question,
                    url=f"{base_url}/{oid}/attachments/{aid}", data=blob))
            self._rows[oid] = row
            self._geometry[oid] = geometry
            self._attachments[oid] = records
            self.changes.added(oid, photos=len(records))
        return FeatureRecord(oid, gid, {OBJECT_ID_FIELD: oid, GLOBAL_ID_FIELD: gid, **client},
                             created, dict(geometry), tuple(records), self.service_url, 0,
                             self.service_name)

    def recreate(self, feature: FeatureRecord, *,
                 created_at_ms: Optional[int] = None) -> FeatureRecord:
        """A new feature with new GlobalIDs and the same attributes and photo bytes
        (Survey123 re-creating a submission)."""
        attributes = {k: v for k, v in feature.attributes.items()
                      if k.lower() not in (OBJECT_ID_FIELD, GLOBAL_ID_FIELD)}
        question = feature.attachments[0].keywords if feature.attachments else "photo"
        return self.add_feature(attributes, [a.data for a in feature.attachments],
                                created_at_ms=created_at_ms, question=question)

    def attributes_of(self, global_id: str) -> Dict[str, Any]:
        """The feature's attributes now (edits included); raises ConfigurationError if unknown."""
        gid = braced_global_id(global_id)
        with self.lock:
            for row in self._rows.values():
                if row[GLOBAL_ID_FIELD] == gid:
                    return dict(row)
        raise ConfigurationError("global_id", global_id, "is not a feature of the layer")

    def lose_photo(self, attachment_id: int) -> None:
        """The photo is gone from the layer: no longer listed, its bytes answer 404."""
        with self.lock:
            for oid, records in self._attachments.items():
                kept = [a for a in records if a.id != attachment_id]
                if len(kept) < len(records):
                    self._gone.extend(a for a in records if a.id == attachment_id)
                    self._attachments[oid] = kept
                    return
        raise ConfigurationError("attachment_id", attachment_id, "is not a photo of the layer")

    def photos(self) -> Dict[str, List[Tuple[str, str, bool]]]:
        """Every photo the layer was given, by feature GlobalID: ``(attachment GlobalID,
        SHA-256, gone)``, gone ones included (the world's ground truth)."""
        with self.lock:
            out: Dict[str, List[Tuple[str, str, bool]]] = {
                row[GLOBAL_ID_FIELD]: [] for row in self._rows.values()}
            for oid, records in self._attachments.items():
                out[self._rows[oid][GLOBAL_ID_FIELD]].extend(
                    (a.global_id, a.sha256, False) for a in records)
            for a in self._gone:
                out[a.parent_global_id].append((a.global_id, a.sha256, True))
            return out

    # --- counters --------------------------------------------------------------------------

    def _clear(self) -> None:
        self._queries = 0
        self._query_attachments = 0
        self._apply_edits = 0
        self._writes: Counter = Counter()
        self._last_written: Dict[str, Dict[str, Any]] = {}
        self._history: Dict[str, List[Tuple[float, Dict[str, Any]]]] = {}
        self._table = RelatedTable(seed=self.seed, fields=self._extra,
                                   monotonic=self.clock.monotonic)
        self._failed_rows = 0
        self._downloads: Counter = Counter()
        self._unauthorized = 0
        self._token_in_query = 0
        self._refused_edits = 0
        self.changes.clear_counters()

    def snapshot(self) -> Dict[str, Any]:
        """``queries``, ``query_attachments`` and ``apply_edits`` (calls); ``writes`` (rows
        written per feature GlobalID, ``{UPPER}``); ``last_written`` (the attributes each
        feature's last written row carried); ``history`` (per feature GlobalID, every row written
        as ``(monotonic seconds, the values it set)``, in order); ``rows_added`` (related-table
        rows, per ``(parent GlobalID, photo GlobalID)``); ``table_rows`` (the related table's rows:
        see :meth:`RelatedTable.snapshot`); ``failed_rows``; ``attachment_downloads`` (per
        attachment id); ``unauthorized`` (calls refused for the token); ``token_in_query``;
        ``refused_edits`` (``applyEdits`` refused in an ``edit_refusals`` window); and the
        change tracking's (:meth:`LayerChanges.snapshot`)."""
        with self.lock:
            table = self._table.snapshot()
            return {"queries": self._queries, "query_attachments": self._query_attachments,
                    "apply_edits": self._apply_edits, "writes": dict(self._writes),
                    "last_written": {k: dict(v) for k, v in self._last_written.items()},
                    "history": {k: [(t, dict(v)) for t, v in rows]
                                for k, rows in self._history.items()},
                    **{"rows_added": table["rows_added"], "table_rows": table["rows"]},
                    "failed_rows": self._failed_rows,
                    "attachment_downloads": dict(self._downloads),
                    "unauthorized": self._unauthorized, "token_in_query": self._token_in_query,
                    "refused_edits": self._refused_edits, **self.changes.snapshot()}

    def reset(self) -> None:
        """Counters to zero (features, photos and edits stay)."""
        with self.lock:
            self._clear()
            self.restart_schedule()

    # --- answering -------------------------------------------------------------------------

    def handle(self, request: Request) -> Reply:
        prefix = f"/arcgis/rest/services/{self.service_name}/FeatureServer"
        path = request.path.rstrip("/")
        if not (path == prefix or path.startswith(prefix + "/")):
            return Reply.json(404, {"error": {"code": 404, "message": "Not Found"}})
        if "token" in request.query:
            with self.lock:
                self._token_in_query += 1
        if self.token is not None and (request.header("x-esri-authorization")
                                       != f"Bearer {self.token}"):
            with self.lock:
                self._unauthorized += 1
            return _error(498, "Invalid token.")
        rest = path[len(prefix):]
        params = request.params
        if rest in ("/0/applyEdits", "/1/applyEdits") and self._refusing():
            return _error(503, "Unable to complete operation.",
                          "The service is not available for editing. Try again later.")
        try:
            if rest == "":
                return Reply.json(200, self._service_info())
            if rest == "/0":
                return Reply.json(200, self._layer_info())
            if rest == "/0/query":
                return self._query(params)
            if rest == "/0/queryAttachments":
                return self._query_attachments_reply(params)
            if rest == "/0/applyEdits":
                if request.method != "POST":
                    return _bad("applyEdits needs POST")
                return self._apply(params)
            if rest in ("/1/query", "/1/applyEdits"):
                return self._related(rest, request.method, params)
            changes = self.changes.handle(rest, params)
            if changes is not None:
                return changes
            match = _ATTACHMENT_PATH.match(rest)
            if match and match.group(1) == "0":
                return self._attachment(int(match.group(2)), match.group(3))
        except WhereError as exc:
            return _bad(str(exc))
        return _error(400, "Invalid URL", f"{rest} is not a resource of this service")

    def _refusing(self) -> bool:
        """Whether now falls in an ``edit_refusals`` window (and count the refusal)."""
        at_s = self.schedule_time()
        if not any(a <= at_s < b for a, b in self.edit_refusals):
            return False
        with self.lock:
            self._refused_edits += 1
        return True

    def _field_info(self, field_name: str) -> Dict[str, Any]:
        info: Dict[str, Any] = {"name": field_name, "type": self._types[field_name],
                                "alias": field_name}
        if self._types[field_name] == "esriFieldTypeString":
            info["length"] = 256
        return info

    def _service_info(self) -> Dict[str, Any]:
        return {"currentVersion": 11.3, "serviceDescription": "fme-ai-resilience stand-in",
                "maxRecordCount": self.max_record_count,
                "supportsApplyEditsWithGlobalIds": True,
                "capabilities": "Query,Editing,Update,ChangeTracking",
                "extractChangesCapabilities": dict(EXTRACT_CHANGES_CAPABILITIES),
                "layers": [{"id": 0, "name": self.service_name,
                            "geometryType": "esriGeometryPoint"}],
                "tables": [{"id": 1, "name": "assessments"}]}

    def _layer_info(self) -> Dict[str, Any]:
        with self.lock:
            fields = [self._field_info(f) for f in self._types]
        return {"currentVersion": 11.3, "id": 0, "name": self.service_name,
                "type": "Feature Layer", "geometryType": "esriGeometryPoint",
                "objectIdField": OBJECT_ID_FIELD, "globalIdField": GLOBAL_ID_FIELD,
                "hasAttachments": True, "supportsApplyEditsWithGlobalIds": True,
                "maxRecordCount": self.max_record_count,
                "advancedQueryCapabilities": {"supportsPagination": True,
                                              "supportsQueryAttachments": True,
                                              "supportsOrderBy": True},
                "editFieldsInfo": {"creationDateField": "CreationDate",
                                   "creatorField": "Creator", "editDateField": "EditDate",
                                   "editorField": "Editor"},
                "fields": fields}

    def hide_until(self, global_id: str, at_s: float) -> None:
        """Keep the feature out of queries and attachment lists until ``at_s`` schedule
        seconds (when its crew's phone sends it)."""
        gid = braced_global_id(global_id)
        with self.lock:
            for oid, row in self._rows.items():
                if row[GLOBAL_ID_FIELD] == gid:
                    self._hidden[oid] = float(at_s)
                    self.changes.hide(oid, at_s)

    def _matching(self, where: Optional[str], object_ids: Optional[str] = None,
                  global_ids: Optional[str] = None) -> List[int]:
        """Object ids (ascending) of the features the filters given select, among those
        already submitted; caller locks."""
        lower = {f.lower(): f for f in self._types}
        predicate = parse_where(where, lower, guid_fields=(GLOBAL_ID_FIELD,),
                                date_fields=("CreationDate", "EditDate"))
        now = self.schedule_time()
        chosen = sorted(oid for oid, row in self._rows.items()
                        if self._hidden.get(oid, 0.0) <= now and predicate(row))
        if object_ids:
            try:
                wanted = {int(v) for v in object_ids.split(",") if v.strip()}
            except ValueError:
                raise WhereError("'objectIds' parameter is invalid") from None
            chosen = [oid for oid in chosen if oid in wanted]
        if global_ids:
            gids = {braced_global_id(v.strip()) for v in global_ids.split(",") if v.strip()}
            chosen = [oid for oid in chosen if self._rows[oid][GLOBAL_ID_FIELD] in gids]
        return chosen

    def _query(self, params: Mapping[str, str]) -> Reply:
        with self.lock:
            self._queries += 1
            chosen = self._matching(params.get("where"), params.get("objectIds"))
            if _flag(params, "returnCountOnly", False):
                return Reply.json(200, {"count": len(chosen)})
            if _flag(params, "returnIdsOnly", False):
                return Reply.json(200, {"objectIdFieldName": OBJECT_ID_FIELD,
                                        "objectIds": chosen})
            out_fields = self._out_fields(params.get("outFields"))
            rows = [self._rows[oid] for oid in chosen]
            for key, descending in reversed(self._order_by(params.get("orderByFields"))):
                rows.sort(key=lambda r: (r.get(key) is not None, r.get(key)),
                          reverse=descending)
            offset = _whole(params, "resultOffset") or 0
            size = min(_whole(params, "resultRecordCount") or self.max_record_count,
                       self.max_record_count)
            page = rows[offset:offset + size]
            geometry = _flag(params, "returnGeometry", True)
            features = []
            for row in page:
                feature: Dict[str, Any] = {"attributes": {f: row.get(f) for f in out_fields}}
                if geometry:
                    feature["geometry"] = dict(self._geometry[row[OBJECT_ID_FIELD]])
                features.append(feature)
            answer: Dict[str, Any] = {
                "objectIdFieldName": OBJECT_ID_FIELD,
                "uniqueIdField": {"name": OBJECT_ID_FIELD, "isSystemMaintained": True},
                "globalIdFieldName": GLOBAL_ID_FIELD, "geometryType": "esriGeometryPoint",
                "spatialReference": dict(_SR), "fields": [self._field_info(f) for f in out_fields],
                "features": features}
        if offset + len(page) < len(rows):
            answer["exceededTransferLimit"] = True
        return Reply.json(200, answer)

    def _out_fields(self, text: Optional[str]) -> List[str]:
        names = [n.strip() for n in (text or OBJECT_ID_FIELD).split(",") if n.strip()]
        if "*" in names:
            return list(self._types)
        lower = {f.lower(): f for f in self._types}
        out = []
        for n in names:
            if n.lower() not in lower:
                raise WhereError(f"Invalid field: {n}")
            out.append(lower[n.lower()])
        return out

    def _order_by(self, text: Optional[str]) -> List[Tuple[str, bool]]:
        lower = {f.lower(): f for f in self._types}
        out = []
        for part in (text or "").split(","):
            words = part.split()
            if not words:
                continue
            if words[0].lower() not in lower or len(words) > 2 or (
                    len(words) == 2 and words[1].lower() not in ("asc", "desc")):
                raise WhereError(f"'orderByFields' parameter is invalid: {part.strip()!r}")
            out.append((lower[words[0].lower()], len(words) == 2 and words[1].lower() == "desc"))
        return out

    def _query_attachments_reply(self, params: Mapping[str, str]) -> Reply:
        object_ids, global_ids = params.get("objectIds"), params.get("globalIds")
        expression = params.get("definitionExpression")
        with self.lock:
            self._query_attachments += 1
            if not (object_ids or global_ids or expression):
                return _bad("'objectIds' or 'globalIds' or 'definitionExpression' parameter "
                            "is required")
            chosen = self._matching(expression, object_ids, global_ids)
            types = {t.strip().lower() for t in (params.get("attachmentTypes") or "").split(",")
                     if t.strip()}
            keywords = {k.strip().lower() for k in (params.get("keywords") or "").split(",")
                        if k.strip()}
            with_url = _flag(params, "returnUrl", False)
            groups = []
            for oid in chosen:
                infos = [_info(a, with_url) for a in self._attachments.get(oid, ())
                         if (not types or a.content_type in types)
                         and (not keywords or a.keywords.lower() in keywords)]
                if infos:
                    groups.append({"parentObjectId": oid,
                                   "parentGlobalId": self._rows[oid][GLOBAL_ID_FIELD],
                                   "attachmentInfos": infos})
        return Reply.json(200, {"attachmentGroups": groups})

    def _attachment(self, oid: int, aid: Optional[str]) -> Reply:
        with self.lock:
            attachments = self._attachments.get(oid)
            if attachments is None:
                return _error(404, "Feature not found.", f"no feature with object id {oid}")
            if aid is None:
                return Reply.json(200, {"attachmentInfos": [_info(a, False)
                                                            for a in attachments]})
            found = next((a for a in attachments if a.id == int(aid)), None)
            if found is None:
                return _error(404, "Attachment not found.", f"no attachment {aid} on {oid}")
            self._downloads[found.id] += 1
        return Reply(200, found.data, found.content_type)

    def _apply(self, params: Mapping[str, str]) -> Reply:
        with self.lock:
            self._apply_edits += 1
        try:
            updates = json.loads(params.get("updates") or "[]")
            others = [json.loads(params.get(k) or "[]") for k in ("adds", "deletes")]
        except ValueError:
            return _bad("'updates' parameter is invalid")
        if not isinstance(updates, list) or not all(isinstance(u, dict) for u in updates):
            return _bad("'updates' parameter is invalid")
        if any(others):
            return _bad("the stand-in applies updates only (adds and deletes are not supported)")
        by_gid = _flag(params, "useGlobalIds", False)
        rollback = _flag(params, "rollbackOnFailure", True)
        with self.lock:
            results, writes = [], []
            for update in updates:
                result, write = resolve_update(update.get("attributes"), by_gid, rows=self._rows,
                                                types=self._types)
                results.append(result)
                if write is not None:
                    writes.append(write)
            failed = len(writes) < len(results)
            self._failed_rows += len(results) - len(writes)
            if failed and rollback:
                for result in results:
                    if result["success"]:
                        result["success"] = False
                        result["error"] = {"code": 1003, "description": "Operation rolled back."}
                writes = []
            now_ms = int(self.clock.now() * 1000)
            for oid, values, sent in writes:
                row = self._rows[oid]
                row.update(values)
                row["EditDate"], row["Editor"] = now_ms, CREATOR
                self._writes[row[GLOBAL_ID_FIELD]] += 1
                self._history.setdefault(row[GLOBAL_ID_FIELD], []).append(
                    (self.clock.monotonic(), dict(values)))
                self._last_written[row[GLOBAL_ID_FIELD]] = dict(sent)
            self.changes.updated([oid for oid, _, _ in writes])
        return Reply.json(200, {"addResults": [], "updateResults": results,
                                "deleteResults": []})

    def _related(self, rest: str, method: str, params: Mapping[str, str]) -> Reply:
        """Table 1, the related table of assessments (:mod:`.related_table`)."""
        if rest == "/1/applyEdits" and method != "POST":
            return _bad("applyEdits needs POST")
        with self.lock:
            table = self._table
            return table.query(params) if rest == "/1/query" else table.apply(params)
