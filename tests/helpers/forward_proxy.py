"""A forward HTTP proxy on 127.0.0.1 that records every request it carries, and an echo server
to put behind it: what a test needs to prove that every call of the library goes through the
proxy the environment (or FME) names.

:class:`ForwardProxy` takes absolute-form requests (``GET http://host:port/path``) and
``CONNECT host:port`` tunnels, forwards them to loopback only (anything else is answered 403,
so no test traffic leaves the machine), and closes each client connection after one answer so
that every call is seen on its own. ``seen`` lists ``"METHOD target"`` per request.
"""
from __future__ import annotations

import json
import socket
import socketserver
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List, Mapping, Optional
from urllib.parse import urlsplit

from helpers.loopback import read_head

_LOOPBACK = ("127.0.0.1", "localhost", "::1")



def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            chunk = source.recv(65536)
            if not chunk:
                break
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (sink,):
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass


class ForwardProxy:
    """A forward proxy on an ephemeral loopback port (see the module docstring)."""

    def __init__(self, aliases: Optional[Mapping[str, str]] = None) -> None:
        self.seen: List[str] = []
        #: Names the proxy forwards to a loopback address (a client never looks them up).
        self.aliases = dict(aliases or {})
        self._lock = threading.Lock()
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._handle(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def __enter__(self) -> "ForwardProxy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _note(self, entry: str) -> None:
        with self._lock:
            self.seen.append(entry)

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(60)
        head, rest = read_head(conn)
        if not head:
            return
        lines = head.split(b"\r\n")
        method, target, version = lines[0].decode("latin-1").split(" ", 2)
        self._note(f"{method} {target}")
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            host = host.strip("[]")
            self._tunnel(conn, self.aliases.get(host, host), int(port), rest)
            return
        parts = urlsplit(target)
        hostname = self.aliases.get(parts.hostname or "", parts.hostname)
        if parts.scheme != "http" or hostname not in _LOOPBACK:
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n"
                         b"Connection: close\r\n\r\n")
            return
        origin = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        kept = [line for line in lines[1:] if not line.lower().startswith(
            (b"connection:", b"proxy-connection:", b"proxy-authorization:", b"keep-alive:"))]
        upstream_head = b"\r\n".join([f"{method} {origin} {version}".encode("latin-1"), *kept,
                                      b"Connection: close"]) + b"\r\n\r\n"
        with socket.create_connection((hostname, parts.port or 80), timeout=60) as up:
            up.sendall(upstream_head + rest)
            sender = threading.Thread(target=_pipe, args=(conn, up), daemon=True)
            sender.start()
            answer_head, answer_rest = read_head(up)
            if not answer_head:
                return
            answer_lines = [line for line in answer_head.split(b"\r\n")
                            if not line.lower().startswith((b"connection:", b"keep-alive:"))]
            conn.sendall(b"\r\n".join([*answer_lines, b"Connection: close"]) + b"\r\n\r\n"
                         + answer_rest)
            _pipe(up, conn)

    def _tunnel(self, conn: socket.socket, host: str, port: int, rest: bytes) -> None:
        if host not in _LOOPBACK:
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        with socket.create_connection((host, port), timeout=60) as up:
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                up.sendall(rest)
            other = threading.Thread(target=_pipe, args=(up, conn), daemon=True)
            other.start()
            _pipe(conn, up)
            other.join(60)


class EchoServer:
    """A loopback HTTP server answering every GET or POST with the request's method, path and
    headers as JSON."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                body = json.dumps({"method": self.command, "path": self.path,
                                   "headers": dict(self.headers.items())}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def __enter__(self) -> "EchoServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
