"""Load and a lost database: a burst at several times the drain rate on four processes, and
PostgreSQL unreachable for seconds during a burst. Judged at the stand-ins: what the Vision AI
analysed and what the layer holds."""
from __future__ import annotations

import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from threading import Event, Thread
from urllib.parse import urlsplit, urlunsplit

import pytest

from fme_ai_resilience.drill.standins import FaultSchedule
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.survey123 import parse_webhook

from helpers.hostile import TcpProxy
from helpers.pipeline_world import (GatewayServer, World, loopback_settings,
                            spawn_processes, stop_processes, wait_until_settled)


pytestmark = pytest.mark.postgres

BURST = 160
WATERMARK, CEILING = 40, 200


def deliver(url, body):
    """POST one webhook body; (status, Retry-After, seconds taken)."""
    import json
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST", headers={
        "Content-Type": "application/json", "X-Survey123-Event": "addData"})
    start = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=15) as answer:
            return answer.status, answer.headers.get("Retry-After"), time.monotonic() - start
    except urllib.error.HTTPError as answer:
        return answer.code, answer.headers.get("Retry-After"), time.monotonic() - start


def keys_of(bodies):
    return [sub.idempotency_key for body in bodies for sub in parse_webhook(body)]


def written_once(world, count):
    layer = world.layer.snapshot()
    assert len(layer["writes"]) == count and set(layer["writes"].values()) == {1}


def test_a_burst_at_several_times_the_drain_rate_on_four_processes(pg_ledger_url):
    """Guarantee: a burst of 160 webhooks at several times what four processes drain is
    answered 202 with intake P99 under 5 s (half Survey123's timeout), the backlog stays
    within the park ceiling, and every photo is analysed once and written once, counted at
    the stand-ins."""
    with World(FaultSchedule(latency_s=0.2)) as world, open_store(pg_ledger_url) as store:
        store.set_config(loopback_settings(world, **{
            "intake.watermark": str(WATERMARK), "intake.park_ceiling": str(CEILING)}),
            now=time.time())
        bodies = world.bodies(BURST)
        procs = spawn_processes(pg_ledger_url, 4)
        peak, done = [0], Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], store.backlog(CEILING + 10))
                done.wait(0.05)

        sampler = Thread(target=sample, daemon=True)
        try:
            with GatewayServer(pg_ledger_url) as gateway:
                sampler.start()
                with ThreadPoolExecutor(max_workers=16) as pool:
                    answers = list(pool.map(lambda b: deliver(gateway.url, b), bodies))
            statuses = wait_until_settled(store, keys_of(bodies), timeout_s=180, procs=procs)
        finally:
            done.set()
            outputs = stop_processes(procs)
        assert [code for code, _, _ in outputs] == [0, 0, 0, 0], outputs[0][2][-2000:]
    assert {status for status, _, _ in answers} == {202}
    latencies = sorted(took for _, _, took in answers)
    assert latencies[int(0.99 * len(latencies)) - 1] < 5.0, latencies[-5:]
    # the burst outran the drain: more work waited than the four processes take at once
    assert 4 * 5 < peak[0] <= CEILING, peak
    assert set(statuses.values()) == {"SUCCEEDED"}
    assert len(world.vision.snapshot()["analysed_by_sha256"]) == BURST
    written_once(world, BURST)


def test_postgresql_unreachable_during_a_burst_is_503_then_nothing_lost(pg_ledger_url):
    """Guarantee: while PostgreSQL is unreachable (cut for 3 s behind a TCP proxy), webhooks
    are answered 503 with Retry-After; every webhook answered 202 is kept, and once the
    database is back every one is analysed and written once."""
    parts = urlsplit(pg_ledger_url)
    proxy = TcpProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    proxied = urlunsplit(parts._replace(netloc=parts.netloc.replace(
        f"{parts.hostname}:{parts.port or 5432}", f"127.0.0.1:{proxy.port}")))
    if proxied == pg_ledger_url:   # the URL named no port: put the proxy's in
        proxied = pg_ledger_url.replace(f"@{parts.hostname}/", f"@127.0.0.1:{proxy.port}/")
    try:
        with World(FaultSchedule()) as world, open_store(pg_ledger_url) as store:
            store.set_config(loopback_settings(world), now=time.time())
            bodies = world.bodies(60)
            answers = []
            with GatewayServer(proxied) as gateway:
                for i, body in enumerate(bodies):
                    if i == 15:
                        proxy.cut()
                        cut_at = time.monotonic()
                    if i > 15 and proxy.down.is_set() and time.monotonic() - cut_at > 3.0:
                        proxy.restore()
                    answers.append(deliver(gateway.url, body))
                    time.sleep(0.1)
                refused = [b for b, (status, _, _) in zip(bodies, answers) if status == 503]
                assert refused, "no webhook came while the database was away"
                assert all(after for status, after, _ in answers if status == 503)
                assert {status for status, _, _ in answers} <= {202, 503}
                again = [deliver(gateway.url, body)[0] for body in refused]
            assert set(again) == {202}
            procs = spawn_processes(pg_ledger_url, 2)
            try:
                statuses = wait_until_settled(store, keys_of(bodies), timeout_s=120,
                                              procs=procs)
            finally:
                stop_processes(procs)
        assert set(statuses.values()) == {"SUCCEEDED"}
        assert len(world.vision.snapshot()["analysed_by_sha256"]) == len(bodies)
        written_once(world, len(bodies))
    finally:
        proxy.close()
