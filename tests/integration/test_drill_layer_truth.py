"""What the judge reads from the stand-ins: the layer's writes, its photos gone, rows added to
its related table, and the mailbox of what people were told."""
from __future__ import annotations

import json

import pytest
import requests

from fme_ai_resilience.drill.standins import FeatureLayerStandIn, NotificationStandIn
from fme_ai_resilience.core.errors import ConfigurationError


def _update(layer, attributes, **extra):
    return requests.post(f"{layer.layer_url}/applyEdits", data={
        "f": "json", "updates": json.dumps([{"attributes": a} for a in attributes]),
        "useGlobalIds": "true", **extra}, timeout=10).json()


def test_every_applied_row_is_kept_in_order_with_its_values_and_a_rolled_back_one_is_not():
    """The history holds each written row's values; a batch rolled back writes none."""
    with FeatureLayerStandIn(seed=1, fields=("ai_condition", "ai_status")) as layer:
        feature = layer.add_feature()
        gid = feature.global_id
        _update(layer, [{"globalid": gid, "ai_condition": "fair", "ai_status": "REVIEW"}])
        _update(layer, [{"globalid": gid, "ai_condition": "good"}])
        _update(layer, [{"globalid": gid, "ai_condition": "damaged"},
                        {"globalid": "{00000000-0000-4000-8000-000000000000}"}])
        history = layer.snapshot()["history"][gid]
        assert [values for _, values in history] == [
            {"ai_condition": "fair", "ai_status": "REVIEW"}, {"ai_condition": "good"}]
        assert history[0][0] <= history[1][0]


def test_a_photo_gone_from_the_layer_is_unlisted_unserved_and_still_known_to_the_world():
    """lose_photo: queryAttachments no longer lists it, its bytes are refused, and photos()
    gives it with gone=True."""
    with FeatureLayerStandIn(seed=1) as layer:
        feature = layer.add_feature(photos=2)
        gone, kept = feature.attachments
        layer.lose_photo(gone.id)
        listed = requests.get(f"{layer.layer_url}/queryAttachments", params={
            "objectIds": str(feature.object_id), "f": "json"}, timeout=10).json()
        infos = listed["attachmentGroups"][0]["attachmentInfos"]
        assert [i["id"] for i in infos] == [kept.id]
        assert "error" in requests.get(gone.url, timeout=10).json()
        assert layer.photos()[feature.global_id] == [(kept.global_id, kept.sha256, False),
                                                     (gone.global_id, gone.sha256, True)]
        with pytest.raises(ConfigurationError):
            layer.lose_photo(gone.id)


def test_rows_added_to_the_related_table_are_counted_per_photo():
    """Table 1 takes adds and counts them by parent and photo GlobalID: a second is visible."""
    with FeatureLayerStandIn(seed=1) as layer:
        row = {"attributes": {"parentglobalid": "{A}", "ai_photo_globalid": "{p}"}}
        for _ in range(2):
            answer = requests.post(f"{layer.service_url}/1/applyEdits", data={
                "f": "json", "adds": json.dumps([row])}, timeout=10).json()
            assert answer["addResults"][0]["success"]
        assert layer.snapshot()["rows_added"] == {("{A}", "{P}"): 2}


def test_the_mailbox_keeps_each_message_with_what_it_names_and_why():
    """notify() keeps the cause, the text, the task or feature named and when (now, or when
    a message handed on later was sent), in order."""
    box = NotificationStandIn()
    box.notify("photo-not-found", "gone", task_key="a/b")
    box.notify("budget", "gave up", feature_global_id="{F}")
    first, second = box.snapshot()["messages"]
    assert (first.cause, first.task_key, first.feature_global_id) == ("photo-not-found", "a/b",
                                                                      None)
    assert (second.cause, second.feature_global_id) == ("budget", "{F}")
    assert first.at <= second.at
    box.notify("late", "handed on later", at=1.5)
    assert box.snapshot()["messages"][-1].at == 1.5
