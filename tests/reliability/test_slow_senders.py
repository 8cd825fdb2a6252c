"""Slow senders cannot keep a real webhook out: 520 connections (above the 500-connection
limit) that each send one byte, trickle a header or body byte every 4 s, or send one
kept-alive request and then idle give up their slots within seconds, and a real delivery is
answered well inside Survey123's 10 s timeout, under ``serve``'s default settings."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from fme_ai_resilience.store import open_store

from helpers.served import Served, delivery, post


FLOOD = 520
SENDER_TIMEOUT_S = 10.0
#: The header deadline (5 s) and a maintenance tick, with room for a loaded machine.
ANSWERED_WITHIN_S = 8.0
#: The feature service the sample deliveries name.
SERVICE = "https://services.example.com/abc/arcgis/rest/services/inspection/FeatureServer"
_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200


def _one_byte(sock: socket.socket, stop: threading.Event) -> None:
    sock.sendall(b"G")


def _trickle(sock: socket.socket, stop: threading.Event) -> None:
    sock.sendall(_HEAD[:1])


def _slow_body(sock: socket.socket, stop: threading.Event) -> None:
    sock.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\n\r\n{")


def _kept_alive(sock: socket.socket, stop: threading.Event) -> None:
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")


def _trickler(flood, stop: threading.Event, text: bytes) -> None:
    """A byte of ``text`` on every connection every 4 s, as the slow sender did."""
    sent = 1
    while not stop.wait(4.0):
        for sock in flood:
            try:
                sock.sendall(text[sent:sent + 1])
            except OSError:
                pass
        sent += 1


def _webhook_behind(start_flood, tmp_path) -> float:
    """Open the flood, then POST a real delivery; how long its answer (202) took."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    served = Served(["--db", url], env={"FAIR_INTAKE_FEATURE_SERVICES": SERVICE})
    flood = []
    stop = threading.Event()
    try:
        for _ in range(FLOOD):
            sock = socket.create_connection(("127.0.0.1", served.port), timeout=5)
            flood.append(sock)
            start_flood(sock, stop)
        if start_flood in (_trickle, _slow_body):
            text = _HEAD if start_flood is _trickle else b" " * 1000
            threading.Thread(target=_trickler, args=(flood, stop, text), daemon=True).start()
        time.sleep(0.5)   # every slot taken by a slow sender
        start = time.monotonic()
        try:
            status = post(served.port, delivery(1), "real-1", timeout_s=SENDER_TIMEOUT_S)
        except socket.timeout:
            pytest.fail(f"the webhook was not answered within the sender's "
                        f"{SENDER_TIMEOUT_S:g} s")
        took = time.monotonic() - start
    finally:
        stop.set()
        for sock in flood:
            sock.close()
        served.terminate()
        served.finish()
    assert status == 202
    with open_store(url) as store:
        assert store.counts()["PENDING"] + store.counts()["DEFERRED"] == 1
    return took


def test_one_byte_senders_cannot_delay_a_webhook_past_the_senders_timeout(tmp_path):
    """Guarantee: a connection whose request head is not complete within
    --header-timeout-seconds (5 s) of its opening is answered 408 and closed, so 520
    connections that each sent one byte delay a webhook by seconds, not 30."""
    took = _webhook_behind(_one_byte, tmp_path)
    assert took < ANSWERED_WITHIN_S, took


def test_trickling_headers_cannot_delay_a_webhook_past_the_senders_timeout(tmp_path):
    """Guarantee: the header deadline is total, not per byte: 520 connections trickling a
    header byte every 4 s are closed at --header-timeout-seconds (5 s), not kept until the
    60 s read deadline, so a webhook behind them is answered in under 8 s."""
    took = _webhook_behind(_trickle, tmp_path)
    assert took < ANSWERED_WITHIN_S, took


def test_trickling_bodies_yield_their_slots_to_a_webhook(tmp_path):
    """Guarantee: while the server is at its connection limit, a request whose body is still
    arriving --header-timeout-seconds (5 s) after its first byte is answered 408 and closed,
    so 520 bodies trickling a byte every 4 s delay a webhook by seconds, not by the 60 s
    read deadline."""
    took = _webhook_behind(_slow_body, tmp_path)
    assert took < ANSWERED_WITHIN_S, took


def test_idle_kept_alive_connections_yield_their_slots_to_a_webhook(tmp_path):
    """Guarantee: while the server is at its connection limit, a kept-alive connection with
    nothing in progress is closed a second after its answer, so 520 connections that sent
    one request and then idle delay a webhook by seconds, not by the 30 s idle deadline."""
    took = _webhook_behind(_kept_alive, tmp_path)
    assert took < ANSWERED_WITHIN_S, took
