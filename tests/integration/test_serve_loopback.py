"""``fme-ai-resilience serve``: the gateway on its HTTP server, secrets from the environment."""
from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request


from fme_ai_resilience.cli import build_parser
from fme_ai_resilience.cli.serve import build_server

from helpers.served import exchange
from helpers import DATA


BODY = (DATA / "survey123_add.json").read_bytes()


def post(url, body, headers):
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_serve_answers_webhooks_on_loopback(tmp_path, monkeypatch):
    """The served gateway checks the shared secret from the environment and writes the ledger."""
    monkeypatch.setenv("INTAKE_SHARED_SECRET", "s3cret-value")
    args = build_parser().parse_args([
        "serve", "--db", f"sqlite:///{tmp_path / 'ledger.db'}", "--host", "127.0.0.1",
        "--port", "0", "--secret-env", "INTAKE_SHARED_SECRET", "--overload-mode", "reject",
        "--set", "download.allowed_hosts=photos.example.com"])
    server, store = build_server(args)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        url = "http://127.0.0.1:%d/" % server.address[1]
        json_type = {"Content-Type": "application/json"}
        assert post(url, BODY, json_type)[0] == 401
        status, body = post(url, BODY, dict(json_type, **{"X-FAIR-Secret": "s3cret-value"}))
        assert status == 202 and body["status"] == "accepted"
        with urllib.request.urlopen(url + "healthz", timeout=10) as response:
            assert json.loads(response.read())["backlog"] == 1
    finally:
        server.stop()
        thread.join(30)
        store.close()


def test_a_malformed_request_line_is_answered_400_and_logged_without_the_token(
        tmp_path, caplog):
    """A request line the stdlib cannot parse is answered 400 and its token stays out of logs."""
    caplog.set_level(logging.INFO)
    args = build_parser().parse_args([
        "serve", "--db", f"sqlite:///{tmp_path / 'ledger.db'}", "--host", "127.0.0.1",
        "--port", "0", "--set", "download.allowed_hosts=photos.example.com"])
    server, store = build_server(args)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        port = server.address[1]
        answer = exchange(port, b"POST /?token=SECRETTOKEN99 HTTP/1.1 junk\r\n")
        assert b"400" in answer
        answer = exchange(port, b"GET /healthz FOO/1.1\r\n")
        assert b"400" in answer
    finally:
        server.stop()
        thread.join(30)
        store.close()
    assert "SECRETTOKEN99" not in caplog.text
