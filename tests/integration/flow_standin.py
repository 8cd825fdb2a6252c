"""A stand-in for FME Flow's REST API on 127.0.0.1, recording every request it gets.

It speaks the request shapes ``fme_ai_resilience.fme.deployment`` and ``services.flow`` model: in
``v4`` mode under ``/fmeapiv4``; in ``v3`` mode every ``/fmeapiv4`` path answers 404 (an FME
Flow older than 2025) and ``/fmerest/v3`` answers instead. It keeps repositories, items and
schedules, so a second deployment sees what the first one left. A request without the
expected token gets 401 with a message that repeats the token it was given (the way a
careless server might), so tests can prove the client never shows it.
"""
from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Tuple
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class Recorded:
    """One request as the stand-in received it."""

    method: str
    path: str
    query: Dict[str, List[str]]
    headers: Dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def form(self) -> Dict[str, List[str]]:
        return parse_qs(self.body.decode("ascii"))


@dataclass
class FlowStandIn:
    """The state behind the stand-in; ``fail`` maps (method, path regex) to (status, body)."""

    token: str
    mode: str = "v4"
    repositories: Dict[str, Dict[str, bytes]] = field(default_factory=dict)
    schedules: Dict[Tuple[str, str], Any] = field(default_factory=dict)
    services: Dict[Tuple[str, str], List[str]] = field(default_factory=dict)
    requests: List[Recorded] = field(default_factory=list)
    fail: Dict[Tuple[str, str], Tuple[int, Any]] = field(default_factory=dict)
    next_job: int = 41
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, rec: Recorded) -> Tuple[int, Any]:
        with self.lock:
            self.requests.append(rec)
            for (method, pattern), answer in self.fail.items():
                if rec.method == method and re.fullmatch(pattern, rec.path):
                    return answer
            if rec.headers.get("authorization") != f"fmetoken token={self.token}":
                return 401, {"message": f"Authorization {rec.headers.get('authorization')} "
                                        f"is not valid"}
            root = "/fmeapiv4" if self.mode == "v4" else "/fmerest/v3"
            if not rec.path.startswith(root + "/"):
                return 404, {"message": "no such endpoint"}
            return self._route(rec, rec.path[len(root):])

    def _route(self, rec: Recorded, path: str) -> Tuple[int, Any]:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        method = rec.method
        if parts == ["repositories"] and method == "GET":
            items = [{"name": name} for name in sorted(self.repositories)]
            return 200, {"offset": 0, "limit": -1, "totalCount": len(items), "items": items}
        if parts == ["repositories"] and method == "POST":
            fields = rec.json() if self.mode == "v4" else {
                k: v[0] for k, v in rec.form().items()}
            if fields["name"] in self.repositories:
                return 409, {"message": "repository exists"}
            self.repositories[fields["name"]] = {}
            return 201, {"name": fields["name"]}
        if len(parts) >= 3 and parts[0] == "repositories" and parts[2] == "items":
            items = self.repositories.get(parts[1])
            if items is None:
                return 404, {"message": f"repository {parts[1]} not found"}
            if len(parts) == 3 and method == "POST":
                name = re.search(r'filename="([^"]+)"',
                                 rec.headers.get("content-disposition", "")).group(1)
                if name in items:
                    return 409, {"message": "item exists"}
                items[name] = rec.body
                return 201, {"name": name}
            if len(parts) == 4 and method == "PUT":
                if parts[3] not in items:
                    return 404, {"message": "no such item"}
                items[parts[3]] = rec.body
                return 200, {"name": parts[3]}
            if len(parts) == 5 and parts[4] == "services" and method == "PUT" \
                    and self.mode == "v3":
                self.services[(parts[1], parts[3])] = rec.form()["services"]
                return 200, {}
        if parts[0] == "schedules":
            if len(parts) == 3:
                key = (parts[1], parts[2])
                if method == "GET":
                    return (200, self.schedules[key]) if key in self.schedules else (
                        404, {"message": "no such schedule"})
                if method == "PUT" and key in self.schedules:
                    self.schedules[key] = rec.json()
                    return 204, None
            if len(parts) == 1 and method == "POST":
                body = rec.json()
                self.schedules[(body["category"], body["name"])] = body
                return 201, {}
        if self.mode == "v4" and parts == ["jobs"] and method == "POST":
            self.next_job += 1
            return 202, {"id": self.next_job}
        if self.mode == "v3" and parts[:2] == ["transformations", "submit"] and method == "POST":
            self.next_job += 1
            return 202, {"id": self.next_job}
        return 404, {"message": "no such endpoint"}

    def calls(self) -> List[Tuple[str, str]]:
        return [(r.method, r.path) for r in self.requests]


def _handler(state: FlowStandIn) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            split = urlsplit(self.path)
            rec = Recorded(self.command, split.path, parse_qs(split.query),
                           {k.lower(): v for k, v in self.headers.items()}, body)
            status, answer = state.handle(rec)
            data = b"" if answer is None else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    return Handler


class FlowServer:
    """The stand-in served on 127.0.0.1 (a free port) until :meth:`close`."""

    def __init__(self, state: FlowStandIn) -> None:
        self.state = state
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def start(token: str, mode: str = "v4", **kwargs: Any) -> FlowServer:
    return FlowServer(FlowStandIn(token=token, mode=mode, **kwargs))
