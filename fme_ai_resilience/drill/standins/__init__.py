"""Loopback stand-ins for the outside world of the pipeline, each a threaded HTTP server.

- :class:`VisionStandIn` with a :class:`FaultSchedule`: the ``generic`` Vision AI provider,
  with latency, 5xx, HTML 502 pages, truncated bodies, 429 + Retry-After, outages, format
  drift and a constant-confidence bug, and each photo's ground truth;
- :class:`PhotoHost`: photos at ``/photos/<name>``, with 404s and ArcGIS's HTTP-200 498;
- :class:`FeatureLayerStandIn`: an ArcGIS feature service (query, queryAttachments,
  attachments, applyEdits) holding the features crews submitted, as :class:`FeatureRecord`,
  with ArcGIS's change tracking (:class:`LayerChanges`: server generations, extractChanges);
- :class:`LayerWebhookSender`: the layer's webhook as ArcGIS sends it (challenge, thin
  notifications on a schedule, signatures, deactivation after failures);
- :class:`Survey123Sender`: webhook bodies for those features, posted like the field app;
- :class:`NotificationStandIn`: the mailbox of what people are told (not a server).

Each listens on 127.0.0.1 only, starts with ``start()`` or ``with``, stops cleanly with
``stop()``, answers deterministically from its inputs and ``seed``, and keeps thread-safe
counters (``snapshot()``, ``reset()``). These are adapters: they read the clock and open
sockets, and nothing in the library imports them.
"""
from __future__ import annotations

from .feature_layer import FeatureLayerStandIn
from .layer_changes import ChangeRecord, LayerChanges
from .layer_webhooks import LayerWebhookSender
from .notifications import Message, NotificationStandIn
from .photos import PhotoHost, fake_jpeg
from .records import AttachmentRecord, FeatureRecord
from .server import Reply, Request, StandInError, StandInServer
from .survey123 import Delivery, Survey123Sender
from .vision import FaultSchedule, VisionStandIn
from .where import WhereError

__all__ = ["VisionStandIn", "FaultSchedule", "PhotoHost", "fake_jpeg", "FeatureLayerStandIn",
           "FeatureRecord", "AttachmentRecord", "Survey123Sender", "Delivery", "StandInServer",
           "StandInError", "Request", "Reply", "WhereError", "NotificationStandIn",
           "Message", "LayerChanges", "ChangeRecord", "LayerWebhookSender"]
