"""ArcGIS layer webhooks into the ledger: each notification kept at once, resolved later into
one task per photo.

:func:`register_notifications` keeps the task of every notification of a delivery (keyed by
service, layer and generation range, so a redelivery is a duplicate). An ArcGIS sender
deactivates a webhook after failed deliveries, so nothing here refuses one: past the
watermark, or while FME Flow has no engine free, a notification is parked DEFERRED (the
backlog is handled by deferral, as for Survey123); only past the hard ceiling of stored rows is
it left out, and then a refusal record keeps what reconciliation needs.

:func:`photo_lister` is the processor's lister: for a notification's task it reads the changes
(``extractChanges``, :mod:`fme_ai_resilience.services.arcgis.changes`), lists the photos of
every feature they add or update (``queryAttachments`` per layer) and returns one submission per
photo, keyed ``<record GlobalID>/<attachment GlobalID>`` as the Survey123 path keys them, so a
photo announced by both an app webhook and a layer webhook is one task. A repeat's record
takes the asset type of its root record (followed through ``parentglobalid``) when it has
none. For any other task it lists the feature's photos as before.
"""
from __future__ import annotations

import logging
from typing import Callable, Dict, List, Optional, Sequence

from ...core.clock import Clock
from ...core.config.settings import Settings
from ...core.errors import ArcGISError, ErrorClass, InvalidPayload
from ...core.intake.arcgis_webhook import ChangedFeature, LayerNotification, changed_features
from ...core.intake.keys import compose_key, normalise_global_id, trace_id_for
from ...core.intake.submission import Submission
from ...core.ledger import OverloadMode, Registration, Task
from ...core.text.caseless import get_ignoring_case
from ...core.text.redact import redact_url
from ...store.base import Store
from ..arcgis.changes import extract_changes
from ..processing.writeback import Layers, braced, layer_photo_lister

__all__ = ["register_notifications", "photo_lister", "notification_photos"]

log = logging.getLogger("fme_ai_resilience.intake")


def register_notifications(notifications: Sequence[LayerNotification], settings: Settings, *,
                           store: Store, now: float, received_at: float,
                           no_capacity: bool = False,
                           delivery_id: Optional[str] = None) -> List[Registration]:
    """Keep the task of every notification: new, parked past the watermark (or at once while
    FME Flow has no engine free), or a duplicate; OVER_BACKLOG only past the park ceiling plus
    one body's headroom."""
    intake = settings.intake
    ceiling = 0 if no_capacity else intake.capacity.watermark
    return [store.register(n.submission(delivery_id), ceiling, OverloadMode.PARK,
                           intake.hard_ceiling,
                           now=now, received_at=received_at) for n in notifications]


def photo_lister(layers: Layers, *, clock: Clock, wait_s: float, poll_s: float,
                 asset_type_field: str = "asset_type") -> Callable[[Task], List[Submission]]:
    """The processor's photo lister: a notification's photos through its changes, any other
    task's through its feature's attachments."""
    by_attachments = layer_photo_lister(layers)

    def listed(task: Task) -> List[Submission]:
        submission = task.submission
        if submission is not None and submission.changes_url:
            try:
                return notification_photos(submission, layers, clock=clock, wait_s=wait_s,
                                           poll_s=poll_s, asset_type_field=asset_type_field)
            except InvalidPayload as exc:   # an answer out of shape: retried, then a dead letter
                raise ArcGISError(ErrorClass.BAD_FORMAT, f"the changes could not be read: "
                                  f"{exc}", operation="extractChanges") from None
        return by_attachments(task)

    return listed


def notification_photos(notification: Submission, layers: Layers, *, clock: Clock,
                        wait_s: float, poll_s: float,
                        asset_type_field: str = "asset_type") -> List[Submission]:
    """One submission per photo of every feature the notification's changes add or update.

    Raises ArcGISError: a service the deployment does not serve (BAD_REQUEST, before any
    request), the changes or the attachments unreadable (retried by their class).
    """
    service = notification.service_url
    if not service or not notification.changes_url:
        raise ArcGISError(ErrorClass.BAD_REQUEST, "the notification names no feature service",
                          operation="extractChanges")
    first_layer = notification.layer_url or f"{service}/0"
    result = extract_changes(layers.get(first_layer), notification.changes_url, clock=clock,
                             wait_s=wait_s, poll_s=poll_s)
    features = changed_features(result)
    by_layer: Dict[int, List[ChangedFeature]] = {}
    for feature in features:
        by_layer.setdefault(feature.layer_id, []).append(feature)
    asset_types = {f.global_id: _asset_type(f, asset_type_field) for f in features
                   if f.global_id is not None}
    out: List[Submission] = []
    for layer_id, changed in sorted(by_layer.items()):
        url = f"{service}/{layer_id}"
        out.extend(_layer_photos(url, changed, layers, notification, asset_types,
                                 asset_type_field))
    log.info("intake: notification %s (%s): %d feature(s) changed, %d photo(s)",
             notification.idempotency_key, redact_url(service), len(features), len(out))
    return out


def _layer_photos(url: str, changed: Sequence[ChangedFeature], layers: Layers,
                  notification: Submission, asset_types: Dict[Optional[str], Optional[str]],
                  asset_type_field: str) -> List[Submission]:
    """The photos of the changed features of one layer, one ``queryAttachments`` per batch."""
    layer = layers.get(url)
    oids = sorted({f.object_id for f in changed if f.object_id is not None})
    gids = [braced(f.global_id) for f in changed if f.object_id is None and f.global_id]
    groups = []
    if oids:
        groups.extend(layer.query_attachments(object_ids=oids))
    if gids:
        groups.extend(layer.query_attachments(global_ids=gids))
    by_oid = {f.object_id: f for f in changed if f.object_id is not None}
    by_gid = {f.global_id: f for f in changed if f.global_id is not None}
    out: List[Submission] = []
    for group in groups:
        feature = by_oid.get(group.parent_object_id)
        record = (feature.global_id if feature is not None and feature.global_id
                  else group.parent_global_id)
        if record is None:
            continue   # a layer without GlobalIDs: nothing to key a photo by
        record = normalise_global_id(record, "parentGlobalId")
        feature = feature or by_gid.get(record)
        attributes = dict(feature.attributes) if feature is not None else {}
        root = feature.root_global_id if feature is not None else None
        asset_type = (_asset_type(feature, asset_type_field) if feature is not None else None) \
            or asset_types.get(root)
        for info in group.attachments:
            if info.global_id is None:
                continue
            photo = normalise_global_id(info.global_id, "globalId")
            key = compose_key(record, photo)
            out.append(Submission(
                idempotency_key=key, feature_global_id=record, trace_id=trace_id_for(key),
                object_id=group.parent_object_id, attachment_global_id=photo,
                attachment_id=info.id, attachment_url=info.url,
                content_type=info.content_type,
                event_type="addData", delivery_id=notification.delivery_id, layer_url=url,
                service_url=notification.service_url, asset_type=asset_type,
                attributes=attributes, source=notification.source))
    return out


def _asset_type(feature: ChangedFeature, field: str) -> Optional[str]:
    value = get_ignoring_case(feature.attributes, field)
    return value if isinstance(value, str) and value else None

