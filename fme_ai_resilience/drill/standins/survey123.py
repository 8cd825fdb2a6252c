"""The Survey123 field app as a sender: webhook bodies for stand-in features, posted like the app.

:meth:`Survey123Sender.body_for` builds the body Survey123 sends for a
:class:`~.records.FeatureRecord` (the shape in docs/intake.md: ``eventType``,
``feature`` with ``attributes``, ``geometry``, ``layerInfo``, ``result`` and ``attachments``
keyed by image question, ``surveyInfo.serviceUrl``, ``portalInfo`` with the token, ``userInfo``);
each photo's ``url`` points at the feature layer stand-in, with no token. The attachments list
can be left out (``attachments="null"`` or ``"absent"``), as some receivers see it.

Posting is what the field app does: one POST per delivery with ``X-Survey123-Event`` and a new
``X-Survey123-Delivery`` UUID, never retried, no redirect followed, the status recorded and
otherwise ignored. :meth:`~Survey123Sender.burst` sends many at once from a thread pool (the
outbox after an offline period); :meth:`~Survey123Sender.redeliver` sends a body again under a
new delivery id. Every delivery is recorded, a refused or failed one too: Survey123 never sends
it again, so ``lost`` counts what only reconciliation can recover. Delivery ids come from a
seeded ``random.Random`` (drawn in the caller's order, a burst's before it starts), so a run
repeats exactly. The URL must be on loopback.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import random
import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union
from urllib.parse import urlsplit

from ...core.checks import count, finite
from ...core.errors import ConfigurationError
from ...core.intake.survey123 import DELIVERY_HEADER, EVENT_HEADER, EVENT_TYPES
from .records import CREATOR, GLOBAL_ID_FIELD, OBJECT_ID_FIELD, FeatureRecord
from .server import LOOPBACK_HOSTS, THREAD_PREFIX

__all__ = ["Survey123Sender", "Delivery", "ATTACHMENT_MODES", "USER_AGENT"]

#: How ``body_for`` gives the attachments: listed, ``null``, or without the key.
ATTACHMENT_MODES = ("listed", "null", "absent")
USER_AGENT = "ArcGIS Survey123 field app (fme-ai-resilience stand-in)"

Body = Union[Mapping[str, Any], bytes, str]


@dataclass(frozen=True)
class Delivery:
    """One POST of a webhook body: its delivery id and what came back.

    ``status`` is None when no answer came (``error`` says why: refused, reset, timed out).
    """

    delivery_id: str
    event_type: str
    feature_global_id: Optional[str]
    status: Optional[int]
    error: Optional[str] = None
    redelivery: bool = False
    answer: bytes = field(default=b"", repr=False)

    @property
    def delivered(self) -> bool:
        """Whether the receiver accepted it (a 2xx answer)."""
        return self.status is not None and 200 <= self.status < 300

    @property
    def lost(self) -> bool:
        """Whether the receiver did not accept it: Survey123 will never send it again."""
        return not self.delivered


class Survey123Sender:
    """Posts Survey123 webhook bodies to ``url`` (on loopback) like the field app.

    ``token`` is the submitter's portal token put in ``portalInfo`` (None: no token);
    ``timeout_s`` bounds each delivery (the app sets none; a drill must end).
    """

    def __init__(self, url: str, *, token: Optional[str] = "stand-in-portal-token",
                 seed: int = 0, timeout_s: float = 30.0,
                 portal_url: str = "https://www.arcgis.com", username: str = CREATOR,
                 form_title: str = "Asset inspection") -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or (parts.hostname or "") not in LOOPBACK_HOSTS:
            raise ConfigurationError("url", url, "must be an http:// URL on loopback")
        self.url = url
        self.token = token
        self.seed = seed
        self.timeout_s = finite("timeout_s", timeout_s, above=0)
        self.portal_url = portal_url
        self.username = username
        self.form_title = form_title
        self._host, self._port = parts.hostname or "", parts.port or 80
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._lock = threading.Lock()
        self._rng = random.Random(f"survey123:{seed}")
        self._deliveries: List[Delivery] = []

    # --- bodies ----------------------------------------------------------------------------

    def body_for(self, feature: FeatureRecord, *, event_type: str = "addData",
                 attachments: str = "listed",
                 attributes: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """The webhook body Survey123 sends for ``feature``.

        ``attributes`` are laid over the feature's own (an edit's new values);
        ``attachments`` is one of :data:`ATTACHMENT_MODES`.
        """
        if event_type not in EVENT_TYPES:
            raise ConfigurationError("event_type", event_type, f"must be one of {EVENT_TYPES}")
        if attachments not in ATTACHMENT_MODES:
            raise ConfigurationError("attachments", attachments,
                                     f"must be one of {list(ATTACHMENT_MODES)}")
        values = dict(feature.attributes)
        values.update(attributes or {})
        record: Dict[str, Any] = {
            "attributes": values,
            "geometry": dict(feature.geometry),
            "layerInfo": {"id": feature.layer_id, "name": feature.layer_name,
                          "type": "Feature Layer", "globalIdField": GLOBAL_ID_FIELD,
                          "objectIdField": OBJECT_ID_FIELD, "relationships": []},
            "result": {"globalId": feature.global_id, "objectId": feature.object_id,
                       "uniqueId": feature.object_id, "success": True},
        }
        if attachments == "listed":
            grouped: Dict[str, List[Dict[str, Any]]] = {}
            for photo in feature.attachments:
                grouped.setdefault(photo.keywords, []).append({
                    "globalId": photo.global_id, "parentGlobalId": photo.parent_global_id,
                    "contentType": photo.content_type, "name": photo.name,
                    "keywords": photo.keywords, "id": photo.id, "url": photo.url})
            record["attachments"] = grouped
        elif attachments == "null":
            record["attachments"] = None
        ids = hashlib.sha256(f"form:{self.seed}:{feature.service_url}".encode("utf-8"))
        portal: Dict[str, Any] = {"url": self.portal_url}
        if self.token is not None:
            portal["token"] = self.token
        return {
            "eventType": event_type,
            "feature": record,
            "surveyInfo": {"formItemId": ids.hexdigest()[:32], "formTitle": self.form_title,
                           "serviceItemId": ids.hexdigest()[32:],
                           "serviceUrl": feature.service_url},
            "portalInfo": portal,
            "userInfo": {"username": self.username, "firstName": "Field", "lastName": "User",
                         "fullName": "Field User", "email": f"{self.username}@example.com"},
        }

    # --- delivering ------------------------------------------------------------------------

    def _next_id(self) -> str:
        with self._lock:
            return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def send(self, body: Body, *, event_type: Optional[str] = None) -> Delivery:
        """POST ``body`` once under a new delivery id; returns the recorded delivery.

        ``event_type`` defaults to the body's ``eventType`` (else ``addData``).
        """
        return self._post(body, self._next_id(), event_type, redelivery=False)

    def redeliver(self, body: Body, *, event_type: Optional[str] = None) -> Delivery:
        """POST the same ``body`` again under a new delivery id (a user re-sending it)."""
        return self._post(body, self._next_id(), event_type, redelivery=True)

    def burst(self, bodies: Sequence[Body], *, concurrency: int = 8) -> List[Delivery]:
        """POST every body at once from ``concurrency`` threads; deliveries in ``bodies`` order."""
        count("concurrency", concurrency, minimum=1)
        items = [(body, self._next_id()) for body in bodies]
        if not items:
            return []
        with ThreadPoolExecutor(max_workers=min(concurrency, len(items)),
                                thread_name_prefix=f"{THREAD_PREFIX}survey123") as pool:
            return list(pool.map(lambda item: self._post(item[0], item[1], None, False), items))

    def _post(self, body: Body, delivery_id: str, event_type: Optional[str],
              redelivery: bool) -> Delivery:
        if isinstance(body, Mapping):
            raw = json.dumps(body, separators=(",", ":")).encode("utf-8")
            event = event_type or str(body.get("eventType") or "addData")
            feature = body.get("feature")
            attrs = feature.get("attributes") if isinstance(feature, Mapping) else None
            gid = attrs.get(GLOBAL_ID_FIELD) if isinstance(attrs, Mapping) else None
        else:
            raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
            event, gid = event_type or "addData", None
        headers = {"Content-Type": "application/json; charset=UTF-8", EVENT_HEADER: event,
                   DELIVERY_HEADER: delivery_id, "User-Agent": USER_AGENT}
        conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_s)
        status: Optional[int] = None
        error: Optional[str] = None
        answer = b""
        try:
            conn.request("POST", self._target, raw, headers)
            response = conn.getresponse()
            status = response.status
            answer = response.read()
        except (http.client.HTTPException, OSError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        finally:
            conn.close()
        delivery = Delivery(delivery_id, event, gid if isinstance(gid, str) else None, status,
                            error, redelivery, answer)
        with self._lock:
            self._deliveries.append(delivery)
        return delivery

    # --- counters --------------------------------------------------------------------------

    def deliveries(self) -> List[Delivery]:
        """Every delivery so far, in the order they finished."""
        with self._lock:
            return list(self._deliveries)

    def snapshot(self) -> Dict[str, Any]:
        """``sent``, ``delivered`` (2xx), ``lost`` (anything else), ``errors`` (no answer at
        all), ``redeliveries``, and ``by_status`` (answers per HTTP status)."""
        with self._lock:
            done = list(self._deliveries)
        return {"sent": len(done), "delivered": sum(d.delivered for d in done),
                "lost": sum(d.lost for d in done),
                "errors": sum(d.status is None for d in done),
                "redeliveries": sum(d.redelivery for d in done),
                "by_status": dict(Counter(d.status for d in done if d.status is not None))}

    def reset(self) -> None:
        """Forget every delivery (delivery ids keep coming from the same sequence)."""
        with self._lock:
            self._deliveries = []
