"""The FME author's safety net: a scheduled workspace that processes what nothing analysed.

:func:`sweep_pass` is one run of it, as a ``sweep`` baseline schedules it on its engines: a
layer query for the features whose assessment is still empty (``<condition field> IS NULL``,
at most the job's limit), the photos of each through ``queryAttachments``, and each photo
analysed and written back as a webhook job does (:meth:`~.job.Job.analyse`), from the
layer's own attachment URL. It tells nobody about what it cannot do.
"""
from __future__ import annotations

from typing import Any, Dict, List

from ...pipeline_settings import WritebackSettings
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


def sweep_pass(job: Job, layer_url: str, limit: int) -> int:
    """One sweep job over ``layer_url``: the photos it wrote (a failed query writes none)."""
    layer_url = layer_url.rstrip("/")
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
        for group in groups.get("attachmentGroups") or () if isinstance(groups, dict) else ():
            for info in group.get("attachmentInfos") or ():
                result = job.analyse(photo_key(gid, info["globalId"]), "", info["url"],
                                     layer_url, gid)
                written += result.succeeded
    return written
