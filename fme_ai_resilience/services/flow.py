"""FME Flow REST: job counts and engine occupancy as a cached health probe, and deployment.

``FlowClient`` speaks REST v4 (``/fmeapiv4``) and falls back to v3 (``/fmerest/v3``, deprecated
since FME Flow 2025.1) when v4 answers 404. The token travels only in the
``Authorization: fmetoken token=<token>`` header and never appears in reprs, logs or errors;
neither do the values of secret published parameters (the ledger URL).

Deployment: :meth:`FlowClient.ensure_repository`, :meth:`FlowClient.upload_workspace`,
:meth:`FlowClient.put_schedule` and :meth:`FlowClient.submit_job`, with the request bodies of
:mod:`fme_ai_resilience.deployment`. The job submission (v4 body, v3 path) and the v3 upload
are in shared/reference/fme.md; the other request shapes are modelled on Safe's documentation
and unverified against a live FME Flow (docs/fme-flow.md lists them).

Intake uses :meth:`FlowClient.health` to answer 503 + Retry-After when FME Flow has no engine
capacity. A probe that fails (Flow unreachable, bad answer) reports ``reachable=False`` and
``has_capacity=True``: the ledger holds the work whatever Flow's state, so an unreachable
health endpoint never turns submissions away.

The health cache is stale-while-revalidate: an answer is fresh for ``cache_ttl_s`` after its
probe *finished*; once stale, one caller probes while the others keep getting the previous
answer, for at most ``max_stale_s`` past its freshness. Callers with no answer, or one too
stale, wait for the probe in flight rather than starting their own (one probe at a time).
"""
from __future__ import annotations

import datetime
import logging
import math
import re
import threading
from dataclasses import dataclass
from typing import Any, Iterable, List, Mapping, Optional, Tuple
from urllib.parse import quote

import requests

from ..checks import count, finite
from ..clock import Clock, SystemClock
from ..deployment import V3, V4, JobRequest, Schedule, job_body, schedule_body
from ..errors import ConfigurationError, FlowError
from ..redact import excerpt, redact_text
from .sessions import new_session

__all__ = ["FlowClient", "FlowHealth", "Engine", "FlowError", "V3", "V4"]

log = logging.getLogger("fme_ai_resilience.flow")

_ITEM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\.fmw")
#: The service a v3 workspace must be registered with to be submitted or scheduled (modelled).
V3_JOB_SUBMITTER = "fmejobsubmitter"


@dataclass(frozen=True)
class Engine:
    """One FME Flow engine: busy when it is running a job."""

    name: str
    busy: bool
    queues: Tuple[str, ...] = ()


@dataclass(frozen=True)
class FlowHealth:
    """What FME Flow reported at ``checked_at`` (monotonic seconds), and the verdict.

    ``has_capacity`` is False only when Flow was reached and reports no engine at all, or
    every engine busy with at least ``max_queued_per_engine`` x engines jobs waiting.
    """

    reachable: bool
    has_capacity: bool
    queued: int = 0
    running: int = 0
    engines: int = 0
    busy_engines: int = 0
    api_version: Optional[str] = None
    checked_at: float = 0.0
    error: Optional[str] = None

    def __post_init__(self) -> None:
        for field in ("queued", "running", "engines", "busy_engines"):
            count(field, getattr(self, field))

    @property
    def idle_engines(self) -> int:
        return max(0, self.engines - self.busy_engines)


class FlowClient:
    """A small FME Flow REST client for queue and engine state, with a cached health probe.

    ``timeout_s`` is the (connect, read) timeout of each request in seconds; ``cache_ttl_s``
    how long a health answer is reused; ``max_stale_s`` how much longer a stale answer is
    served while one caller refreshes it. ``session`` and ``clock`` are injectable for tests.
    """

    def __init__(self, base_url: str, token: str, *, session: Optional[requests.Session] = None,
                 clock: Optional[Clock] = None, cache_ttl_s: float = 5.0,
                 timeout_s: Tuple[float, float] = (3.0, 5.0),
                 max_queued_per_engine: float = 1.0, max_stale_s: float = 30.0) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigurationError("base_url", base_url, "must be an http(s) URL")
        if not isinstance(token, str) or not token:
            raise ConfigurationError("token", "", "must not be empty")
        finite("cache_ttl_s", cache_ttl_s, minimum=0)
        finite("max_queued_per_engine", max_queued_per_engine, minimum=0)
        finite("max_stale_s", max_stale_s, minimum=0)
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._clock = clock or SystemClock()
        self._session = session if session is not None else new_session(clock=self._clock)
        self.cache_ttl_s = cache_ttl_s
        self.timeout_s = timeout_s
        self.max_queued_per_engine = max_queued_per_engine
        self.max_stale_s = max_stale_s
        self.api_version: Optional[str] = None
        self._cached: Optional[FlowHealth] = None
        self._lock = threading.Condition()
        self._refreshing = False

    def __repr__(self) -> str:
        return f"FlowClient({self.base_url!r}, api={self.api_version or 'auto'})"

    # -- raw reads ----------------------------------------------------------------------------
    def job_counts(self) -> Tuple[int, int]:
        """``(queued, running)`` job counts. Raises :class:`FlowError`."""
        return tuple(_total(self._read(  # type: ignore[return-value]
            ("/fmeapiv4/jobs", {"status": status, "limit": 1}),
            (f"/fmerest/v3/transformations/jobs/{status}", {"limit": 1})))
            for status in ("queued", "running"))

    def engines(self) -> List[Engine]:
        """Every registered engine with whether it is running a job. Raises :class:`FlowError`."""
        body = self._read(("/fmeapiv4/engines", {"limit": -1}),
                          ("/fmerest/v3/transformations/engines", None))
        return [_engine(item) for item in _items(body)]

    # -- health -------------------------------------------------------------------------------
    def health(self) -> FlowHealth:
        """The cached verdict on engine capacity (stale-while-revalidate, see the module
        docstring); never raises. No lock is held during the HTTP calls."""
        with self._lock:
            while True:
                cached = self._cached
                age = None if cached is None else self._clock.monotonic() - cached.checked_at
                if age is not None and age < self.cache_ttl_s:
                    return cached  # type: ignore[return-value]
                if not self._refreshing:
                    self._refreshing = True
                    break
                if age is not None and age < self.cache_ttl_s + self.max_stale_s:
                    return cached  # type: ignore[return-value]
                self._lock.wait()  # nothing usable: wait for the probe in flight
        fresh: Optional[FlowHealth] = None
        try:
            fresh = self._probe()
            return fresh
        finally:
            with self._lock:
                if fresh is not None:
                    self._cached = fresh
                self._refreshing = False
                self._lock.notify_all()

    def _probe(self) -> FlowHealth:
        """Ask Flow now; the answer is stamped when the probe finished (monotonic seconds)."""
        try:
            queued, running = self.job_counts()
            engines = self.engines()
        except FlowError as exc:
            now = self._clock.monotonic()
            log.warning("FME Flow health probe failed: %s", exc)
            return FlowHealth(reachable=False, has_capacity=True, checked_at=now,
                              api_version=self.api_version, error=str(exc))
        now = self._clock.monotonic()
        busy = sum(1 for e in engines if e.busy)
        total = len(engines)
        saturated = total == 0 or (
            busy >= total and queued >= math.ceil(self.max_queued_per_engine * total))
        return FlowHealth(reachable=True, has_capacity=not saturated, queued=queued,
                          running=running, engines=total, busy_engines=busy,
                          api_version=self.api_version, checked_at=now)

    # -- deployment ---------------------------------------------------------------------------
    def repositories(self) -> List[str]:
        """The names of every repository the token can see. Raises :class:`FlowError`."""
        body = self._read(("/fmeapiv4/repositories", {"limit": -1}),
                          ("/fmerest/v3/repositories", {"limit": -1}))
        return [str(item.get("name")) for item in _items(body) if item.get("name")]

    def ensure_repository(self, name: str, description: str = "") -> bool:
        """Create repository ``name`` unless it exists; True when this call created it.

        v4 ``POST /fmeapiv4/repositories`` with JSON, v3 ``POST /fmerest/v3/repositories``
        with a form (both modelled); a 409 (created meanwhile) counts as existing.
        """
        if name in self.repositories():
            return False
        fields = {"name": name, "description": description}
        if self._api() == V4:
            response = self._send("POST", "/fmeapiv4/repositories", ok=(200, 201, 409),
                                  json=fields)
        else:
            response = self._send("POST", "/fmerest/v3/repositories", ok=(200, 201, 409),
                                  data=fields)
        return response.status_code != 409

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
        items = f"{self._root()}/repositories/{_segment(repository)}/items"
        headers = {"Content-Type": "application/octet-stream",
                   "Content-Disposition": f'attachment; filename="{filename}"'}
        response = self._send("POST", items, ok=(200, 201, 409), data=content, headers=headers)
        outcome = "created"
        if response.status_code == 409:
            self._send("PUT", f"{items}/{_segment(filename)}", ok=(200, 201, 204),
                       data=content, headers=headers)
            outcome = "replaced"
        if self._api() == V3:
            self._send("PUT", f"{items}/{_segment(filename)}/services", ok=(200, 201, 204),
                       data={"services": V3_JOB_SUBMITTER})
        return outcome

    def put_schedule(self, schedule: Schedule) -> str:
        """Create ``schedule`` or replace the one with its category and name: ``"created"`` or
        ``"updated"`` (``GET``, then ``PUT`` or ``POST`` under ``.../schedules``, modelled).
        It begins now, by this client's clock, in UTC."""
        if not isinstance(schedule, Schedule):
            raise ConfigurationError("schedule", schedule, "must be a Schedule")
        api = self._api()
        begin = datetime.datetime.fromtimestamp(self._clock.now(), datetime.timezone.utc)
        body = schedule_body(schedule, api, begin=begin.strftime("%Y-%m-%dT%H:%M:%S"))
        secrets = schedule.job.secret_values
        one = (f"{self._root()}/schedules/{_segment(schedule.category)}/"
               f"{_segment(schedule.name)}")
        found = self._send("GET", one, ok=(200, 404), secrets=secrets)
        if found.status_code == 200:
            self._send("PUT", one, ok=(200, 201, 204), json=body, secrets=secrets)
            return "updated"
        self._send("POST", f"{self._root()}/schedules", ok=(200, 201), json=body,
                   secrets=secrets)
        return "created"

    def submit_job(self, job: JobRequest) -> int:
        """Submit ``job`` now and return its job id: v4 ``POST /fmeapiv4/jobs``, v3 ``POST
        /fmerest/v3/transformations/submit/{repository}/{workspace}`` (fme.md)."""
        if not isinstance(job, JobRequest):
            raise ConfigurationError("job", job, "must be a JobRequest")
        api = self._api()
        path = "/fmeapiv4/jobs" if api == V4 else (
            f"/fmerest/v3/transformations/submit/{_segment(job.repository)}/"
            f"{_segment(job.workspace)}")
        response = self._send("POST", path, ok=(200, 201, 202), json=job_body(job, api),
                              secrets=job.secret_values)
        try:
            job_id = response.json().get("id")
        except (ValueError, AttributeError):
            job_id = None
        if not isinstance(job_id, int) or isinstance(job_id, bool):
            raise FlowError(f"POST {path}: the answer carries no job id")
        return job_id

    def _api(self) -> str:
        """The REST version, found out by listing repositories when not known yet."""
        if self.api_version is None:
            self.repositories()
        return self.api_version or V4

    def _root(self) -> str:
        return "/fmeapiv4" if self._api() == V4 else "/fmerest/v3"

    # -- HTTP ---------------------------------------------------------------------------------
    def _send(self, method: str, path: str, *, ok: Tuple[int, ...], json: Any = None,
              data: Any = None, headers: Optional[Mapping[str, str]] = None,
              secrets: Iterable[str] = ()) -> requests.Response:
        """One write (or existence check) with the token; any status outside ``ok`` raises
        :class:`FlowError` naming the path, the status and FME Flow's own message, scrubbed
        of the token and of ``secrets``."""
        all_headers = {"Authorization": f"fmetoken token={self._token}",
                       "Accept": "application/json", **(headers or {})}
        try:
            response = self._session.request(method, self.base_url + path, json=json, data=data,
                                             headers=all_headers, timeout=self.timeout_s,
                                             allow_redirects=False)
        except requests.RequestException as exc:
            raise FlowError(self._clean(f"{method} {path}: {type(exc).__name__}: {exc}",
                                        secrets)) from None
        if response.status_code not in ok:
            raise FlowError(self._clean(f"{method} {path}: HTTP {response.status_code}"
                                        f"{_server_message(response)}", secrets))
        return response

    def _read(self, v4: Tuple[str, Optional[Mapping[str, Any]]],
              v3: Tuple[str, Optional[Mapping[str, Any]]]) -> Any:
        """GET on v4; the first 404 from v4 switches this client to v3 for good (older Flow)."""
        if self.api_version != V3:
            try:
                return self._get(*v4, fallback_on_404=self.api_version is None)
            except _NotThere:
                log.info("FME Flow at %s has no REST v4; using v3", self.base_url)
                self.api_version = V3
        return self._get(*v3)

    def _get(self, path: str, params: Optional[Mapping[str, Any]],
             fallback_on_404: bool = False) -> Any:
        url = self.base_url + path
        headers = {"Authorization": f"fmetoken token={self._token}", "Accept": "application/json"}
        try:
            response = self._session.get(url, params=params, headers=headers,
                                         timeout=self.timeout_s, allow_redirects=False)
        except requests.RequestException as exc:
            raise FlowError(self._clean(f"GET {path}: {type(exc).__name__}: {exc}")) from None
        if response.status_code == 404 and fallback_on_404:
            raise _NotThere()
        if response.status_code != 200:
            raise FlowError(self._clean(f"GET {path}: HTTP {response.status_code}"
                                        f"{_server_message(response)}"))
        try:
            body = response.json()
        except ValueError:
            raise FlowError(f"GET {path}: the answer is not JSON") from None
        if self.api_version is None:
            self.api_version = V4 if path.startswith("/fmeapiv4") else V3
        return body

    def _clean(self, text: str, secrets: Iterable[str] = ()) -> str:
        return redact_text(text, [self._token, *secrets])


class _NotThere(FlowError):
    """A v4 endpoint answered 404 (the client then switches to v3)."""


def _segment(value: str) -> str:
    """One path segment, percent-encoded (a repository or schedule name with a space)."""
    if not isinstance(value, str) or not value:
        raise ConfigurationError("name", value, "must be a non-empty string")
    return quote(value, safe="")


def _server_message(response: requests.Response) -> str:
    """FME Flow's own explanation of a refusal, short (``: Queue 'x' does not exist``)."""
    try:
        body = response.json()
    except ValueError:
        return ""
    message = body.get("message") if isinstance(body, Mapping) else None
    return f": {excerpt(message, 200)}" if isinstance(message, str) and message else ""


def _items(body: Any) -> List[Mapping[str, Any]]:
    if isinstance(body, Mapping):
        body = body.get("items", [])
    if not isinstance(body, list):
        raise FlowError("the answer has no item list")
    return [item for item in body if isinstance(item, Mapping)]


def _total(body: Any) -> int:
    if isinstance(body, Mapping) and isinstance(body.get("totalCount"), int) \
            and body["totalCount"] >= 0:
        return body["totalCount"]
    return len(_items(body))


def _engine(item: Mapping[str, Any]) -> Engine:
    job = item.get("currentJobID", item.get("currentJobId"))
    busy = isinstance(job, int) and not isinstance(job, bool) and job >= 0
    queues = item.get("assignedQueues") or ()
    name = item.get("name") or item.get("instanceName") or item.get("hostname") \
        or item.get("hostName") or ""
    return Engine(name=str(name), busy=busy,
                  queues=tuple(str(q) for q in queues) if isinstance(queues, list) else ())
