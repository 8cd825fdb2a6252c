"""A stand-in for FME Flow's REST API on 127.0.0.1, recording every request it gets.

It speaks the request shapes ``fme_ai_resilience.core.fme.deployment`` and ``services.flow`` model
and plays one FME Flow build: ``GET /fmeinfo/version`` tells it (``/fmerest/v3/info`` too, with
the server's time zone), and each operation answers only on the REST version that build serves
it with (``V4_FROM_BUILD``, as Safe's CLI routes): the other version's path answers 404, so a
client that routes wrongly fails. It also serves the job lists and engines. It keeps repositories, items and
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

from fme_ai_resilience.core.fme.deployment import V3, V4, api_for

#: Builds a stand-in plays: before v4 repositories, between v4 lists and v4 submission, after.
BUILD_V3 = 22300
BUILD_MIDDLE = 25615
BUILD_V4 = 26100


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
    build: int = BUILD_V4
    time_zone: str = "America/Vancouver"
    queued: int = 0
    running: int = 0
    engines: List[Dict[str, Any]] = field(default_factory=list)
    repositories: Dict[str, Dict[str, bytes]] = field(default_factory=dict)
    schedules: Dict[Tuple[str, str], Any] = field(default_factory=dict)
    services: Dict[Tuple[str, str], List[str]] = field(default_factory=dict)
    requests: List[Recorded] = field(default_factory=list)
    fail: Dict[Tuple[str, str], Tuple[int, Any]] = field(default_factory=dict)
    next_job: int = 41
    lock: threading.Lock = field(default_factory=threading.Lock)
    mode: str = V4  # the version of the request being routed

    def handle(self, rec: Recorded) -> Tuple[int, Any]:
        with self.lock:
            self.requests.append(rec)
            for (method, pattern), answer in self.fail.items():
                if rec.method == method and re.fullmatch(pattern, rec.path):
                    return answer
            if rec.headers.get("authorization") != f"fmetoken token={self.token}":
                return 401, {"message": f"Authorization {rec.headers.get('authorization')} "
                                        f"is not valid"}
            if rec.path == "/fmeinfo/version":
                return 200, {"buildNumber": self.build, "buildString": f"FME Flow {self.build}"}
            if rec.path == "/fmerest/v3/info" and self.build < 26018:
                return 200, {"build": f"FME Flow 20xx.x - Build {self.build} - linux-x64",
                             "timeZone": self.time_zone, "version": "FME Flow"}
            if rec.path == "/fmeapiv4/info" and self.build >= 25208:
                return 200, {"buildNumber": self.build, "timeZone": self.time_zone}
            for version, root in ((V4, "/fmeapiv4"), (V3, "/fmerest/v3")):
                if rec.path.startswith(root + "/"):
                    parts = [unquote(p) for p in rec.path[len(root):].strip("/").split("/")]
                    operation = _operation(rec.method, parts)
                    if operation is None or api_for(operation, self.build) != version:
                        return 404, {"message": "no such endpoint"}
                    self.mode = version
                    return self._route(rec, parts)
            return 404, {"message": "no such endpoint"}

    def _route(self, rec: Recorded, parts: List[str]) -> Tuple[int, Any]:
        method = rec.method
        if parts[-1] == "engines":
            return 200, {"offset": 0, "limit": -1, "totalCount": len(self.engines),
                         "items": self.engines}
        if parts[0] == "jobs" and method == "GET" or parts[:2] == ["transformations", "jobs"]:
            status = rec.query.get("status", [parts[-1]])[0]
            total = self.queued if status == "queued" else self.running
            return 200, {"offset": 0, "limit": 1, "totalCount": total, "items": []}
        if parts == ["repositories"] and method == "GET":
            items = [{"name": name} for name in sorted(self.repositories)]
            return 200, {"offset": 0, "limit": -1, "totalCount": len(items), "items": items}
        if len(parts) == 2 and parts[0] == "repositories" and method == "GET":
            if parts[1] not in self.repositories:
                return 404, {"message": f"repository {parts[1]} not found"}
            return 200, {"name": parts[1]}
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
        if parts == ["jobs"] and method == "POST":
            self.next_job += 1
            return 202, {"id": self.next_job}
        if parts[:2] == ["transformations", "submit"] and method == "POST":
            self.next_job += 1
            return 202, {"id": self.next_job}
        return 404, {"message": "no such endpoint"}

    def calls(self) -> List[Tuple[str, str]]:
        return [(r.method, r.path) for r in self.requests]


def _operation(method: str, parts: List[str]) -> Any:
    """Which operation of ``V4_FROM_BUILD`` a path (below its version's root) is, or None."""
    if parts[0] == "repositories":
        return "repositories" if len(parts) <= 2 else "upload"
    if parts[0] == "schedules":
        return "schedules"
    if parts == ["jobs"] or parts[:2] == ["transformations", "jobs"]:
        return "jobs" if method == "GET" else "submit"
    if parts[:2] == ["transformations", "submit"]:
        return "submit"
    if parts[-1] == "engines":
        return "engines"
    return None


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


def start(token: str, build: int = BUILD_V4, **kwargs: Any) -> FlowServer:
    return FlowServer(FlowStandIn(token=token, build=build, **kwargs))
