"""Who sent a delivery (Survey123, an ArcGIS Online layer, an ArcGIS Enterprise service, a
CloudEvent around any of them), what its notifications are, and the features their changes
name. Sample bodies follow the shapes documented for each sender (docs/intake.md, "Senders")."""
from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import pytest

from fme_ai_resilience.core.errors import InvalidPayload
from fme_ai_resilience.core.intake.arcgis_webhook import (ENTERPRISE, ONLINE,
                                                          changed_features,
                                                          parse_notifications)
from fme_ai_resilience.core.intake.senders import Delivery, Sender, Unsupported, read_delivery

from helpers import DATA


SERVICE = "https://services.arcgis.com/AbC123xYz/arcgis/rest/services/inspection/FeatureServer"
ENTERPRISE_SERVICE = "https://gis.example.com/server/rest/services/Hosted/inspection/FeatureServer"
JSON = {"Content-Type": "application/json"}
LIMITS = {"max_bytes": 1024 * 1024, "max_depth": 32}
SURVEY123 = sorted(DATA.glob("survey123_*.json"))
PARENT = "5c1e0a2b-9d3f-4e61-8a7b-0f2c3d4e5a6b"
CHILD = "a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d"
GRANDCHILD = "0f1e2d3c-4b5a-4968-8776-655443322110"


def changes_url(low: int = 1, high: int = 5, service: str = SERVICE, encoded: bool = True,
                query: str = "") -> str:
    """``changesUrl`` as ArcGIS Online sends it: percent-encoded, lower-case escapes."""
    url = (f"{service}/extractChanges?"
           + (query or f"serverGens=[{low},{high}]&async=true&returnUpdates=true"
                       "&returnDeletes=true&returnAttachments=true"))
    return quote(url, safe="").replace("%2F", "%2f").replace("%3A", "%3a") if encoded else url


def online(layer: int = 0, low: int = 1, high: int = 5, events=("FeaturesCreated",),
           **extra) -> dict:
    """One notification of an ArcGIS Online hosted feature layer webhook."""
    return dict({"name": "inspection-hook", "layerId": layer, "orgId": "AbC123xYz",
                 "serviceName": "inspection", "lastUpdatedTime": 1732954500000,
                 "changesUrl": changes_url(low, high), "events": list(events)}, **extra)


def enterprise(low: int = 10, high: int = 12, events=("FeaturesCreated",)) -> dict:
    """The one-object body of an ArcGIS Enterprise (11.1+) feature service webhook."""
    return {"serviceType": "FeatureServer", "id": "7d1f3c4e-61aa-4b2d-9c2e-0e2f0c1d9a11",
            "name": "inspection-hook", "folderName": "Hosted", "serviceName": "inspection",
            "changesUrl": changes_url(low, high, ENTERPRISE_SERVICE, encoded=False),
            "events": [{"eventType": e, "when": 1732954500000} for e in events]}


def notifications(data):
    """The notifications of ``data``; the first problem of an item that is none, raised."""
    found, problems = parse_notifications(data)
    if problems:
        raise problems[0]
    return found


def raw(value) -> bytes:
    return json.dumps(value).encode("utf-8")


def read(body, headers=None) -> Delivery:
    return read_delivery(body, JSON if headers is None else headers, **LIMITS)


def cloudevent(data, **attributes) -> bytes:
    """A structured-mode CloudEvent (application/cloudevents+json) carrying ``data``."""
    envelope = {"specversion": "1.0", "id": "evt-0001", "source": "/survey/inspection",
                "type": "com.example.survey.submitted", "datacontenttype": "application/json",
                "data": data}
    envelope.update(attributes)
    return raw({k: v for k, v in envelope.items() if v is not None})


CE_JSON = {"Content-Type": "application/cloudevents+json; charset=utf-8"}


def binary_headers(**extra) -> dict:
    """The ``ce-*`` headers of a binary-mode CloudEvent (percent-encoded where needed)."""
    return dict({"Content-Type": "application/json", "ce-specversion": "1.0",
                 "ce-id": "evt%2F42", "ce-source": "%2Flayers%2Finspection",
                 "ce-type": "com.esri.featurelayer.changed"}, **extra)


# -- which sender --------------------------------------------------------------------------------

def test_an_online_array_with_a_percent_encoded_changes_url_is_arcgis_online():
    """ArcGIS Online's JSON array is ARCGIS_ONLINE, its decoded value handed on, its
    signature header kept."""
    body = raw([online(0), online(1)])
    delivery = read(body, dict(JSON, **{"x-esriHook-Signature": "sha256=abc"}))
    assert delivery.sender is Sender.ARCGIS_ONLINE and delivery.sender.is_arcgis
    assert delivery.raw == body and delivery.data == json.loads(body)
    assert delivery.signature == "sha256=abc" and delivery.event is None


def test_the_online_array_form_encoded_as_payload_is_arcgis_online():
    """``payload=<json>`` (application/x-www-form-urlencoded): the payload is the body its
    parser reads, the form as received is ``raw``, a signature field is read."""
    payload = json.dumps([online()])
    form = urlencode({"payload": payload, "x-esriHook-Signature": "sha256=xyz"}).encode()
    delivery = read(form, {"Content-Type": "application/x-www-form-urlencoded"})
    assert delivery.sender is Sender.ARCGIS_ONLINE
    assert delivery.body == payload.encode() and delivery.raw == form
    assert delivery.data == [online()] and delivery.signature == "sha256=xyz"


def test_an_enterprise_object_is_arcgis_enterprise():
    """ArcGIS Enterprise's single object with a changesUrl is ARCGIS_ENTERPRISE."""
    delivery = read(raw(enterprise()))
    assert delivery.sender is Sender.ARCGIS_ENTERPRISE and delivery.data == enterprise()


@pytest.mark.parametrize("path", SURVEY123, ids=lambda p: p.stem)
def test_survey123_bodies_are_still_survey123(path):
    """Every sample Survey123 body stays SURVEY123, left undecoded for its own parser."""
    body = path.read_bytes()
    delivery = read(body, {"Content-Type": "application/json; charset=UTF-8"})
    assert delivery.sender is Sender.SURVEY123 and not delivery.sender.is_arcgis
    assert delivery.body == body and delivery.data is None


def test_a_survey123_body_without_a_content_type_or_already_decoded_is_survey123():
    """No Content-Type is read as JSON; a mapping a caller decoded itself is read too."""
    body = (DATA / "survey123_add.json").read_bytes()
    assert read(body, {}).sender is Sender.SURVEY123
    assert read(json.loads(body), None).sender is Sender.SURVEY123


def test_a_survey123_body_naming_changes_url_in_a_value_is_still_survey123():
    """A Survey123 feature that merely mentions changesUrl (a text answer) is not an ArcGIS
    notification: it carries a ``feature``."""
    data = json.loads((DATA / "survey123_add.json").read_bytes())
    data["feature"]["attributes"]["notes"] = "changesUrl"
    data["changesUrl"] = changes_url()
    assert read(raw(data)).sender is Sender.SURVEY123


def test_a_structured_cloudevent_wrapping_a_survey123_body_is_survey123():
    """A structured CloudEvent's data is the body; its id becomes the delivery id the
    Survey123 parser sees, unless the sender gave one."""
    inner = json.loads((DATA / "survey123_add.json").read_bytes())
    delivery = read(cloudevent(inner), CE_JSON)
    assert delivery.sender is Sender.SURVEY123
    assert delivery.event is not None and delivery.event.mode == "structured"
    assert (delivery.event.id, delivery.event.source) == ("evt-0001", "/survey/inspection")
    assert delivery.delivery_id == "evt-0001"
    assert delivery.headers_for_parser(CE_JSON)["X-Survey123-Delivery"] == "evt-0001"
    given = dict(CE_JSON, **{"x-survey123-delivery": "own-id"})
    assert delivery.headers_for_parser(given)["x-survey123-delivery"] == "own-id"
    assert "X-Survey123-Delivery" not in delivery.headers_for_parser(given)


def test_a_structured_cloudevent_wrapping_an_online_array_is_arcgis_online():
    """The Online array as a CloudEvent's data is ARCGIS_ONLINE, keyed by the event."""
    delivery = read(cloudevent([online()], type="com.esri.featurelayer.changed"), CE_JSON)
    assert delivery.sender is Sender.ARCGIS_ONLINE and delivery.data == [online()]
    assert delivery.delivery_id == "evt-0001" and delivery.event.type.startswith("com.esri")


def test_a_cloudevent_carrying_its_data_as_base64_or_a_json_string_is_read():
    """``data_base64`` and data sent as a JSON string are the same notification."""
    as_base64 = cloudevent(None, data_base64=base64.b64encode(raw(enterprise())).decode())
    as_string = cloudevent(json.dumps(enterprise()))
    for body in (as_base64, as_string):
        delivery = read(body, CE_JSON)
        assert delivery.sender is Sender.ARCGIS_ENTERPRISE and delivery.data == enterprise()


def test_a_binary_cloudevent_is_read_from_its_ce_headers():
    """Binary mode: the body is the data, the attributes ``ce-*`` headers, percent-decoded."""
    body = raw([online()])
    delivery = read(body, binary_headers())
    assert delivery.sender is Sender.ARCGIS_ONLINE and delivery.raw == body
    assert delivery.event is not None and delivery.event.mode == "binary"
    assert (delivery.event.id, delivery.event.source) == ("evt/42", "/layers/inspection")
    assert delivery.delivery_id == "evt/42"


def test_a_binary_cloudevent_around_a_survey123_body_is_survey123():
    """A Survey123 body in binary mode stays SURVEY123 with the event's id."""
    body = (DATA / "survey123_add.json").read_bytes()
    delivery = read(body, binary_headers(**{"ce-type": "com.example.submitted"}))
    assert delivery.sender is Sender.SURVEY123 and delivery.delivery_id == "evt/42"


def test_a_delivery_repr_shows_no_body():
    """A delivery's repr names the sender and size, never the body (it may hold a token)."""
    body = (DATA / "survey123_add.json").read_bytes()
    text = repr(read(body))
    assert "survey123" in text and "PORTAL-TOKEN" not in text


# -- what is not read ----------------------------------------------------------------------------

@pytest.mark.parametrize("body, headers", [
    (raw([{"specversion": "1.0", "id": "1", "source": "/s", "type": "t",
           "data": [online()]}]),
     {"Content-Type": "application/cloudevents-batch+json"}),
    (cloudevent("<feature/>", datacontenttype="application/xml"), CE_JSON),
    (cloudevent("hello", datacontenttype="text/plain"), CE_JSON),
    (urlencode({"data": json.dumps([online()])}).encode(),
     {"Content-Type": "application/x-www-form-urlencoded"}),
    (raw([online()]), {"Content-Type": "text/plain"}),
    (raw([online()]), {"Content-Type": "multipart/form-data; boundary=x"}),
    (cloudevent([online()], specversion="0.3"), CE_JSON),
    (raw([online()]), binary_headers(**{"ce-specversion": "0.3"})),
], ids=["batch", "xml-data", "text-data", "form-without-payload", "text-plain", "multipart",
        "structured-0.3", "binary-0.3"])
def test_formats_the_intake_does_not_read_are_unsupported(body, headers):
    """Batch mode, a CloudEvent whose data is not JSON, a form without ``payload``, other
    media types and other CloudEvents versions raise Unsupported (answered 415)."""
    with pytest.raises(Unsupported):
        read(body, headers)


@pytest.mark.parametrize("missing", ["id", "source", "type"])
def test_a_structured_cloudevent_without_a_required_attribute_is_invalid(missing):
    """A CloudEvent missing id, source or type is a broken delivery (a dead letter), naming
    the attribute."""
    with pytest.raises(InvalidPayload) as caught:
        read(cloudevent([online()], **{missing: None}), CE_JSON)
    assert missing in str(caught.value)


def test_a_binary_cloudevent_without_an_id_is_invalid():
    """Binary mode without ce-id is broken too."""
    headers = binary_headers()
    del headers["ce-id"]
    with pytest.raises(InvalidPayload):
        read(raw([online()]), headers)


@pytest.mark.parametrize("body", [
    cloudevent(None),
    cloudevent(None, data_base64="not base64!"),
    b"{not json",
], ids=["no-data", "bad-base64", "not-json"])
def test_a_broken_structured_cloudevent_is_invalid(body):
    """A CloudEvent without data, with data_base64 that is not base64, or not JSON at all."""
    with pytest.raises(InvalidPayload):
        read(body, CE_JSON)


# -- notifications -------------------------------------------------------------------------------

def test_an_online_notification_decodes_its_changes_url_once():
    """The percent-encoded changesUrl is decoded; the service, layer, range and events are
    read."""
    [n] = notifications([online(3, 7, 9, ["FeaturesCreated", "AttachmentsCreated"])])
    assert n.source == ONLINE and n.service_url == SERVICE and n.layer_id == 3
    assert n.changes_url.startswith(f"{SERVICE}/extractChanges?serverGens=[7,9]")
    assert n.server_gens == (7, 9) and n.brings_photos
    submission = n.submission("delivery-1")
    assert submission.idempotency_key == n.key and submission.changes_url == n.changes_url
    assert submission.source == ONLINE and submission.layer_url == f"{SERVICE}/3"
    assert submission.delivery_id == "delivery-1"


def test_a_redelivered_notification_has_the_same_key():
    """The same notification sent again (another time stamp, its URL decoded or not, the
    host in other case) has the same key."""
    first = notifications([online(lastUpdatedTime=1)])[0]
    again = notifications([online(lastUpdatedTime=2)])[0]
    decoded = notifications([online(changesUrl=changes_url(encoded=False))])[0]
    shouted = notifications([online(changesUrl=changes_url(
        service=SERVICE.replace("services.arcgis.com", "SERVICES.ArcGIS.com")))])[0]
    assert first.key == again.key == decoded.key == shouted.key
    assert first.key.startswith("changes:")


def test_keys_differ_by_layer_by_range_and_by_service():
    """Another layer, another generation range or another service is another notification."""
    keys = {notifications([n])[0].key for n in (
        online(0, 1, 5), online(1, 1, 5), online(0, 1, 6), online(0, 2, 5),
        online(0, 1, 5, changesUrl=changes_url(service=SERVICE.replace("inspection", "other"))))}
    assert len(keys) == 5


def test_an_enterprise_notification_names_its_webhook_and_every_layer():
    """Enterprise notifies per service: no layer, the webhook id kept, events read from
    ``eventType``."""
    [n] = notifications(enterprise(events=["FeaturesCreated", "FeaturesDeleted"]))
    assert n.source == ENTERPRISE and n.layer_id is None and n.service_url == ENTERPRISE_SERVICE
    assert n.key.endswith("/*/gens-10-12") and n.webhook_id.startswith("7d1f3c4e")
    assert n.events == ("FeaturesCreated", "FeaturesDeleted") and n.brings_photos
    assert n.submission().layer_url is None


def test_only_deletions_or_schema_changes_bring_no_photo():
    """A notification of deletions, or of schema changes, brings no photo."""
    for events in (["FeaturesDeleted"], ["LayerSchemaChanged", "AttachmentsDeleted"]):
        assert not notifications([online(events=events)])[0].brings_photos


def test_a_layer_server_gens_range_is_read():
    """``layerServerGens=[{id, serverGen}]`` gives the range lowest to highest generation."""
    gens = json.dumps([{"id": 0, "serverGen": 9}, {"id": 1, "serverGen": 3}])
    url = changes_url(query=f"layerServerGens={gens}&async=true")
    [n] = notifications([online(changesUrl=url)])
    assert n.server_gens == (3, 9) and n.key.endswith("/gens-3-9")


@pytest.mark.parametrize("url", [
    changes_url().replace("extractChanges", "0%2fquery"),
    changes_url(query="async=true&returnUpdates=true"),
    changes_url(9, 3),
    changes_url(query="serverGens=[1,x]"),
    changes_url(query="layerServerGens=[{\"id\":0}]"),
    changes_url(service=SERVICE.replace("https", "ftp")),
    changes_url(service="https://services.arcgis.com/AbC/arcgis/rest/services/x/MapServer"),
    "",
    "https%3a%2f%2f" + "a" * 5000,
    None,
], ids=["not-extractchanges", "no-gens", "reversed", "bad-gens", "layer-gens-without-gen",
        "ftp", "mapserver", "empty", "too-long", "missing"])
def test_a_bad_changes_url_is_invalid(url):
    """A changesUrl that is no FeatureServer extractChanges URL with a forward range is an
    invalid notification naming the field."""
    item = online()
    if url is None:
        del item["changesUrl"]
    else:
        item["changesUrl"] = url
    with pytest.raises(InvalidPayload) as caught:
        notifications([item])
    assert "changesUrl" in str(caught.value.field)


@pytest.mark.parametrize("data", [
    [], [online()] * 1001, ["x"], "text", 42,
    [online(layerId=-1)], [online(layerId=True)], [online(layerId="0")],
    [dict(online(), events="FeaturesCreated")], [online(events=[1])],
    dict(enterprise(), events="FeaturesCreated"), dict(enterprise(), events=[{"when": 1}]),
], ids=["empty", "over-100", "not-object", "string", "number", "negative-layer", "bool-layer",
        "string-layer", "events-string", "events-numbers", "enterprise-events-string",
        "enterprise-event-without-type"])
def test_malformed_notifications_are_invalid(data):
    """Any other malformed notification body raises InvalidPayload."""
    with pytest.raises(InvalidPayload):
        notifications(data)


# -- what extractChanges answers -----------------------------------------------------------------

def feature(gid: str, oid: int, parent=None, **attributes) -> dict:
    values = dict({"objectid": oid, "globalid": "{%s}" % gid.upper()}, **attributes)
    if parent is not None:
        values["parentglobalid"] = parent
    return {"attributes": values}


def test_changed_features_reads_adds_and_updates_each_once_and_skips_deletes():
    """Adds and updates of every layer, a feature in both (or twice) once, deletions left
    out; GlobalIDs normalised."""
    result = {"layerServerGens": [{"id": 0, "serverGen": 5}],
              "responseType": "esriDataChangesResponseTypeEdits",
              "edits": [{"id": 0, "features": {"adds": [feature(PARENT, 1)],
                                               "updates": [feature(PARENT, 1),
                                                           feature(CHILD, 2)],
                                               "deleteIds": [7, 8]}},
                        {"id": 0, "features": {"adds": [feature(CHILD, 2)]}},
                        {"id": 1, "features": {"adds": [feature(GRANDCHILD, 1)]}}]}
    found = changed_features(result)
    assert [(f.global_id, f.object_id) for f in found] == [(PARENT, 1), (CHILD, 2),
                                                           (GRANDCHILD, 1)]


def test_changed_features_with_object_ids_only():
    """``returnIdsOnly``: features are the object ids added or updated, without GlobalIDs."""
    result = {"edits": [{"id": 2, "objectIds": {"adds": [4, 5], "updates": [5, 6],
                                                "deletes": [9]}}]}
    found = changed_features(result)
    assert [f.object_id for f in found] == [4, 5, 6]
    assert all(f.global_id is None and f.root_global_id is None for f in found)


def test_a_repeat_record_is_resolved_to_its_root_through_parentglobalid():
    """A repeat's record (and its own repeat's) resolve to the top record within the
    changes; a parent outside them leaves the record its own root."""
    outside = "99999999-9999-4999-8999-999999999999"
    result = {"edits": [
        {"id": 0, "features": {"adds": [feature(PARENT, 1, asset_type="hydrant")]}},
        {"id": 1, "features": {"adds": [feature(CHILD, 1, "{%s}" % PARENT.upper())]}},
        {"id": 2, "features": {"updates": [feature(GRANDCHILD, 1, CHILD)]}},
        {"id": 3, "features": {"adds": [feature("11111111-1111-4111-8111-111111111111", 1,
                                                outside)]}}]}
    roots = {f.global_id: f.root_global_id for f in changed_features(result)}
    assert roots[PARENT] == roots[CHILD] == roots[GRANDCHILD] == PARENT
    assert roots["11111111-1111-4111-8111-111111111111"] == "11111111-1111-4111-8111-111111111111"


def test_a_parentglobalid_cycle_ends():
    """Records naming each other as parent (a corrupt layer) do not loop: each gets a root
    from the cycle."""
    result = {"edits": [{"id": 1, "features": {"adds": [feature(PARENT, 1, CHILD),
                                                        feature(CHILD, 2, PARENT)]}},
                        {"id": 2, "features": {"adds": [feature(GRANDCHILD, 3, GRANDCHILD)]}}]}
    roots = {f.global_id: f.root_global_id for f in changed_features(result)}
    assert roots[PARENT] in (PARENT, CHILD) and roots[CHILD] in (PARENT, CHILD)
    assert roots[GRANDCHILD] == GRANDCHILD


def test_a_parentglobalid_that_is_no_guid_is_ignored():
    """A parentglobalid that is not a GUID leaves the record its own root."""
    result = {"edits": [{"id": 1, "features": {"adds": [feature(CHILD, 2, "not-a-guid")]}}]}
    assert changed_features(result)[0].root_global_id == CHILD


@pytest.mark.parametrize("result", [
    {}, {"edits": {}}, {"edits": [{"features": {"adds": []}}]},
    {"edits": [{"id": 0}]}, {"edits": [{"id": 0, "features": {"adds": {"0": {}}}}]},
    {"edits": [{"id": 0, "features": {"adds": [{"geometry": None}]}}]},
    {"edits": [{"id": 0, "features": {"adds": [{"attributes": {"name": "x"}}]}}]},
    {"edits": [{"id": 0, "features": {"adds": [{"attributes": {"globalid": "x"}}]}}]},
    {"edits": [{"id": 0, "objectIds": {"adds": ["4"]}}]},
], ids=["no-edits", "edits-object", "no-layer-id", "neither", "adds-object", "no-attributes",
        "no-ids", "bad-globalid", "string-object-id"])
def test_a_result_that_is_no_extract_changes_answer_is_invalid(result):
    """A result without an edits list, or with an edit or feature that cannot be read."""
    with pytest.raises(InvalidPayload):
        changed_features(result)


def test_the_key_and_the_request_are_what_is_read_never_the_senders_query():
    """The changes asked for are built from the service, the layers and the range alone: a
    notification whose query asks for no inserts still reads inserts, takes the same key as
    the honest one, and the layers a changesUrl names key it (one key for the notification
    each layer of a form with a repeat sends for the same changes)."""
    honest = online(0, changesUrl=changes_url(query="serverGens=[1,5]&layers=[0,1]"))
    odd = online(0, changesUrl=changes_url(
        query="serverGens=[1,5]&layers=[1,0]&returnInserts=false&returnUpdates=false"))
    repeat = online(1, changesUrl=changes_url(query="serverGens=[1,5]&layers=[0,1]"))
    keys = {notifications([n])[0].key for n in (honest, odd, repeat)}
    assert keys == {f"changes:{SERVICE.lower()}/0,1/gens-1-5"}
    [n] = notifications([odd])
    query = parse_qs(urlsplit(n.changes_url).query)
    assert n.changes_url.startswith(f"{SERVICE}/extractChanges?")
    assert (query["serverGens"], query["layers"], query["returnInserts"],
            query["returnUpdates"], query["returnDeletes"], query["returnAttachments"]) == (
        ["[1,5]"], ["[0,1]"], ["true"], ["true"], ["false"], ["true"])
    assert n.submission().changes_url == n.changes_url


def test_an_array_keeps_the_items_it_can_read_and_names_the_others():
    """One item without changesUrl, one without a range: the good ones are read, each other
    item is one problem naming where it is; the array is still ArcGIS's."""
    items = [online(0, 1, 5), {"name": "hook", "layerId": 0, "events": ["LayerSchemaChanged"]},
             online(1, changesUrl=changes_url(query="async=true")), online(2, 6, 8)]
    assert read(raw(items)).sender is Sender.ARCGIS_ONLINE
    found, problems = parse_notifications(items)
    assert [n.layer_id for n in found] == [0, 2]
    assert [p.field for p in problems] == ["[1].changesUrl", "[2].changesUrl"]


def test_features_whose_attachments_changed_are_read_from_the_attachments_too():
    """``returnAttachments``: a photo added to a feature not otherwise edited brings its
    feature (by its GlobalID), once, beside the features edited."""
    result = {"edits": [{"id": 0, "features": {"adds": [feature(PARENT, 1)], "updates": []},
                         "attachments": {"adds": [
                             {"globalId": "{%s}" % GRANDCHILD.upper(),
                              "parentGlobalId": "{%s}" % CHILD.upper()},
                             {"globalId": "{11111111-2222-4333-8444-555555555555}",
                              "parentGlobalId": "{%s}" % PARENT.upper()}],
                             "updates": [], "deleteIds": []}},
                        {"id": 1, "attachments": {"adds": [
                            {"parentGlobalId": "{%s}" % GRANDCHILD.upper()}]}}]}
    found = [(f.layer_id, f.global_id, f.object_id) for f in changed_features(result)]
    assert found == [(0, PARENT, 1), (0, CHILD, None), (1, GRANDCHILD, None)]
    with pytest.raises(InvalidPayload):
        changed_features({"edits": [{"id": 0, "attachments": {"adds": [{"globalId": "x"}]}}]})
