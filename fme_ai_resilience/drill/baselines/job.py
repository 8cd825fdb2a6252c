"""One baseline job: an FME job for one webhook delivery, or one photo the sweep found.

:func:`run_job` reads the body with :func:`~fme_ai_resilience.core.intake.survey123.parse_webhook`
and, for each photo it lists, :meth:`Job.analyse`: one GET of the photo, the Vision AI call under
the baseline's retry, the answer through a Tester holding the library's own validation and
confidence rule (:data:`TESTER`: an answer that does not validate fails the photo, one under
the threshold is written as REVIEW, else ACCEPTED), and an ArcGIS ``applyEdits`` update by
GlobalID into the library's default write-back fields. With a related table (``table_url``:
a form whose features carry several photos) the photo's row is written instead, as a careful
author builds it: a query of the table for the photo's row (by ``ai_photo_globalid``), then
an update of that row by object id, or an add of one row naming the feature and the photo.
Two jobs of one photo at once can both find none and add two rows: there is no ledger. A
failed photo is logged and kept nowhere. A job passes the stage boundaries a chaos kill may
stop it at (:data:`~fme_ai_resilience.drill.chaos.KILL_POINTS`): ``boundary(point)`` is
called at each and may raise :class:`~fme_ai_resilience.drill.chaos.EngineKilled`; once it
did, the job's other photos stop at their next boundary too.
"""
from __future__ import annotations

import hashlib
import json
import logging
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, List, Mapping, Optional, Tuple, Union

import requests

from ...core.clock import Clock, SystemClock
from ...core.errors import ConfigurationError, InvalidPayload, ResilienceError
from ...core.config.pipeline_settings import WritebackSettings
from ...services.processing.writeback import braced
from ...core.config.settings import ValidationSettings
from ...core.intake.submission import Submission
from ...core.intake.survey123 import parse_webhook
from ...core.vision.validate import validate
from ..chaos import EngineKilled
from ..timescale import TimeScale
from .gauges import Progress
from .models import Baseline, BaselineError, baseline, read_json

__all__ = ["Job", "JobResult", "PhotoResult", "run_job", "runnable", "TESTER", "Body"]

log = logging.getLogger("fme_ai_resilience.drill.baselines")

#: The Tester every baseline puts on the answer: the library's default validation settings.
TESTER = ValidationSettings()
_WRITEBACK = WritebackSettings()
_GLOBAL_ID_FIELD = "globalid"

Body = Union[Mapping[str, Any], bytes, str]


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


class Job:
    """What one job shares between its photos (HTTPCaller's run in parallel)."""

    def __init__(self, baseline: Baseline, *, vision_url: str, time_scale: float,
                 clock: Clock, rng: random.Random, session: requests.Session,
                 progress: Progress, table_url: str = "",
                 boundary: Optional[Callable[[str], None]] = None) -> None:
        self.baseline = baseline
        self.boundary = boundary
        self.killed = False
        self.table_url = table_url.rstrip("/")
        self.vision_url = vision_url
        self.time_scale = time_scale
        self.scale = TimeScale(time_scale)
        self.clock = clock
        self.rng = rng
        self.session = session
        self.progress = progress
        self.timeout = (self._real(baseline.connect_timeout_s),
                        self._real(baseline.transfer_timeout_s))
        self.lock = threading.Lock()
        self.vision_calls = 0
        self.waits_s: List[float] = []

    def at(self, point: str) -> None:
        """A stage boundary: raises EngineKilled when the job's engine dies here (or died)."""
        if self.killed:
            raise EngineKilled(point)
        if self.boundary is not None:
            try:
                self.boundary(point)
            except EngineKilled:
                self.killed = True
                raise

    def _real(self, seconds: float) -> float:
        """A timeout of the baseline in real seconds: the drill's one time scale."""
        return self.scale.real(seconds, timeout=True)

    def pause(self, seconds: float) -> None:
        """A wait of ``seconds`` production seconds, through the drill's one time scale."""
        with self.lock:
            self.waits_s.append(seconds)
        self.clock.sleep(self.scale.real(seconds))

    def transfer(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        self.progress.change(in_flight=1)
        try:
            return self.session.request(method, url, timeout=self.timeout, **kwargs)
        finally:
            self.progress.change(in_flight=-1)

    def photo(self, submission: Submission) -> PhotoResult:
        key, trace = submission.idempotency_key, submission.trace_id
        if not submission.attachment_url or not submission.layer_url:
            return self._failed(key, trace, "the body gives no photo URL or no layer", None)
        return self.analyse(key, trace, submission.attachment_url, submission.layer_url,
                            submission.feature_global_id, submission.attachment_global_id)

    def analyse(self, key: str, trace_id: str, photo_url: str, layer_url: str,
                feature_global_id: str, photo_global_id: Optional[str] = None) -> PhotoResult:
        """Download the photo, ask the Vision AI under the baseline's retry, put the answer
        through the Tester (the library's validation and confidence rule) and write it to
        the feature by GlobalID; a failure is logged and kept nowhere."""
        sha: List[str] = []
        try:
            self._analyse(photo_url, layer_url, (feature_global_id, photo_global_id),
                          trace_id, sha)
        except EngineKilled:
            raise                     # the engine died: nothing of the job goes on
        except (requests.RequestException, ValueError, KeyError, TypeError,
                ResilienceError) as exc:
            return self._failed(key, trace_id, f"{type(exc).__name__}: {exc}",
                                next(iter(sha), None))
        return PhotoResult(key, trace_id, True, self.clock.monotonic(), sha256=sha[0])

    def note_failure(self, error: str) -> None:
        """What the job logs of a failure outside a photo (the sweep's query)."""
        log.info("%s job: %s", self.baseline.name, error)

    def _failed(self, key: str, trace_id: str, error: str, sha: Optional[str]) -> PhotoResult:
        log.info("%s job: photo %s failed: %s", self.baseline.name, key, error)
        return PhotoResult(key, trace_id, False, self.clock.monotonic(), error, sha)

    def _analyse(self, photo_url: str, layer_url: str, ids: Tuple[str, Optional[str]],
                 trace_id: str, sha: List[str]) -> None:
        self.at("claimed")
        download = self.transfer("GET", photo_url)
        download.raise_for_status()
        image = download.content
        sha.append(hashlib.sha256(image).hexdigest())
        self.at("downloaded")

        def send() -> requests.Response:
            with self.lock:
                self.vision_calls += 1
            return self.transfer("POST", self.vision_url, data=image,
                                 headers={"Content-Type": "application/octet-stream"})

        payload = self.baseline.call(send, pause=self.pause, rng=self.rng)
        if not isinstance(payload, dict):
            raise BaselineError("the Vision AI answer is not a JSON object")
        # The Tester reads the two attributes the workspace writes: the condition and the
        # confidence, by the library's own rule (domain, 0..1, the threshold).
        verdict = validate({"condition": payload.get("condition"),
                            "confidence": payload.get("confidence")}, TESTER)
        if verdict.invalid:
            raise BaselineError("the Tester refused the answer: " + "; ".join(verdict.reasons))
        self.at("analyzed")
        s = _WRITEBACK
        fields = {s.condition_field: payload["condition"],
                  s.confidence_field: float(payload["confidence"]),
                  s.outcome_field: verdict.kind.value,
                  s.model_field: payload.get("model_version"),
                  s.trace_field: trace_id,
                  s.assessed_at_field: int(round(self.clock.now() * 1000))}
        if self.table_url:
            self._write_row(ids, fields)
        else:
            self._edit(layer_url, "updates", {_GLOBAL_ID_FIELD: braced(ids[0]), **fields},
                       by_global_id=True)
        self.at("written")

    def _write_row(self, ids: Tuple[str, Optional[str]], fields: Mapping[str, Any]) -> None:
        """The photo's row of the related table: updated when the table holds one, else
        added."""
        s = _WRITEBACK
        if not ids[1]:
            raise BaselineError("the photo has no GlobalID to name its row by")
        photo = braced(ids[1])
        found = read_json(self.transfer("GET", f"{self.table_url}/query", params={
            "where": f"{s.photo_field} = '{photo}'", "outFields": "objectid", "f": "json"}))
        if not isinstance(found, dict) or not isinstance(found.get("features"), list):
            raise BaselineError(f"the table's query answered {found!r:.200}")
        if found["features"]:
            self._edit(self.table_url, "updates",
                       {"objectid": found["features"][0]["attributes"]["objectid"], **fields},
                       by_global_id=False)
        else:
            self._edit(self.table_url, "adds", {s.parent_field: braced(ids[0]),
                                                s.photo_field: photo, **fields},
                       by_global_id=False)

    def _edit(self, url: str, kind: str, attributes: Mapping[str, Any], *,
              by_global_id: bool) -> None:
        """One ``applyEdits`` row (``updates`` or ``adds``); raises BaselineError unless the
        layer wrote it."""
        written = self.transfer("POST", f"{url.rstrip('/')}/applyEdits", data={
            "f": "json", kind: json.dumps([{"attributes": dict(attributes)}]),
            "useGlobalIds": "true" if by_global_id else "false",
            "rollbackOnFailure": "true"})
        answer = read_json(written)
        if not isinstance(answer, dict):
            raise BaselineError("applyEdits answered something other than a JSON object")
        if answer.get("error") is not None:
            raise BaselineError(f"applyEdits answered {answer['error']}")
        rows = answer.get("updateResults" if kind == "updates" else "addResults")
        row = rows[0] if isinstance(rows, list) and rows and isinstance(rows[0], dict) else {}
        if row.get("success") is not True:
            failure = row.get("error") if isinstance(row.get("error"), dict) else {}
            raise BaselineError(f"applyEdits refused the row: {failure.get('code')} "
                                f"{failure.get('description') or ''}".strip())


def runnable(name: str) -> Baseline:
    """The baseline ``name``; raises ConfigurationError for an unknown one or one that cannot
    run here (what it misses, such as tenacity)."""
    chosen = baseline(name)
    missing = chosen.missing()
    if missing is not None:
        raise ConfigurationError("name", name, missing)
    return chosen


def run_job(name: str, body: Body, *, vision_url: str, rng: random.Random,
            time_scale: float = 1.0, clock: Optional[Clock] = None,
            session: Optional[requests.Session] = None,
            progress: Optional[Progress] = None, table_url: str = "",
            boundary: Optional[Callable[[str], None]] = None) -> JobResult:
    """One FME job of baseline ``name`` for one webhook ``body``, on the calling thread.

    Waits are production seconds, slept x ``time_scale`` through ``clock``; ``rng`` draws
    the jitter; ``table_url``: the related table each photo's row goes to; ``boundary``:
    called at each stage boundary (see the module). Raises ConfigurationError for an unknown
    baseline or one that cannot run here, EngineKilled when a chaos kill stops the job.
    """
    chosen = runnable(name)
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
    job = Job(chosen, vision_url=vision_url, time_scale=time_scale, clock=clock, rng=rng,
               session=session or requests.Session(), progress=progress or Progress(),
               table_url=table_url, boundary=boundary)
    width = min(chosen.transfers_per_job, len(photos))
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
