"""The FME author's safety net: a scheduled workspace that processes what nothing analysed.

:func:`sweep_pass` is one run of it, as a ``sweep`` baseline schedules it on its engines: a
layer query for the features whose assessment is still empty (``<condition field> IS NULL``,
at most the job's limit), the photos of each through ``queryAttachments``, and each photo
analysed and written back as a webhook job does (:meth:`~.job.Job.analyse`), from the
layer's own attachment URL. With a related table (several photos a feature) the sweep
looks for photos rather than features: the table's rows (their ``ai_photo_globalid``) beside
every photo ``queryAttachments`` lists, and the photos no row names, at most the job's limit
(a FeatureReader on each and a FeatureJoiner's unjoined port). It tells nobody about what it
cannot do.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Set, Tuple

from ...core.config.pipeline_settings import WritebackSettings
from ..judge import photo_key
from .job import Job
from .models import BaselineError, read_json

__all__ = ["sweep_pass"]


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


def _row_pass(job: Job, layer_url: str, limit: int) -> int:
    """The sweep over a related table: photos no row names, at most ``limit``."""
    try:
        named = _with_rows(job)
        groups = read_json(job.transfer("GET", f"{layer_url}/queryAttachments", params={
            "definitionExpression": "1=1", "returnUrl": "true", "f": "json"}))
    except (BaselineError, ValueError, OSError) as exc:
        job.note_failure(f"the sweep's query failed: {exc}")
        return 0
    owed = [(gid, info) for gid, info in _photos(groups)
            if str(info.get("globalId")).upper() not in named][:limit]
    return sum(job.analyse(photo_key(gid, info["globalId"]), "", info["url"], layer_url, gid,
                           info["globalId"]).succeeded for gid, info in owed)


def sweep_pass(job: Job, layer_url: str, limit: int) -> int:
    """One sweep job over ``layer_url``: the photos it wrote (a failed query writes none)."""
    layer_url = layer_url.rstrip("/")
    if job.table_url:
        return _row_pass(job, layer_url, limit)
    try:
        features = _features(job, layer_url, limit)
    except (BaselineError, ValueError, OSError) as exc:
        job.note_failure(f"the sweep's query failed: {exc}")
        return 0
    written = 0
    for feature in features:
        oid, gid = feature.get("objectid"), feature.get("globalid")
        try:
            groups = read_json(job.transfer("GET", f"{layer_url}/queryAttachments", params={
                "objectIds": str(oid), "returnUrl": "true", "f": "json"}))
        except (ValueError, OSError) as exc:
            job.note_failure(f"queryAttachments of {gid} failed: {exc}")
            continue
        for _, info in _photos(groups):
            result = job.analyse(photo_key(gid, info["globalId"]), "", info["url"],
                                 layer_url, gid, info["globalId"])
            written += result.succeeded
    return written
