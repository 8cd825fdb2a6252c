"""An idle flood cannot keep a real webhook out: 520 connections that send nothing (above the
500-connection limit) are closed within seconds, and a real delivery is answered well inside
Survey123's 10 s timeout."""
from __future__ import annotations

import socket
import time


from fme_ai_resilience.store import open_store

from helpers.served import Served, delivery, post


FLOOD = 520
SENDER_TIMEOUT_S = 10.0


def test_an_idle_flood_cannot_delay_a_webhook_past_the_senders_timeout(tmp_path):
    """Guarantee: connections that send nothing are closed within a few seconds
    (--silent-timeout-seconds, 5 s), so a webhook behind 520 of them is answered in under
    10 s."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    served = Served(["--db", url])
    idle = []
    try:
        for _ in range(FLOOD):
            sock = socket.create_connection(("127.0.0.1", served.port), timeout=5)
            idle.append(sock)
        time.sleep(0.5)   # every slot taken by a silent connection
        start = time.monotonic()
        status = post(served.port, delivery(1), "real-1", timeout_s=SENDER_TIMEOUT_S)
        took = time.monotonic() - start
    finally:
        for sock in idle:
            sock.close()
        served.terminate()
        served.finish()
    assert status == 202
    assert took < SENDER_TIMEOUT_S, took
    with open_store(url) as store:
        assert store.counts()["PENDING"] + store.counts()["DEFERRED"] == 1
