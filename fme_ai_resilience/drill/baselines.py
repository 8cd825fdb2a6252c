"""The drill's baselines: FME Flow without this library, on the same loopback stand-ins.

A baseline is how FME users call a Vision AI service today, measured against the faults the
library's run meets. Each one models an FME Flow deployment with no ledger, no deduplication,
no circuit breaker and no dead-letter queue:

- every Survey123 webhook delivery triggers one FME job (an Automation webhook trigger queues
  a job per delivery and never refuses one); ``engines`` FME engines take the jobs from one
  FIFO queue, each engine a thread with its own ``requests`` session;
- a job reads the body with :func:`~fme_ai_resilience.survey123.parse_webhook` (the baselines
  differ in how they call, not in how they read JSON) and, for each photo the body lists,
  downloads it (one GET), POSTs the bytes to the Vision AI service (the ``generic`` provider:
  ``application/octet-stream``) under the baseline's retry, reads ``condition`` and
  ``confidence`` from the JSON answer and writes them back with ArcGIS ``applyEdits`` (an
  update by GlobalID on the feature's layer, into the fields the library writes by default,
  ``world.WRITEBACK_FIELDS``, which the drill's layer is created with);
- a photo whose retries ran out, whose answer cannot be read or whose write is refused is
  simply failed: the job logs it and nothing keeps it. A redelivery, or a feature re-created
  with new GlobalIDs and the same photos, is analysed and written again. A body that lists no
  photo has nothing to analyse (the job does not list the feature's attachments).

The three baselines (:data:`BASELINES`), each retrying the Vision AI call only (the download
and the write-back are tried once, as the faults under test are the Vision AI's):

- ``naive``: three tries with a fixed 1 s wait, whatever failed (a 400 too), Retry-After not
  read, a 30 s timeout: retries inside the engine with nothing kept;
- ``tenacity``: ``tenacity.retry(wait=wait_random_exponential(multiplier=1, max=60),
  stop=stop_after_attempt(5))`` retrying connection errors, timeouts, 429 and 5xx, a 30 s
  timeout: what a careful Python author writes. tenacity is optional (the ``drill`` extra);
  without it the baseline is skipped with :data:`TENACITY_MISSING`. Its jitter is drawn from
  the run's seeded ``random.Random`` instead of the global one, with tenacity's own formula;
- ``httpcaller``: FME's HTTPCaller with its retry switched on, **modelled from the
  documentation, not run in FME**: retries on connection errors (refused, reset, timeouts) and
  on 429 and 500-511, at most 3 retries (the default; 0-10 allowed), an initial backoff of
  500 ms, up to 25 transfers in flight per job (``MAX_TRANSFERS_IN_PROGRESS``), 60 s to
  connect and 90 s per transfer, all per job and nothing shared across engines. How the wait
  grows and whether Retry-After is read are undocumented; the model assumes the wait doubles
  from 500 ms (0.5, 1, 2 s) and that Retry-After is not read. A body cut short is a failed
  transfer, not retried.

None of the three reads Retry-After. Every wait and timeout is in production seconds, slept
as production seconds x ``time_scale`` (real seconds per production second: with 0.05 the 1 s
wait sleeps 50 ms); timeouts never go below 0.25 real seconds, so loopback overhead on a busy
machine is never read as a timeout. Pass the same ``time_scale`` to the stand-ins.

The interface the drill calls, with a :class:`~fme_ai_resilience.drill.scenarios.Plan` made on
a fresh :class:`~fme_ai_resilience.drill.world.World` (its Vision AI stand-in reset at the
start, as for the library)::

    run = run_baseline("naive", plan.deliveries, vision_url=world.vision.endpoint,
                       engines=4, time_scale=0.05, seed=1, progress=progress)
    result = baseline_result("naive", run, vision_snapshot=world.vision.snapshot(),
                             layer_snapshot=world.layer.snapshot(), facts=plan.facts,
                             outage=plan.outage)

``plan.deliveries`` are :class:`~fme_ai_resilience.drill.scenarios.Scheduled` (``at_s`` real
seconds after the start, the body; a redelivery is one more job like any other).
:class:`Progress` is the gauge the drill samples while a run goes on (``queued``, ``busy``,
``in_flight``, ``backlog``, and their peaks); :class:`BaselineRun` is what the run did, fact
by fact; :func:`baseline_result` turns it and the stand-ins' counters into a
:class:`~fme_ai_resilience.drill.report.SubjectResult` whose times are real seconds, as the
library's. :func:`run_job` runs one job (one delivery) on the calling thread.
"""
from __future__ import annotations

import abc
import hashlib
import importlib
import json
import logging
import queue
import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import (Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple,
                    Union)

import requests
from requests.adapters import HTTPAdapter

from ..calibrate import percentile
from ..checks import count, finite
from ..clock import Clock, SystemClock
from ..errors import ConfigurationError, InvalidPayload, ResilienceError
from ..pipeline_settings import WritebackSettings
from ..services.writeback import braced
from ..submission import Submission
from ..survey123 import parse_webhook
from .report import SubjectResult
from .scenarios import Scheduled

__all__ = ["Progress", "Baseline", "Naive", "Tenacity", "HTTPCaller", "BASELINES", "BaselineRun",
           "FactOutcome", "JobResult", "PhotoResult", "BaselineError", "run_baseline", "run_job",
           "baseline_result", "tenacity_wait", "WRITTEN_STATUS", "TENACITY_MISSING"]

log = logging.getLogger("fme_ai_resilience.drill.baselines")

#: The library's default write-back fields, which the baselines write too (the drill's feature
#: layer is created with them, ``world.WRITEBACK_FIELDS``).
_WRITEBACK = WritebackSettings()
#: What a baseline writes as the outcome: it has no confidence policy, so every answer it can
#: read is accepted.
WRITTEN_STATUS = "accepted"
TENACITY_MISSING = "tenacity is not installed (pip install 'fme-ai-resilience[drill]')"
#: The shortest real timeout, whatever the time scale.
_MIN_TIMEOUT_S = 0.25
_GLOBAL_ID_FIELD = "globalid"

Body = Union[Mapping[str, Any], bytes, str]
Pause = Callable[[float], None]
Send = Callable[[], requests.Response]


class BaselineError(ResilienceError):
    """One photo of a baseline's job failed (what the FME job would log)."""


def _gauge(index: int, peak: bool) -> property:
    """A read-only view of one of :class:`Progress`'s gauges (now, or its peak)."""
    return property(lambda self: self._read(index, peak))


class Progress:
    """What a baseline's run is doing now, thread-safe, for the drill's sampler.

    ``queued``: jobs waiting for an engine; ``busy``: engines working on a job; ``in_flight``:
    HTTP transfers in progress; ``backlog``: deliveries not yet done (queued + busy). Each has
    its peak (``peak_queued``...).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now = [0, 0, 0, 0]                    # queued, busy, in_flight, backlog
        self._peak = [0, 0, 0, 0]

    def __repr__(self) -> str:
        queued, busy, in_flight = self.sample()
        return f"Progress(queued={queued}, busy={busy}, in_flight={in_flight})"

    def change(self, *, queued: int = 0, busy: int = 0, in_flight: int = 0) -> None:
        """Move the gauges by these amounts, at once."""
        with self._lock:
            for i, delta in enumerate((queued, busy, in_flight, queued + busy)):
                self._now[i] += delta
                self._peak[i] = max(self._peak[i], self._now[i])

    def sample(self) -> Tuple[int, int, int]:
        """``(queued, busy, in_flight)`` now."""
        with self._lock:
            return self._now[0], self._now[1], self._now[2]

    def _read(self, index: int, peak: bool) -> int:
        with self._lock:
            return (self._peak if peak else self._now)[index]

    queued = _gauge(0, False)
    busy = _gauge(1, False)
    in_flight = _gauge(2, False)
    backlog = _gauge(3, False)
    peak_queued = _gauge(0, True)
    peak_busy = _gauge(1, True)
    peak_in_flight = _gauge(2, True)
    peak_backlog = _gauge(3, True)


# --- the three ways of calling -------------------------------------------------------------------

def _tenacity() -> Any:
    """The tenacity module, or None when it is not installed."""
    try:
        return importlib.import_module("tenacity")
    except ImportError:
        return None


def tenacity_wait(*, rng: random.Random) -> Any:
    """``tenacity.wait_random_exponential(multiplier=1, max=60)`` drawing from ``rng``.

    tenacity draws from the global random module; this is its own class and formula (the
    window ``min(60, 2 ** (attempt - 1))``, a uniform draw inside it) with the draw from the
    run's seeded source. Raises ConfigurationError when tenacity is not installed.
    """
    tenacity = _tenacity()
    if tenacity is None:
        raise ConfigurationError("baseline", "tenacity", TENACITY_MISSING)

    class SeededRandomExponential(tenacity.wait_random_exponential):  # type: ignore[misc]
        def __call__(self, retry_state: Any) -> float:
            high = tenacity.wait_exponential.__call__(self, retry_state)
            return rng.uniform(self.min, high)

    return SeededRandomExponential(multiplier=1, max=60)


def _read_json(answer: requests.Response) -> Any:
    answer.raise_for_status()
    return answer.json()


@dataclass(frozen=True)
class Baseline(abc.ABC):
    """How one baseline calls the Vision AI service: its timeouts, its retry and its note.

    ``attempts`` is the most Vision AI calls per photo; ``transfers_per_job`` how many photos
    of one job are in flight at once; timeouts are production seconds.
    """

    name: str
    summary: str
    note: str
    attempts: int
    connect_timeout_s: float
    transfer_timeout_s: float
    transfers_per_job: int = 1

    def missing(self) -> Optional[str]:
        """Why this baseline cannot run here (a library not installed), else None."""
        return None

    @abc.abstractmethod
    def call(self, send: Send, *, pause: Pause, rng: random.Random) -> Any:
        """The decoded JSON answer of the Vision AI, calling ``send`` (one POST) as this
        baseline does and ``pause`` (production seconds) between calls; what finally fails
        is raised."""


@dataclass(frozen=True)
class Naive(Baseline):
    """Tries ``attempts`` times whatever failed, ``wait_s`` apart."""

    wait_s: float = 1.0

    def call(self, send: Send, *, pause: Pause, rng: random.Random) -> Any:
        for attempt in range(1, self.attempts + 1):
            try:
                return _read_json(send())
            except (requests.RequestException, ValueError):
                if attempt == self.attempts:
                    raise
                pause(self.wait_s)
        raise BaselineError("no attempt was made")  # attempts >= 1: never reached


def _tenacity_retries(exc: BaseException) -> bool:
    """What the careful author retries: connection errors, timeouts, 429 and 5xx."""
    if isinstance(exc, (requests.ConnectionError, requests.Timeout)):
        return True
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        status = exc.response.status_code
        return status == 429 or status >= 500
    return False


@dataclass(frozen=True)
class Tenacity(Baseline):
    """``tenacity.retry`` around the call: random exponential wait, stop after ``attempts``."""

    def missing(self) -> Optional[str]:
        return TENACITY_MISSING if _tenacity() is None else None

    def call(self, send: Send, *, pause: Pause, rng: random.Random) -> Any:
        tenacity = _tenacity()
        if tenacity is None:
            raise ConfigurationError("baseline", self.name, TENACITY_MISSING)

        @tenacity.retry(wait=tenacity_wait(rng=rng),
                        stop=tenacity.stop_after_attempt(self.attempts),
                        retry=tenacity.retry_if_exception(_tenacity_retries),
                        sleep=pause, reraise=True)
        def analyse() -> Any:
            return _read_json(send())

        return analyse()


@dataclass(frozen=True)
class HTTPCaller(Baseline):
    """HTTPCaller's retry as documented: ``retries`` after the first try, the wait doubling
    from ``initial_backoff_s``, on connection errors, 429 and 500-511."""

    retries: int = 3
    initial_backoff_s: float = 0.5

    def call(self, send: Send, *, pause: Pause, rng: random.Random) -> Any:
        for retry in range(self.retries + 1):
            last = retry == self.retries
            try:
                answer = send()
            except (requests.ConnectionError, requests.Timeout):
                if last:
                    raise
            else:
                if last or not (answer.status_code == 429 or 500 <= answer.status_code <= 511):
                    return _read_json(answer)
            pause(self.initial_backoff_s * 2 ** retry)
        raise BaselineError("no attempt was made")  # the last retry returns or raises


_HTTPCALLER_NOTE = (
    "modelled from the documentation, not run in FME: HTTPCaller with retry on (connection "
    "errors, 429 and 500-511; 3 retries, the default), 60 s connect and 90 s transfer "
    "timeouts, up to 25 transfers in flight per job, nothing shared across engines; assumed "
    "where the documentation is silent: the wait doubling from 500 ms (0.5, 1, 2 s), "
    "Retry-After is not read, a body cut short is not retried")

#: The baselines by name.
BASELINES: Mapping[str, Baseline] = MappingProxyType({
    "naive": Naive(
        "naive", "three tries, a fixed 1 s wait",
        "three tries of the Vision AI call with a fixed 1 s wait whatever failed (a 400 "
        "too), Retry-After not read, a 30 s timeout; no ledger, no breaker",
        attempts=3, connect_timeout_s=30.0, transfer_timeout_s=30.0),
    "tenacity": Tenacity(
        "tenacity", "tenacity: random exponential wait, stop after 5",
        "tenacity.retry(wait=wait_random_exponential(multiplier=1, max=60), "
        "stop=stop_after_attempt(5)) on connection errors, timeouts, 429 and 5xx, a 30 s "
        "timeout, Retry-After not read; no ledger, no breaker",
        attempts=5, connect_timeout_s=30.0, transfer_timeout_s=30.0),
    "httpcaller": HTTPCaller(
        "httpcaller", "FME HTTPCaller, retry on", _HTTPCALLER_NOTE,
        attempts=4, connect_timeout_s=60.0, transfer_timeout_s=90.0, transfers_per_job=25),
})


def _baseline(name: str) -> Baseline:
    baseline = BASELINES.get(name) if isinstance(name, str) else None
    if baseline is None:
        raise ConfigurationError("name", name, f"must be one of {sorted(BASELINES)}")
    return baseline


# --- one job -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PhotoResult:
    """One photo of one job: its fact key, whether it was written, when it ended
    (``ended_at``, the clock's monotonic reading) and the SHA-256 of the bytes downloaded."""

    key: str
    trace_id: str
    succeeded: bool
    ended_at: float
    error: Optional[str] = None
    sha256: Optional[str] = None


@dataclass(frozen=True)
class JobResult:
    """One job (one delivery): its photos, its Vision AI calls and every wait between them
    (production seconds); ``error`` when the body could not be read."""

    photos: Tuple[PhotoResult, ...]
    vision_calls: int
    waits_s: Tuple[float, ...]
    ended_at: float
    error: Optional[str] = None


class _Job:
    """What one job shares between its photos (HTTPCaller's run in parallel)."""

    def __init__(self, baseline: Baseline, *, vision_url: str, time_scale: float,
                 clock: Clock, rng: random.Random, session: requests.Session,
                 progress: Progress) -> None:
        self.baseline = baseline
        self.vision_url = vision_url
        self.time_scale = time_scale
        self.clock = clock
        self.rng = rng
        self.session = session
        self.progress = progress
        self.timeout = (self._real(baseline.connect_timeout_s),
                        self._real(baseline.transfer_timeout_s))
        self.lock = threading.Lock()
        self.vision_calls = 0
        self.waits_s: List[float] = []

    def _real(self, seconds: float) -> float:
        return max(_MIN_TIMEOUT_S, seconds * self.time_scale)

    def pause(self, seconds: float) -> None:
        with self.lock:
            self.waits_s.append(seconds)
        self.clock.sleep(seconds * self.time_scale)

    def transfer(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        self.progress.change(in_flight=1)
        try:
            return self.session.request(method, url, timeout=self.timeout, **kwargs)
        finally:
            self.progress.change(in_flight=-1)

    def photo(self, submission: Submission) -> PhotoResult:
        sha: List[str] = []
        try:
            self._photo(submission, sha)
        except (requests.RequestException, ValueError, KeyError, TypeError,
                ResilienceError) as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.info("%s job: photo %s failed: %s", self.baseline.name,
                     submission.idempotency_key, error)
            return PhotoResult(submission.idempotency_key, submission.trace_id, False,
                               self.clock.monotonic(), error, next(iter(sha), None))
        return PhotoResult(submission.idempotency_key, submission.trace_id, True,
                           self.clock.monotonic(), sha256=sha[0])

    def _photo(self, submission: Submission, sha: List[str]) -> None:
        if not submission.attachment_url or not submission.layer_url:
            raise BaselineError("the body gives no photo URL or no layer")
        download = self.transfer("GET", submission.attachment_url)
        download.raise_for_status()
        image = download.content
        sha.append(hashlib.sha256(image).hexdigest())

        def send() -> requests.Response:
            with self.lock:
                self.vision_calls += 1
            return self.transfer("POST", self.vision_url, data=image,
                                 headers={"Content-Type": "application/octet-stream"})

        payload = self.baseline.call(send, pause=self.pause, rng=self.rng)
        if not isinstance(payload, dict):
            raise BaselineError("the Vision AI answer is not a JSON object")
        s = _WRITEBACK
        attributes = {_GLOBAL_ID_FIELD: braced(submission.feature_global_id),
                      s.condition_field: payload["condition"],
                      s.confidence_field: float(payload["confidence"]),
                      s.outcome_field: WRITTEN_STATUS,
                      s.model_field: payload.get("model_version"),
                      s.trace_field: submission.trace_id,
                      s.assessed_at_field: int(round(self.clock.now() * 1000))}
        written = self.transfer("POST", f"{submission.layer_url.rstrip('/')}/applyEdits", data={
            "f": "json", "updates": json.dumps([{"attributes": attributes}]),
            "useGlobalIds": "true", "rollbackOnFailure": "true"})
        answer = _read_json(written)
        if not isinstance(answer, dict):
            raise BaselineError("applyEdits answered something other than a JSON object")
        if answer.get("error") is not None:
            raise BaselineError(f"applyEdits answered {answer['error']}")
        rows = answer.get("updateResults")
        row = rows[0] if isinstance(rows, list) and rows and isinstance(rows[0], dict) else {}
        if row.get("success") is not True:
            failure = row.get("error") if isinstance(row.get("error"), dict) else {}
            raise BaselineError(f"applyEdits refused the row: {failure.get('code')} "
                                f"{failure.get('description') or ''}".strip())


def run_job(name: str, body: Body, *, vision_url: str, rng: random.Random,
            time_scale: float = 1.0, clock: Optional[Clock] = None,
            session: Optional[requests.Session] = None,
            progress: Optional[Progress] = None) -> JobResult:
    """One FME job of baseline ``name`` for one webhook ``body``, on the calling thread.

    Waits are production seconds, slept x ``time_scale`` through ``clock``; ``rng`` draws
    the jitter. Raises ConfigurationError for an unknown baseline or one that cannot run here.
    """
    baseline = _baseline(name)
    missing = baseline.missing()
    if missing is not None:
        raise ConfigurationError("name", name, missing)
    clock = clock or SystemClock()
    try:
        photos = [s for s in parse_webhook(body) if not s.attachments_unknown]
    except InvalidPayload as exc:
        log.info("%s job: the body cannot be read: %s", name, exc)
        return JobResult((), 0, (), clock.monotonic(), str(exc))
    if not photos:
        log.info("%s job: the body lists no photo", name)
        return JobResult((), 0, (), clock.monotonic(), "the body lists no photo")
    own_session = session is None
    job = _Job(baseline, vision_url=vision_url, time_scale=time_scale, clock=clock, rng=rng,
               session=session or requests.Session(), progress=progress or Progress())
    width = min(baseline.transfers_per_job, len(photos))
    try:
        if width > 1:
            with ThreadPoolExecutor(max_workers=width,
                                    thread_name_prefix=f"baseline-{name}-transfer") as pool:
                results = tuple(pool.map(job.photo, photos))
        else:
            results = tuple(job.photo(s) for s in photos)
    finally:
        if own_session:
            job.session.close()
    with job.lock:
        return JobResult(results, job.vision_calls, tuple(job.waits_s), clock.monotonic())


# --- a whole run ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class FactOutcome:
    """One fact (one photo key) over the run: whether any job wrote it, when its first
    delivery arrived and when it ended (its first success, else its last failure), real
    seconds after the run's start; ``error`` is the last failure of a fact never written,
    ``tries`` the jobs that took it, ``sha256`` the photo's (None when never downloaded)."""

    key: str
    succeeded: bool
    delivered_at_s: float
    ended_at_s: float
    error: Optional[str] = None
    tries: int = 1
    sha256: Optional[str] = None


@dataclass(frozen=True)
class BaselineRun:
    """What a baseline's run did: ``facts`` by key, the jobs and Vision AI calls, every wait
    between calls (production seconds), ``wall_s`` (real seconds from the first delivery to
    the last job's end), and the peaks of its :class:`Progress`. ``skipped`` says why it did
    not run; ``note`` is what the baseline models and assumes."""

    name: str
    note: str
    time_scale: float
    engines: int
    skipped: Optional[str] = None
    deliveries: int = 0
    jobs: int = 0
    failed_jobs: int = 0
    facts: Mapping[str, FactOutcome] = field(default_factory=dict)
    vision_calls: int = 0
    waits_s: Tuple[float, ...] = ()
    wall_s: Optional[float] = None
    peak_busy: int = 0
    peak_queued: int = 0
    peak_in_flight: int = 0
    peak_backlog: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "facts", MappingProxyType(dict(self.facts)))


class _Tally:
    """The run's results as the engines hand them in."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.lock = threading.Lock()
        self.facts: Dict[str, Dict[str, Any]] = {}
        self.jobs = 0
        self.failed_jobs = 0
        self.vision_calls = 0
        self.waits_s: List[float] = []
        self.first_arrival: Optional[float] = None
        self.last_end: Optional[float] = None

    def add(self, arrived: float, job: JobResult) -> None:
        with self.lock:
            self.jobs += 1
            self.failed_jobs += job.error is not None
            self.vision_calls += job.vision_calls
            self.waits_s.extend(job.waits_s)
            self.last_end = (job.ended_at if self.last_end is None
                             else max(self.last_end, job.ended_at))
            for photo in job.photos:
                ended = photo.ended_at - self.start
                fact = self.facts.setdefault(photo.key, {
                    "delivered": arrived - self.start, "succeeded": None, "failed": None,
                    "error": None, "tries": 0, "sha256": None})
                fact["delivered"] = min(fact["delivered"], arrived - self.start)
                fact["tries"] += 1
                fact["sha256"] = fact["sha256"] or photo.sha256
                if photo.succeeded:
                    if fact["succeeded"] is None or ended < fact["succeeded"]:
                        fact["succeeded"] = ended
                elif fact["failed"] is None or ended >= fact["failed"]:
                    fact["failed"], fact["error"] = ended, photo.error

    def outcomes(self) -> Dict[str, FactOutcome]:
        out = {}
        for key, f in self.facts.items():
            ok = f["succeeded"] is not None
            out[key] = FactOutcome(key, ok, f["delivered"], f["succeeded"] if ok else f["failed"],
                                   None if ok else f["error"], f["tries"], f["sha256"])
        return out


class _Both(Progress):
    """The run's own gauges (its peaks) and the caller's, moved together."""

    def __init__(self, own: Progress, theirs: Progress) -> None:
        super().__init__()
        self._pair = (own, theirs)

    def change(self, *, queued: int = 0, busy: int = 0, in_flight: int = 0) -> None:
        for gauges in self._pair:
            gauges.change(queued=queued, busy=busy, in_flight=in_flight)

    def sample(self) -> Tuple[int, int, int]:
        return self._pair[0].sample()


def _session(baseline: Baseline) -> requests.Session:
    session = requests.Session()
    # No hidden retries below the baseline's own (max_retries=0), and room for its transfers.
    adapter = HTTPAdapter(pool_maxsize=max(10, baseline.transfers_per_job), max_retries=0)
    session.mount("http://", adapter)
    return session


def run_baseline(name: str, deliveries: Sequence[Scheduled], *, vision_url: str, engines: int,
                 time_scale: float, seed: int,
                 progress: Optional[Progress] = None) -> BaselineRun:
    """Run baseline ``name`` on ``deliveries``: each one queued as a job at its ``at_s``,
    ``engines`` engine threads taking them in order, until every job has ended.

    ``vision_url`` is the Vision AI stand-in's endpoint; the photos and layers come from the
    bodies. ``progress`` (optional) is updated as the run goes. A baseline that cannot run
    here comes back with ``skipped`` set and nothing run. Raises ConfigurationError for an
    unknown name, ``engines`` < 1 or a ``time_scale`` not above 0.
    """
    baseline = _baseline(name)
    count("engines", engines, minimum=1)
    finite("time_scale", time_scale, above=0)
    missing = baseline.missing()
    if missing is not None:
        return BaselineRun(name, baseline.note, time_scale, engines, skipped=missing)
    own = Progress()
    gauges = own if progress is None else _Both(own, progress)
    ordered = sorted(deliveries, key=lambda d: d.at_s)
    jobs: "queue.Queue[Optional[Tuple[float, Body]]]" = queue.Queue()
    clock = SystemClock()
    start = clock.monotonic()
    tally = _Tally(start)

    crashed: List[BaseException] = []

    def engine(index: int) -> None:
        rng = random.Random(f"{name}:{seed}:{index}")
        with _session(baseline) as session:
            while True:
                item = jobs.get()
                if item is None:
                    return
                arrived, body = item
                gauges.change(queued=-1, busy=1)
                try:
                    result = run_job(name, body, vision_url=vision_url, rng=rng,
                                     time_scale=time_scale, clock=clock, session=session,
                                     progress=gauges)
                    tally.add(arrived, result)
                except BaseException as exc:  # a fault of the model itself, raised below
                    crashed.append(exc)
                    return
                finally:
                    gauges.change(busy=-1)

    threads = [threading.Thread(target=engine, args=(i,), name=f"baseline-{name}-engine-{i}",
                                daemon=True) for i in range(engines)]
    for thread in threads:
        thread.start()
    try:
        for delivery in ordered:
            wait = start + delivery.at_s - clock.monotonic()
            if wait > 0:
                clock.sleep(wait)
            arrived = clock.monotonic()
            if tally.first_arrival is None:
                tally.first_arrival = arrived
            gauges.change(queued=1)
            jobs.put((arrived, delivery.body))
    finally:
        for _ in threads:
            jobs.put(None)
        for thread in threads:
            thread.join()
    if crashed:
        raise BaselineError(f"a {name} engine failed: {crashed[0]!r}") from crashed[0]
    wall = (tally.last_end - tally.first_arrival
            if tally.first_arrival is not None and tally.last_end is not None else None)
    return BaselineRun(name, baseline.note, time_scale, engines, deliveries=len(ordered),
                       jobs=tally.jobs, failed_jobs=tally.failed_jobs, facts=tally.outcomes(),
                       vision_calls=tally.vision_calls, waits_s=tuple(tally.waits_s),
                       wall_s=wall, peak_busy=own.peak_busy, peak_queued=own.peak_queued,
                       peak_in_flight=own.peak_in_flight, peak_backlog=own.peak_backlog)


# --- the report's figures ------------------------------------------------------------------------

def _beyond(counts: Mapping[str, int], expected: Callable[[str], int]) -> int:
    return sum(max(0, int(n) - expected(k)) for k, n in counts.items())


def _settled_facts(run: BaselineRun, facts: Sequence[str]) -> List[Optional[float]]:
    """Per fact, its first delivery to its first write (real seconds), None if never written.

    A fact is a photo key or a photo's SHA-256 (a plan's facts: a re-created feature's photo
    is the same fact under new keys); either way every key that carried it counts.
    """
    by_id: Dict[str, List[FactOutcome]] = {}
    for outcome in run.facts.values():
        by_id.setdefault(outcome.key, []).append(outcome)
        if outcome.sha256 is not None and outcome.sha256 != outcome.key:
            by_id.setdefault(outcome.sha256, []).append(outcome)
    out: List[Optional[float]] = []
    for fact in facts:
        outcomes = by_id.get(fact, [])
        written = [o.ended_at_s for o in outcomes if o.succeeded]
        out.append(min(written) - min(o.delivered_at_s for o in outcomes) if written else None)
    return out


def baseline_result(name: str, run: BaselineRun, *, vision_snapshot: Mapping[str, Any],
                    layer_snapshot: Mapping[str, Any], facts: Iterable[str],
                    outage: Optional[Sequence[float]] = None) -> SubjectResult:
    """The report's figures for one baseline's run, from the run and the stand-ins' counters.

    ``facts`` are the scenario's distinct facts: photo keys, or photo SHA-256s (a plan's
    ``facts``). ``outage`` is ``(start_s, end_s)`` in real seconds after the Vision AI
    stand-in's start or reset (a plan's ``outage``); by default the calls its own outage
    windows counted. Duplicate analyses are valid answers (``ok``) beyond one per photo
    SHA-256; duplicate writes are rows written beyond one per photo of the feature the run
    handled; lost are facts never written (a baseline has no dead letters). Times are real
    seconds, as the library's figures.
    """
    if run.skipped is not None:
        return SubjectResult(name=name, skipped=run.skipped, notes=[run.note])
    distinct = list(dict.fromkeys(facts))
    settled = [s for s in _settled_facts(run, distinct) if s is not None]
    log_entries = vision_snapshot.get("log") or ()
    answers = Counter(sha for _, sha, outcome in log_entries if outcome == "ok")
    photos_of = Counter(k.partition("/")[0] for k in run.facts)
    writes = layer_snapshot.get("writes") or {}
    ai_calls = int(vision_snapshot.get("total") or 0)
    if outage is not None:
        start, end = outage
        outage_calls = sum(1 for entry in log_entries
                           if start <= entry[0] * run.time_scale < end)
    else:
        outage_calls = sum(int(w["calls"]) for w in vision_snapshot.get("outages") or ())
    return SubjectResult(
        name=name, submitted=run.deliveries, distinct_facts=len(distinct),
        succeeded={WRITTEN_STATUS: len(settled)}, lost=len(distinct) - len(settled),
        duplicate_analyses=_beyond(answers, lambda sha: 1),
        duplicate_writes=_beyond(writes, lambda gid: max(
            1, photos_of.get(gid.strip("{}").lower(), 1))),
        ai_calls=ai_calls,
        ai_calls_per_completed_task=round(ai_calls / len(settled), 3) if settled else None,
        outage_ai_calls=outage_calls, peak_backlog=run.peak_backlog,
        peak_concurrent_engines=run.peak_busy,
        p95_end_to_end_s=round(percentile(settled, 95), 3) if settled else None,
        drain_s=round(run.wall_s, 3) if run.wall_s is not None else None, notes=[run.note])
