"""The write-back to ArcGIS, and the photo list of a webhook that carried none.

:class:`FeatureLayerSink` writes a conclusion into configurable fields (``writeback.*``):
either onto the feature itself (``applyEdits`` update by GlobalID, ``useGlobalIds``) or, with
``writeback.table_url``, as one row per photo of a related table, found again by the photo's
GlobalID and updated in place, and added with a GlobalID derived from the photo's (so two
holders of one photo's task cannot add two rows); both are idempotent, so a retried
write-back changes nothing.
The ``written`` checkpoint is recorded before the completion, so a task whose write-back
succeeded but whose completion was lost never writes again.

:func:`layer_photo_lister` lists a feature's photos through the layer's ``queryAttachments``,
one submission per photo, for the processor to register as their own tasks.
"""
from __future__ import annotations

import threading
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

#: The check a fenced write runs just before it is sent (raises LeaseLost: see
#: :class:`FeatureLayerSink`).
Fence = Callable[[], None]

import requests

from ...core.text.caseless import get_ignoring_case
from ...core.clock import Clock, SystemClock
from ...core.errors import ArcGISError, ErrorClass
from ...core.intake.keys import compose_key, normalise_global_id, trace_id_for
from ...core.ledger import CallRecord, Stage, Task
from ...core.config.pipeline_settings import WritebackSettings
from ...core.text.redact import redact_url
from ...core.config.settings import Settings
from ...store.base import Store
from ...core.intake.submission import Submission
from ..arcgis.layer import FeatureLayer
from ..arcgis.credentials import TokenProvider
from ..http.sessions import session_for
from .sinks import Conclusion, _complete, written

__all__ = ["FeatureLayerSink", "Layers", "layer_photo_lister", "trusted_layers", "braced",
           "row_global_id"]

#: The namespace of the related-table rows' GlobalIDs (see :func:`row_global_id`).
_ROW_NAMESPACE = uuid.UUID("7d1c5b0e-58f4-4b7e-9a43-0c6f2d9e1a57")

#: The ArcGIS applyEdits error code that means "no such row" (the feature is gone).
_MISSING_ROW = {1019}
#: ArcGIS codes of a refusal for want of permission (not an invalid token).
_NO_PERMISSION = {403}
#: What a configuration dead letter tells the crew to check.
_FIX = ("check the writeback.* field names and layer URL against the layer, and that the "
        "processor's ArcGIS user may edit it")


def braced(global_id: str) -> str:
    """A normalised GlobalID as ArcGIS writes it: ``{ABCD...}``."""
    return "{" + global_id.strip("{}").upper() + "}"


class Layers:
    """One :class:`FeatureLayer` per URL, all sharing the processor's token, session and call
    log (thread-safe).

    A layer URL may come from a webhook body, which anyone can send: ``trusted(url)`` says
    whether the deployment configured it (:func:`trusted_layers`), and an untrusted URL is
    refused before any request, so the token never goes where the configuration did not say.
    The refusal is BAD_REQUEST (the request named a layer the deployment does not serve), or
    CONFIGURATION with ``no_services`` (no feature service configured: no submission's layer
    could be trusted, the deployment's fault).
    """

    def __init__(self, *, trusted: Callable[[str], bool],
                 token: Optional[TokenProvider] = None,
                 session: Optional[requests.Session] = None, clock: Optional[Clock] = None,
                 on_call: Optional[Callable[[CallRecord], None]] = None,
                 timeout_s: float = 30.0, no_services: bool = False) -> None:
        self._trusted = trusted
        self._refusal = ErrorClass.CONFIGURATION if no_services else ErrorClass.BAD_REQUEST
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
        """The layer at ``url`` (one client per URL); raises ArcGISError (BAD_REQUEST, or
        CONFIGURATION with ``no_services``) for a layer the configuration does not name."""
        if not self._trusted(url):
            raise ArcGISError(self._refusal, f"layer {redact_url(url)} belongs to no "
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
    """Writes a conclusion to the feature (or a related table) and completes the task.

    Fenced: every ``applyEdits`` runs the processor's ``fence`` just before it is sent, so a
    holder whose lease lapsed never writes over its successor's result or a reviewer's
    verdict (docs/pipeline.md, "Fenced to the layer").
    """

    name = "feature_layer"
    fenced = True

    def __init__(self, settings: WritebackSettings, layers: Layers) -> None:
        self.settings = settings
        self.layers = layers

    def __repr__(self) -> str:
        return f"FeatureLayerSink(table={bool(self.settings.table_url)})"

    def finish(self, conclusion: Conclusion, *, store: Store, now: float,
               fence: Optional[Fence] = None) -> bool:
        task = conclusion.task
        if not written(task):
            receipt = self._write(conclusion, now=now, fence=fence)
            if not store.checkpoint(task.key, task.lease_token, Stage.WRITTEN, receipt,
                                    now=now):
                return False
        return _complete(conclusion, store=store, now=now)

    def flag(self, conclusion: Conclusion, *, store: Store, now: float,
             fence: Optional[Fence] = None) -> None:
        """Write the layer value (AWAITING_ANALYSIS, REVIEWED, FAILED) the same idempotent
        way."""
        self._write(conclusion, now=now, fence=fence)

    def _fields(self, conclusion: Conclusion, *, now: float) -> Dict[str, Any]:
        s, result = self.settings, conclusion.result
        return {s.condition_field: result.get("condition"),
                s.confidence_field: result.get("confidence"),
                s.outcome_field: conclusion.layer.value,  # type: ignore[union-attr]
                s.model_field: result.get("model_version"),
                s.trace_field: conclusion.task.trace_id,
                s.assessed_at_field: int(now * 1000)}

    def _write(self, conclusion: Conclusion, *, now: float,
               fence: Optional[Fence] = None) -> Dict[str, Any]:
        submission = conclusion.submission
        feature = braced(submission.feature_global_id)
        fields = self._fields(conclusion, now=now)
        if self.settings.table_url:
            return self._write_row(conclusion, feature, fields, fence)
        url = self.settings.layer_url or submission.layer_url
        if not url:
            raise ArcGISError(ErrorClass.CONFIGURATION, "no layer to write back to: the "
                              "submission names none and writeback.layer_url is empty",
                              operation="applyEdits")
        gid_field = _global_id_field(submission.attributes)
        results = _apply(self.layers, url, updates=[{gid_field: feature, **fields}],
                         fence=fence)
        _check(results.failed, url)
        return {"sink": self.name, "layer": url, "global_id": feature}

    def _write_row(self, conclusion: Conclusion, feature: str, fields: Dict[str, Any],
                   fence: Optional[Fence] = None) -> Dict[str, Any]:
        s = self.settings
        photo = conclusion.submission.attachment_global_id
        if not photo:
            raise ArcGISError(ErrorClass.BAD_REQUEST, "a related-table row needs the photo's "
                              "GlobalID", operation="applyEdits")
        photo_id = braced(str(photo))
        found = self._row_of(photo_id)
        if found is None:
            # The row's GlobalID is the photo's own derivation: a second holder's add of the
            # same photo is refused by the table's unique GlobalID, never a second row.
            results = _apply(self.layers, s.table_url,
                             adds=[{"globalid": row_global_id(photo_id),
                                    s.parent_field: feature, s.photo_field: photo_id,
                                    **fields}], use_global_ids=True, fence=fence)
            if results.failed:
                found = self._row_of(photo_id)   # added meanwhile by another holder
                if found is None:
                    _check(results.failed, s.table_url)
        if found is not None:
            results = _apply(self.layers, s.table_url,
                             updates=[{"objectid": found, **fields}], use_global_ids=False,
                             fence=fence)
            _check(results.failed, s.table_url)
        return {"sink": self.name, "table": s.table_url, "photo": photo_id,
                "updated": found is not None}

    def _row_of(self, photo_id: str) -> Optional[Any]:
        """The object id of the photo's row in the related table, or None."""
        found = _configured(lambda: self.layers.get(self.settings.table_url).query(
            f"{self.settings.photo_field} = '{photo_id}'", out_fields=("objectid",)))
        return get_ignoring_case(found[0], "objectid") if found else None


def row_global_id(photo_global_id: str) -> str:
    """The GlobalID of a photo's related-table row, derived from the photo's GlobalID, so
    every holder of the photo's task adds the same row (``{ABCD...}``)."""
    return braced(str(uuid.uuid5(_ROW_NAMESPACE, braced(photo_global_id))))


def _global_id_field(attributes: Mapping[str, Any]) -> str:
    """The layer's GlobalID field as the submission's attributes spell it (``globalid``)."""
    for key in attributes:
        if isinstance(key, str) and key.lower() == "globalid":
            return key
    return "globalid"


def _apply(layers: Layers, url: str, **edits: Any) -> Any:
    """``applyEdits`` on the layer at ``url``, a refusal for the setup's reasons classed so."""
    return _configured(lambda: layers.get(url).apply_edits(**edits))


def _configured(call: Callable[[], Any]) -> Any:
    """``call()``, its ArcGIS refusals for the deployment's reasons re-raised as
    CONFIGURATION: a layer the configuration does not name, a request the layer refuses
    (HTTP 400: a field or a URL that is no layer), no permission to edit (403) or no such
    layer (404). An invalid token (498/499, AUTH) and transient failures keep their class."""
    try:
        return call()
    except ArcGISError as exc:
        refused = exc.error_class in (ErrorClass.BAD_REQUEST, ErrorClass.NOT_FOUND) or (
            exc.error_class is ErrorClass.AUTH and exc.code in _NO_PERMISSION)
        if not refused:
            raise
        raise ArcGISError(ErrorClass.CONFIGURATION, f"{exc.reason}; {_FIX}",
                          operation=exc.operation, status_code=exc.status_code,
                          code=exc.code) from exc


def _check(failed: Sequence[Any], url: str) -> None:
    """A row ``applyEdits`` refused: NOT_FOUND when the feature is gone, else the setup's
    fault (code 1000: a field that does not exist or a value the field refuses)."""
    if not failed:
        return
    row = failed[0]
    gone = row.error_code in _MISSING_ROW
    raise ArcGISError(ErrorClass.NOT_FOUND if gone else ErrorClass.CONFIGURATION,
                      f"applyEdits on {url} refused the row: "
                      f"{row.error_code} {row.error_description or ''}".strip()
                      + ("" if gone else f"; {_FIX}"), operation="applyEdits")


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
    """A :data:`~fme_ai_resilience.services.processing.processor.PhotoLister` over
    ``queryAttachments``: one submission per photo of the task's feature, keyed as intake keys them
    (the edit marker of an editData submission kept)."""

    def listed(task: Task) -> List[Submission]:
        payload = dict(task.payload)
        submission = task.submission or Submission.from_payload(payload)
        url = submission.layer_url
        if not url:
            raise ArcGISError(ErrorClass.BAD_REQUEST, "the submission names no layer to list "
                              "its photos from", operation="queryAttachments")
        feature = submission.feature_global_id
        oid = submission.object_id
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
