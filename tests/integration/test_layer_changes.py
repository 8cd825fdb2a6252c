"""The feature layer stand-in's change tracking: server generations and extractChanges, sync
and async, as ArcGIS answers them."""
from __future__ import annotations

import json
import time

import pytest
import requests

from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.drill.standins import FeatureLayerStandIn

TOKEN = "layer-token"
AUTH = {"X-Esri-Authorization": f"Bearer {TOKEN}"}


def _extract(layer, method="GET", headers=AUTH, **params):
    params = {"f": "json", "dataFormat": "json", "layers": "[0]", **params}
    url = f"{layer.service_url}/extractChanges"
    if method == "POST":
        return requests.post(url, data=params, headers=headers, timeout=10).json()
    return requests.get(url, params=params, headers=headers, timeout=10).json()


def _update(layer, gid, **values):
    return requests.post(f"{layer.layer_url}/applyEdits", data={
        "f": "json", "useGlobalIds": "true",
        "updates": json.dumps([{"attributes": {"globalid": gid, **values}}])},
        headers=AUTH, timeout=10).json()


def _gids(features):
    return [f["attributes"]["globalid"] for f in features]


def _poll(status_url, *, until=("Completed", "Failed"), seconds=20.0):
    """Every status answered, polling until one of ``until`` (generous, never timed)."""
    seen = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = requests.get(status_url, params={"f": "json"}, headers=AUTH, timeout=10).json()
        seen.append(status)
        if status.get("status") in until:
            return seen
        time.sleep(0.01)
    pytest.fail(f"the job never ended: {seen[-3:]}")


@pytest.fixture
def layer():
    with FeatureLayerStandIn(seed=3, token=TOKEN, fields=("ai_condition",)) as stand_in:
        yield stand_in


def test_each_add_and_each_applyedits_call_takes_the_next_generation(layer):
    """The generation starts at 1; a feature added takes one, an applyEdits call one."""
    assert layer.changes.current() == 1
    first = layer.add_feature(photos=2)
    second = layer.add_feature()
    assert layer.changes.current() == 3
    assert _update(layer, first.global_id, ai_condition="good")["updateResults"][0]["success"]
    assert layer.changes.current() == 4
    assert [(r.gen, r.object_id, r.kind) for r in layer.changes.records()] == [
        (2, first.object_id, "add"), (3, second.object_id, "add"),
        (4, first.object_id, "update")]
    assert layer.snapshot()["server_gen"] == 4


def test_a_failed_or_rolled_back_edit_takes_no_generation(layer):
    """A batch rolled back writes nothing, so it is no change."""
    feature = layer.add_feature()
    before = layer.changes.current()
    requests.post(f"{layer.layer_url}/applyEdits", data={
        "f": "json", "useGlobalIds": "true", "updates": json.dumps([
            {"attributes": {"globalid": feature.global_id, "ai_condition": "poor"}},
            {"attributes": {"globalid": "{00000000-0000-4000-8000-000000000000}"}}])},
        headers=AUTH, timeout=10)
    assert layer.changes.current() == before


def test_sync_extract_changes_gives_each_feature_once_as_its_net_change(layer):
    """(a, b]: a feature added in the range is an add (even if updated since), one added
    before it and updated within it an update, with all its fields and its geometry."""
    first = layer.add_feature({"asset_id": "A-1", "asset_type": "valve", "crew": "north-1"})
    second = layer.add_feature()
    _update(layer, first.global_id, ai_condition="good")
    answer = _extract(layer, serverGens="[1,4]")
    assert answer["layerServerGens"] == [{"id": 0, "serverGen": 4}]
    assert answer["responseType"] == "esriDataChangesResponseTypeEdits"
    (edit,) = answer["edits"]
    assert edit["id"] == 0
    assert _gids(edit["features"]["adds"]) == [first.global_id, second.global_id]
    assert edit["features"]["updates"] == [] and edit["features"]["deleteIds"] == []
    added = edit["features"]["adds"][0]
    assert added["attributes"]["objectid"] == first.object_id
    assert added["attributes"]["globalid"] == first.global_id
    assert added["attributes"]["globalid"].startswith("{") and added["attributes"][
        "globalid"] == added["attributes"]["globalid"].upper()
    assert added["attributes"]["asset_type"] == "valve"
    assert added["attributes"]["ai_condition"] == "good"
    assert {"x", "y", "spatialReference"} <= set(added["geometry"])

    later = _extract(layer, method="POST", serverGens="[3,4]")["edits"][0]["features"]
    assert later["adds"] == [] and _gids(later["updates"]) == [first.global_id]
    by_layer = _extract(layer, layerServerGens=json.dumps([{"id": 0, "serverGen": 2}]))
    features = by_layer["edits"][0]["features"]
    assert _gids(features["adds"]) == [second.global_id]
    assert _gids(features["updates"]) == [first.global_id]
    assert by_layer["layerServerGens"] == [{"id": 0, "serverGen": 4}]


def test_a_range_past_the_current_generation_ends_at_it_and_filters_apply(layer):
    """serverGens beyond now answers up to now; returnInserts/returnUpdates false leave
    those out."""
    feature = layer.add_feature()
    _update(layer, feature.global_id, ai_condition="fair")
    answer = _extract(layer, serverGens="[1,99]", returnInserts="false")
    assert answer["layerServerGens"][0]["serverGen"] == 3
    assert answer["edits"][0]["features"]["adds"] == []
    no_updates = _extract(layer, serverGens="[2,3]", returnUpdates="false")
    assert no_updates["edits"][0]["features"]["updates"] == []


def test_return_ids_only_gives_object_ids(layer):
    """returnIdsOnly: ``objectIds`` with adds, updates and deletes."""
    first, second = layer.add_feature(), layer.add_feature()
    _update(layer, first.global_id, ai_condition="good")
    answer = _extract(layer, serverGens="[2,4]", returnIdsOnly="true")
    assert answer["edits"] == [{"id": 0, "objectIds": {
        "adds": [second.object_id], "updates": [first.object_id], "deletes": []}}]


def test_async_extract_changes_is_pending_then_completed_and_serves_its_result(layer):
    """async=true: a statusUrl, Pending and InProgress for the first polls, then Completed
    with a resultUrl that answers what the sync call answers."""
    feature = layer.add_feature()
    submitted = _extract(layer, serverGens="[1,2]", **{"async": "true"})
    assert set(submitted) == {"statusUrl"}
    assert submitted["statusUrl"].startswith(f"{layer.service_url}/jobs/")
    statuses = _poll(submitted["statusUrl"])
    assert [s["status"] for s in statuses] == ["Pending", "InProgress", "Completed"]
    job_id = submitted["statusUrl"].rsplit("/", 1)[1]
    assert statuses[-1]["resultUrl"] == f"{layer.service_url}/replicafiles/{job_id}.json"
    result = requests.get(statuses[-1]["resultUrl"], headers=AUTH, timeout=10).json()
    assert result == _extract(layer, serverGens="[1,2]")
    assert _gids(result["edits"][0]["features"]["adds"]) == [feature.global_id]
    counters = layer.snapshot()
    assert (counters["extract_changes"], counters["status_polls"],
            counters["results_served"]) == (2, 3, 1)


def test_posted_async_job_and_polls_pending_setting():
    """extractChanges by POST; changes_polls_pending=0 completes on the first poll."""
    with FeatureLayerStandIn(seed=3, changes_polls_pending=0) as layer:
        layer.add_feature()
        submitted = _extract(layer, method="POST", headers={}, serverGens="[1,2]",
                             **{"async": "true"})
        status = requests.get(submitted["statusUrl"], params={"f": "json"}, timeout=10).json()
        assert status["status"] == "Completed"


def test_the_first_changes_failures_jobs_fail_sync_and_async():
    """changes_failures=2: a sync call answers ArcGIS's error in HTTP 200, an async job ends
    Failed with no result; the third job succeeds."""
    with FeatureLayerStandIn(seed=3, token=TOKEN, changes_failures=2) as layer:
        layer.add_feature()
        sync = requests.get(f"{layer.service_url}/extractChanges", params={
            "layers": "[0]", "serverGens": "[1,2]", "f": "json"}, headers=AUTH, timeout=10)
        assert sync.status_code == 200 and sync.json()["error"]["code"] == 500
        submitted = _extract(layer, serverGens="[1,2]", **{"async": "true"})
        statuses = _poll(submitted["statusUrl"])
        assert [s["status"] for s in statuses] == ["Pending", "InProgress", "Failed"]
        assert "error" in statuses[-1] and "resultUrl" not in statuses[-1]
        job_id = submitted["statusUrl"].rsplit("/", 1)[1]
        gone = requests.get(f"{layer.service_url}/replicafiles/{job_id}.json", headers=AUTH,
                            timeout=10).json()
        assert "error" in gone
        assert len(_extract(layer, serverGens="[1,2]")["edits"][0]["features"]["adds"]) == 1
        assert layer.snapshot()["change_jobs_failed"] == 2


def test_a_hidden_feature_is_no_change_until_it_becomes_visible(layer):
    """hide_until: extractChanges does not report the feature, and it takes a generation
    when it shows, after the features added meanwhile."""
    hidden = layer.add_feature()
    layer.hide_until(hidden.global_id, 1e6)
    assert _extract(layer, serverGens="[0,99]")["edits"][0]["features"]["adds"] == []
    shown = layer.add_feature()
    before = layer.changes.current()
    assert _gids(_extract(layer, serverGens=f"[0,{before}]")["edits"][0]["features"][
        "adds"]) == [shown.global_id]
    layer.hide_until(hidden.global_id, 0)
    after = layer.changes.current()
    assert after == before + 1
    answer = _extract(layer, serverGens=f"[{before},{after}]")
    assert _gids(answer["edits"][0]["features"]["adds"]) == [hidden.global_id]


def test_a_feature_hidden_until_a_schedule_time_takes_its_generation_then():
    """A feature shown by schedule time comes after one added when it was still hidden."""
    with FeatureLayerStandIn(seed=3, time_scale=0.01) as layer:
        late = layer.add_feature()
        layer.hide_until(late.global_id, 300)       # 3 real seconds after the start
        early = layer.add_feature()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            kinds = {r.object_id: r.gen for r in layer.changes.records()}
            if late.object_id in kinds:
                break
            time.sleep(0.02)
        assert kinds[late.object_id] > kinds[early.object_id]


def test_every_change_tracking_path_needs_the_token(layer):
    """extractChanges, a job's status and its result answer 498 without the token."""
    layer.add_feature()
    assert _extract(layer, headers={}, serverGens="[1,2]")["error"]["code"] == 498
    status_url = _extract(layer, serverGens="[1,2]", **{"async": "true"})["statusUrl"]
    assert requests.get(status_url, timeout=10).json()["error"]["code"] == 498
    result_url = _poll(status_url)[-1]["resultUrl"]
    assert requests.get(result_url, timeout=10).json()["error"]["code"] == 498
    assert "edits" in requests.get(result_url, headers=AUTH, timeout=10).json()
    assert layer.snapshot()["unauthorized"] == 3


@pytest.mark.parametrize("params", [
    {"layers": "", "serverGens": "[1,2]"}, {"layers": "[1]", "serverGens": "[1,2]"}, {},
    {"serverGens": "[3,1]"}, {"serverGens": "nope"},
    {"layerServerGens": '[{"id": 1, "serverGen": 1}]'}])
def test_parameters_it_cannot_read_are_a_400(layer, params):
    """No layers, an untracked layer, no range, a reversed or unreadable range: 400."""
    assert _extract(layer, **params)["error"]["code"] == 400


def test_the_service_says_it_tracks_changes(layer):
    """The service description lists ChangeTracking and extractChangesCapabilities."""
    info = requests.get(layer.service_url, params={"f": "json"}, headers=AUTH,
                        timeout=10).json()
    assert "ChangeTracking" in info["capabilities"]
    assert info["extractChangesCapabilities"]["supportsReturnIdsOnly"] is True


def test_bad_change_settings_are_refused():
    """A negative failure count or poll count is a ConfigurationError."""
    with pytest.raises(ConfigurationError):
        FeatureLayerStandIn(changes_failures=-1)
    with pytest.raises(ConfigurationError):
        FeatureLayerStandIn(changes_polls_pending=-1)
