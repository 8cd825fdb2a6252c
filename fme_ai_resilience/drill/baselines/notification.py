"""One baseline job for one ArcGIS layer-webhook delivery: the changes read, each photo analysed.

:func:`run_notification_job` is the FME job a careful author builds behind an Automation's
webhook trigger (:mod:`.trigger`) when the layer's webhook, not the app's, announces the
edits. The body is a JSON array of thin notifications (one object for ArcGIS Enterprise, or
``payload=<json>`` as a form); for each, the job:

- percent-decodes its ``changesUrl`` (as Esri's samples do) and calls it (an HTTPCaller);
  an asynchronous answer's ``statusUrl`` is polled in a loop every :data:`POLL_S` production
  seconds, at most :data:`MAX_POLLS` times, until ``Completed`` (then its ``resultUrl`` is
  read), and a job that ends ``Failed`` or ``Cancelled`` is submitted again, at most
  :data:`SUBMISSIONS` times in all;
- keeps the features added or updated whose assessment is still empty (a Tester on the
  condition field: the write-back's own edits are notified back, and analysing them again
  would loop), lists their photos with one ``queryAttachments`` per layer, and analyses and
  writes each photo as every baseline job does (:meth:`~.job.Job.analyse`: one download,
  the Vision AI under the baseline's retry, the Tester, the write-back), up to the baseline's
  transfers in flight.

There is no ledger: a photo announced by two notifications (a form with a repeat is notified
once per layer, each naming the same changes) is analysed by each job that finds it still
empty. What fails is logged and kept nowhere. Every wait is in production seconds, through
the drill's one time scale.
"""
from __future__ import annotations

import json
import logging
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

import requests

from ...core.clock import Clock, SystemClock
from ...core.config.pipeline_settings import WritebackSettings
from ...core.errors import InvalidPayload, ResilienceError
from ...core.text.caseless import get_ignoring_case
from ..judge import photo_key
from .gauges import Progress
from .job import Body, Job, JobResult, PhotoResult, runnable
from .models import BaselineError, read_json

__all__ = ["run_notification_job", "read_notifications", "POLL_S", "MAX_POLLS", "SUBMISSIONS",
           "NOTIFICATION_NOTE"]

log = logging.getLogger("fme_ai_resilience.drill.baselines")

#: The wait between two polls of an extractChanges job (production s; Esri's samples poll
#: every 1-2 s).
POLL_S = 2.0
#: The most polls of one job before the job is given up (a minute, at POLL_S).
MAX_POLLS = 30
#: The most submissions of one notification's extractChanges job (a failed job is submitted
#: again).
SUBMISSIONS = 3
#: What every baseline's report says of its webhook jobs in a layer-webhook scenario.
NOTIFICATION_NOTE = (
    "layer webhook: FME Flow's webhook trigger cannot answer ArcGIS's challenge or check "
    "x-esriHook-Signature, so the webhook is registered without a signatureKey; each "
    "notification starts one job that calls its changesUrl (HTTPCaller), polls the job's "
    f"statusUrl every {POLL_S:g} s up to {MAX_POLLS} times, submits a failed job again (at "
    f"most {SUBMISSIONS} submissions), keeps the changed features whose assessment is still "
    "empty, lists their photos with queryAttachments and analyses each as its webhook job "
    "does; no ledger: a photo two notifications announce is analysed by each job that finds "
    "it empty")

_CONDITION = WritebackSettings().condition_field
_Photo = Tuple[str, str, Mapping[str, Any]]     # (layer URL, feature GlobalID, attachment info)


def read_notifications(body: Body) -> List[Dict[str, Any]]:
    """The notifications of a delivery's body: a JSON array (ArcGIS Online), one object
    (ArcGIS Enterprise), either as ``payload=<json>`` in a form. Raises InvalidPayload (a
    ValueError) for a body that holds none, ValueError for one that is not JSON."""
    if isinstance(body, Mapping):
        data: Any = dict(body)
    else:
        text = body.decode("utf-8") if isinstance(body, bytes) else str(body)
        if text.startswith("payload="):
            text = dict(parse_qsl(text)).get("payload", "")
        data = json.loads(text)
    found = [data] if isinstance(data, dict) else data if isinstance(data, list) else []
    notes = [n for n in found if isinstance(n, dict)]
    if not notes:
        raise InvalidPayload("the body holds no notification")
    return notes


def _poll(job: Job, status_url: str) -> Tuple[str, Mapping[str, Any]]:
    """Poll a job until it ends: its status (lower case, or ``timeout``) and last answer."""
    status: Mapping[str, Any] = {}
    for _ in range(MAX_POLLS):
        job.pause(POLL_S)
        answer = read_json(job.transfer("GET", status_url, params={"f": "json"}))
        status = answer if isinstance(answer, dict) else {}
        state = str(status.get("status", "")).strip().lower()
        if state in ("completed", "failed", "cancelled", "canceled"):
            return state, status
    return "timeout", status


def _changes(job: Job, changes_url: str) -> Mapping[str, Any]:
    """The extractChanges result ``changes_url`` names; raises BaselineError when no job
    completes."""
    parts = urlsplit(changes_url)
    url = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    params["f"] = "json"
    for submission in range(1, SUBMISSIONS + 1):
        answer = read_json(job.transfer("GET", url, params=params))
        if not isinstance(answer, dict):
            raise BaselineError(f"extractChanges answered {answer!r:.200}")
        if isinstance(answer.get("edits"), list):
            return answer
        if not answer.get("statusUrl"):
            raise BaselineError(f"extractChanges answered {answer!r:.200}")
        state, status = _poll(job, str(answer["statusUrl"]))
        if state == "completed":
            result = read_json(job.transfer("GET", str(status.get("resultUrl"))))
            if not isinstance(result, dict) or not isinstance(result.get("edits"), list):
                raise BaselineError(f"the extractChanges result is {result!r:.200}")
            return result
        if state == "timeout":
            raise BaselineError(f"the extractChanges job did not end in {MAX_POLLS} polls")
        job.note_failure(f"the extractChanges job ended {state} (submission {submission})")
    raise BaselineError(f"the extractChanges job failed {SUBMISSIONS} times")


def _photos(job: Job, changes_url: str) -> List[_Photo]:
    """The photos of the features a notification's changes add or update, still empty."""
    result = _changes(job, changes_url)
    service = urlsplit(changes_url).path.rsplit("/extractChanges", 1)[0]
    base = urlunsplit(urlsplit(changes_url)[:2] + (service, "", ""))
    out: List[_Photo] = []
    for edit in result["edits"]:
        features = edit.get("features") if isinstance(edit, dict) else None
        if not isinstance(features, dict):
            continue
        changed = [f.get("attributes") or {} for kind in ("adds", "updates")
                   for f in features.get(kind) or () if isinstance(f, dict)]
        oids = sorted({get_ignoring_case(a, "objectid") for a in changed
                       if get_ignoring_case(a, _CONDITION) is None
                       and get_ignoring_case(a, "objectid") is not None})
        if not oids:
            continue
        layer_url = f"{base}/{edit.get('id', 0)}"
        groups = read_json(job.transfer("GET", f"{layer_url}/queryAttachments", params={
            "objectIds": ",".join(str(o) for o in oids), "returnUrl": "true", "f": "json"}))
        for group in (groups.get("attachmentGroups") or ()) if isinstance(groups, dict) else ():
            for info in group.get("attachmentInfos") or ():
                out.append((layer_url, str(group.get("parentGlobalId")), info))
    return out


def _each(job: Job, work: Callable[[_Photo], PhotoResult],
          photos: List[_Photo]) -> Tuple[PhotoResult, ...]:
    width = min(job.baseline.transfers_per_job, len(photos))
    if width <= 1:
        return tuple(work(p) for p in photos)
    with ThreadPoolExecutor(max_workers=width, thread_name_prefix=(
            f"baseline-{job.baseline.name}-notification")) as pool:
        return tuple(pool.map(work, photos))


def run_notification_job(name: str, body: Body, *, vision_url: str, rng: random.Random,
                         time_scale: float = 1.0, clock: Optional[Clock] = None,
                         session: Optional[requests.Session] = None,
                         progress: Optional[Progress] = None, table_url: str = "",
                         boundary: Optional[Callable[[str], None]] = None) -> JobResult:
    """One FME job of baseline ``name`` for one layer-webhook delivery ``body`` (see the
    module), on the calling thread; the arguments as :func:`~.job.run_job`'s. Raises
    ConfigurationError for an unknown baseline or one that cannot run here, EngineKilled
    when a chaos kill stops the job."""
    chosen = runnable(name)
    clock = clock or SystemClock()
    try:
        notes = read_notifications(body)
    except (ValueError, UnicodeDecodeError) as exc:
        log.info("%s job: the body cannot be read: %s", name, exc)
        return JobResult((), 0, (), clock.monotonic(), str(exc))
    own_session = session is None
    job = Job(chosen, vision_url=vision_url, time_scale=time_scale, clock=clock, rng=rng,
              session=session or requests.Session(), progress=progress or Progress(),
              table_url=table_url, boundary=boundary)
    try:
        photos: List[_Photo] = []
        for note in notes:
            url = unquote(str(note.get("changesUrl") or ""))
            if not url:
                job.note_failure("a notification names no changesUrl")
                continue
            try:
                photos.extend(_photos(job, url))
            except (requests.RequestException, ValueError, KeyError, TypeError,
                    ResilienceError) as exc:
                job.note_failure(f"the changes could not be read: {type(exc).__name__}: {exc}")
        results = _each(job, lambda p: job.analyse(
            photo_key(p[1], str(p[2].get("globalId"))), "", str(p[2].get("url")), p[0], p[1],
            str(p[2].get("globalId"))), photos)
    finally:
        if own_session:
            job.session.close()
    with job.lock:
        return JobResult(results, job.vision_calls, tuple(job.waits_s), clock.monotonic())
