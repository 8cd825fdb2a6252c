"""``fme-ai-resilience serve``'s /metrics on loopback, on SQLite and PostgreSQL: what Prometheus
scrapes parses with its reference parser, carries the intake latency of the webhook just
delivered, and agrees with ``status --json``."""
from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fme_ai_resilience.cli import build_parser, main
from fme_ai_resilience.cli.serve import build_server
from fme_ai_resilience.core.errors import FailureClass
from fme_ai_resilience.store import open_store

from helpers import DATA

BODY = (DATA / "survey123_add.json").read_bytes()


@pytest.fixture(params=("sqlite", "postgresql"))
def ledger_url(request, tmp_path):
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_ledger_url")
    else:
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_store(url, init_schema=True) as store:
        store.clear()
    return url


def post(url, body, content_type="application/json"):
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def test_served_metrics_parse_and_agree_with_status(ledger_url, capsys):
    """A delivery and an invalid body through the served gateway: /metrics has them as
    counters (webhooks by answer, the dead letter of the invalid body, the gateway's
    requests), the intake latency as a histogram, and status --json the same totals."""
    args = build_parser().parse_args([
        "serve", "--db", ledger_url, "--host", "127.0.0.1", "--port", "0",
        "--set", "download.allowed_hosts=photos.example.com"])
    server, store = build_server(args)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        base = "http://127.0.0.1:%d/" % server.address[1]
        assert post(base, BODY) == 202
        assert post(base, b'{"not": "a survey"}') == 400
        with urllib.request.urlopen(base + "metrics", timeout=10) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = response.read().decode()
    finally:
        server.stop()
        thread.join(30)
        store.close()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    webhooks = {s.labels["answer"]: s.value for s in families["fair_webhooks"].samples}
    assert families["fair_webhooks"].type == "counter"
    assert webhooks == {"accepted": 1, "invalid": 1}
    requests = {(s.labels["handler"], s.labels["code"]): s.value
                for s in families["fair_http_requests"].samples}
    assert requests == {("webhook", "202"): 1, ("webhook", "400"): 1}
    assert families["fair_ledger_up"].samples[0].value == 1
    latency = families["fair_intake_latency_seconds"]
    assert latency.type == "histogram"
    counts = {s.name: s.value for s in latency.samples if not s.name.endswith("_bucket")}
    photos = len(json.loads(BODY)["feature"]["attachments"]["photo"])
    assert counts["fair_intake_latency_seconds_count"] == photos
    inf = [s.value for s in latency.samples if s.labels.get("le") == "+Inf"]
    assert inf == [photos]

    assert main(["status", "--db", ledger_url, "--json"]) == 0
    totals = json.loads(capsys.readouterr().out)["signals"]["totals"]
    # /metrics has every cause from the start (0 until counted); status what was counted
    dead = {s.labels["cause"]: s.value for s in families["fair_dead_letters"].samples
            if s.value}
    assert len(families["fair_dead_letters"].samples) == len(FailureClass)
    assert dead == {r["labels"]["cause"]: r["value"]
                    for r in totals["counters"]["dead_letters"]} == {"INVALID_PAYLOAD": 1}
    (intake,) = totals["histograms"]["intake_latency_seconds"]
    assert intake["count"] == counts["fair_intake_latency_seconds_count"]
    assert intake["sum"] == round(counts["fair_intake_latency_seconds_sum"], 6)
