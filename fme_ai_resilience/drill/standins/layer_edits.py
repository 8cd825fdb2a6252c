"""The ArcGIS answers the feature layer stand-in gives, and how it resolves one update.

ArcGIS's errors come in HTTP 200 (:func:`error`, :func:`bad`); request flags and whole numbers
are read as ArcGIS reads them (:func:`flag`, :func:`whole`); :func:`resolve_update` matches
one ``applyEdits`` update to a feature (by GlobalID or object id) and gives its result row and
the write it makes.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from ...core.text.caseless import get_ignoring_case
from .records import GLOBAL_ID_FIELD, OBJECT_ID_FIELD, AttachmentRecord
from .server import Reply
from .where import WhereError, braced_global_id

__all__ = ["TRACKING", "error", "bad", "flag", "whole", "esri_type", "attachment_info",
           "resolve_update"]

#: The editor-tracking fields the layer sets itself.
TRACKING = {"CreationDate": "esriFieldTypeDate", "Creator": "esriFieldTypeString",
            "EditDate": "esriFieldTypeDate", "Editor": "esriFieldTypeString"}


def error(code: int, message: str, *details: str) -> Reply:
    """ArcGIS's error: HTTP 200 with ``{"error": {"code", "message", "details"}}``."""
    return Reply.json(200, {"error": {"code": code, "message": message,
                                      "details": list(details)}})


def bad(detail: str) -> Reply:
    """The 400 error of a parameter the layer cannot read."""
    return error(400, "Unable to complete operation.", detail)


def flag(params: Mapping[str, str], key: str, default: bool) -> bool:
    """A ``true``/``false`` parameter, ``default`` when absent or blank."""
    value = params.get(key)
    return default if value in (None, "") else value.strip().lower() == "true"


def whole(params: Mapping[str, str], key: str) -> Optional[int]:
    """A whole-number parameter, None when absent; raises WhereError when not a number."""
    value = (params.get(key) or "").strip()
    if not value:
        return None
    if not value.isdigit():
        raise WhereError(f"'{key}' parameter is invalid")
    return int(value)


def esri_type(value: Any) -> str:
    """The field type ArcGIS gives a new field holding ``value``."""
    if isinstance(value, bool) or isinstance(value, str) or value is None:
        return "esriFieldTypeString"
    return "esriFieldTypeInteger" if isinstance(value, int) else "esriFieldTypeDouble"


def attachment_info(attachment: AttachmentRecord, with_url: bool) -> Dict[str, Any]:
    """The ``attachmentInfos`` entry of one photo (its URL when asked)."""
    info: Dict[str, Any] = {"id": attachment.id, "globalId": attachment.global_id,
                            "parentGlobalId": attachment.parent_global_id,
                            "name": attachment.name, "contentType": attachment.content_type,
                            "size": attachment.size, "keywords": attachment.keywords,
                            "exifInfo": None}
    if with_url:
        info["url"] = attachment.url
    return info


def resolve_update(attributes: Any, by_gid: bool, *, rows: Mapping[int, Mapping[str, Any]],
                   types: Mapping[str, str]
                   ) -> Tuple[Dict[str, Any], Optional[Tuple[int, Dict[str, Any], Mapping]]]:
    """The result row for one update of ``rows`` (object id -> attributes; ``types`` the
    layer's fields), and the write it makes when it can; the caller holds the lock."""
    if not isinstance(attributes, dict):
        return {"objectId": None, "globalId": None, "success": False,
                "error": {"code": 1000, "description": "The update has no attributes."}}, None
    raw_gid = get_ignoring_case(attributes, GLOBAL_ID_FIELD)
    raw_oid = get_ignoring_case(attributes, OBJECT_ID_FIELD)
    oid: Optional[int] = None
    if by_gid:
        try:
            gid = braced_global_id(raw_gid)
        except WhereError:
            gid = None
        oid = next((o for o, r in rows.items() if r[GLOBAL_ID_FIELD] == gid), None)
    elif isinstance(raw_oid, int) and raw_oid in rows:
        oid = raw_oid
    if oid is None:
        return {"objectId": raw_oid if isinstance(raw_oid, int) else None,
                "globalId": raw_gid if isinstance(raw_gid, str) else None, "success": False,
                "error": {"code": 1019, "description": "Object is missing."}}, None
    row = rows[oid]
    result: Dict[str, Any] = {"objectId": oid, "globalId": row[GLOBAL_ID_FIELD],
                              "success": True}
    lower = {f.lower(): f for f in types}
    values = {}
    for key, value in attributes.items():
        canonical = lower.get(key.lower())
        if canonical is None:
            result["success"] = False
            result["error"] = {"code": 1000, "description": f"Invalid column name '{key}'."}
            return result, None
        if canonical not in (OBJECT_ID_FIELD, GLOBAL_ID_FIELD) and canonical not in TRACKING:
            values[canonical] = value
    return result, (oid, values, attributes)
