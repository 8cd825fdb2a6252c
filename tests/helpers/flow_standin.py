"""A stand-in for FME Flow's REST API on 127.0.0.1, recording every request it gets.

It answers in the shapes Safe's own CLI recorded from FME Flow (tests/data/
fmeflow_cli_fixtures.json, from safesoftware/fmeflow-cli's test fixtures) for every call
those cover: ``GET /fmeinfo/version`` (the build), ``GET /fmerest/v3/info`` (its
``timeZone`` a fixed offset, ``+0000``, by default), repositories (list, one, create, the 409
when one exists), engines, job lists, job submission and deployment parameters (list, one,
create, replace, the 409). The schedule, upload replacement and job-submitter calls the CLI
never makes keep the modelled shapes of ``fme_ai_resilience.core.fme.deployment``.

It plays one FME Flow build: each operation answers only on the REST version that build
serves it with (``V4_FROM_BUILD``, as Safe's CLI routes): the other version's path answers 404,
so a client that routes wrongly fails; deployment parameters exist from build 23000. It keeps
repositories, items, schedules and deployment parameters, so a second deployment sees what
the first one left. A request without the expected token gets 401 with a message that
repeats the token it was given (the way a careless server might), so tests can prove the
client never shows it.
"""
from __future__ import annotations

import copy
import json
import os
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Tuple
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from fme_ai_resilience.core.fme.deployment import DEPLOYMENT_PARAMETERS_FROM_BUILD, V3, V4, api_for


#: Builds a stand-in plays: before v4 repositories, between v4 lists and v4 submission, after.

from helpers import DATA


BUILD_V3 = 22300
BUILD_2023 = 23166      # the build of the recorded v3 info (fmeflow-cli, info_v3_test.go)
BUILD_2024 = 24622
BUILD_MIDDLE = 25615
BUILD_V4 = 26100
#: The answers Safe's CLI recorded (facts, vendored with their source).
SHAPES = json.loads((DATA /
                     "fmeflow_cli_fixtures.json").read_text(encoding="utf-8"))


def shape(recorded: str, **changes: Any) -> Any:
    """A copy of the recorded answer ``recorded``, with top-level ``changes``."""
    value = copy.deepcopy(SHAPES[recorded])
    value.update(changes)
    return value


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
    time_zone: str = "+0000"
    queued: int = 0
    running: int = 0
    engines: List[Dict[str, Any]] = field(default_factory=list)
    repositories: Dict[str, Dict[str, bytes]] = field(default_factory=dict)
    schedules: Dict[Tuple[str, str], Any] = field(default_factory=dict)
    services: Dict[Tuple[str, str], List[str]] = field(default_factory=dict)
    parameters: Dict[str, Dict[str, Any]] = field(default_factory=dict)
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
                return 200, shape("fmeinfo_version", buildNumber=self.build,
                                  buildString=f"FME Flow {self._release()} - Build "
                                              f"{self.build} - linux-x64")
            if rec.path == "/fmerest/v3/info":
                return 200, shape("info_v3", timeZone=self.time_zone,
                                  build=f"FME Server {self._release()} - Build {self.build} "
                                        f"- linux-x64")
            if rec.path.startswith("/fmeapiv4/deploymentparameters"):
                if self.build < DEPLOYMENT_PARAMETERS_FROM_BUILD:
                    return 404, {"message": "no such endpoint"}
                return self._parameter(rec)
            for version, root in ((V4, "/fmeapiv4"), (V3, "/fmerest/v3")):
                if rec.path.startswith(root + "/"):
                    parts = [unquote(p) for p in rec.path[len(root):].strip("/").split("/")]
                    operation = _operation(rec.method, parts)
                    if operation is None or api_for(operation, self.build) != version:
                        return 404, {"message": "no such endpoint"}
                    self.mode = version
                    return self._route(rec, parts)
            return 404, {"message": "no such endpoint"}

    def _release(self) -> str:
        return f"20{self.build // 1000}.{1 if self.build % 1000 >= 500 else 0}"

    def _parameter(self, rec: Recorded) -> Tuple[int, Any]:
        parts = rec.path.split("/")[2:]   # ["deploymentparameters", name?]
        if len(parts) == 1 and rec.method == "GET":
            items = [shape("deploymentparameter", **p) for p in self.parameters.values()]
            return 200, shape("deploymentparameters", items=items, totalCount=len(items))
        if len(parts) == 1 and rec.method == "POST":
            body = rec.json()
            if body["name"] in self.parameters:
                return 409, shape("deploymentparameter_exists", message=(
                    f'A deployment parameter with name "{body["name"]}" already exists.'))
            self.parameters[body["name"]] = body
            return 201, None
        name = unquote(parts[1])
        if name not in self.parameters:
            return 404, shape("deploymentparameter_missing")
        if rec.method == "GET":
            return 200, shape("deploymentparameter", **self.parameters[name])
        if rec.method == "PUT":
            self.parameters[name] = {**self.parameters[name], **rec.json()}
            return 204, None
        return 404, {"message": "no such endpoint"}

    def _engine(self, given: Dict[str, Any]) -> Dict[str, Any]:
        if self.mode == V4:
            item = copy.deepcopy(SHAPES["engines_v4"]["items"][0])
            item.update(name=given["name"], hostname=given["name"],
                        state="busy" if given.get("currentJobID", -1) >= 0 else "idle")
        else:
            item = copy.deepcopy(SHAPES["engines_v3"]["items"][0])
            item.update(hostName=given["name"], instanceName=given["name"])
        item.update(currentJobID=given.get("currentJobID", -1), buildNumber=self.build)
        return item

    def _route(self, rec: Recorded, parts: List[str]) -> Tuple[int, Any]:
        method, v4 = rec.method, self.mode == V4
        if parts[-1] == "engines":
            items = [self._engine(e) for e in self.engines]
            return 200, shape("engines_v4" if v4 else "engines_v3", items=items,
                              totalCount=len(items))
        if parts[0] == "jobs" and method == "GET" or parts[:2] == ["transformations", "jobs"]:
            status = rec.query.get("status", [parts[-1]])[0]
            total = self.queued if status == "queued" else self.running
            return 200, shape("jobs_v4" if v4 else "jobs_v3", items=[], totalCount=total)
        if parts == ["repositories"] and method == "GET":
            template = SHAPES["repositories_v4" if v4 else "repositories_v3"]["items"][0]
            items = [{**template, "name": name, "description": ""}
                     for name in sorted(self.repositories)]
            return 200, shape("repositories_v4" if v4 else "repositories_v3", items=items,
                              totalCount=len(items))
        if len(parts) == 2 and parts[0] == "repositories" and method == "GET":
            if parts[1] not in self.repositories:
                return 404, {"message": f"repository {parts[1]} not found"}
            return 200, shape("repository_v4" if v4 else "repository_v3", name=parts[1])
        if parts == ["repositories"] and method == "POST":
            fields = rec.json() if v4 else {k: v[0] for k, v in rec.form().items()}
            if fields["name"] in self.repositories:
                return 409, shape("repository_exists_v4") if v4 else None
            self.repositories[fields["name"]] = {}
            return 201, None
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
            if len(parts) == 5 and parts[4] == "services" and method == "PUT" and not v4:
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
        if parts == ["jobs"] and method == "POST" or parts[:2] == ["transformations",
                                                                    "submit"]:
            self.next_job += 1
            return 202, shape("submit_v4" if v4 else "submit_v3", id=self.next_job)
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


#: The FME Flow token and the ledger URL the deploy tests hand over (both secrets).
TOKEN = "fmetoken-0b7c-5ecret-a1"
DB = "postgresql://fair:ledger-pw-77@db.internal:5432/ledger"


@pytest.fixture
def flow():
    """Starts Flow stand-ins (``flow(build=..., token=..., **kwargs)``), stopped after the
    test."""
    servers = []

    def run(build: int = BUILD_V4, token: str = TOKEN, **kwargs: Any) -> FlowServer:
        server = start(token, build, **kwargs)
        servers.append(server)
        return server

    yield run
    for server in servers:
        server.close()


@pytest.fixture
def flow_environment(monkeypatch):
    """The token and the ledger URL in the variables ``flow deploy`` is told to read, and no
    ``FAIR_*`` variable of the caller's."""
    monkeypatch.setenv("FLOW_TOKEN_TEST", TOKEN)
    monkeypatch.setenv("LEDGER_URL_TEST", DB)
    for name in [n for n in os.environ if n.startswith("FAIR_")]:
        monkeypatch.delenv(name)
