"""Intake never waits on FME Flow: ``serve --flow-url`` against an FME Flow on 127.0.0.1 that
trickles its answer one byte a second, and the health probe against a 300 MB answer."""
from __future__ import annotations

import json
import threading
import time
import urllib.request


from fme_ai_resilience.cli import build_parser
from fme_ai_resilience.cli.serve import build_server
from fme_ai_resilience.services.flow.client import FlowClient

from helpers.loopback import read_request, serve  # noqa: F401 (fixture)
from helpers.served import delivery, post


STATUS_LINE = b"HTTP/1.1 200 OK\r\n"
#: How long the trickling FME Flow takes to send even its status line, at one byte a second.
STATUS_LINE_S = len(STATUS_LINE) * 1.0


def trickle(conn, stop):
    """Answer any request one byte a second, for at most a minute."""
    read_request(conn)
    answer = STATUS_LINE + b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    for byte in answer[:60]:
        if stop.wait(1.0):
            return
        conn.sendall(bytes([byte]))


def test_ten_webhooks_are_answered_while_flow_trickles(serve, tmp_path, monkeypatch):  # noqa: F811
    """With FME Flow sending one byte a second, ten webhooks and /healthz are all answered
    before the trickle could even finish its status line: intake never waits on Flow."""
    flow = serve(trickle)
    monkeypatch.setenv("FAIR_TEST_FLOW_TOKEN", "flow-token-trickle")
    monkeypatch.setenv("FAIR_TEST_MONITOR_TOKEN", "monitor-token-trickle")
    args = build_parser().parse_args([
        "serve", "--db", f"sqlite:///{tmp_path / 'ledger.db'}", "--host", "127.0.0.1",
        "--port", "0", "--flow-url", flow.url, "--flow-token-env", "FAIR_TEST_FLOW_TOKEN",
        "--monitor-token-env", "FAIR_TEST_MONITOR_TOKEN",
        "--set", "download.allowed_hosts=photos.example.com"])
    server, store = build_server(args)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    statuses = []
    try:
        port = server.address[1]
        started = time.monotonic()
        posters = [threading.Thread(target=lambda i=i: statuses.append(
            post(port, delivery(i), f"d-{i}", timeout_s=STATUS_LINE_S * 2))) for i in range(10)]
        for poster in posters:
            poster.start()
        detail = urllib.request.Request(f"http://127.0.0.1:{port}/healthz", headers={
            "Authorization": "Bearer monitor-token-trickle"})   # FME Flow's part is detail
        with urllib.request.urlopen(detail, timeout=STATUS_LINE_S * 2) as response:
            health = json.loads(response.read())
        for poster in posters:
            poster.join(STATUS_LINE_S * 2)
        elapsed = time.monotonic() - started
    finally:
        server.stop()
        thread.join(30)
        store.close()
    assert sorted(statuses) == [202] * 10
    assert health["flow"]["reachable"] is False  # not known yet: never waited for
    assert elapsed < STATUS_LINE_S / 2, f"ten webhooks took {elapsed:.1f} s"


def test_a_300_mb_answer_is_read_no_further_than_the_limit(serve):  # noqa: F811
    """An FME Flow announcing a 300 MB answer: the probe stops at its size limit, reports
    Flow unusable and raises nothing; far less than the answer is ever sent."""
    sent = []

    def huge(conn, stop):
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 314572800\r\n\r\n[")
        total, block = 0, b" " * 65536
        try:
            while total < 314572800 and not stop.is_set():
                conn.sendall(block)
                total += len(block)
        finally:
            sent.append(total)

    flow = serve(huge)
    client = FlowClient(flow.url, "flow-token", build=26100, max_answer_bytes=1024 * 1024)
    health = client.refresh_health()
    assert health.reachable is False and health.has_capacity is True
    assert "larger than" in (health.error or "")
    flow.close()
    assert sent and sent[0] < 64 * 1024 * 1024
