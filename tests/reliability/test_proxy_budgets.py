"""Through a proxy the phase limits still hold: a proxy that trickles its answer to CONNECT
(or lets a TLS handshake crawl) holds a call no longer than connect + TTFB, and the failure
is a connect timeout, never a late answer. The hold is measured at the proxy."""
from __future__ import annotations

import socket
import time

import pytest

from fme_ai_resilience.core.clock import SystemClock
from fme_ai_resilience.core.errors import ErrorClass
from fme_ai_resilience.services.http.sessions import new_session, reset_session_choice
from fme_ai_resilience.services.vision.phases import exchange

from helpers.hostile import trickle
from helpers.loopback import Loopback


CONNECT_S, TTFB_S = 0.5, 0.5
MARGIN_S = 1.0
#: Each byte of the proxy's answer to CONNECT comes this long after the previous one: every
#: single read is well within the connect limit, the whole answer far beyond the budget.
EVERY_S = 0.1
ANSWER = b"HTTP/1.1 200 Connection established\r\nX-Pad: " + b"a" * 300 + b"\r\n\r\n"


class TricklingProxy(Loopback):
    """A proxy on 127.0.0.1 that answers CONNECT one byte every EVERY_S and records, per
    tunnel asked for, how long the client stayed before it gave up."""

    def __init__(self) -> None:
        self.held = []
        super().__init__(self._handle)

    def _handle(self, conn: socket.socket, stop) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(65536)
            if not chunk:
                return
            head += chunk
        start = time.monotonic()
        trickle(conn, ANSWER, stop=stop, every_s=EVERY_S)
        self.held.append((head.split(b"\r\n", 1)[0].decode(), time.monotonic() - start))


@pytest.fixture
def proxy(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    server = TricklingProxy()
    monkeypatch.setenv("HTTPS_PROXY", server.url)
    reset_session_choice()
    yield server
    server.close()
    reset_session_choice()


def test_a_proxy_trickling_its_connect_answer_holds_a_call_no_longer_than_its_budget(proxy):
    """Guarantee: HTTPS through a proxy whose CONNECT answer crawls ends at about connect +
    TTFB as CONNECT_TIMEOUT (the tunnel never opened), however long the proxy would go on."""
    session = new_session(clock=SystemClock())
    done = exchange("POST", "https://vision.example.com/analyze",
                    {"Authorization": "Bearer k"}, b"{}", connect_s=CONNECT_S, ttfb_s=TTFB_S,
                    body_s=TTFB_S, max_bytes=1024, session=session, clock=SystemClock())
    assert done.error_class is ErrorClass.CONNECT_TIMEOUT, done
    deadline = time.monotonic() + 5
    while not proxy.held and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [line.rsplit(" ", 1)[0] for line, _ in proxy.held] == ["CONNECT vision.example.com:443"]
    assert all(seconds <= CONNECT_S + TTFB_S + MARGIN_S for _, seconds in proxy.held), \
        proxy.held
