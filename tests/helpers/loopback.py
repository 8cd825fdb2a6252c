"""Scripted TCP servers on 127.0.0.1 for the Vision AI and photo download integration tests."""
from __future__ import annotations

import socket
import threading

import pytest


def read_head(conn):
    """Read a request's head from ``conn``: ``(head, what arrived after it)``; ``(b"", b"")``
    when the client closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return b"", b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def read_request(conn):
    """Read one HTTP request (headers and a Content-Length body) from ``conn``."""
    head, body = read_head(conn)
    if not head:
        return head
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head


def response(status, body=b"", headers=(), reason="X", length=None):
    lines = [f"HTTP/1.1 {status} {reason}",
             f"Content-Length: {len(body) if length is None else length}",
             "Connection: close", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class Loopback:
    """A scripted TCP server on 127.0.0.1: ``handler(conn, stop)`` serves each connection."""

    def __init__(self, handler):
        self.handler = handler
        self.stop = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn):
        try:
            conn.settimeout(5)
            self.handler(conn, self.stop)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=2)
        self.sock.close()


@pytest.fixture
def serve():
    servers = []

    def start(handler):
        server = Loopback(handler)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()
