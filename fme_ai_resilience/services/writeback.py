"""The write-back to ArcGIS, and the photo list of a webhook that carried none.

:class:`FeatureLayerSink` writes a conclusion into configurable fields (``writeback.*``):
either onto the feature itself (``applyEdits`` update by GlobalID, ``useGlobalIds``) or, with
``writeback.table_url``, as one row per photo of a related table, found again by the photo's
GlobalID and updated in place; both are idempotent, so a retried write-back changes nothing.
The ``written`` checkpoint is recorded before the completion, so a task whose write-back
succeeded but whose completion was lost never writes again.

:func:`layer_photo_lister` lists a feature's photos through the layer's ``queryAttachments``,
one submission per photo, for the processor to register as their own tasks.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import requests

from ..caseless import get_ignoring_case
from ..clock import Clock, SystemClock
from ..errors import ArcGISError, ErrorClass
from ..keys import compose_key, normalise_global_id, trace_id_for
from ..ledger import CallRecord, Stage, Task
from ..pipeline_settings import WritebackSettings
from ..redact import redact_url
from ..settings import Settings
from ..store.base import Store
from ..submission import Submission
from .arcgis import FeatureLayer
from .credentials import TokenProvider
from .sessions import session_for
from .sinks import Conclusion, _complete, written

__all__ = ["FeatureLayerSink", "Layers", "layer_photo_lister", "trusted_layers", "braced"]

#: ArcGIS applyEdits error codes that mean "no such row".
_MISSING_ROW = {1000, 1019}


def braced(global_id: str) -> str:
    """A normalised GlobalID as ArcGIS writes it: ``{ABCD...}``."""
    return "{" + global_id.strip("{}").upper() + "}"


class Layers:
    """One :class:`FeatureLayer` per URL, all sharing the processor's token, session and call
    log (thread-safe).

    A layer URL may come from a webhook body, which anyone can send: ``trusted(url)`` says
    whether the deployment configured it (:func:`trusted_layers`), and an untrusted URL is
    refused before any request, so the token never goes where the configuration did not say.
    """

    def __init__(self, *, trusted: Callable[[str], bool],
                 token: Optional[TokenProvider] = None,
                 session: Optional[requests.Session] = None, clock: Optional[Clock] = None,
                 on_call: Optional[Callable[[CallRecord], None]] = None,
                 timeout_s: float = 30.0) -> None:
        self._trusted = trusted
        self._token = token
        self._clock = clock or SystemClock()
        self._session = session_for(session=session, clock=self._clock)
        self._on_call = on_call
        self._timeout_s = timeout_s
        self._layers: Dict[str, FeatureLayer] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Layers({sorted(self._layers)})"

    def get(self, url: str) -> FeatureLayer:
        """The layer at ``url`` (one client per URL); raises ArcGISError (BAD_REQUEST) for a
        layer the configuration does not name."""
        if not self._trusted(url):
            raise ArcGISError(ErrorClass.BAD_REQUEST, f"layer {redact_url(url)} belongs to no "
                              "configured feature service (intake.feature_services, "
                              "writeback.layer_url, writeback.table_url): nothing is sent there",
                              operation="layer")
        with self._lock:
            layer = self._layers.get(url)
            if layer is None:
                layer = self._layers[url] = FeatureLayer(
                    url, token=self._token, session=self._session, clock=self._clock,
                    timeout_s=(min(5.0, self._timeout_s), self._timeout_s),
                    on_call=self._on_call)
            return layer


class FeatureLayerSink:
    """Writes a conclusion to the feature (or a related table) and completes the task."""

    name = "feature_layer"

    def __init__(self, settings: WritebackSettings, layers: Layers) -> None:
        self.settings = settings
        self.layers = layers

    def __repr__(self) -> str:
        return f"FeatureLayerSink(table={bool(self.settings.table_url)})"

    def finish(self, conclusion: Conclusion, *, store: Store, now: float) -> bool:
        task = conclusion.task
        if not written(task):
            receipt = self._write(conclusion, now=now)
            if not store.checkpoint(task.key, task.lease_token, Stage.WRITTEN, receipt,
                                    now=now):
                return False
        return _complete(conclusion, store=store, now=now)

    def _fields(self, conclusion: Conclusion, *, now: float) -> Dict[str, Any]:
        s, result = self.settings, conclusion.result
        return {s.condition_field: result.get("condition"),
                s.confidence_field: result.get("confidence"),
                s.outcome_field: conclusion.outcome.value,
                s.model_field: result.get("model_version"),
                s.trace_field: conclusion.task.trace_id,
                s.assessed_at_field: int(now * 1000)}

    def _write(self, conclusion: Conclusion, *, now: float) -> Dict[str, Any]:
        payload = conclusion.payload
        feature = braced(str(payload["feature_global_id"]))
        fields = self._fields(conclusion, now=now)
        if self.settings.table_url:
            return self._write_row(conclusion, feature, fields)
        url = self.settings.layer_url or payload.get("layer_url")
        if not url:
            raise ArcGISError(ErrorClass.BAD_REQUEST, "no layer to write back to: the "
                              "submission names none and writeback.layer_url is empty",
                              operation="applyEdits")
        gid_field = _global_id_field(payload.get("attributes") or {})
        results = self.layers.get(url).apply_edits(updates=[{gid_field: feature, **fields}])
        _check(results.failed, url)
        return {"sink": self.name, "layer": url, "global_id": feature}

    def _write_row(self, conclusion: Conclusion, feature: str,
                   fields: Dict[str, Any]) -> Dict[str, Any]:
        s, payload = self.settings, conclusion.payload
        photo = payload.get("attachment_global_id")
        if not photo:
            raise ArcGISError(ErrorClass.BAD_REQUEST, "a related-table row needs the photo's "
                              "GlobalID", operation="applyEdits")
        table = self.layers.get(s.table_url)
        photo_id = braced(str(photo))
        found = table.query(f"{s.photo_field} = '{photo_id}'", out_fields=("objectid",))
        if found:
            oid = get_ignoring_case(found[0], "objectid")
            results = table.apply_edits(updates=[{"objectid": oid, **fields}],
                                        use_global_ids=False)
        else:
            results = table.apply_edits(
                adds=[{s.parent_field: feature, s.photo_field: photo_id, **fields}],
                use_global_ids=False)
        _check(results.failed, s.table_url)
        return {"sink": self.name, "table": s.table_url, "photo": photo_id,
                "updated": bool(found)}


def _global_id_field(attributes: Mapping[str, Any]) -> str:
    """The layer's GlobalID field as the submission's attributes spell it (``globalid``)."""
    for key in attributes:
        if isinstance(key, str) and key.lower() == "globalid":
            return key
    return "globalid"


def _check(failed: Sequence[Any], url: str) -> None:
    if not failed:
        return
    row = failed[0]
    error_class = ErrorClass.NOT_FOUND if row.error_code in _MISSING_ROW \
        else ErrorClass.BAD_REQUEST
    raise ArcGISError(error_class, f"applyEdits on {url} refused the row: "
                      f"{row.error_code} {row.error_description or ''}".strip(),
                      operation="applyEdits")


def trusted_layers(settings: Settings) -> Callable[[str], bool]:
    """Whether a layer URL is the deployment's: a layer or table of one of
    ``intake.feature_services``, or the write-back's own ``layer_url`` / ``table_url``."""
    configured = {u.rstrip("/").lower() for u in (settings.writeback.layer_url,
                                                  settings.writeback.table_url) if u}

    def trusted(url: str) -> bool:
        text = str(url).strip().rstrip("/")
        service, _, layer_id = text.rpartition("/")
        return text.lower() in configured or (layer_id.isdigit()
                                              and settings.intake.serves(service))
    return trusted


def layer_photo_lister(layers: Layers,
                       content_types: Sequence[str] = ("image/jpeg", "image/png")
                       ) -> Callable[[Task], List[Submission]]:
    """A :data:`~fme_ai_resilience.services.processor.PhotoLister` over ``queryAttachments``:
    one submission per photo of the task's feature, keyed as intake keys them (the edit marker
    of an editData submission kept)."""

    def listed(task: Task) -> List[Submission]:
        payload = dict(task.payload)
        url = payload.get("layer_url")
        if not url:
            raise ArcGISError(ErrorClass.BAD_REQUEST, "the submission names no layer to list "
                              "its photos from", operation="queryAttachments")
        feature = str(payload["feature_global_id"])
        oid = payload.get("object_id")
        groups = layers.get(url).query_attachments(
            object_ids=[oid] if isinstance(oid, int) else None,
            global_ids=None if isinstance(oid, int) else [braced(feature)],
            content_types=content_types)
        marker = task.key.partition("@")[2] or None
        out = []
        for group in groups:
            for info in group.attachments:
                if info.global_id is None:
                    continue
                attachment = normalise_global_id(info.global_id, "globalId")
                key = compose_key(feature, attachment, marker)
                out.append(Submission(**{
                    **{k: v for k, v in payload.items()
                       if k in Submission.__dataclass_fields__},
                    "idempotency_key": key, "trace_id": trace_id_for(key),
                    "attachment_global_id": attachment, "attachment_id": info.id,
                    "attachment_url": info.url, "content_type": info.content_type,
                    "attachments_unknown": False, "object_id": group.parent_object_id}))
        return out

    return listed
