"""The feature layer stand-in's related table (table 1): one row per photo, found again by
the photo's GlobalID, updated in place, a row's GlobalID unique, every write kept."""
from __future__ import annotations

import json

import requests

from fme_ai_resilience.drill.standins import FeatureLayerStandIn

FIELDS = ("ai_condition", "ai_confidence", "ai_status")
PARENT, PHOTO = "{AAAAAAAA-0000-4000-8000-000000000000}", "{BBBBBBBB-1111-4000-8000-000000000000}"
ROW_GID = "{CCCCCCCC-2222-4000-8000-000000000000}"


def _edits(layer, kind, rows, **extra):
    return requests.post(f"{layer.service_url}/1/applyEdits", data={
        "f": "json", kind: json.dumps([{"attributes": r} for r in rows]), **extra},
        timeout=10).json()


def _query(layer, where, out="objectid"):
    return requests.get(f"{layer.service_url}/1/query", params={
        "where": where, "outFields": out, "f": "json"}, timeout=10).json()


def test_a_photos_row_is_found_by_the_photos_globalid_and_updated_in_place():
    """Query by ai_photo_globalid (any GUID spelling) finds the row added; an update by
    object id changes it; the row's writes are kept in order under its photo."""
    with FeatureLayerStandIn(seed=1, fields=FIELDS) as layer:
        assert _query(layer, f"ai_photo_globalid = '{PHOTO}'")["features"] == []
        added = _edits(layer, "adds", [{"parentglobalid": PARENT, "ai_photo_globalid":
                                        PHOTO.lower().strip("{}"), "ai_status": "AWAITING_ANALYSIS"}])
        oid = added["addResults"][0]["objectId"]
        found = _query(layer, f"ai_photo_globalid = '{PHOTO.lower()}'")["features"]
        assert [f["attributes"]["objectid"] for f in found] == [oid]
        updated = _edits(layer, "updates", [{"objectid": oid, "ai_condition": "fair",
                                             "ai_status": "ACCEPTED"}])
        assert updated["updateResults"][0]["success"] is True
        rows = layer.snapshot()["table_rows"]
        assert list(rows) == [oid] and rows[oid][0] == (PARENT, PHOTO)
        assert [v.get("ai_status") for _, v in rows[oid][1]] == ["AWAITING_ANALYSIS",
                                                                 "ACCEPTED"]
        assert layer.snapshot()["rows_added"] == {(PARENT, PHOTO): 1}


def test_a_rows_globalid_is_unique_when_the_adder_names_it():
    """With useGlobalIds an add keeps the GlobalID it names, a second add of it is refused
    (code 1000) and adds no row, and an update by that GlobalID reaches the row."""
    with FeatureLayerStandIn(seed=1, fields=FIELDS) as layer:
        row = {"globalid": ROW_GID, "parentglobalid": PARENT, "ai_photo_globalid": PHOTO}
        first = _edits(layer, "adds", [row], useGlobalIds="true")["addResults"][0]
        second = _edits(layer, "adds", [row], useGlobalIds="true")["addResults"][0]
        assert (first["success"], first["globalId"]) == (True, ROW_GID)
        assert (second["success"], second["error"]["code"]) == (False, 1000)
        by_gid = _edits(layer, "updates", [{"globalid": ROW_GID, "ai_condition": "good"}],
                        useGlobalIds="true")["updateResults"][0]
        assert by_gid["success"] is True
        assert layer.snapshot()["rows_added"] == {(PARENT, PHOTO): 1}
        assert _query(layer, "1=1", "ai_condition")["features"] == [
            {"attributes": {"ai_condition": "good"}}]


def test_a_failed_row_rolls_back_the_batch_and_an_unknown_row_is_missing():
    """An unknown field refuses its row (1000) and rolls the others back; an update of an
    object id the table lacks answers 1019; nothing is written."""
    with FeatureLayerStandIn(seed=1, fields=FIELDS) as layer:
        answer = _edits(layer, "adds", [{"parentglobalid": PARENT, "ai_photo_globalid": PHOTO},
                                        {"no_such_field": 1}])
        assert [r["success"] for r in answer["addResults"]] == [False, False]
        assert answer["addResults"][0]["error"]["code"] == 1003
        missing = _edits(layer, "updates", [{"objectid": 99, "ai_condition": "good"}])
        assert missing["updateResults"][0]["error"]["code"] == 1019
        assert layer.snapshot()["table_rows"] == {}
        assert "error" in requests.get(f"{layer.service_url}/1/applyEdits",
                                       timeout=10).json()
