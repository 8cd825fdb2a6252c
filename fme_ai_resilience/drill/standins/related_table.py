"""Table 1 of the feature layer stand-in: a related table of assessments, one row per photo.

A Survey123 form with a photo repeat gives a feature several photos; a deployment then writes
one row per photo into a related table (the write-back's ``writeback.table_url``). The table
answers ``/1/query`` (``where``, ``outFields``, ``resultOffset``, ``resultRecordCount``,
``returnCountOnly``) and ``/1/applyEdits`` (POST): ``adds`` (a row's ``globalid`` kept when
``useGlobalIds=true`` names one, refused with code 1000 when a row already holds it, as the
table's unique GlobalID index would; else the table makes one) and ``updates`` (by object id,
or by GlobalID with ``useGlobalIds``; an unknown row fails with code 1019); ``rollbackOnFailure``
as on layer 0. Every row's writes are kept in order (:meth:`RelatedTable.snapshot`), so rows
added twice for one photo and assessments overwritten are visible to the judge.
"""
from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ...core.text.caseless import get_ignoring_case
from .layer_edits import bad as _bad, flag as _flag, whole as _whole
from .records import GLOBAL_ID_FIELD, OBJECT_ID_FIELD
from .server import Reply
from .where import WhereError, braced_global_id, parse_where

__all__ = ["RelatedTable", "PARENT_FIELD", "PHOTO_FIELD"]

#: The fields that tie a row to its feature and photo (the write-back's defaults).
PARENT_FIELD = "parentglobalid"
PHOTO_FIELD = "ai_photo_globalid"
_GUIDS = (GLOBAL_ID_FIELD, PARENT_FIELD, PHOTO_FIELD)


def _guid(value: Any) -> Optional[str]:
    try:
        return braced_global_id(value) if isinstance(value, str) else None
    except WhereError:
        return None


class RelatedTable:
    """The rows of table 1; the layer holds its lock around every call (``clock`` gives the
    monotonic time of each write, ``fields`` the assessment fields beside the keys)."""

    def __init__(self, *, seed: int, fields: Tuple[str, ...],
                 monotonic: Callable[[], float]) -> None:
        self._rng = random.Random(f"table:{seed}")
        self._monotonic = monotonic
        self._types: Dict[str, str] = {OBJECT_ID_FIELD: "esriFieldTypeOID",
                                       GLOBAL_ID_FIELD: "esriFieldTypeGlobalID",
                                       PARENT_FIELD: "esriFieldTypeGUID",
                                       PHOTO_FIELD: "esriFieldTypeGUID"}
        for extra in fields:
            self._types.setdefault(extra, "esriFieldTypeString")
        self._rows: Dict[int, Dict[str, Any]] = {}
        self._history: Dict[int, List[Tuple[float, Dict[str, Any]]]] = {}
        self._next_oid = 1
        self.apply_edits = 0
        self.queries = 0

    def _field(self, key: str) -> Optional[str]:
        lower = {f.lower(): f for f in self._types}
        return lower.get(key.lower())

    def query(self, params: Mapping[str, str]) -> Reply:
        """``/1/query``: the rows ``where`` selects, by object id, paged."""
        self.queries += 1
        lower = {f.lower(): f for f in self._types}
        predicate = parse_where(params.get("where"), lower, guid_fields=_GUIDS)
        chosen = [self._rows[oid] for oid in sorted(self._rows) if predicate(self._rows[oid])]
        if _flag(params, "returnCountOnly", False):
            return Reply.json(200, {"count": len(chosen)})
        names = [n.strip() for n in (params.get("outFields") or OBJECT_ID_FIELD).split(",")
                 if n.strip()]
        out = list(self._types) if "*" in names else [self._field(n) or n for n in names]
        unknown = [n for n in out if n not in self._types]
        if unknown:
            raise WhereError(f"Invalid field: {unknown[0]}")
        offset = _whole(params, "resultOffset") or 0
        size = _whole(params, "resultRecordCount") or 1000
        page = chosen[offset:offset + size]
        answer: Dict[str, Any] = {"objectIdFieldName": OBJECT_ID_FIELD,
                                  "globalIdFieldName": GLOBAL_ID_FIELD,
                                  "features": [{"attributes": {f: r.get(f) for f in out}}
                                               for r in page]}
        if offset + len(page) < len(chosen):
            answer["exceededTransferLimit"] = True
        return Reply.json(200, answer)

    def apply(self, params: Mapping[str, str]) -> Reply:
        """``/1/applyEdits``: adds and updates (see the module)."""
        self.apply_edits += 1
        try:
            edits = {k: json.loads(params.get(k) or "[]") for k in ("adds", "updates")}
        except ValueError:
            return _bad("'adds' or 'updates' parameter is invalid")
        for key, rows in edits.items():
            if not isinstance(rows, list) or not all(
                    isinstance(r, dict) and isinstance(r.get("attributes"), dict) for r in rows):
                return _bad(f"'{key}' parameter is invalid")
        by_gid = _flag(params, "useGlobalIds", False)
        staged: Dict[int, Dict[str, Any]] = {}
        adds = [self._add(r["attributes"], by_gid, staged) for r in edits["adds"]]
        updates = [self._update(r["attributes"], by_gid, staged) for r in edits["updates"]]
        failed = any(not r["success"] for r in adds + updates)
        if failed and _flag(params, "rollbackOnFailure", True):
            for result in adds + updates:
                if result["success"]:
                    result["success"] = False
                    result["error"] = {"code": 1003, "description": "Operation rolled back."}
            staged = {}
        for oid, values in staged.items():
            self._rows.setdefault(oid, {OBJECT_ID_FIELD: oid}).update(values)
            self._history.setdefault(oid, []).append((self._monotonic(), dict(values)))
        return Reply.json(200, {"addResults": adds, "updateResults": updates,
                                "deleteResults": []})

    def _values(self, attributes: Mapping[str, Any]) -> Tuple[Dict[str, Any], Optional[str]]:
        values: Dict[str, Any] = {}
        for key, value in attributes.items():
            canonical = self._field(key)
            if canonical is None:
                return {}, f"Invalid column name '{key}'."
            if canonical != OBJECT_ID_FIELD:
                values[canonical] = (_guid(value) or value) if canonical in _GUIDS else value
        return values, None

    def _add(self, attributes: Mapping[str, Any], by_gid: bool,
             staged: Dict[int, Dict[str, Any]]) -> Dict[str, Any]:
        values, problem = self._values(attributes)
        gid = values.get(GLOBAL_ID_FIELD) if by_gid else None
        taken = {r.get(GLOBAL_ID_FIELD) for r in list(self._rows.values()) + list(staged.values())}
        if problem is None and gid is not None and gid in taken:
            problem = f"Cannot insert duplicate GlobalID {gid}."
        if problem is not None:
            return {"objectId": None, "globalId": gid, "success": False,
                    "error": {"code": 1000, "description": problem}}
        if gid is None:
            gid = "{" + str(uuid.UUID(int=self._rng.getrandbits(128), version=4)).upper() + "}"
        values[GLOBAL_ID_FIELD] = gid
        oid = self._next_oid
        self._next_oid += 1
        staged[oid] = values
        return {"objectId": oid, "globalId": gid, "success": True}

    def _update(self, attributes: Mapping[str, Any], by_gid: bool,
                staged: Dict[int, Dict[str, Any]]) -> Dict[str, Any]:
        if by_gid:
            gid = _guid(get_ignoring_case(attributes, GLOBAL_ID_FIELD))
            oid = next((o for o, r in self._rows.items() if r.get(GLOBAL_ID_FIELD) == gid), None)
        else:
            raw = get_ignoring_case(attributes, OBJECT_ID_FIELD)
            oid = raw if isinstance(raw, int) and raw in self._rows else None
        if oid is None:
            return {"objectId": None, "globalId": None, "success": False,
                    "error": {"code": 1019, "description": "Object is missing."}}
        values, problem = self._values(attributes)
        if problem is not None:
            return {"objectId": oid, "globalId": None, "success": False,
                    "error": {"code": 1000, "description": problem}}
        values.pop(GLOBAL_ID_FIELD, None)
        staged.setdefault(oid, {}).update(values)
        return {"objectId": oid, "globalId": self._rows[oid].get(GLOBAL_ID_FIELD),
                "success": True}

    def snapshot(self) -> Dict[str, Any]:
        """``rows`` (per object id: the row's ``(parent GlobalID, photo GlobalID)`` and every
        write as ``(monotonic s, values)``), ``rows_added`` (rows per ``(parent, photo)``),
        ``apply_edits`` and ``queries`` (calls)."""
        rows = {}
        added: Counter = Counter()
        for oid, row in self._rows.items():
            key = (str(row.get(PARENT_FIELD)).upper(), str(row.get(PHOTO_FIELD)).upper())
            added[key] += 1
            rows[oid] = (key, [(t, dict(v)) for t, v in self._history.get(oid, ())])
        return {"rows": rows, "rows_added": dict(added), "apply_edits": self.apply_edits,
                "queries": self.queries}
