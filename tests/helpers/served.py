"""``fme-ai-resilience serve`` as a real process on 127.0.0.1, and Survey123-shaped deliveries."""
from __future__ import annotations

import http.client
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from typing import Dict, List, Optional, Sequence, Tuple

from helpers import DATA


SAMPLE = DATA / "survey123_add.json"
_LISTENING = re.compile(r"intake gateway on http://127\.0\.0\.1:(\d+)/")


def delivery(i: int, photos: int = 1) -> bytes:
    """A distinct Survey123 body: feature ``i`` with ``photos`` photos of its own."""
    data = json.loads(SAMPLE.read_text(encoding="utf-8"))
    feature = "{%08X-0000-4000-8000-%012X}" % (i, i)
    data["feature"]["attributes"]["globalid"] = feature
    data["feature"]["result"]["globalId"] = feature
    data["feature"]["attachments"]["photo"] = [
        {"globalId": "{%08X-%04X-4000-8000-000000000000}" % (i, n), "parentGlobalId": feature,
         "contentType": "image/jpeg", "id": n + 1,
         "url": "https://services.example.com/abc/arcgis/rest/services/inspection/"
                f"FeatureServer/0/{i}/attachments/{n + 1}"} for n in range(photos)]
    return json.dumps(data).encode("utf-8")


def post(port: int, body: bytes, delivery_id: str, timeout_s: float = 30.0) -> int:
    """POST ``body`` as Survey123 does on a connection of its own; the status code."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("POST", "/", body=body, headers={
            "Content-Type": "application/json; charset=UTF-8", "X-Survey123-Event": "addData",
            "X-Survey123-Delivery": delivery_id})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def exchange(port: int, head: bytes, body: bytes = b"") -> bytes:
    """Send one raw request (``head`` then a blank line and ``body``) and read the answer
    until the server closes the connection or the answer is complete."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(head + b"\r\n" + body)
        data = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                return data
            data += chunk
            head_part, sep, rest = data.partition(b"\r\n\r\n")
            for line in head_part.split(b"\r\n") if sep else ():
                name, _, value = line.partition(b":")
                if name.lower() == b"content-length" and len(rest) >= int(value):
                    return data


#: A photo host for the gateway's settings: serve refuses to start with none configured, and
#: intake itself never reads it (the processor does), so no delivery is answered differently.
PHOTO_HOSTS = {"FAIR_DOWNLOAD_ALLOWED_HOSTS": "photos.example.com"}


class Served:
    """A ``serve`` process; its output lines are collected as they come. Its environment
    has :data:`PHOTO_HOSTS` unless ``env`` says otherwise."""

    def __init__(self, args: Sequence[str], env: Optional[Dict[str, str]] = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fme_ai_resilience", "serve", "--host", "127.0.0.1",
             "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **PHOTO_HOSTS, **(env or {})})
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self.seen: List[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.port = int(self.wait_for(_LISTENING).group(1))

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)  # end of output

    def wait_for(self, pattern: "re.Pattern[str]", timeout_s: float = 30.0) -> "re.Match[str]":
        """The first output line matching ``pattern``; AssertionError if the output ends."""
        while True:
            try:
                line = self.lines.get(timeout=timeout_s)
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern.pattern!r}: {self.seen}")
            if line is None:
                raise AssertionError(f"serve ended without {pattern.pattern!r}: {self.seen}")
            self.seen.append(line)
            match = pattern.search(line)
            if match:
                return match

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def finish(self, timeout_s: float = 30.0) -> Tuple[int, List[str]]:
        """Wait for the process to end; its exit code and every line it wrote."""
        try:
            code = self.proc.wait(timeout=timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        while True:
            try:
                line = self.lines.get(timeout=5)
            except queue.Empty:
                break
            if line is None:
                break
            self.seen.append(line)
        return code, self.seen
