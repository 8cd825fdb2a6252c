"""FeatureLayer: paged queries and time windows, attachments (and the per-feature fallback),
applyEdits per row, every HTTP-200 error classified, the token only in the header, a refused
token renewed once, and one CallRecord per request."""
from __future__ import annotations

import json
import logging
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
import responses

from fme_ai_resilience.core.errors import ArcGISError, ConfigurationError, ErrorClass
from fme_ai_resilience.services.arcgis.layer import (AttachmentGroup, AttachmentInfo, EditResult,
                                                     FeatureLayer, where_since)
from fme_ai_resilience.services.arcgis.credentials import OAuthAppToken, StaticToken, UserToken

LAYER = "https://services.example.com/arcgis/rest/services/Assets/FeatureServer/0"
QUERY = f"{LAYER}/query"
PORTAL = "https://portal.example.com/portal"
OAUTH_URL = f"{PORTAL}/sharing/rest/oauth2/token"
TOKEN = "layer-token-5f2a9c"
CLIENT_SECRET = "app-secret-7c1f9e2d"
G1 = "{2B0D6B0E-6E8F-4C2A-9A53-0C1B4B7E9D11}"
G2 = "{7F3C1A22-0B4D-4E6F-8A9B-1C2D3E4F5A6B}"


def params(call) -> dict:
    """The parameters of a recorded request: its query string, or its form for a POST."""
    request = call.request
    if request.method == "POST":
        body = request.body.decode() if isinstance(request.body, bytes) else request.body
        text = body
    else:
        text = urlsplit(request.url).query
    return {k: v[0] for k, v in parse_qs(text).items()}


def layer(clock, **kw) -> FeatureLayer:
    kw.setdefault("token", StaticToken(TOKEN))
    return FeatureLayer(LAYER, clock=clock, **kw)


def page(*ids, more=False):
    body = {"objectIdFieldName": "objectid", "globalIdFieldName": "globalid",
            "features": [{"attributes": {"objectid": i}} for i in ids]}
    if more:
        body["exceededTransferLimit"] = True
    return body


# -- query --------------------------------------------------------------------------------------

@responses.activate
def test_query_pages_through_three_pages_of_the_transfer_limit(clock):
    """While exceededTransferLimit is true the next page starts at resultOffset += rows."""
    responses.get(QUERY, json=page(1, 2, more=True))
    responses.get(QUERY, json=page(3, 4, more=True))
    responses.get(QUERY, json=page(5))
    rows = layer(clock).query("crew = 'A'", out_fields=("objectid", "crew"), page_size=2,
                              order_by="objectid")
    assert [r["objectid"] for r in rows] == [1, 2, 3, 4, 5]
    sent = [params(c) for c in responses.calls]
    assert [(p["resultOffset"], p["resultRecordCount"]) for p in sent] == [
        ("0", "2"), ("2", "2"), ("4", "2")]
    assert sent[0]["where"] == "crew = 'A'" and sent[0]["outFields"] == "objectid,crew"
    assert sent[0]["returnGeometry"] == "false" and sent[0]["f"] == "json"
    assert sent[0]["orderByFields"] == "objectid"


@responses.activate
def test_query_without_a_page_size_pages_by_what_the_layer_gave(clock):
    """Without page_size the layer's maxRecordCount sets the page; offsets follow the rows."""
    responses.get(QUERY, json=page(1, 2, 3, more=True))
    responses.get(QUERY, json=page(4))
    assert len(layer(clock).query()) == 4
    first, second = (params(c) for c in responses.calls)
    assert "resultOffset" not in first and "resultRecordCount" not in first
    assert second["resultOffset"] == "3"


def test_a_time_window_becomes_timestamp_comparisons_in_utc():
    """since/until (epoch ms) become >= and < on the date field, ANDed with the where clause."""
    since, until = 1_764_374_400_000, 1_764_460_800_999   # 2025-11-29 00:00:00 .. +1 day
    assert where_since("crew = 'A'", date_field="CreationDate", since_ms=since,
                       until_ms=until) == (
        "(crew = 'A') AND CreationDate >= timestamp '2025-11-29 00:00:00' "
        "AND CreationDate < timestamp '2025-11-30 00:00:00'")
    assert where_since(date_field="EditDate", since_ms=since) == (
        "EditDate >= timestamp '2025-11-29 00:00:00'")
    assert where_since("1=1") == "1=1"


@pytest.mark.parametrize("kw", [dict(since_ms=1000), dict(date_field="x y", since_ms=1000),
                                dict(date_field="d", since_ms=5000, until_ms=1000),
                                dict(date_field="d", since_ms=float("nan"))])
def test_a_bad_time_window_is_a_configuration_error(kw):
    """A window needs a field name and finite, ordered bounds."""
    with pytest.raises(ConfigurationError):
        where_since("1=1", **kw)


@responses.activate
def test_the_window_reaches_the_query(clock):
    """query(date_field=..., since_ms=...) sends the combined where clause."""
    responses.get(QUERY, json=page())
    layer(clock).query(date_field="CreationDate", since_ms=0, until_ms=86_400_000)
    assert params(responses.calls[0])["where"] == (
        "CreationDate >= timestamp '1970-01-01 00:00:00' "
        "AND CreationDate < timestamp '1970-01-02 00:00:00'")


@responses.activate
def test_return_ids_only_gives_object_ids(clock):
    """returnIdsOnly=true answers objectIds; an empty layer's null list is no ids."""
    responses.get(QUERY, json={"objectIdFieldName": "objectid", "objectIds": [11, 12, 13]})
    responses.get(QUERY, json={"objectIdFieldName": "objectid", "objectIds": None})
    assert layer(clock).query(return_ids_only=True) == [11, 12, 13]
    assert params(responses.calls[0])["returnIdsOnly"] == "true"
    assert layer(clock).query(return_ids_only=True) == []


@responses.activate
def test_a_long_where_clause_goes_as_a_post_form(clock):
    """A query string longer than a proxy would pass is POSTed instead."""
    responses.post(QUERY, json=page(1))
    where = "objectid IN (" + ",".join(str(i) for i in range(1000)) + ")"
    layer(clock).query(where)
    call = responses.calls[0]
    assert call.request.method == "POST" and urlsplit(call.request.url).query == ""
    assert params(call)["where"] == where


@responses.activate
def test_an_empty_page_that_claims_more_is_bad_format(clock):
    """exceededTransferLimit on an empty page would loop forever: it is a format error."""
    responses.get(QUERY, json=page(more=True))
    with pytest.raises(ArcGISError) as caught:
        layer(clock).query()
    assert caught.value.error_class is ErrorClass.BAD_FORMAT



@responses.activate
def test_a_layer_that_ignores_result_offset_is_refused_not_looped(clock):
    """The same page again means the layer does not page: BAD_REQUEST instead of a loop."""
    responses.get(QUERY, json=page(1, 2, more=True))
    with pytest.raises(ArcGISError) as caught:
        layer(clock).query(page_size=2)
    assert caught.value.error_class is ErrorClass.BAD_REQUEST
    assert "does not page" in str(caught.value) and len(responses.calls) == 2

# -- attachments --------------------------------------------------------------------------------

GROUPS = {"attachmentGroups": [
    {"parentObjectId": 11, "parentGlobalId": G1, "attachmentInfos": [
        {"id": 42, "globalId": "{A1}", "name": "photo.jpg", "contentType": "image/jpeg",
         "size": 123456, "keywords": "photo", "url": f"{LAYER}/11/attachments/42"},
        {"id": 43, "globalId": "{A2}", "name": "notes.pdf", "contentType": "application/pdf",
         "size": 99}]},
    {"parentObjectId": 12, "parentGlobalId": G2, "attachmentInfos": [
        {"id": 50, "globalId": "{A3}", "name": "p.png", "contentType": "image/png", "size": 7}]},
]}


@responses.activate
def test_query_attachments_gives_one_group_per_feature(clock):
    """queryAttachments with returnUrl=true; a missing url is built; other types are left out."""
    responses.get(f"{LAYER}/queryAttachments", json=GROUPS)
    groups = layer(clock).query_attachments(object_ids=[11, 12])
    assert groups == [
        AttachmentGroup(11, G1, (AttachmentInfo(42, "{A1}", "photo.jpg", "image/jpeg", 123456,
                                                f"{LAYER}/11/attachments/42"),)),
        AttachmentGroup(12, G2, (AttachmentInfo(50, "{A3}", "p.png", "image/png", 7,
                                                f"{LAYER}/12/attachments/50"),))]
    sent = params(responses.calls[0])
    assert sent["objectIds"] == "11,12" and sent["returnUrl"] == "true"
    assert sent["attachmentTypes"] == "image/jpeg,image/png"



@responses.activate
def test_query_attachments_pages_and_merges_by_feature(clock):
    """Pages of queryAttachments follow resultOffset; a feature split across pages is one group."""
    first = {"exceededTransferLimit": True, "attachmentGroups": [
        {"parentObjectId": 11, "parentGlobalId": G1, "attachmentInfos": [
            {"id": 42, "contentType": "image/jpeg"}]}]}
    second = {"attachmentGroups": [{"parentObjectId": 11, "parentGlobalId": G1,
                                    "attachmentInfos": [{"id": 44, "contentType": "image/png"}]}]}
    responses.get(f"{LAYER}/queryAttachments", json=first)
    responses.get(f"{LAYER}/queryAttachments", json=second)
    groups = layer(clock).query_attachments(object_ids=[11])
    assert [(g.parent_object_id, [a.id for a in g.attachments]) for g in groups] == [
        (11, [42, 44])]
    assert params(responses.calls[1])["resultOffset"] == "1"


@responses.activate
def test_query_attachments_that_repeat_a_page_are_refused_not_looped(clock):
    """A queryAttachments page with nothing new while claiming more is BAD_REQUEST."""
    responses.get(f"{LAYER}/queryAttachments", json=dict(GROUPS, exceededTransferLimit=True))
    with pytest.raises(ArcGISError) as caught:
        layer(clock).query_attachments(object_ids=[11, 12])
    assert caught.value.error_class is ErrorClass.BAD_REQUEST and len(responses.calls) == 2

@responses.activate
def test_query_attachments_by_global_id_sends_them_as_arcgis_writes_them(clock):
    """GlobalIDs in any accepted form go as {UPPER-CASE} GUIDs."""
    responses.get(f"{LAYER}/queryAttachments", json={"attachmentGroups": []})
    assert layer(clock).query_attachments(global_ids=[G1.lower().strip("{}")]) == []
    assert params(responses.calls[0])["globalIds"] == G1


def test_query_attachments_needs_ids(clock):
    """No ids, or a GlobalID that is not a GUID, is a ConfigurationError before any request."""
    with pytest.raises(ConfigurationError):
        layer(clock).query_attachments()
    with pytest.raises(ConfigurationError):
        layer(clock).query_attachments(global_ids=["x' OR '1'='1"])


UNSUPPORTED = {"error": {"code": 400, "message": "Unable to complete operation.",
                         "details": ["'queryAttachments' operation is not supported."]}}


@responses.activate
def test_a_layer_without_query_attachments_is_listed_feature_by_feature(clock):
    """An HTTP-200 error about the operation switches to <layer>/<oid>/attachments for good."""
    responses.get(f"{LAYER}/queryAttachments", json=UNSUPPORTED)
    responses.get(LAYER, json={"objectIdField": "OBJECTID", "globalIdField": "GlobalID"})
    responses.get(QUERY, json={"features": [{"attributes": {"OBJECTID": 11, "GlobalID": G1}}]})
    responses.get(f"{LAYER}/11/attachments", json={"attachmentInfos": [
        {"id": 42, "contentType": "image/jpeg", "size": 5, "name": "a.jpg"},
        {"id": 43, "contentType": "text/plain", "size": 5, "name": "b.txt"}]})
    features = layer(clock)
    expected = [AttachmentGroup(11, G1, (AttachmentInfo(42, None, "a.jpg", "image/jpeg", 5,
                                                        f"{LAYER}/11/attachments/42"),))]
    assert features.query_attachments(global_ids=[G1]) == expected
    assert params(responses.calls[2])["where"] == f"GlobalID IN ('{G1}')"
    calls = len(responses.calls)
    assert features.query_attachments(object_ids=[11]) == expected
    urls = [c.request.url.split("?")[0] for c in responses.calls[calls:]]
    assert f"{LAYER}/queryAttachments" not in urls and LAYER not in urls   # remembered


@responses.activate
def test_other_attachment_errors_are_raised_not_worked_around(clock):
    """A refusal that is not about the operation (403 here) raises; no fallback is tried."""
    responses.get(f"{LAYER}/queryAttachments",
                  json={"error": {"code": 403, "message": "You do not have permissions"}})
    with pytest.raises(ArcGISError) as caught:
        layer(clock).query_attachments(object_ids=[1])
    assert caught.value.error_class is ErrorClass.AUTH
    assert len(responses.calls) == 1


# -- applyEdits ---------------------------------------------------------------------------------

@responses.activate
def test_apply_edits_reports_each_row_and_a_failed_row_is_not_raised(clock):
    """Per-row results come back in order; a refused row is a failed EditResult."""
    responses.post(f"{LAYER}/applyEdits", json={
        "addResults": [{"objectId": 30, "globalId": G2, "success": True}],
        "updateResults": [
            {"objectId": 11, "globalId": G1, "success": True},
            {"objectId": None, "globalId": "{0000}", "success": False,
             "error": {"code": 1019, "description": "Object is missing."}}],
        "deleteResults": []})
    results = layer(clock).apply_edits(
        updates=[{"globalid": G1, "ai_condition": "damaged"},
                 {"attributes": {"globalid": "{0000}", "ai_condition": "good"}}],
        adds=[{"globalid": G2, "parentglobalid": G1}])
    assert results.updates == (
        EditResult(G1, 11, True),
        EditResult("{0000}", None, False, 1019, "Object is missing."))
    assert results.adds == (EditResult(G2, 30, True),)
    assert not results.ok and [r.error_code for r in results.failed] == [1019]
    sent = params(responses.calls[0])
    assert json.loads(sent["updates"]) == [
        {"attributes": {"globalid": G1, "ai_condition": "damaged"}},
        {"attributes": {"globalid": "{0000}", "ai_condition": "good"}}]
    assert json.loads(sent["adds"]) == [{"attributes": {"globalid": G2, "parentglobalid": G1}}]
    assert (sent["useGlobalIds"], sent["rollbackOnFailure"]) == ("true", "true")


@responses.activate
def test_apply_edits_failing_as_a_whole_raises(clock):
    """An error for the whole call (inside an HTTP 200) raises with its class."""
    responses.post(f"{LAYER}/applyEdits", json={"error": {"code": 503, "message": "busy"}})
    with pytest.raises(ArcGISError) as caught:
        layer(clock).apply_edits(updates=[{"globalid": G1}])
    assert caught.value.error_class is ErrorClass.SERVER_ERROR


@responses.activate
def test_apply_edits_with_a_result_missing_is_bad_format(clock):
    """Fewer results than rows sent leaves the outcome unknown: BAD_FORMAT, to be retried."""
    responses.post(f"{LAYER}/applyEdits", json={"updateResults": []})
    with pytest.raises(ArcGISError) as caught:
        layer(clock).apply_edits(updates=[{"globalid": G1}])
    assert caught.value.error_class is ErrorClass.BAD_FORMAT


@responses.activate
def test_apply_edits_with_nothing_to_do_makes_no_request(clock):
    """No rows, no call."""
    assert layer(clock).apply_edits().ok
    assert len(responses.calls) == 0


def test_apply_edits_refuses_rows_that_are_not_json(clock):
    """A NaN or an object JSON cannot carry is a ConfigurationError before any request."""
    with pytest.raises(ConfigurationError):
        layer(clock).apply_edits(updates=[{"globalid": G1, "ai_confidence": float("nan")}])


# -- errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    (498, ErrorClass.AUTH), (499, ErrorClass.AUTH), (403, ErrorClass.AUTH),
    (404, ErrorClass.NOT_FOUND), (400, ErrorClass.BAD_REQUEST),
    (429, ErrorClass.RATE_LIMITED), (500, ErrorClass.SERVER_ERROR),
    (503, ErrorClass.SERVER_ERROR), (504, ErrorClass.SERVER_ERROR),
    (17, ErrorClass.SERVER_ERROR)])
@responses.activate
def test_an_error_inside_an_http_200_body_is_classified(clock, code, expected):
    """{"error": {"code": N}} in a 200 raises ArcGISError with the class of N."""
    responses.get(QUERY, json={"error": {"code": code, "message": "Something",
                                         "details": ["in detail"]}})
    with pytest.raises(ArcGISError) as caught:
        layer(clock).query()
    error = caught.value
    assert (error.error_class, error.code, error.status_code) == (expected, code, 200)
    assert "Something; in detail" in str(error) and error.operation == "query"


@pytest.mark.parametrize("status, expected", [
    (498, ErrorClass.AUTH), (401, ErrorClass.AUTH), (403, ErrorClass.AUTH),
    (404, ErrorClass.NOT_FOUND), (400, ErrorClass.BAD_REQUEST), (502, ErrorClass.SERVER_ERROR)])
@responses.activate
def test_an_http_error_status_is_classified(clock, status, expected):
    """Real HTTP error statuses (HTML or JSON bodies alike) get the same classes."""
    responses.get(QUERY, status=status, body="<html>no</html>")
    with pytest.raises(ArcGISError) as caught:
        layer(clock).query()
    assert caught.value.error_class is expected and caught.value.status_code == status


@responses.activate
def test_rate_limiting_carries_retry_after(clock):
    """429 (as status or inside a 200) carries the wait the service asked for."""
    responses.get(QUERY, status=429, headers={"Retry-After": "12"}, json={})
    responses.get(QUERY, json={"error": {"code": 429, "message": "Too many requests"}},
                  headers={"Retry-After": "3"})
    for wait in (12.0, 3.0):
        with pytest.raises(ArcGISError) as caught:
            layer(clock).query()
        assert caught.value.error_class is ErrorClass.RATE_LIMITED
        assert caught.value.retry_after_s == wait


@pytest.mark.parametrize("failure, expected", [
    (requests.exceptions.ConnectTimeout(), ErrorClass.CONNECT_TIMEOUT),
    (requests.exceptions.ReadTimeout(), ErrorClass.TTFB_TIMEOUT),
    (requests.exceptions.ConnectionError(), ErrorClass.CONNECTION_ERROR)])
@responses.activate
def test_transport_failures_get_the_transport_classes(clock, failure, expected):
    """Timeouts and refused connections raise with their transient class and no status."""
    responses.get(QUERY, body=failure)
    with pytest.raises(ArcGISError) as caught:
        layer(clock).query()
    assert caught.value.error_class is expected and caught.value.status_code is None


@pytest.mark.parametrize("kw", [dict(body="<html>proxy login</html>"), dict(json=[1, 2]),
                                dict(body='{"features": [' * 50 + "]}" * 50)])
@responses.activate
def test_an_answer_that_is_not_a_json_object_is_bad_format(clock, kw):
    """HTML, a JSON array or absurd nesting in a 200 is BAD_FORMAT."""
    responses.get(QUERY, **kw)
    with pytest.raises(ArcGISError) as caught:
        layer(clock).query()
    assert caught.value.error_class is ErrorClass.BAD_FORMAT


@responses.activate
def test_an_answer_over_the_size_limit_is_bad_format(clock):
    """The body is read only up to max_response_bytes."""
    responses.get(QUERY, json=page(*range(500)))
    with pytest.raises(ArcGISError) as caught:
        layer(clock, max_response_bytes=1000).query()
    assert caught.value.error_class is ErrorClass.BAD_FORMAT


@responses.activate
def test_a_redirect_is_not_followed(clock):
    """A 3xx is BAD_REQUEST: the token is sent nowhere but the configured URL."""
    responses.get(QUERY, status=302, headers={"Location": "https://elsewhere.example.com/q"},
                  body="Moved")
    with pytest.raises(ArcGISError) as caught:
        layer(clock).query()
    assert caught.value.error_class is ErrorClass.BAD_REQUEST
    assert len(responses.calls) == 1


# -- the token ----------------------------------------------------------------------------------

def _oauth(*tokens):
    for token in tokens:
        responses.post(OAUTH_URL, json={"access_token": token, "expires_in": 7200})
    return OAuthAppToken(PORTAL, "app-id", CLIENT_SECRET)


@responses.activate
def test_the_token_travels_only_in_the_header(clock):
    """Every layer request has X-Esri-Authorization: Bearer; no URL or body holds the token."""
    provider = _oauth(TOKEN)
    responses.get(QUERY, json=page(1))
    responses.get(f"{LAYER}/queryAttachments", json={"attachmentGroups": []})
    responses.post(f"{LAYER}/applyEdits", json={"updateResults": [{"success": True}]})
    features = layer(clock, token=provider)
    features.query()
    features.query_attachments(object_ids=[1])
    features.apply_edits(updates=[{"globalid": G1}])
    layer_calls = [c for c in responses.calls if c.request.url.startswith(LAYER)]
    assert len(layer_calls) == 3
    for call in responses.calls:
        body = call.request.body or ""
        body = body.decode() if isinstance(body, bytes) else body
        assert TOKEN not in call.request.url and TOKEN not in body
        assert "token=" not in call.request.url.lower()
    for call in layer_calls:
        assert call.request.headers["X-Esri-Authorization"] == f"Bearer {TOKEN}"
        assert "Authorization" not in call.request.headers


@responses.activate
def test_a_user_token_is_sent_with_its_referer(clock):
    """A generateToken token is bound to its referer, so requests send it as Referer."""
    responses.post(f"{PORTAL}/sharing/rest/generateToken", json={"token": TOKEN})
    responses.get(QUERY, json=page())
    provider = UserToken(PORTAL, "surveyor", "pw-1234", referer="https://fme.example.com")
    layer(clock, token=provider).query()
    assert responses.calls[1].request.headers["Referer"] == "https://fme.example.com"


@responses.activate
def test_a_refused_token_is_invalidated_and_the_request_sent_again_with_a_new_one(clock):
    """498 in a 200 drops the token; the request is repeated once with the renewed token."""
    provider = _oauth("old-token-1111", "new-token-2222")
    responses.get(QUERY, json={"error": {"code": 498, "message": "Invalid token."}})
    responses.get(QUERY, json=page(7))
    assert layer(clock, token=provider).query() == [{"objectid": 7}]
    headers = [c.request.headers.get("X-Esri-Authorization") for c in responses.calls
               if c.request.url.startswith(QUERY)]
    assert headers == ["Bearer old-token-1111", "Bearer new-token-2222"]
    assert provider.refreshes == 2


@responses.activate
def test_a_token_refused_twice_raises_auth_and_the_next_call_refreshes(clock):
    """A renewed token refused again raises AUTH and is dropped too: the next call renews."""
    provider = _oauth("t-one-1111", "t-two-2222", "t-three-3333")
    responses.get(QUERY, json={"error": {"code": 499, "message": "Token Required"}})
    features = layer(clock, token=provider)
    with pytest.raises(ArcGISError) as caught:
        features.query()
    assert caught.value.error_class is ErrorClass.AUTH and caught.value.code == 499
    assert provider.expires_at is None and provider.refreshes == 2
    with pytest.raises(ArcGISError):
        features.query()
    headers = [c.request.headers.get("X-Esri-Authorization") for c in responses.calls
               if c.request.url.startswith(QUERY)]
    # the renewal after the third refusal gave t-three again: not worth a fourth request
    assert headers == ["Bearer t-one-1111", "Bearer t-two-2222", "Bearer t-three-3333"]


@responses.activate
def test_a_refused_static_token_is_not_sent_again(clock):
    """A static token cannot be renewed: the 498 raises AUTH after one request."""
    responses.get(QUERY, json={"error": {"code": 498, "message": "Invalid token."}})
    with pytest.raises(ArcGISError) as caught:
        layer(clock).query()
    assert caught.value.error_class is ErrorClass.AUTH
    assert len(responses.calls) == 1


@responses.activate
def test_errors_logs_and_reprs_hold_no_secret(clock, caplog):
    """An answer echoing the token is redacted in the exception; reprs show no token."""
    provider = _oauth("echoed-token-9999", "echoed-token-9999")
    responses.get(QUERY, json={"error": {"code": 498,
                                         "message": "Invalid token echoed-token-9999"}})
    features = layer(clock, token=provider)
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(ArcGISError) as caught:
            features.query()
    for text in (str(caught.value), caught.value.reason, repr(features), repr(provider),
                 caplog.text):
        assert "echoed-token-9999" not in text and CLIENT_SECRET not in text
    assert "[REDACTED]" in str(caught.value)


def test_a_layer_url_with_a_token_or_without_a_layer_id_is_refused(clock):
    """The URL must end in the layer id and carry no query string (the token goes in a header)."""
    with pytest.raises(ConfigurationError) as caught:
        FeatureLayer(f"{LAYER}?token={TOKEN}")
    assert TOKEN not in str(caught.value)
    with pytest.raises(ConfigurationError):
        FeatureLayer(LAYER.rsplit("/", 1)[0])
    assert FeatureLayer(LAYER + "/").url == LAYER


# -- the call log -------------------------------------------------------------------------------

@responses.activate
def test_every_request_is_reported_to_on_call(clock):
    """One CallRecord per HTTP request: service arcgis, start time, status and error class."""
    records = []
    provider = _oauth("old-token-1111", "new-token-2222")
    responses.get(QUERY, json={"error": {"code": 498, "message": "Invalid token."}})
    responses.get(QUERY, json=page(1))
    responses.get(QUERY, status=503, body="")
    features = layer(clock, token=provider, on_call=records.append)
    features.query()
    clock.advance(10)
    with pytest.raises(ArcGISError):
        features.query()
    assert [(r.service, r.status_code, r.error_class) for r in records] == [
        ("arcgis", 200, "AUTH"), ("arcgis", 200, None), ("arcgis", 503, "SERVER_ERROR")]
    assert [r.started_at for r in records] == [clock.now() - 10] * 2 + [clock.now()]
    assert all(r.duration_s >= 0 and set(r.phases) >= {"connect", "ttfb"} for r in records)


@responses.activate
def test_a_failing_on_call_hook_does_not_fail_the_call(clock, caplog):
    """The call log is bookkeeping: a hook that raises is logged, the answer still returned."""
    def broken(record):
        raise RuntimeError("ledger down")

    responses.get(QUERY, json=page(1))
    with caplog.at_level(logging.WARNING, logger="fme_ai_resilience.arcgis"):
        assert layer(clock, on_call=broken).query() == [{"objectid": 1}]
    assert "on_call failed" in caplog.text


@responses.activate
def test_a_public_layer_is_called_without_a_token(clock):
    """token=None sends no authorization header at all."""
    responses.get(QUERY, json=page(1))
    FeatureLayer(LAYER, clock=clock).query()
    assert "X-Esri-Authorization" not in responses.calls[0].request.headers
