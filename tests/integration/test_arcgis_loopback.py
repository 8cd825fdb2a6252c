"""FeatureLayer and an OAuth app token against a stand-in portal and feature service on
127.0.0.1: real sockets, real form bodies, the token only in the header."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from fme_ai_resilience.core.errors import ArcGISError, ErrorClass
from fme_ai_resilience.services.arcgis.layer import FeatureLayer
from fme_ai_resilience.services.arcgis.credentials import OAuthAppToken, StaticToken

from helpers.loopback import read_request, serve  # noqa: F401 (fixture)


SECRET = "loopback-client-secret-42"
G1 = "{2B0D6B0E-6E8F-4C2A-9A53-0C1B4B7E9D11}"


class StandIn(BaseHTTPRequestHandler):
    """A portal that issues tokens and a layer of five features without queryAttachments."""

    seen: list = []
    issued: list = []

    def log_message(self, *args):  # keep the test output quiet
        pass

    def _answer(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _params(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        self.seen.append((self.command, self.path, body, dict(self.headers)))
        text = body if self.command == "POST" else urlsplit(self.path).query
        return {k: v[0] for k, v in parse_qs(text).items()}

    def do_GET(self):  # noqa: N802 - http.server's spelling
        self._route(self._params())

    do_POST = do_GET

    def _route(self, params):
        path = urlsplit(self.path).path
        if path.endswith("/oauth2/token"):
            ok = params.get("client_secret") == SECRET
            token = f"issued-token-{len(self.issued) + 1}"
            self.issued.append(token)
            return self._answer({"access_token": token, "expires_in": 3600} if ok else
                                {"error": {"code": 400, "message": "Invalid client_secret"}})
        if self.headers.get("X-Esri-Authorization") != f"Bearer {self.issued[-1]}":
            return self._answer({"error": {"code": 498, "message": "Invalid token."}})
        if path.endswith("/query"):
            offset = int(params.get("resultOffset", 0))
            ids = list(range(1, 6))[offset:offset + 2]
            return self._answer({"features": [{"attributes": {"objectid": i}} for i in ids],
                                 "exceededTransferLimit": offset + 2 < 5})
        if path.endswith("/queryAttachments"):
            return self._answer({"error": {"code": 400, "message": "Invalid URL",
                                           "details": ["Invalid URL"]}})
        if path.endswith("/FeatureServer/0"):
            return self._answer({"objectIdField": "objectid", "globalIdField": "globalid"})
        if path.endswith("/attachments"):   # only feature 1 has a photo
            return self._answer({"attachmentInfos": [
                {"id": 9, "contentType": "image/jpeg", "size": 3, "name": "p.jpg"}]
                if path.endswith("/1/attachments") else []})
        if path.endswith("/applyEdits"):
            updates = json.loads(params["updates"])
            return self._answer({"updateResults": [
                {"globalId": u["attributes"]["globalid"], "objectId": 1, "success": True}
                for u in updates]})
        self.send_error(404)


@pytest.fixture
def stand_in():
    StandIn.seen, StandIn.issued = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_query_attachments_and_edits_over_real_sockets(stand_in):
    """Pages, the attachment fallback and applyEdits work end to end; the token and the client
    secret never appear in a request line, and the token is in every layer request's header."""
    records = []
    provider = OAuthAppToken(f"{stand_in}/portal", "app", SECRET)
    features = FeatureLayer(f"{stand_in}/arcgis/rest/services/A/FeatureServer/0",
                            token=provider, on_call=records.append,
                            timeout_s=(2.0, 5.0))
    assert [r["objectid"] for r in features.query(page_size=2)] == [1, 2, 3, 4, 5]
    groups = features.query_attachments(object_ids=[1])
    assert [(g.parent_object_id, [a.id for a in g.attachments]) for g in groups] == [(1, [9])]
    assert features.apply_edits(updates=[{"globalid": G1, "ai_condition": "good"}]).ok
    provider.invalidate()   # as after a 498: the stand-in now expects the next token
    assert len(features.query(page_size=5)) == 5
    for method, path, body, headers in StandIn.seen:
        for token in StandIn.issued:
            assert token not in path and token not in body
        assert SECRET not in path
        if "/FeatureServer/" in path:
            assert headers["X-Esri-Authorization"].startswith("Bearer issued-token-")
    assert len(records) == len([s for s in StandIn.seen if "/FeatureServer/" in s[1]])
    assert all(r.service == "arcgis" and r.status_code == 200 for r in records)


def test_a_layer_that_never_answers_is_a_ttfb_timeout(serve):
    """A server that accepts and stays silent ends in TTFB_TIMEOUT, not a hang."""
    def silent(conn, stop):
        read_request(conn)
        stop.wait(3)

    server = serve(silent)
    features = FeatureLayer(f"{server.url}/arcgis/rest/services/A/FeatureServer/0",
                            timeout_s=(1.0, 0.3))
    with pytest.raises(ArcGISError) as caught:
        features.query()
    assert caught.value.error_class is ErrorClass.TTFB_TIMEOUT


def test_the_client_speaks_to_the_drill_s_feature_layer_stand_in():
    """Against the drill's layer: a time window the stand-in parses, paging past its record
    cap, attachments by GlobalID, a write by GlobalID, and a refused row under rollback."""
    from fme_ai_resilience.drill.standins import FeatureLayerStandIn

    day_ms = 1_764_374_400_000   # 2025-11-29 00:00:00 UTC
    with FeatureLayerStandIn(token="drill-token-77", max_record_count=2,
                             fields=("ai_condition",)) as stand_in:
        inside = [stand_in.add_feature(photos=1, created_at_ms=day_ms + i * 1000)
                  for i in range(5)]
        stand_in.add_feature(photos=1, created_at_ms=day_ms + 86_400_000)   # the next day
        features = FeatureLayer(stand_in.layer_url, token=StaticToken("drill-token-77"),
                                timeout_s=(2.0, 5.0))
        rows = features.query(out_fields=("objectid", "globalid", "CreationDate"),
                              date_field="CreationDate", since_ms=day_ms,
                              until_ms=day_ms + 86_400_000, order_by="objectid")
        assert [r["globalid"] for r in rows] == [f.global_id for f in inside]
        groups = features.query_attachments(global_ids=[inside[0].global_id])
        assert [(g.parent_global_id, len(g.attachments)) for g in groups] == [
            (inside[0].global_id, 1)]
        assert features.apply_edits(updates=[{"globalid": inside[0].global_id,
                                              "ai_condition": "good"}]).ok
        refused = features.apply_edits(updates=[
            {"globalid": inside[1].global_id, "ai_condition": "fair"},
            {"globalid": "{00000000-0000-0000-0000-000000000000}", "ai_condition": "x"}])
        assert [r.error_code for r in refused.failed] == [1003, 1019]
        seen = stand_in.snapshot()
        assert seen["unauthorized"] == 0 and seen["token_in_query"] == 0
        assert seen["last_written"][inside[0].global_id]["ai_condition"] == "good"
