"""``fme-ai-resilience serve`` as a process: bursts, idle and trickling clients, SIGTERM."""
from __future__ import annotations

import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from fme_ai_resilience.store import open_store

from helpers.loopback import read_request
from helpers.served import Served, delivery, post


BURST = 300
STALLERS = 5


def _hold(port: int, trickle: bool, stop: threading.Event) -> None:
    """A client that connects and then sends nothing, or a request one byte at a time."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        head = (b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100000\r\n\r\n")
        for byte in (head + b"{" * 100000 if trickle else b""):
            if stop.wait(0.2):
                return
            try:
                conn.sendall(bytes([byte]))
            except OSError:  # the server cut the trickle off: that is allowed
                return
        stop.wait()


def test_a_burst_is_stored_whole_while_clients_hold_idle_and_trickling_connections(tmp_path):
    """300 concurrent deliveries, with 5 clients holding idle or trickling connections open:
    every delivery is answered 2xx and stored (default settings)."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    served = Served(["--db", url])
    stop = threading.Event()
    holders = [threading.Thread(target=_hold, args=(served.port, i % 2 == 1, stop), daemon=True)
               for i in range(STALLERS)]
    try:
        for holder in holders:
            holder.start()
        time.sleep(0.5)  # the stallers are connected before the burst starts
        with ThreadPoolExecutor(max_workers=BURST) as pool:
            codes = list(pool.map(
                lambda i: _status(served.port, delivery(i), f"burst-{i}"), range(BURST)))
    finally:
        stop.set()
        served.terminate()
        code, output = served.finish()
    assert sorted(set(codes)) == [202], [c for c in codes if c != 202][:10]
    with open_store(url) as store:
        assert store.counts()["PENDING"] + store.counts()["DEFERRED"] == BURST
    assert code == 0, output


def _status(port: int, body: bytes, delivery_id: str) -> object:
    try:
        return post(port, body, delivery_id, timeout_s=30)
    except OSError as exc:
        return type(exc).__name__


def test_sigterm_finishes_the_delivery_in_flight_and_exits_0(tmp_path):
    """SIGTERM: no new connection is accepted, a delivery already arriving is answered and
    stored, and the process exits 0."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    served = Served(["--db", url])
    body = delivery(7)
    try:
        conn = socket.create_connection(("127.0.0.1", served.port), timeout=30)
        head = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"X-Survey123-Delivery: in-flight\r\nContent-Length: {len(body)}\r\n\r\n")
        conn.sendall(head.encode("ascii") + body[:100])
        time.sleep(0.3)  # the server has read the first part
        served.terminate()
        served.wait_for(re.compile(r"stopping"))
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", served.port), timeout=5).close()
        conn.sendall(body[100:])
        answer = read_request(conn)
        conn.close()
    finally:
        code, output = served.finish()
    assert answer.startswith(b"HTTP/1.1 202 "), (answer, output)
    assert code == 0, output
    with open_store(url) as store:
        assert store.counts()["PENDING"] == 1


def test_deadlines_cut_off_trickling_requests_and_idle_connections(tmp_path):
    """A request still arriving past the read deadline is answered 408 and closed, and a
    connection that sends nothing is closed past the idle deadline."""
    served = Served(["--db", f"sqlite:///{tmp_path / 'ledger.db'}",
                     "--read-timeout-seconds", "1", "--idle-timeout-seconds", "1"])
    stop = threading.Event()
    try:
        idle = socket.create_connection(("127.0.0.1", served.port), timeout=30)
        trickler = socket.create_connection(("127.0.0.1", served.port), timeout=30)

        def trickle() -> None:
            head = (b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 100000\r\n\r\n")
            for byte in head + b"{" * 1000:
                if stop.wait(0.1):
                    return
                try:
                    trickler.sendall(bytes([byte]))
                except OSError:
                    return

        threading.Thread(target=trickle, daemon=True).start()
        answer = trickler.recv(65536)
        stop.set()
        closed = idle.recv(65536)
        idle.close()
        trickler.close()
    finally:
        stop.set()
        served.terminate()
        code, output = served.finish()
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b'"status":"request_timeout"' in answer
    assert closed == b""
    assert code == 0, output


def test_deliveries_sent_just_before_sigterm_are_all_answered_and_stored(tmp_path):
    """Deliveries whose bytes were all sent the moment SIGTERM arrives (some still in the
    listen backlog, some unread) are accepted, answered 202 and stored; exit 0."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    served = Served(["--db", url])
    conns = []
    try:
        for i in range(20):
            body = delivery(100 + i)
            conn = socket.create_connection(("127.0.0.1", served.port), timeout=30)
            conn.sendall(f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                         f"\r\nContent-Length: {len(body)}\r\n\r\n".encode("ascii") + body)
            conns.append(conn)
        served.terminate()
        answers = []
        for conn in conns:
            data = read_request(conn)
            answers.append(data.split(b" ", 2)[1] if data else b"closed")
            conn.close()
    finally:
        code, output = served.finish()
    assert answers == [b"202"] * 20, output[-20:]
    assert code == 0, output
    with open_store(url) as store:
        assert store.counts()["PENDING"] == 20
