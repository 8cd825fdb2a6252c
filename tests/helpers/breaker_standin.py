"""A stand-in Vision AI service on 127.0.0.1 that fails or answers on command and counts calls."""
from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List, Tuple


class _Server(ThreadingHTTPServer):
    # A burst of k probes arrives within milliseconds: the default accept queue of 5 can drop
    # a SYN on a loaded machine, and a call the stand-in never saw would still be recorded.
    request_queue_size = 128


class StandIn:
    """Answers POST/GET with 500 while ``failing`` else 200; keeps (arrival time, kind) per call."""

    def __init__(self) -> None:
        self.failing = True
        self.calls: List[Tuple[float, str]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                arrived = time.time()
                with outer._lock:
                    outer.calls.append((arrived, self.headers.get("X-Attempt", "first")))
                    status = 500 if outer.failing else 200
                body = b'{"error": "down"}' if status == 500 else b'{"condition": "good"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/analyze"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "StandIn":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def between(self, start: float, end: float) -> List[Tuple[float, str]]:
        """Calls that arrived in [start, end]."""
        with self._lock:
            return [c for c in self.calls if start <= c[0] <= end]

    def count(self, kind: str) -> int:
        with self._lock:
            return sum(1 for c in self.calls if c[1] == kind)
