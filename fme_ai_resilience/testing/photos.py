"""A photo host on loopback that the library's downloader accepts, for tests of WS-02.

The downloader fetches a photo only from a host on its allow-list, over https unless the host
is listed for plain http, and resolving to public addresses unless listed as private; it
looks the name up itself, so a URL mocked with ``responses`` never reaches it.
:class:`PhotoHost` is a real HTTP server on 127.0.0.1 serving the photos a test adds, and
:attr:`PhotoHost.macros` are the published parameters that let the downloader in (the
allow-list entry ``127.0.0.1:PORT``, plain http and the private address for 127.0.0.1 only)::

    with PhotoHost() as photos:
        url = photos.add("hydrant.jpg")                 # JPEG-looking bytes, image/jpeg
        run = run_caller(ProcessorCaller, [{}], {**macros, **photos.macros})

``run_caller(..., photo_host=photos)`` merges the macros itself. ``requests`` records what was
asked (path, and whether a token header came). docs/testing.md, Testing WS-02 end to end.
"""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Mapping, Optional, Tuple
from urllib.parse import quote, urlsplit

from ..core.errors import ConfigurationError

__all__ = ["PhotoHost", "JPEG"]

#: A few bytes that start like a JPEG (what the Vision stand-ins are given).
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 64


class PhotoHost:
    """A loopback HTTP server of photos (see the module docstring); a context manager."""

    def __init__(self) -> None:
        self._photos: Dict[str, Tuple[int, str, bytes]] = {}
        self._lock = threading.Lock()
        #: ``(path, headers)`` of every request, in order.
        self.requests: List[Tuple[str, Mapping[str, str]]] = []
        host = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                path = urlsplit(self.path).path
                with host._lock:
                    host.requests.append((path, dict(self.headers.items())))
                    status, ctype, body = host._photos.get(
                        path, (404, "application/json", b'{"error":"no such photo"}'))
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._server: Optional[ThreadingHTTPServer] = ThreadingHTTPServer(
            ("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="fair-photo-host")
        self._thread.start()

    def __repr__(self) -> str:
        return f"PhotoHost({self.url!r}, {len(self._photos)} photo(s))"

    def __enter__(self) -> "PhotoHost":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def add(self, name: str, content: bytes = JPEG, *, content_type: str = "image/jpeg",
            status: int = 200) -> str:
        """Serve ``content`` at ``/photos/<name>`` and return its URL; ``status`` 404 makes
        a photo that is gone."""
        if not isinstance(name, str) or not name or "/" in name:
            raise ConfigurationError("name", name, "must be a file name")
        path = f"/photos/{quote(name)}"
        with self._lock:
            self._photos[path] = (int(status), content_type, bytes(content))
        return self.url + path

    @property
    def macros(self) -> Dict[str, str]:
        """The published parameters that let the downloader fetch from this host."""
        return {"FAIR_DOWNLOAD_ALLOWED_HOSTS": f"127.0.0.1:{self.port}",
                "FAIR_DOWNLOAD_ALLOW_HTTP_HOSTS": "127.0.0.1",
                "FAIR_DOWNLOAD_ALLOW_PRIVATE_HOSTS": "127.0.0.1"}
