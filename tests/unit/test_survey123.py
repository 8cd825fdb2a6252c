"""Survey123 webhook parsing: one Submission per photo, stable keys, clear refusals."""
from __future__ import annotations

import copy
import json
import logging
from urllib.parse import unquote_plus, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fme_ai_resilience.core.errors import InvalidPayload
from fme_ai_resilience.core.intake.keys import UNKNOWN_ATTACHMENTS, idempotency_key
from fme_ai_resilience.core.intake.survey123 import parse_webhook

from helpers import DATA


TOKEN = "PORTAL-TOKEN-7f3a9c1e5b2d4a6f8e0c"
FEATURE = "5c1e0a2b-9d3f-4e61-8a7b-0f2c3d4e5a6b"
PHOTO = "a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d"
SERVICE = "https://services.example.com/abc/arcgis/rest/services/inspection/FeatureServer"


def sample() -> dict:
    return json.loads((DATA / "survey123_add.json").read_text(encoding="utf-8"))


def photo(gid: str, oid: int, att_id: int, parent: str) -> dict:
    return {"globalId": gid, "parentGlobalId": parent, "contentType": "image/jpeg",
            "name": f"p{att_id}.jpg", "keywords": "photo", "id": att_id,
            "url": f"{SERVICE}/0/{oid}/attachments/{att_id}"}


def test_sample_body_yields_one_submission_with_every_field():
    """The reference body becomes one Submission carrying the feature and photo facts."""
    (sub,) = parse_webhook(json.dumps(sample()).encode(),
                           {"X-Survey123-Delivery": "d-1", "X-Survey123-Event": "addData"})
    assert sub.idempotency_key == f"{FEATURE}/{PHOTO}"
    assert sub.feature_global_id == FEATURE and sub.attachment_global_id == PHOTO
    assert (sub.object_id, sub.attachment_id) == (204, 77)
    assert sub.attachment_url == f"{SERVICE}/0/204/attachments/77"
    assert sub.content_type == "image/jpeg" and sub.question == "photo"
    assert sub.event_type == "addData" and sub.delivery_id == "d-1"
    assert sub.layer_url == f"{SERVICE}/0" and sub.service_url == SERVICE
    assert sub.asset_type == "hydrant" and sub.attributes["asset_id"] == "HYD-0931"
    assert sub.attachments_unknown is False and sub.trace_id
    assert sub.portal_token == TOKEN


def test_token_stays_out_of_repr_payload_and_logs(caplog):
    """The portal token is carried for the download but never shown or serialised."""
    caplog.set_level(logging.DEBUG)
    (sub,) = parse_webhook(json.dumps(sample()))
    assert TOKEN not in repr(sub)
    assert TOKEN not in json.dumps(sub.to_payload())
    assert TOKEN not in caplog.text


def test_several_image_questions_and_repeats_give_one_submission_per_photo():
    """Every photo of every image question and every repeat record is its own Submission."""
    body = sample()
    feature = body["feature"]
    feature["attachments"]["sketch"] = [
        photo("{11111111-2222-4333-8444-555555555555}", 204, 78, FEATURE)]
    repeat_gid = "{99999999-8888-4777-8666-555555555555}"
    feature["repeats"] = {"defects": [
        {"attributes": {"OBJECTID": 5, "GlobalID": repeat_gid, "severity": "high"},
         "layerInfo": {"id": 1, "globalIdField": "GlobalID", "objectIdField": "OBJECTID"},
         "attachments": {"defect_photo": [
             photo("{22222222-2222-4333-8444-555555555555}", 5, 3, repeat_gid),
             photo("{33333333-2222-4333-8444-555555555555}", 5, 4, repeat_gid)]}},
    ]}
    subs = parse_webhook(json.dumps(body))
    assert [s.question for s in subs] == ["photo", "sketch", "defect_photo", "defect_photo"]
    assert len({s.idempotency_key for s in subs}) == 4
    repeat = subs[2]
    assert repeat.feature_global_id == "99999999-8888-4777-8666-555555555555"
    assert repeat.object_id == 5 and repeat.layer_url == f"{SERVICE}/1"
    assert repeat.asset_type == "hydrant"  # inherited from the feature
    assert repeat.attributes["severity"] == "high"


@pytest.mark.parametrize("absent", [True, False])
def test_null_or_absent_attachments_give_one_flagged_submission(absent):
    """No attachment list: one Submission flagged attachments_unknown, keyed by the feature."""
    body = sample()
    if absent:
        del body["feature"]["attachments"]
    else:
        body["feature"]["attachments"] = None
    (sub,) = parse_webhook(json.dumps(body))
    assert sub.attachments_unknown is True
    assert sub.idempotency_key == f"{FEATURE}/{UNKNOWN_ATTACHMENTS}"
    assert sub.attachment_global_id is None and sub.attachment_url is None
    assert sub.layer_url == f"{SERVICE}/0" and sub.object_id == 204


def test_empty_photo_lists_still_register_the_feature():
    """A body listing no photo at all still yields one flagged Submission (nothing dropped)."""
    body = sample()
    body["feature"]["attachments"] = {"photo": []}
    (sub,) = parse_webhook(json.dumps(body))
    assert sub.attachments_unknown is True


def test_repeat_record_without_attachments_is_flagged_for_listing():
    """A repeat record with attachments null is listed through queryAttachments too."""
    body = sample()
    body["feature"]["repeats"] = {"defects": [{
        "attributes": {"globalid": "{99999999-8888-4777-8666-555555555555}", "objectid": 6},
        "layerInfo": {"id": 1}, "attachments": None}]}
    subs = parse_webhook(json.dumps(body))
    assert [s.attachments_unknown for s in subs] == [False, True]
    assert subs[1].layer_url == f"{SERVICE}/1"


def test_upper_and_lower_case_global_ids_yield_the_same_keys():
    """{UPPER} and lower-case GlobalIDs describe the same fact."""
    upper = sample()
    lower = copy.deepcopy(upper)
    lower["feature"]["attributes"]["globalid"] = FEATURE
    lower["feature"]["attachments"]["photo"][0]["globalId"] = PHOTO
    assert ([s.idempotency_key for s in parse_webhook(json.dumps(upper))]
            == [s.idempotency_key for s in parse_webhook(json.dumps(lower))])


def test_delivery_id_never_enters_the_key():
    """Redeliveries with new delivery UUIDs produce the same key."""
    raw = json.dumps(sample())
    a = parse_webhook(raw, {"X-Survey123-Delivery": "one"})[0]
    b = parse_webhook(raw, {"x-survey123-delivery": "two"})[0]
    assert a.idempotency_key == b.idempotency_key and a.trace_id == b.trace_id
    assert (a.delivery_id, b.delivery_id) == ("one", "two")


def test_field_names_come_from_layer_info():
    """globalIdField/objectIdField name the attributes holding the ids (service specific)."""
    body = sample()
    attrs = body["feature"]["attributes"]
    attrs["GlobalID_1"] = attrs.pop("globalid")
    attrs["FID"] = 999
    attrs["objectid"] = 1
    body["feature"]["layerInfo"].update(globalIdField="GlobalID_1", objectIdField="FID")
    body["feature"]["result"] = {}
    (sub,) = parse_webhook(json.dumps(body))
    assert sub.feature_global_id == FEATURE and sub.object_id == 999


def test_edit_data_gets_an_edit_marker_in_the_key():
    """editData keys differ from addData keys for the same photo and are stable per edit."""
    body = sample()
    add = parse_webhook(json.dumps(body))[0]
    body["eventType"] = "editData"
    edit = parse_webhook(json.dumps(body))[0]
    again = parse_webhook(json.dumps(body), {"X-Survey123-Delivery": "other"})[0]
    assert edit.event_type == "editData"
    assert edit.idempotency_key != add.idempotency_key
    assert edit.idempotency_key.startswith(add.idempotency_key + "@edit-")
    assert again.idempotency_key == edit.idempotency_key
    body["feature"]["attributes"]["crew"] = "south-1"
    assert parse_webhook(json.dumps(body))[0].idempotency_key != edit.idempotency_key


def test_event_type_from_header_when_body_has_none():
    """Without eventType in the body the X-Survey123-Event header decides."""
    body = sample()
    del body["eventType"]
    (sub,) = parse_webhook(json.dumps(body), {"X-Survey123-Event": "editData"})
    assert sub.event_type == "editData"


def test_unknown_keys_are_ignored():
    """Extra keys at any level do not disturb parsing."""
    body = sample()
    body["somethingNew"] = {"x": [1, 2]}
    body["feature"]["extra"] = True
    body["feature"]["attachments"]["photo"][0]["sizeHint"] = 12
    (sub,) = parse_webhook(json.dumps(body))
    assert sub.idempotency_key == f"{FEATURE}/{PHOTO}"


def test_token_in_attachment_url_is_stripped():
    """An attachment URL is stored without any token query parameter."""
    body = sample()
    url = body["feature"]["attachments"]["photo"][0]["url"]
    body["feature"]["attachments"]["photo"][0]["url"] = url + "?token=" + TOKEN + "&w=800"
    (sub,) = parse_webhook(json.dumps(body))
    assert TOKEN not in sub.attachment_url and "w=800" in sub.attachment_url


@pytest.mark.parametrize("query", [
    "sv=2022-11-02&se=2026-12-01T00%3A00%3A00Z&sr=b&sp=r&sig=abc%2Fdef%3D",
    "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20261130&X-Amz-Signature=0f1e2d",
    "X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature=9a8b7c&X-Goog-Expires=900",
    "Signature=a%2Bb&Expires=1700000000&Key-Pair-Id=K2ABC",
    "key=AIzaSyExample&alt=media",
])
def test_a_pre_signed_photo_url_keeps_its_signature_byte_for_byte(query):
    """Only portal-token parameters leave a photo URL: a pre-signed URL stays downloadable."""
    body = sample()
    url = f"https://photos.example.net/bucket/p77.jpg?{query}"
    body["feature"]["attachments"]["photo"][0]["url"] = url + "&token=" + TOKEN
    (sub,) = parse_webhook(json.dumps(body))
    assert sub.attachment_url == url


def test_intake_strips_exactly_the_parameters_the_downloader_strips():
    """Every portal-token spelling goes at intake as it does before a download; nothing else."""
    from fme_ai_resilience.services.vision.download import PORTAL_TOKEN_PARAMS

    body = sample()
    base = f"{SERVICE}/0/204/attachments/77"
    tokens = "&".join(f"{name}={TOKEN}" for name in sorted(PORTAL_TOKEN_PARAMS))
    body["feature"]["attachments"]["photo"][0]["url"] = f"{base}?w=800&{tokens}&sig=s1"
    (sub,) = parse_webhook(json.dumps(body))
    assert sub.attachment_url == f"{base}?w=800&sig=s1"


def test_token_echoed_in_an_attribute_is_scrubbed():
    """The portal token never rides into the stored attributes."""
    body = sample()
    body["feature"]["attributes"]["note"] = "sent with " + TOKEN
    (sub,) = parse_webhook(json.dumps(body))
    assert TOKEN not in json.dumps(sub.to_payload())


def test_service_url_falls_back_to_the_attachment_url():
    """Without surveyInfo the FeatureServer URL is read from the photo URL."""
    body = sample()
    del body["surveyInfo"]
    (sub,) = parse_webhook(json.dumps(body))
    assert sub.service_url == SERVICE and sub.layer_url == f"{SERVICE}/0"


def test_mapping_body_is_accepted():
    """An already decoded body (e.g. an FME published parameter parsed upstream) works."""
    assert parse_webhook(sample())[0].idempotency_key == f"{FEATURE}/{PHOTO}"


@pytest.mark.parametrize("body, reason", [
    (b"", "empty body"),
    (b"{not json", "not JSON"),
    (b"\xff\xfe\x00garbage", "not UTF-8"),
    (b"[1, 2]", "not a JSON object but an array"),
    (b'"text"', "not a JSON object but a string"),
    (b"{}", "no feature object"),
    (b'{"feature": []}', "no feature object"),
    (b'{"feature": {"attributes": {"x": 1}}}', "no GlobalID"),
    (b'{"feature": {"attributes": {"globalid": "nope"}}}', "not a GUID"),
    (b'{"eventType": "deleteData", "feature": {}}', "eventType"),
    (b'{"feature": {"attributes": {"v": NaN}}}', "NaN"),
    (b'{"feature": {"attributes": {"v": 1e999}}}', "out of range"),
    (b'{"feature": {"attributes": {"v": "a\\u0000b"}}}', "NUL"),
    (b'{"feature": {"attributes": {"v": "\\ud800"}}}', "surrogate"),
])
def test_invalid_bodies_say_what_is_wrong(body, reason):
    """Each kind of bad body raises InvalidPayload with a reason naming the problem."""
    with pytest.raises(InvalidPayload) as info:
        parse_webhook(body)
    assert reason in str(info.value)


def test_attachment_without_global_id_is_invalid():
    """A listed photo must carry its GlobalID (the key depends on it)."""
    body = sample()
    del body["feature"]["attachments"]["photo"][0]["globalId"]
    with pytest.raises(InvalidPayload) as info:
        parse_webhook(json.dumps(body))
    assert info.value.field == "feature.attachments.photo[0].globalId"


def test_size_limit():
    """A body over the byte limit is refused before it is decoded."""
    raw = json.dumps(sample()).encode()
    with pytest.raises(InvalidPayload, match="over the limit"):
        parse_webhook(raw, max_bytes=len(raw) - 1)
    assert parse_webhook(raw, max_bytes=len(raw))


def test_nesting_limit_also_beyond_the_interpreter_recursion_limit():
    """Deep nesting is refused as InvalidPayload, however deep."""
    body = sample()
    body["feature"]["attributes"]["deep"] = json.loads("[" * 40 + "]" * 40)
    with pytest.raises(InvalidPayload, match="nesting deeper than 32"):
        parse_webhook(json.dumps(body))
    with pytest.raises(InvalidPayload, match="nesting"):
        parse_webhook(b'{"feature": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                      max_bytes=10 ** 6)


def test_too_many_attachments():
    """More photos than the limit is refused."""
    body = sample()
    body["feature"]["attachments"]["photo"] = [
        photo("{%08d-2222-4333-8444-555555555555}" % i, 204, i, FEATURE) for i in range(5)]
    assert len(parse_webhook(json.dumps(body), max_attachments=5)) == 5
    with pytest.raises(InvalidPayload, match="more than 4 attachments"):
        parse_webhook(json.dumps(body), max_attachments=4)


def test_invalid_payload_message_never_carries_the_token():
    """A refusal's message names the problem, not the secret."""
    body = sample()
    body["feature"]["attributes"]["globalid"] = TOKEN
    with pytest.raises(InvalidPayload) as info:
        parse_webhook(json.dumps(body))
    assert TOKEN not in str(info.value)


# -- fuzzing --------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=30)

keys = st.sampled_from(["eventType", "feature", "attributes", "layerInfo", "attachments",
                        "repeats", "globalId", "globalid", "objectid", "id", "url", "result",
                        "surveyInfo", "serviceUrl", "portalInfo", "token", "photo",
                        "parentGlobalId", "globalIdField", "objectIdField", "contentType"])
guids = st.uuids().map(lambda u: "{%s}" % str(u).upper()) | st.uuids().map(str)
shaped = st.recursive(
    st.none() | st.integers() | st.text(max_size=20) | guids | st.sampled_from(
        ["addData", "editData", SERVICE + "/0/1/attachments/2", "http://[::1"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=6),
    max_leaves=40)


def _only_invalid_payload(body):
    try:
        result = parse_webhook(body)
    except InvalidPayload:
        return
    assert result and all(s.idempotency_key for s in result)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=512))
def test_arbitrary_bytes_raise_only_invalid_payload(raw):
    """Random bytes never raise anything but InvalidPayload."""
    _only_invalid_payload(raw)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_arbitrary_json_raises_only_invalid_payload(value):
    """Any JSON document, as text or decoded, never raises anything but InvalidPayload."""
    _only_invalid_payload(json.dumps(value).encode())
    _only_invalid_payload(value)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(keys, shaped, max_size=6))
def test_survey_shaped_json_raises_only_invalid_payload(value):
    """Bodies built from Survey123's own keys never raise anything but InvalidPayload."""
    _only_invalid_payload(json.dumps(value).encode())


@settings(max_examples=200, deadline=None)
@given(guids, guids)
def test_keys_do_not_depend_on_spelling(feature, attachment):
    """Any spelling of the same GlobalIDs yields the same key."""
    assert (idempotency_key(feature, attachment)
            == idempotency_key(feature.strip("{}").lower(), attachment.upper()))


# -- regressions: business data kept as sent, limits and inheritance ------------------------------

REPEAT_1 = "{11111111-1111-4111-8111-111111111111}"
REPEAT_2 = "{22222222-2222-4222-8222-222222222222}"


def edit_body(attributes: dict) -> str:
    body = sample()
    body["eventType"] = "editData"
    body["feature"]["attributes"].update(attributes)
    return json.dumps(body)


@pytest.mark.parametrize("first, second", [
    ({"key": "HYD-0931"}, {"key": "HYD-0932"}),
    ({"key": "K1", "notes": "Basic leaking"}, {"key": "K1", "notes": "Basic fixed"}),
    ({"signature": "yes", "condition": "token: 3"}, {"signature": "yes", "condition": "token: 4"}),
])
def test_different_edits_get_different_keys_whatever_the_field_names(first, second):
    """Edits differing only in secret-looking field names or text still get distinct keys."""
    a = parse_webhook(edit_body(first))[0].idempotency_key
    b = parse_webhook(edit_body(second))[0].idempotency_key
    assert a != b


def test_survey_fields_named_like_secrets_are_stored_unchanged():
    """Attributes called key/notes/asset_type keep their values; only the portal token goes."""
    body = sample()
    attrs = {"key": "HYD-0931", "notes": "Basic check ok; password: none needed, token: 3 of 5",
             "asset_type": "basic hydrant"}
    body["feature"]["attributes"].update(attrs)
    body["feature"]["attributes"]["echo"] = TOKEN
    (sub,) = parse_webhook(json.dumps(body))
    assert {k: sub.attributes[k] for k in attrs} == attrs
    assert sub.asset_type == "basic hydrant"
    assert sub.attributes["echo"] != TOKEN and TOKEN not in json.dumps(sub.to_payload())


def test_non_ascii_digits_are_invalid_payload_not_a_crash():
    """An objectid of superscript digits is refused as InvalidPayload naming the field."""
    body = sample()
    body["feature"]["attributes"]["objectid"] = "\u00b2"
    with pytest.raises(InvalidPayload, match="objectid"):
        parse_webhook(json.dumps(body))


def test_unknown_photo_lists_count_toward_max_attachments():
    """Repeat records without photo lists count toward the limit, so one body stays bounded."""
    body = sample()
    body["feature"]["attachments"] = {}
    body["feature"]["repeats"] = {"visits": [
        {"attributes": {"globalid": "{%08d-1111-4111-8111-111111111111}" % i}}
        for i in range(10)]}
    assert len(parse_webhook(json.dumps(body), max_attachments=11)) == 11
    with pytest.raises(InvalidPayload, match="more than 10 attachments.*max_attachments"):
        parse_webhook(json.dumps(body), max_attachments=10)


def test_nested_repeats_inherit_the_root_asset_type():
    """A repeat inside a repeat takes the nearest ancestor's asset type."""
    body = sample()
    body["feature"]["repeats"] = {"visits": [{
        "attributes": {"globalid": REPEAT_1}, "layerInfo": {"id": 1}, "attachments": None,
        "repeats": {"defects": [{"attributes": {"globalid": REPEAT_2}, "layerInfo": {"id": 2},
                                 "attachments": None}]}}]}
    subs = parse_webhook(json.dumps(body))
    assert len(subs) == 3 and {s.asset_type for s in subs} == {"hydrant"}


def test_feature_without_listed_photo_gets_its_own_unknown_submission():
    """A feature listing no photo still gets one even when a repeat record lists none either."""
    body = sample()
    body["feature"]["attachments"] = {}
    body["feature"]["repeats"] = {"t": [{"attributes": {"globalid": REPEAT_1},
                                         "attachments": None}]}
    keys = {s.idempotency_key for s in parse_webhook(json.dumps(body))}
    assert keys == {f"{FEATURE}/{UNKNOWN_ATTACHMENTS}",
                    f"11111111-1111-4111-8111-111111111111/{UNKNOWN_ATTACHMENTS}"}


def test_literal_backslash_u0000_text_is_accepted_and_real_nul_refused():
    """Text spelling backslash-u0000 is data; a decoded NUL character is still refused."""
    body = sample()
    body["feature"]["attributes"]["notes"] = "path C:\\u0000x"
    (sub,) = parse_webhook(json.dumps(body))
    assert sub.attributes["notes"] == "path C:\\u0000x"
    body["feature"]["attributes"]["notes"] = "a\x00b"
    with pytest.raises(InvalidPayload, match="NUL"):
        parse_webhook(json.dumps(body))


def test_null_event_type_falls_back_to_the_header():
    """"eventType": null in the body lets the X-Survey123-Event header decide."""
    body = sample()
    body["eventType"] = None
    (sub,) = parse_webhook(json.dumps(body), {"X-Survey123-Event": "editData"})
    assert sub.event_type == "editData"


def test_service_url_with_a_query_builds_clean_layer_and_photo_urls():
    """A serviceUrl carrying ?token=... yields layer URLs without the query or the token."""
    body = sample()
    del body["feature"]["attachments"]["photo"][0]["url"]
    body["surveyInfo"]["serviceUrl"] = SERVICE + "/?token=" + TOKEN + "&f=json"
    (sub,) = parse_webhook(json.dumps(body))
    assert sub.service_url == SERVICE and sub.layer_url == f"{SERVICE}/0"
    assert sub.attachment_url == f"{SERVICE}/0/204/attachments/77"


# -- photo URLs lose the portal token and nothing else -------------------------------------------

_URL_TEXT = st.lists(st.sampled_from(list("ab:/.?#@[]%=&-_ 09\t\u00e9\u2100")
                                    + ["token", "access_token", "Token", "key", "sig", "user:pw@"]),
                    max_size=20).map("".join)


def _params(url):
    """The query parameters of ``url`` as sent, each with its decoded lower-case name."""
    query = urlsplit(url).query
    return [(unquote_plus(p.partition("=")[0]).strip().lower(), p) for p in query.split("&") if p]


@settings(max_examples=300, deadline=None)
@given(st.one_of(_URL_TEXT, st.builds(lambda p: "https://h.example/" + p, _URL_TEXT)))
def test_a_photo_url_keeps_everything_but_portal_tokens_and_credentials(url):
    """For any URL text: the portal-token parameters go, every other parameter stays verbatim
    and in order, and a URL with neither a token parameter nor credentials is kept as sent."""
    from fme_ai_resilience.core.text.redact import PORTAL_TOKEN_PARAMS
    from fme_ai_resilience.core.intake.survey123 import _without_token

    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        with pytest.raises(InvalidPayload):
            _without_token(url)
        return
    out = _without_token(url)
    assert not {name for name, _ in _params(out)} & PORTAL_TOKEN_PARAMS
    assert [p for name, p in _params(out)] == [p for name, p in _params(url)
                                               if name not in PORTAL_TOKEN_PARAMS]
    assert "@" not in urlsplit(out).netloc
    if "@" not in netloc and not {name for name, _ in _params(url)} & PORTAL_TOKEN_PARAMS:
        assert out == url


def test_an_object_body_is_copied_not_shared():
    """Changing a decoded body handed in as an object afterwards leaves the submissions as
    parsed, and their attributes cannot be changed."""
    body = sample()
    (sub,) = parse_webhook(body)
    body["feature"]["attributes"]["crew"] = "changed"
    assert sub.attributes["crew"] == "north-2"
    with pytest.raises(TypeError):
        sub.attributes["crew"] = "x"  # type: ignore[index]


def test_every_photo_of_a_record_carries_the_records_attributes():
    """Photos of one record carry equal, read-only attributes; a repeat record its own."""
    subs = parse_webhook((DATA / "survey123_repeats.json").read_bytes())
    feature = [s for s in subs if s.layer_url.endswith("/0")]
    assert len(feature) == 3 and all(s.attributes == feature[0].attributes for s in feature)
    assert all(s.attributes["asset_id"] == "VLV-0412" for s in feature)
    repeat = [s for s in subs if s.layer_url.endswith("/1")]
    assert [s.attributes["severity"] for s in repeat] == ["high", "low"]
    assert [s.asset_type for s in repeat] == ["valve", "valve-box"]


def test_the_delivery_id_is_kept_with_control_characters_escaped():
    """A delivery id carrying a line break or a terminal escape is kept visibly escaped,
    bounded after escaping."""
    from fme_ai_resilience.core.intake.survey123 import delivery_id_of

    assert delivery_id_of({"X-Survey123-Delivery": " d-1\r\nforged\x1b "}) == \
        "d-1\\x0d\\x0aforged\\x1b"
    assert len(delivery_id_of({"X-Survey123-Delivery": "x\n" * 500})) == 128
