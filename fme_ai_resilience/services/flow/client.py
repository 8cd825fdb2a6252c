"""FME Flow REST: job counts and engine occupancy as a cached health probe, and deployment.

``FlowClient`` reads the server's build once (``GET /fmeinfo/version``, else the ``build`` of
``GET /fmerest/v3/info``) and sends each operation to the REST version that build serves it
with, as Safe's own CLI decides (:data:`~fme_ai_resilience.core.fme.deployment.V4_FROM_BUILD`):
v4 (``/fmeapiv4``) from the operation's threshold build on, v3 (``/fmerest/v3``) below it.
The token travels only in the ``Authorization: fmetoken token=<token>`` header and never
appears in reprs, logs or errors; neither do the values of secret published parameters (the
ledger URL).

Deployment: :meth:`FlowClient.put_deployment_parameter`, :meth:`FlowClient.ensure_repository`,
:meth:`FlowClient.upload_workspace`, :meth:`FlowClient.put_schedule` and
:meth:`FlowClient.submit_job`, with the request bodies of
:mod:`fme_ai_resilience.core.fme.deployment`. A schedule begins now in the server's time zone (FME
Flow reads schedule times and cron expressions in its own zone): the ``timeZone`` FME Flow
reports in its v3 info (a fixed offset such as ``+0000`` on the builds Safe's CLI recorded,
or an IANA name), or ``time_zone`` given to the client. The job submission (v4 body, v3
path and TMDirectives), the repository lookup and creation, the deployment parameters, the
engines list, the v3 upload and the info endpoints are Safe's (its CLI and the answers its
tests recorded); the other request shapes are modelled on Safe's documentation and unverified
against a live FME Flow (docs/fme-flow.md lists them).

Every call runs under per-phase limits (connect, time to first byte, body; the answer's size
capped at ``max_answer_bytes``, its JSON decoded within a nesting limit). Intake uses
:meth:`FlowClient.health` to answer 503 + Retry-After when FME Flow has no engine capacity;
that answer comes from a cache refreshed in the background (:mod:`.flow_health`), so intake
never waits on FME Flow, and a probe runs under ``probe_deadline_s`` in total. A probe that
fails reports ``reachable=False`` and ``has_capacity=True``: the ledger holds the work
whatever Flow's state, so an unreachable FME Flow never turns submissions away.
"""
from __future__ import annotations

import datetime
import json as _json
import logging
import math
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple
from urllib.parse import quote, urlencode

import requests

from ...core.checks import count, finite
from ...core.clock import Clock, SystemClock
from ...core.errors import ConfigurationError, FlowError, InvalidPayload
from ...core.fme.deployment import V3, V4, JobRequest, Schedule, api_for, job_body, schedule_body
from ...core.text.redact import excerpt, redact_text
from ...core.text.untrusted_json import decode_value
from .health import FlowHealth, HealthCache
from ..http.sessions import new_session
from ..vision.phases import exchange

__all__ = ["FlowClient", "FlowHealth", "Engine", "FlowError", "V3", "V4", "is_fixed_offset"]

log = logging.getLogger("fme_ai_resilience.flow")

_ITEM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\.fmw")
_BUILD = re.compile(r"\bBuild\s+(\d{1,9})\b")
#: The service a v3 workspace must be registered with to be submitted or scheduled (modelled).
V3_JOB_SUBMITTER = "fmejobsubmitter"
#: How deep an FME Flow answer may nest: its lists of items are two or three levels deep.
MAX_ANSWER_DEPTH = 32
ROOTS = {V4: "/fmeapiv4", V3: "/fmerest/v3"}


@dataclass(frozen=True)
class Engine:
    """One FME Flow engine: busy when it is running a job."""

    name: str
    busy: bool
    queues: Tuple[str, ...] = ()


class FlowClient:
    """A small FME Flow REST client: queue and engine state behind a cached health probe, and
    the deployment of the workspaces, each call sent to the version the server's build serves.

    ``timeout_s`` is the (connect, read) limit of each call in seconds (the read limit bounds
    the wait for the answer's headers and, again, the read of its body); ``cache_ttl_s`` how
    long a health answer is reused; ``max_stale_s`` how much longer a stale answer is served
    while the background probe refreshes it; ``probe_deadline_s`` the probe's total budget.
    ``build`` and ``time_zone`` (an IANA name, ``Europe/Oslo``, or a UTC offset, ``+0100``)
    skip asking the server.
    ``session`` and ``clock`` are injectable for tests.
    """

    def __init__(self, base_url: str, token: str, *, session: Optional[requests.Session] = None,
                 clock: Optional[Clock] = None, cache_ttl_s: float = 5.0,
                 timeout_s: Tuple[float, float] = (3.0, 5.0),
                 max_queued_per_engine: float = 1.0, max_stale_s: float = 30.0,
                 probe_deadline_s: float = 10.0, max_answer_bytes: int = 4 * 1024 * 1024,
                 build: Optional[int] = None, time_zone: Optional[str] = None) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigurationError("base_url", base_url, "must be an http(s) URL")
        if not isinstance(token, str) or not token:
            raise ConfigurationError("token", "", "must not be empty")
        finite("max_queued_per_engine", max_queued_per_engine, minimum=0)
        if not (isinstance(timeout_s, tuple) and len(timeout_s) == 2):
            raise ConfigurationError("timeout_s", timeout_s, "must be (connect, read) seconds")
        for label, value in zip(("timeout_s[0]", "timeout_s[1]"), timeout_s):
            finite(label, value, minimum=0.001)
        count("max_answer_bytes", max_answer_bytes, minimum=1)
        if build is not None:
            count("build", build, minimum=1)
        if time_zone is not None:
            _zone(time_zone)
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._clock = clock or SystemClock()
        self._own_session = session is None
        self._session = session if session is not None else new_session(clock=self._clock)
        self.timeout_s = timeout_s
        self.max_queued_per_engine = max_queued_per_engine
        self.max_answer_bytes = max_answer_bytes
        self.build: Optional[int] = build
        self._time_zone = time_zone
        self._sent_secrets: Set[str] = set()
        self._health = HealthCache(self._probe, clock=self._clock, cache_ttl_s=cache_ttl_s,
                                   max_stale_s=max_stale_s, deadline_s=probe_deadline_s)

    def __repr__(self) -> str:
        return f"FlowClient({self.base_url!r}, build={self.build or 'unknown'})"

    def close(self) -> None:
        """Stop the background probes (health() then answers "not known" at once) and close
        the session this client made; a session handed in is the caller's to close."""
        self._health.close()
        if self._own_session:
            self._session.close()

    # -- the server and the version of each operation -------------------------------------
    def server_build(self, *, deadline: Optional[float] = None) -> int:
        """The server's build number, read once (``GET /fmeinfo/version``, as Safe's CLI does,
        else the ``build`` text of ``GET /fmerest/v3/info``). Raises :class:`FlowError`."""
        if self.build is None:
            status, body = self._call("GET", "/fmeinfo/version", ok=(200, 404),
                                      deadline=deadline)
            try:
                number = _mapping(self._json(body, "/fmeinfo/version")).get("buildNumber") \
                    if status == 200 else None
            except FlowError:   # a page in its place (a proxy's): ask the v3 info
                number = None
            if not (isinstance(number, int) and not isinstance(number, bool) and number > 0):
                info = self._info("/fmerest/v3/info", deadline)
                found = _BUILD.search(str(info.get("build", "")))
                if found is None:
                    raise FlowError("FME Flow reported no build number")
                number = int(found.group(1))
            self.build = number
        return self.build

    def api_for(self, operation: str, *, deadline: Optional[float] = None) -> str:
        """The REST version this server serves ``operation`` with (``jobs``, ``engines``,
        ``repositories``, ``upload``, ``schedules``, ``submit``)."""
        return api_for(operation, self.server_build(deadline=deadline))

    @property
    def api_version(self) -> Optional[str]:
        """The version of the job and engine lists, once the build is known."""
        return None if self.build is None else api_for("jobs", self.build)

    def routes(self) -> Dict[str, str]:
        """Every operation and the REST version this server gets it on."""
        build = self.server_build()
        return {op: api_for(op, build) for op in ("repositories", "upload", "schedules",
                                                  "submit", "jobs", "engines")}

    def time_zone(self) -> str:
        """The server's time zone: given, or the ``timeZone`` of ``GET /fmerest/v3/info``,
        an IANA name or, as FME Flow answers it (fmeflow-cli's recorded fixture), a fixed
        offset such as ``+0000`` (:func:`is_fixed_offset`: no daylight saving followed).
        The v4 info (``/fmeinfo/version``) carries no time zone. Raises FlowError when the
        server gives none: pass ``time_zone``."""
        if self._time_zone is None:
            path = "/fmerest/v3/info"
            status, body = self._call("GET", path, ok=(200, 404))
            zone = _mapping(self._json(body, path)).get("timeZone") if status == 200 else None
            if not (isinstance(zone, str) and zone):
                raise FlowError("FME Flow reported no time zone; give it (--time-zone)")
            _zone(zone)
            self._time_zone = zone
        return self._time_zone

    def _info(self, path: str, deadline: Optional[float]) -> Mapping[str, Any]:
        _, body = self._call("GET", path, deadline=deadline)
        return _mapping(self._json(body, path))

    def _root(self, operation: str, deadline: Optional[float] = None) -> str:
        return ROOTS[self.api_for(operation, deadline=deadline)]

    # -- raw reads ----------------------------------------------------------------------------
    def job_counts(self, *, deadline: Optional[float] = None) -> Tuple[int, int]:
        """``(queued, running)`` job counts. Raises :class:`FlowError`."""
        v4 = self.api_for("jobs", deadline=deadline) == V4
        counts = []
        for status in ("queued", "running"):
            if v4:
                path, params = "/fmeapiv4/jobs", {"status": status, "limit": 1}
            else:
                path, params = f"/fmerest/v3/transformations/jobs/{status}", {"limit": 1}
            counts.append(_total(self._get(path, params, deadline)))
        return counts[0], counts[1]

    def engines(self, *, deadline: Optional[float] = None) -> List[Engine]:
        """Every registered engine with whether it is running a job. Raises :class:`FlowError`."""
        if self.api_for("engines", deadline=deadline) == V4:
            body = self._get("/fmeapiv4/engines", None, deadline)   # as Safe's CLI asks
        else:
            body = self._get("/fmerest/v3/transformations/engines", None, deadline)
        return [_engine(item) for item in _items(body)]

    # -- health -------------------------------------------------------------------------------
    def health(self) -> FlowHealth:
        """The cached verdict on engine capacity, refreshed in the background (see the
        module docstring); never waits on FME Flow and never raises."""
        return self._health.get()

    def refresh_health(self) -> FlowHealth:
        """Probe now, under the probe's deadline, keep the answer and return it."""
        return self._health.refresh()

    def wait_for_probe(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a background probe; True when none is running."""
        return self._health.wait(timeout_s)

    def _probe(self) -> FlowHealth:
        """Ask Flow now, under the total deadline; stamped when it finished (monotonic s)."""
        deadline = self._clock.monotonic() + self._health.deadline_s
        try:
            queued, running = self.job_counts(deadline=deadline)
            engines = self.engines(deadline=deadline)
        except FlowError as exc:
            log.warning("FME Flow health probe failed: %s", exc)
            return FlowHealth(reachable=False, has_capacity=True,
                              checked_at=self._clock.monotonic(),
                              api_version=self.api_version, error=str(exc))
        busy = sum(1 for e in engines if e.busy)
        total = len(engines)
        saturated = total == 0 or (
            busy >= total and queued >= math.ceil(self.max_queued_per_engine * total))
        return FlowHealth(reachable=True, has_capacity=not saturated, queued=queued,
                          running=running, engines=total, busy_engines=busy,
                          api_version=self.api_version, checked_at=self._clock.monotonic())

    # -- deployment ---------------------------------------------------------------------------
    def repositories(self) -> List[str]:
        """The names of every repository the token can see. Raises :class:`FlowError`."""
        body = self._get(f"{self._root('repositories')}/repositories", {"limit": -1})
        return [str(item.get("name")) for item in _items(body) if item.get("name")]

    def ensure_repository(self, name: str, description: str = "") -> bool:
        """Create repository ``name`` unless it exists; True when this call created it.

        ``GET .../repositories/{name}`` (200: there, 404: not), then v4 ``POST
        /fmeapiv4/repositories`` with JSON, v3 ``POST /fmerest/v3/repositories`` with a form
        (Safe's CLI, both); a 409 (created meanwhile) counts as existing.
        """
        root = self._root("repositories")
        found, _ = self._call("GET", f"{root}/repositories/{_segment(name)}", ok=(200, 404))
        if found == 200:
            return False
        fields = {"name": name, "description": description}
        if root == ROOTS[V4]:
            status, _ = self._call("POST", f"{root}/repositories", ok=(200, 201, 409),
                                   json=fields)
        else:
            status, _ = self._call("POST", f"{root}/repositories", ok=(200, 201, 409),
                                   data=fields)
        return status != 409

    def upload_workspace(self, repository: str, filename: str, content: bytes) -> str:
        """Put the workspace file into ``repository``: ``"created"`` or ``"replaced"``.

        ``POST .../repositories/{repository}/items`` with the file as the body
        (``Content-Disposition: attachment; filename="..."``, fme.md for v3); an item that
        exists (409) is replaced with ``PUT .../items/{filename}``. On v3 the workspace is
        then registered with the job submitter service (modelled).
        """
        if not isinstance(filename, str) or not _ITEM_NAME.fullmatch(filename):
            raise ConfigurationError("filename", filename, "must be a plain NAME.fmw")
        if not isinstance(content, bytes):
            raise ConfigurationError("content", type(content).__name__, "must be bytes")
        root = self._root("upload")
        items = f"{root}/repositories/{_segment(repository)}/items"
        headers = {"Content-Type": "application/octet-stream",
                   "Content-Disposition": f'attachment; filename="{filename}"'}
        status, _ = self._call("POST", items, ok=(200, 201, 409), data=content, headers=headers)
        outcome = "created"
        if status == 409:
            self._call("PUT", f"{items}/{_segment(filename)}", ok=(200, 201, 204),
                       data=content, headers=headers)
            outcome = "replaced"
        if root == ROOTS[V3]:
            self._call("PUT", f"{items}/{_segment(filename)}/services", ok=(200, 201, 204),
                       data={"services": V3_JOB_SUBMITTER})
        return outcome

    def schedule_begin(self) -> str:
        """Now, by this client's clock, as the server's wall clock shows it
        (``YYYY-MM-DDTHH:MM:SS`` in :meth:`time_zone`)."""
        zone = _zone(self.time_zone())
        return datetime.datetime.fromtimestamp(self._clock.now(), zone).strftime(
            "%Y-%m-%dT%H:%M:%S")

    def put_schedule(self, schedule: Schedule, *, begin: Optional[str] = None) -> str:
        """Create ``schedule`` or replace the one with its category and name: ``"created"`` or
        ``"updated"`` (``GET``, then ``PUT`` or ``POST`` under ``.../schedules``, modelled).
        It begins at ``begin`` (default: now in the server's time zone); its job carries the
        job's directives (``maxJobRuntime``/``tm_ttc`` among them)."""
        if not isinstance(schedule, Schedule):
            raise ConfigurationError("schedule", schedule, "must be a Schedule")
        api = self.api_for("schedules")
        body = schedule_body(schedule, api, begin=begin or self.schedule_begin())
        secrets = schedule.job.secret_values
        root = ROOTS[api]
        one = f"{root}/schedules/{_segment(schedule.category)}/{_segment(schedule.name)}"
        status, _ = self._call("GET", one, ok=(200, 404), secrets=secrets)
        if status == 200:
            self._call("PUT", one, ok=(200, 201, 204), json=body, secrets=secrets)
            return "updated"
        self._call("POST", f"{root}/schedules", ok=(200, 201), json=body, secrets=secrets)
        return "created"

    def put_deployment_parameter(self, name: str, value: str) -> str:
        """Create the text deployment parameter ``name`` holding ``value``, or replace the
        value of the one there: ``"created"`` or ``"updated"`` (``GET``, then ``PUT`` or
        ``POST`` under ``/fmeapiv4/deploymentparameters``, as Safe's CLI sends them). The
        value never appears in an error."""
        self._sent_secrets.add(value)   # scrubbed from every later error too
        one = f"/fmeapiv4/deploymentparameters/{_segment(name)}"
        status, _ = self._call("GET", one, ok=(200, 404), secrets=(value,))
        if status == 200:
            self._call("PUT", one, ok=(200, 204), json={"type": "text", "value": value},
                       secrets=(value,))
            return "updated"
        self._call("POST", "/fmeapiv4/deploymentparameters", ok=(200, 201),
                   json={"name": name, "type": "text", "value": value}, secrets=(value,))
        return "created"

    def submit_job(self, job: JobRequest) -> int:
        """Submit ``job`` now and return its job id: v4 ``POST /fmeapiv4/jobs`` from build
        26018 (FME Flow 2026.0), below it v3 ``POST /fmerest/v3/transformations/submit/
        {repository}/{workspace}`` with ``TMDirectives`` (Safe's CLI, ``cmd/run.go``)."""
        if not isinstance(job, JobRequest):
            raise ConfigurationError("job", job, "must be a JobRequest")
        api = self.api_for("submit")
        path = "/fmeapiv4/jobs" if api == V4 else (
            f"/fmerest/v3/transformations/submit/{_segment(job.repository)}/"
            f"{_segment(job.workspace)}")
        _, body = self._call("POST", path, ok=(200, 201, 202), json=job_body(job, api),
                             secrets=job.secret_values)
        try:
            job_id = _mapping(self._json(body, path)).get("id")
        except FlowError:
            job_id = None
        if not isinstance(job_id, int) or isinstance(job_id, bool):
            raise FlowError(f"POST {path}: the answer carries no job id")
        return job_id

    # -- HTTP ---------------------------------------------------------------------------------
    def _get(self, path: str, params: Optional[Mapping[str, Any]],
             deadline: Optional[float] = None) -> Any:
        _, body = self._call("GET", path, params=params, deadline=deadline)
        return self._json(body, path)

    def _call(self, method: str, path: str, *, ok: Tuple[int, ...] = (200,),
              params: Optional[Mapping[str, Any]] = None, json: Any = None, data: Any = None,
              headers: Optional[Mapping[str, str]] = None, secrets: Iterable[str] = (),
              deadline: Optional[float] = None) -> Tuple[int, bytes]:
        """One exchange with the token under the phase limits (shrunk to fit ``deadline``,
        monotonic seconds); any status outside ``ok`` raises :class:`FlowError` naming the
        path, the status and FME Flow's own message, scrubbed of the token and ``secrets``."""
        connect_s, read_s = self.timeout_s
        if deadline is not None:
            left = deadline - self._clock.monotonic()
            if left <= 0:
                raise FlowError(f"{method} {path}: the probe's deadline passed")
            scale = min(1.0, left / (connect_s + 2 * read_s))
            connect_s, read_s = connect_s * scale, read_s * scale
        all_headers = {"Authorization": f"fmetoken token={self._token}",
                       "Accept": "application/json", **(headers or {})}
        payload = b""
        if json is not None:
            payload = _json.dumps(json).encode("utf-8")
            all_headers.setdefault("Content-Type", "application/json")
        elif isinstance(data, Mapping):
            payload = urlencode(data).encode("ascii")
            all_headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
        elif data is not None:
            payload = data
        url = self.base_url + path + (f"?{urlencode(params, doseq=True)}" if params else "")
        done = exchange(method, url, all_headers, payload, connect_s=connect_s,
                        ttfb_s=read_s, body_s=read_s, max_bytes=self.max_answer_bytes,
                        session=self._session, clock=self._clock)
        if done.error_class is not None or done.status_code is None:
            what = done.detail or (done.error_class.value if done.error_class else "no answer")
            raise FlowError(self._clean(f"{method} {path}: {what}", secrets))
        if done.status_code not in ok:
            raise FlowError(self._clean(f"{method} {path}: HTTP {done.status_code}"
                                        f"{_server_message(done.body)}", secrets))
        if done.oversize:
            raise FlowError(f"{method} {path}: the answer is larger than "
                            f"{self.max_answer_bytes} bytes")
        return done.status_code, done.body

    def _json(self, body: bytes, path: str) -> Any:
        """The answer's JSON within the size and nesting limits; a mapping for ``.get``."""
        try:
            value = decode_value(body, max_bytes=self.max_answer_bytes,
                                 max_depth=MAX_ANSWER_DEPTH)
        except InvalidPayload as exc:
            raise FlowError(f"{path}: the answer is not usable JSON ({exc})") from None
        return value if isinstance(value, (Mapping, list)) else {}

    def _clean(self, text: str, secrets: Iterable[str] = ()) -> str:
        return redact_text(text, [self._token, *secrets, *self._sent_secrets])


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


_OFFSET = re.compile(r"([+-])(\d\d):?(\d\d)")


def is_fixed_offset(name: str) -> bool:
    """Whether ``name`` is a fixed UTC offset (``+0000``, ``-07:00``): no DST is followed."""
    return isinstance(name, str) and _OFFSET.fullmatch(name.strip()) is not None


def _zone(name: str) -> datetime.tzinfo:
    """The time zone named ``name``: an IANA name, UTC, or a fixed offset as FME Flow's v3
    info answers it (``+0000``, ``-0700``, ``+05:30``); ConfigurationError if unknown."""
    if not isinstance(name, str) or not name or len(name) > 64:
        raise ConfigurationError("time_zone", name, "must be an IANA time zone name or an "
                                 "offset such as +0000")
    offset = _OFFSET.fullmatch(name.strip())
    if offset is not None:
        sign, hours, minutes = offset.groups()
        if int(hours) > 23 or int(minutes) > 59:
            raise ConfigurationError("time_zone", name, "is no UTC offset")
        delta = datetime.timedelta(hours=int(hours), minutes=int(minutes))
        return datetime.timezone(-delta if sign == "-" else delta)
    if name.upper() in ("UTC", "GMT", "ETC/UTC"):
        return datetime.timezone.utc
    try:
        import zoneinfo
        return zoneinfo.ZoneInfo(name)
    except (ImportError, ValueError, OSError, KeyError):
        raise ConfigurationError("time_zone", name, "is no time zone this machine knows "
                                 "(on Windows install tzdata)") from None


def _segment(value: str) -> str:
    """One path segment, percent-encoded (a repository or schedule name with a space)."""
    if not isinstance(value, str) or not value:
        raise ConfigurationError("name", value, "must be a non-empty string")
    return quote(value, safe="")


def _server_message(body: bytes) -> str:
    """FME Flow's own explanation of a refusal, short (``: Queue 'x' does not exist``)."""
    try:
        value = decode_value(body, max_bytes=64 * 1024, max_depth=MAX_ANSWER_DEPTH)
    except InvalidPayload:
        return ""
    message = value.get("message") if isinstance(value, Mapping) else None
    return f": {excerpt(message, 200)}" if isinstance(message, str) and message else ""


def _items(body: Any) -> List[Mapping[str, Any]]:
    if isinstance(body, Mapping):
        body = body.get("items", [])
    if not isinstance(body, list):
        raise FlowError("the answer has no item list")
    return [item for item in body if isinstance(item, Mapping)]


def _total(body: Any) -> int:
    total = body.get("totalCount") if isinstance(body, Mapping) else None
    if isinstance(total, int) and not isinstance(total, bool) and 0 <= total < 2 ** 31:
        return total
    return len(_items(body))


def _engine(item: Mapping[str, Any]) -> Engine:
    job = item.get("currentJobID", item.get("currentJobId"))
    busy = isinstance(job, int) and not isinstance(job, bool) and job >= 0
    queues = item.get("assignedQueues") or ()
    name = item.get("name") or item.get("instanceName") or item.get("hostname") \
        or item.get("hostName") or ""
    return Engine(name=str(name), busy=busy,
                  queues=tuple(str(q) for q in queues) if isinstance(queues, list) else ())
