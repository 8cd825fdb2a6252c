"""Hostile servers on 127.0.0.1 for the reliability suite: a front that forwards to a stand-in
but trickles (or reads slowly) the requests a rule picks, and records how long each hostile
connection was held by the client."""
from __future__ import annotations

import socket
import threading
import time
from typing import Callable, List, Optional, Tuple, Union
from urllib.parse import urlsplit, urlunsplit

from helpers.loopback import Loopback, read_head


TRICKLE, SLOW_READ = "trickle", "slow-read"
_PAD = b"X-Pad: " + b"a" * 400 + b"\r\n"



def _length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0



def trickle(conn: socket.socket, answer: bytes, *, stop: threading.Event,
            every_s: float) -> None:
    """Send ``answer`` one byte every ``every_s`` until it is out, ``stop`` is set (the server
    stops: the client held it at least this long) or the client shuts its side (it gave up)."""
    try:
        for byte in answer:
            if stop.wait(every_s):
                break
            conn.sendall(bytes([byte]))
            conn.settimeout(0)
            try:
                if conn.recv(1) == b"":
                    break
            except (BlockingIOError, socket.timeout):
                pass
            finally:
                conn.settimeout(60)
    except OSError:
        pass


class Front(Loopback):
    """A loopback server: ``rule(method, path)`` says what to do with each request (None:
    forward it to ``upstream_port``, one request per connection; TRICKLE: answer with headers
    one byte every ``every_s``; SLOW_READ: read the request body at ``bytes_per_s``; bytes:
    answer 200 with that JSON body).

    ``held`` lists ``(path, seconds)``: how long the client kept each hostile connection,
    from the end of its request head until it gave up (closed or reset the connection).
    """

    def __init__(self, rule: Callable[[str, str], Union[None, str, bytes]], *,
                 upstream_port: Optional[int] = None, every_s: float = 0.1,
                 bytes_per_s: int = 65536) -> None:
        self.rule, self.upstream_port = rule, upstream_port
        self.every_s, self.bytes_per_s = every_s, bytes_per_s
        self.held: List[Tuple[str, float]] = []
        self.seen: List[bytes] = []
        super().__init__(self._handle)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)

    def __enter__(self) -> "Front":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_held(self, count: int = 1, timeout_s: float = 3.0) -> None:
        """Wait until ``count`` hostile connections ended (the client gave them up)."""
        deadline = time.monotonic() + timeout_s
        while len(self.held) < count and time.monotonic() < deadline:
            time.sleep(0.05)

    def _handle(self, conn: socket.socket, stop: threading.Event) -> None:
        conn.settimeout(60)
        head, rest = read_head(conn)
        if not head:
            return
        self.seen.append(head)
        method, path = head.split(b" ", 2)[:2]
        if path.startswith(b"http://"):   # asked as a proxy: forward in origin form
            target = urlsplit(path.decode())
            origin = (target.path or "/") + (f"?{target.query}" if target.query else "")
            head = head.replace(path, origin.encode(), 1)
            path = origin.encode()
        action = self.rule(method.decode(), path.decode())
        if action == SLOW_READ:
            self._slow_read(conn, path.decode(), head, rest)
            return
        rest = self._body(conn, head, rest)
        if isinstance(action, bytes):   # a canned answer (an echo of what was sent)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n"
                         % len(action) + action)
        elif action == TRICKLE:
            self._trickle(conn, path.decode())
        else:
            self._forward(conn, head, rest)

    def _body(self, conn: socket.socket, head: bytes, rest: bytes) -> bytes:
        length = _length(head)
        while len(rest) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            rest += chunk
        return rest

    def _trickle(self, conn: socket.socket, path: str) -> None:
        start = time.monotonic()
        answer = b"HTTP/1.1 200 OK\r\n" + _PAD[:80] + b"\r\nContent-Length: 2\r\n\r\n{}"
        trickle(conn, answer, stop=self.stop, every_s=self.every_s)
        self.held.append((path, time.monotonic() - start))

    def _slow_read(self, conn: socket.socket, path: str, head: bytes, rest: bytes) -> None:
        start = time.monotonic()
        length, got = _length(head), len(rest)
        try:
            while got < length:
                if self.stop.wait(65536 / self.bytes_per_s):
                    break   # the server stops: the client held it at least this long
                chunk = conn.recv(65536)
                if not chunk:
                    break
                got += len(chunk)
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")
        except OSError:
            pass
        self.held.append((path, time.monotonic() - start))

    def _forward(self, conn: socket.socket, head: bytes, body: bytes) -> None:
        lines = [line for line in head.split(b"\r\n")
                 if not line.lower().startswith(b"connection:")]
        request = b"\r\n".join(lines + [b"Connection: close"]) + b"\r\n\r\n" + body
        with socket.create_connection(("127.0.0.1", self.upstream_port), timeout=30) as up:
            up.sendall(request)
            answer = b""
            while True:
                chunk = up.recv(65536)
                if not chunk:
                    break
                answer += chunk
        top, _, rest = answer.partition(b"\r\n\r\n")
        kept = [line for line in top.split(b"\r\n") if not line.lower().startswith(b"connection:")]
        conn.sendall(b"\r\n".join(kept + [b"Connection: close"]) + b"\r\n\r\n" + rest)


class TcpProxy:
    """A TCP proxy on 127.0.0.1 in front of ``upstream`` (host, port): :meth:`cut` drops every
    connection and refuses new ones (accepted, then closed at once) until :meth:`restore`;
    :meth:`freeze` stops forwarding in both directions without closing anything (the kernel
    still accepts and acknowledges every byte), as a hung proxy, a stalled network path or a
    frozen virtual machine looks to a client, until :meth:`thaw`."""

    def __init__(self, upstream: Tuple[str, int]) -> None:
        self.upstream = upstream
        self.stop = threading.Event()
        self.down = threading.Event()
        self.running = threading.Event()   # clear: frozen
        self.running.set()
        self._lock = threading.Lock()
        self._open: List[socket.socket] = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def cut(self) -> None:
        self.down.set()
        with self._lock:
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            self._open.clear()

    def restore(self) -> None:
        self.down.clear()

    def freeze(self) -> None:
        """Hold every byte from now on, both ways (new connections wait in the listen
        backlog, unanswered)."""
        self.running.clear()

    def thaw(self) -> None:
        self.running.set()

    def url(self, url: str) -> str:
        """``url`` (a PostgreSQL URL) pointed at this proxy."""
        parts = urlsplit(url)
        auth = parts.netloc.rpartition("@")[0]
        netloc = (auth + "@" if auth else "") + f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    def __enter__(self) -> "TcpProxy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _held(self) -> bool:
        """Wait while frozen; False once the proxy closes."""
        while not self.running.wait(0.1):
            if self.stop.is_set():
                return False
        return not self.stop.is_set()

    def close(self) -> None:
        self.stop.set()
        self.cut()
        self._thread.join(2)
        self.sock.close()

    def _accept(self) -> None:
        while self._held():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            if self.down.is_set():
                conn.close()
                continue
            try:
                up = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                conn.close()
                continue
            with self._lock:
                self._open.extend((conn, up))
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            source.settimeout(None)
            while True:
                data = source.recv(65536)
                if not data or not self._held():
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.close()
                except OSError:
                    pass
