"""A storm of ArcGIS layer webhook deliveries against ``serve`` on 127.0.0.1: ArcGIS
deactivates a webhook after a few failed deliveries in a row, so while the ledger answers
none of them may get a refusal, however hostile the intake's own state."""
from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import random
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Tuple
from urllib.parse import quote

from fme_ai_resilience.store import open_store

from helpers.flow_standin import start as start_flow
from helpers.served import Served, delivery, post


KEY = "storm-signature-key-41c7"
FLOW_TOKEN = "storm-flow-token"
MONITOR = "storm-monitor-token"
SERVICE = "https://services.arcgis.com/StOrM0rg/arcgis/rest/services/inspection/FeatureServer"
DISTINCT = 300
REDELIVERED = 90
RESENT_IN_ARRAYS = 30
THREADS = 16


def esri_signature(body: bytes) -> str:
    """``sha256=<base64 HMAC-SHA256(key, body)>``, computed here as Esri documents it."""
    return "sha256=" + base64.b64encode(
        hmac.new(KEY.encode(), body, hashlib.sha256).digest()).decode()


def notification(i: int, sent_at: int = 1732954500000) -> dict:
    """Notification ``i``: layer ``i % 3``, its own generation range, percent-encoded."""
    low = 10 * i + 1
    url = (f"{SERVICE}/extractChanges?serverGens=[{low},{low + 4}]&async=true"
           "&returnUpdates=true&returnAttachments=true")
    return {"name": "storm-hook", "layerId": i % 3, "orgId": "StOrM0rg",
            "serviceName": "inspection", "lastUpdatedTime": sent_at,
            "changesUrl": quote(url, safe=""),
            "events": ["FeaturesCreated", "AttachmentsCreated"]}


def send(port: int, body: bytes) -> object:
    """POST one signed Online delivery on a connection of its own; the status or the
    connection error's name."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", "/", body=body, headers={
            "Content-Type": "application/json", "x-esriHook-Signature": esri_signature(body)})
        response = conn.getresponse()
        response.read()
        return response.status
    except OSError as exc:
        return type(exc).__name__
    finally:
        conn.close()


def flow_detail(port: int) -> Dict[str, object]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/healthz",
                                     headers={"Authorization": f"Bearer {MONITOR}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read()).get("flow") or {}


def wait_for_no_capacity(port: int) -> Dict[str, object]:
    """Poll /healthz until the gateway has seen FME Flow with no engine (at most ~30 s)."""
    detail: Dict[str, object] = {}
    for _ in range(300):
        detail = flow_detail(port)
        if detail.get("reachable") and detail.get("has_capacity") is False:
            return detail
        time.sleep(0.1)
    raise AssertionError(f"the gateway never saw FME Flow without capacity: {detail}")


def storm(rng: random.Random) -> Tuple[List[bytes], List[str]]:
    """Every distinct notification once, redeliveries of some byte for byte, and arrays that
    send two already-announced notifications again with a later time stamp; shuffled."""
    singles = [json.dumps([notification(i)]).encode() for i in range(DISTINCT)]
    again = [singles[i] for i in rng.sample(range(DISTINCT), REDELIVERED)]
    arrays = [json.dumps([notification(a, 1732954560000), notification(b, 1732954560000)])
              .encode() for a, b in (rng.sample(range(DISTINCT), 2)
                                     for _ in range(RESENT_IN_ARRAYS))]
    bodies = singles + again + arrays
    rng.shuffle(bodies)
    return bodies, [f"changes:{SERVICE.lower()}/{i % 3}/gens-{10 * i + 1}-{10 * i + 5}"
                    for i in range(DISTINCT)]


def test_an_arcgis_delivery_storm_is_never_refused_while_the_ledger_is_up(tmp_path, rng):
    """Guarantee: 300 signed ArcGIS Online notifications from 16 threads, with 120
    redeliveries among them, against a gateway past its watermark (2), in reject mode, whose
    FME Flow has no engine: every delivery is answered 200 or 202 (a Survey123 delivery in the
    same state is refused), and the ledger holds exactly one task per distinct notification,
    parked, none dead."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    bodies, keys = storm(rng)
    flow = start_flow(FLOW_TOKEN, engines=[])
    try:
        served = Served(["--db", url, "--overload-mode", "reject",
                         "--set", "intake.watermark=2", "--threads", "8",
                         "--flow-url", flow.url, "--flow-token-env", "FAIR_TEST_FLOW_TOKEN",
                         "--monitor-token-env", "FAIR_TEST_MONITOR_TOKEN",
                         "--arcgis-signature-key-env", "FAIR_TEST_ARCGIS_KEY"],
                        env={"FAIR_TEST_FLOW_TOKEN": FLOW_TOKEN,
                             "FAIR_TEST_MONITOR_TOKEN": MONITOR, "FAIR_TEST_ARCGIS_KEY": KEY})
        try:
            wait_for_no_capacity(served.port)
            survey123 = post(served.port, delivery(1), "survey123-control")
            with ThreadPoolExecutor(max_workers=THREADS) as pool:
                codes = list(pool.map(lambda body: send(served.port, body), bodies))
        finally:
            served.terminate()
            code, output = served.finish()
    finally:
        flow.close()
    assert survey123 in (429, 503), survey123   # the same state refuses Survey123
    assert len(codes) == DISTINCT + REDELIVERED + RESENT_IN_ARRAYS
    assert set(codes) <= {200, 202}, sorted({str(c) for c in codes} - {"200", "202"})
    assert code == 0, output
    with open_store(url) as store:
        counts = store.counts()
        found = store.existing_keys(keys)
        delivered = {(c.sender, c.event): c.n for c in store.sender_counts()}
    assert counts["DEFERRED"] == DISTINCT and sum(counts.values()) == DISTINCT, counts
    assert found == set(keys)
    assert delivered == {("arcgis_online", "delivered"): len(bodies)}
