"""Change tracking for the feature layer stand-in: server generations and ``extractChanges``.

The service keeps one server generation counter (an int; 1 for a layer with no edits yet).
Each edit to layer 0 takes the next generation and is recorded as
``(gen, layer 0, object id, add | update)``: a feature added (with its photos: one edit) takes
one, an ``applyEdits`` call takes one for every feature it wrote (the pipeline's own write-back
included: on ArcGIS those are edits too). A feature kept out by ``hide_until`` is not an edit
yet: it takes its generation when it becomes visible, at the first read of the generation
after that moment of schedule time, so a range read before it shows never holds it.

``<service>/FeatureServer/extractChanges`` (GET or POST) reads the changes:

- ``layers``: a JSON list of layer ids; only layer 0 is tracked (any other id is a 400);
- ``serverGens``: ``[a, b]``, the changes with ``a < gen <= b`` (``b`` beyond the current
  generation means the current one); or ``layerServerGens``: ``[{"id": 0, "serverGen": a}]``,
  the changes after ``a`` up to the current generation;
- ``returnInserts``, ``returnUpdates``, ``returnDeletes`` (default true), ``returnIdsOnly``
  (default false); ``returnAttachments``, ``dataFormat`` and the rest are read and ignored;
- ``async``: false answers the result itself; true answers ``{"statusUrl":
  "<service>/FeatureServer/jobs/<job id>"}``, whose first ``polls_pending`` polls answer
  ``Pending`` (then ``InProgress``), and the next ``Completed`` with ``resultUrl``
  (``<service>/FeatureServer/replicafiles/<job id>.json``, the result).

The result: ``{"layerServerGens": [{"id": 0, "serverGen": g}], "responseType":
"esriDataChangesResponseTypeEdits", "edits": [{"id": 0, "features": {"adds", "updates",
"deleteIds"}}]}`` (``objectIds: {"adds", "updates", "deletes"}`` with ids only), where ``g`` is
the generation the answer is complete up to (the range's upper end, at most the current
generation). Each feature appears once, as its net change over the range (added within it: an
add; else an update), with its attributes now (every field) and its geometry. The stand-in
never deletes, so deletes are always empty.

``failures``: the first that many extractChanges jobs since the stand-in was built fail: an
async one answers ``{"status": "Failed", "error": ...}`` after its pending polls, a sync one
ArcGIS's error JSON in HTTP 200.
"""
from __future__ import annotations

import json
import random
import re
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ...core.checks import count
from ...core.clock import Clock
from .layer_edits import bad, error, flag
from .server import Reply
from .where import WhereError

__all__ = ["LayerChanges", "ChangeRecord", "ADD", "UPDATE", "TRACKED_LAYER",
           "EXTRACT_CHANGES_CAPABILITIES"]

ADD = "add"
UPDATE = "update"
#: The one layer whose changes the stand-in tracks.
TRACKED_LAYER = 0
#: What the service description says ``extractChanges`` supports.
EXTRACT_CHANGES_CAPABILITIES = {
    "supportsReturnIdsOnly": True, "supportsReturnExtentOnly": False,
    "supportsReturnAttachments": False, "supportsLayerQueries": False,
    "supportsGeometry": False, "supportsFeatureReturn": True, "supportsReturnHasGeometryUpdates":
    False, "supportsFieldsToCompare": False, "supportsServerGens": True}

_JOB = re.compile(r"^/jobs/([0-9a-f\-]+)$")
_RESULT = re.compile(r"^/replicafiles/([0-9a-f\-]+)\.json$")
#: An extractChanges job that fails says this.
_FAILED = "Extract changes job failed."


@dataclass(frozen=True)
class ChangeRecord:
    """One edit of a feature: the generation it took, its layer, the feature and its kind."""

    gen: int
    layer_id: int
    object_id: int
    kind: str
    photos: int = 0


@dataclass
class _Job:
    job_id: str
    result: Optional[Dict[str, Any]]    # None: the job fails
    submitted_ms: int
    polls: int = 0


class LayerChanges:
    """The change log of one feature service stand-in and its ``extractChanges`` paths.

    ``rows``, ``geometry`` and ``types`` are the layer's own live dicts (object id ->
    attributes, object id -> geometry, field -> type), read under ``lock``;
    ``schedule_time`` gives the stand-in's schedule seconds and ``base_url`` its
    ``.../FeatureServer`` URL. ``failures`` and ``polls_pending``: see the module docstring.
    """

    def __init__(self, *, rows: Mapping[int, Mapping[str, Any]],
                 geometry: Mapping[int, Mapping[str, Any]], types: Mapping[str, str],
                 lock: Any, schedule_time: Callable[[], float], base_url: Callable[[], str],
                 clock: Clock, seed: int = 0, failures: int = 0,
                 polls_pending: int = 2) -> None:
        self.failures = count("changes_failures", failures)
        self.polls_pending = count("changes_polls_pending", polls_pending)
        self._rows, self._geometry, self._types = rows, geometry, types
        self._lock: threading.RLock = lock
        self._schedule_time = schedule_time
        self._base_url = base_url
        self._clock = clock
        self._rng = random.Random(f"changes:{seed}")
        self._gen = 1
        self._records: List[ChangeRecord] = []
        self._pending: Dict[int, Tuple[float, int]] = {}   # object id -> (visible at s, photos)
        self._jobs: Dict[str, _Job] = {}
        self._jobs_started = 0
        self.clear_counters()

    # --- the log ---------------------------------------------------------------------------

    def _settle(self) -> None:
        """Give each hidden feature that became visible its generation; caller locks."""
        if not self._pending:
            return
        now = self._schedule_time()
        due = sorted((at, oid) for oid, (at, _) in self._pending.items() if at <= now)
        for _, oid in due:
            self._gen += 1
            self._records.append(ChangeRecord(self._gen, TRACKED_LAYER, oid, ADD,
                                              self._pending.pop(oid)[1]))

    def current(self) -> int:
        """The server generation now (the last edit's; 1 before any edit)."""
        with self._lock:
            self._settle()
            return self._gen

    def added(self, object_id: int, *, photos: int = 0) -> int:
        """Record the add of a feature (with ``photos`` photos); returns its generation."""
        with self._lock:
            self._settle()
            self._gen += 1
            self._records.append(ChangeRecord(self._gen, TRACKED_LAYER, object_id, ADD, photos))
            return self._gen

    def updated(self, object_ids: List[int]) -> Optional[int]:
        """Record one ``applyEdits`` call that wrote these features; returns its generation
        (None when it wrote no visible feature: a hidden one shows later as an add)."""
        with self._lock:
            self._settle()
            visible = [oid for oid in dict.fromkeys(object_ids) if oid not in self._pending]
            if not visible:
                return None
            self._gen += 1
            self._records.extend(ChangeRecord(self._gen, TRACKED_LAYER, oid, UPDATE)
                                 for oid in visible)
            return self._gen

    def hide(self, object_id: int, at_s: float) -> None:
        """The feature becomes visible at ``at_s`` schedule seconds: until then it is no
        edit (a visible feature hidden again loses the generation it had)."""
        with self._lock:
            if object_id in self._pending:
                self._pending[object_id] = (float(at_s), self._pending[object_id][1])
            elif at_s > self._schedule_time():
                mine = [r for r in self._records if r.object_id == object_id]
                self._records = [r for r in self._records if r.object_id != object_id]
                self._pending[object_id] = (float(at_s), sum(r.photos for r in mine))
            self._settle()

    def records(self, low: int = 0, high: Optional[int] = None) -> List[ChangeRecord]:
        """The edits with ``low < gen <= high`` (``high``: the current generation), in order."""
        with self._lock:
            self._settle()
            top = self._gen if high is None else high
            return [r for r in self._records if low < r.gen <= top]

    def net(self, low: int, high: int) -> Tuple[List[int], List[int]]:
        """The object ids added and (only) updated with ``low < gen <= high``, ascending."""
        adds, updates = set(), set()
        for record in self.records(low, high):
            (adds if record.kind == ADD else updates).add(record.object_id)
        return sorted(adds), sorted(updates - adds)

    def events(self, low: int, high: int) -> List[str]:
        """The webhook events of the edits with ``low < gen <= high``: ``FeaturesCreated``,
        ``AttachmentsCreated`` (added features that had photos), ``FeaturesUpdated``."""
        found = self.records(low, high)
        names = [("FeaturesCreated", any(r.kind == ADD for r in found)),
                 ("AttachmentsCreated", any(r.kind == ADD and r.photos for r in found)),
                 ("FeaturesUpdated", any(r.kind == UPDATE for r in found))]
        return [event for event, present in names if present]

    # --- counters --------------------------------------------------------------------------

    def clear_counters(self) -> None:
        """Counters to zero (the log, the jobs and the failure budget stay)."""
        with self._lock:
            self._calls = 0
            self._failed = 0
            self._polls = 0
            self._served = 0

    def snapshot(self) -> Dict[str, Any]:
        """``extract_changes`` (calls), ``change_jobs_failed`` (jobs that failed, counted
        when submitted), ``status_polls``, ``results_served``, ``server_gen`` (now)."""
        with self._lock:
            return {"extract_changes": self._calls, "change_jobs_failed": self._failed,
                    "status_polls": self._polls, "results_served": self._served,
                    "server_gen": self.current()}

    # --- answering -------------------------------------------------------------------------

    def handle(self, rest: str, params: Mapping[str, str]) -> Optional[Reply]:
        """The answer to ``rest`` (the path after ``.../FeatureServer``) when it is one of the
        change-tracking paths, else None."""
        if rest == "/extractChanges":
            return self._extract(params)
        match = _JOB.match(rest)
        if match:
            return self._status(match.group(1))
        match = _RESULT.match(rest)
        if match:
            return self._result(match.group(1))
        return None

    def _range(self, params: Mapping[str, str]) -> Tuple[int, int]:
        """``(low, high)`` from ``serverGens`` or ``layerServerGens``; raises WhereError (a
        parameter it cannot read, as the layer's other paths) or ValueError (not JSON)."""
        current = self.current()
        if params.get("serverGens"):
            gens = json.loads(params["serverGens"])
            if not (isinstance(gens, list) and len(gens) == 2
                    and all(isinstance(g, int) and not isinstance(g, bool) and g >= 0
                            for g in gens) and gens[0] <= gens[1]):
                raise WhereError("'serverGens' parameter is invalid")
            return gens[0], min(gens[1], current)
        if params.get("layerServerGens"):
            entries = json.loads(params["layerServerGens"])
            lows = [e.get("serverGen") for e in entries if isinstance(e, dict)
                    and e.get("id") == TRACKED_LAYER] if isinstance(entries, list) else []
            if len(lows) != 1 or not isinstance(lows[0], int) or lows[0] < 0:
                raise WhereError("'layerServerGens' parameter is invalid")
            return lows[0], current
        raise WhereError("'serverGens' or 'layerServerGens' parameter is required")

    def _extract(self, params: Mapping[str, str]) -> Reply:
        with self._lock:
            self._calls += 1
        try:
            layers = json.loads(params.get("layers") or "null")
            if isinstance(layers, int) and not isinstance(layers, bool):
                layers = [layers]
            if not isinstance(layers, list) or not layers:
                return bad("'layers' parameter is invalid")
            if any(layer != TRACKED_LAYER for layer in layers):
                return bad(f"only layer {TRACKED_LAYER} tracks changes: {layers}")
            low, high = self._range(params)
        except WhereError as exc:
            return bad(str(exc))
        except ValueError:
            return bad("a JSON parameter is invalid")
        ids_only = flag(params, "returnIdsOnly", False)
        with self._lock:
            self._jobs_started += 1
            failing = self._jobs_started <= self.failures
            if failing:
                self._failed += 1
            result = None if failing else self._answer(
                low, high, inserts=flag(params, "returnInserts", True),
                updates=flag(params, "returnUpdates", True), ids_only=ids_only)
            if not flag(params, "async", False):
                if result is None:
                    return error(500, "Unable to extract changes.", _FAILED)
                return Reply.json(200, result)
            job = _Job(str(uuid.UUID(int=self._rng.getrandbits(128), version=4)), result,
                       int(self._clock.now() * 1000))
            self._jobs[job.job_id] = job
        return Reply.json(200, {"statusUrl": f"{self._base_url()}/jobs/{job.job_id}"})

    def _answer(self, low: int, high: int, *, inserts: bool, updates: bool,
                ids_only: bool) -> Dict[str, Any]:
        """The result JSON for ``low < gen <= high``; caller locks."""
        adds, ups = self.net(low, high)
        adds, ups = (adds if inserts else []), (ups if updates else [])
        edit: Dict[str, Any] = {"id": TRACKED_LAYER}
        if ids_only:
            edit["objectIds"] = {"adds": adds, "updates": ups, "deletes": []}
        else:
            edit["features"] = {"adds": [self._feature(oid) for oid in adds],
                                "updates": [self._feature(oid) for oid in ups],
                                "deleteIds": []}
        return {"layerServerGens": [{"id": TRACKED_LAYER, "serverGen": high}],
                "responseType": "esriDataChangesResponseTypeEdits", "edits": [edit]}

    def _feature(self, oid: int) -> Dict[str, Any]:
        row = self._rows[oid]
        return {"attributes": {f: row.get(f) for f in self._types},
                "geometry": dict(self._geometry[oid])}

    def _status(self, job_id: str) -> Reply:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return error(404, "Job not found.", f"no extractChanges job {job_id}")
            self._polls += 1
            job.polls += 1
            status: Dict[str, Any] = {"submissionTime": job.submitted_ms,
                                      "lastUpdatedTime": int(self._clock.now() * 1000)}
            if job.polls <= self.polls_pending:
                status["status"] = "Pending" if job.polls == 1 else "InProgress"
            elif job.result is None:
                status.update(status="Failed", error={"code": 500, "message": _FAILED,
                                                      "details": []})
            else:
                status.update(status="Completed",
                              resultUrl=f"{self._base_url()}/replicafiles/{job_id}.json")
        return Reply.json(200, status)

    def _result(self, job_id: str) -> Reply:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.result is None or job.polls <= self.polls_pending:
                return error(404, "Result not found.", f"no result for job {job_id}")
            self._served += 1
            return Reply.json(200, job.result)
