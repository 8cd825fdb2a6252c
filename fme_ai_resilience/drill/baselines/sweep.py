"""The FME author's safety net: a scheduled workspace that processes what nothing analysed.

:func:`sweep_pass` is one run of it, as a ``sweep`` baseline schedules it on its engines: a
layer query for the features whose assessment is still empty (``<condition field> IS NULL``,
at most the job's limit), the photos of each through ``queryAttachments``, and each photo
analysed and written back as a webhook job does (:meth:`~.job.Job.analyse`), from the
layer's own attachment URL. With a related table (several photos a feature) the sweep
looks for photos rather than features: the table's rows (their ``ai_photo_globalid``) beside
every photo ``queryAttachments`` lists, and the photos no row names, at most the job's limit
(a FeatureReader on each and a FeatureJoiner's unjoined port). Its HTTP calls run as
HTTPCaller runs them, up to the job's ``transfers_per_job`` (25) in flight: the photos'
attachment lists, then the photos themselves, each downloaded, analysed and written. It
tells nobody about what it cannot do. A pass answers what it found owed and what it wrote,
so its schedule knows whether anything is left (:class:`Pass`).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Sequence, Set, Tuple, TypeVar

from ...core.config.pipeline_settings import WritebackSettings
from ..judge import photo_key
from .job import Job
from .models import BaselineError, read_json

__all__ = ["sweep_pass", "Pass"]

_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass(frozen=True)
class Pass:
    """One sweep pass: the photos it found owed and those it wrote (None: its query failed)."""

    found: int
    written: int

    @property
    def left_nothing(self) -> bool:
        """Whether the pass left nothing owed: it found nothing, or wrote all it found."""
        return self.found == self.written


def _each(job: Job, work: Callable[[_T], _R], items: Sequence[_T]) -> List[_R]:
    """``work`` on each item with the job's transfers in flight at once, as HTTPCaller."""
    width = min(job.baseline.transfers_per_job, len(items))
    if width <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=width,
                            thread_name_prefix=f"baseline-{job.baseline.name}-sweep") as pool:
        return list(pool.map(work, items))


def _features(job: Job, layer_url: str, limit: int) -> List[Dict[str, Any]]:
    field = WritebackSettings().condition_field
    answer = read_json(job.transfer("GET", f"{layer_url}/query", params={
        "where": f"{field} IS NULL", "outFields": "objectid,globalid", "f": "json",
        "orderByFields": "objectid", "resultRecordCount": str(limit),
        "returnGeometry": "false"}))
    if not isinstance(answer, dict) or "features" not in answer:
        raise BaselineError(f"the sweep's query answered {answer!r:.200}")
    return [f["attributes"] for f in answer["features"]]


def _with_rows(job: Job) -> Set[str]:
    """The photo GlobalIDs the related table's rows name, page by page."""
    field = WritebackSettings().photo_field
    named: Set[str] = set()
    seen = 0
    while True:
        answer = read_json(job.transfer("GET", f"{job.table_url}/query", params={
            "where": "1=1", "outFields": field, "f": "json", "resultOffset": str(seen),
            "resultRecordCount": "1000"}))
        if not isinstance(answer, dict) or not isinstance(answer.get("features"), list):
            raise BaselineError(f"the sweep's table query answered {answer!r:.200}")
        rows = [f["attributes"].get(field) for f in answer["features"]]
        named.update(str(r).upper() for r in rows)
        seen += len(rows)
        if not rows or answer.get("exceededTransferLimit") is not True:
            return named


def _photos(groups: Any) -> Iterator[Tuple[str, Dict[str, Any]]]:
    for group in groups.get("attachmentGroups") or () if isinstance(groups, dict) else ():
        for info in group.get("attachmentInfos") or ():
            yield group.get("parentGlobalId"), info


def _analysed(job: Job, layer_url: str, owed: Iterable[Tuple[str, Dict[str, Any]]]) -> Pass:
    """Each owed ``(feature GlobalID, attachment info)`` analysed and written, in parallel."""
    photos = list(owed)
    done = _each(job, lambda item: job.analyse(
        photo_key(item[0], item[1]["globalId"]), "", item[1]["url"], layer_url, item[0],
        item[1]["globalId"]).succeeded, photos)
    return Pass(len(photos), sum(done))


def _row_pass(job: Job, layer_url: str, limit: int) -> Pass:
    """The sweep over a related table: photos no row names, at most ``limit``."""
    try:
        named = _with_rows(job)
        groups = read_json(job.transfer("GET", f"{layer_url}/queryAttachments", params={
            "definitionExpression": "1=1", "returnUrl": "true", "f": "json"}))
    except (BaselineError, ValueError, OSError) as exc:
        job.note_failure(f"the sweep's query failed: {exc}")
        return Pass(1, 0)
    owed = [(gid, info) for gid, info in _photos(groups)
            if str(info.get("globalId")).upper() not in named][:limit]
    return _analysed(job, layer_url, owed)


def _attachments(job: Job, layer_url: str, feature: Dict[str, Any]
                 ) -> List[Tuple[str, Dict[str, Any]]]:
    """A feature's photos from ``queryAttachments`` (none when it fails: logged)."""
    oid, gid = feature.get("objectid"), feature.get("globalid")
    try:
        groups = read_json(job.transfer("GET", f"{layer_url}/queryAttachments", params={
            "objectIds": str(oid), "returnUrl": "true", "f": "json"}))
    except (ValueError, OSError) as exc:
        job.note_failure(f"queryAttachments of {gid} failed: {exc}")
        return []
    return [(str(gid), info) for _, info in _photos(groups)]


def sweep_pass(job: Job, layer_url: str, limit: int) -> Pass:
    """One sweep job over ``layer_url``: what it found owed and what it wrote (a failed query
    counts as one photo found and none written: the pass cannot tell that nothing is left)."""
    layer_url = layer_url.rstrip("/")
    if job.table_url:
        return _row_pass(job, layer_url, limit)
    try:
        features = _features(job, layer_url, limit)
    except (BaselineError, ValueError, OSError) as exc:
        job.note_failure(f"the sweep's query failed: {exc}")
        return Pass(1, 0)
    lists = _each(job, lambda feature: _attachments(job, layer_url, feature), features)
    return _analysed(job, layer_url, [photo for listed in lists for photo in listed])
