"""A feature-layer webhook as ArcGIS sends it: thin notifications of the stand-in layer's changes.

:class:`LayerWebhookSender` is what ArcGIS Online (or Enterprise) does for a webhook registered
on a :class:`~.feature_layer.FeatureLayerStandIn`:

- :meth:`~LayerWebhookSender.register` sends the challenge ``GET <hook_url>?crc_token=<t>``
  and expects ``200 {"response_token": "sha256=<base64 HMAC-SHA256(signature_key, t)>"}``;
  a sender whose challenge failed is not active and never sends. Without a signature key
  there is nothing to answer and it is active at once.
- Every ``interval_s`` (the ``scheduleInfo`` interval, in schedule seconds: real seconds are
  ``interval_s * time_scale`` of the layer; ArcGIS's minimum is 30 s, the stand-in takes any)
  :meth:`~LayerWebhookSender.send_due` looks at the layer's server generation and, when it
  moved since the last notified one, POSTs one notification for the range ``(last, now]``
  whose ``changesUrl`` (``<service>/FeatureServer/extractChanges?serverGens=[a,b]&async=true
  &returnUpdates=true&returnDeletes=false&returnAttachments=false&layers=[0]``) arrives
  percent-encoded, lower-case escapes, as on ArcGIS Online. ``style`` picks the body:
  ``online-json`` (a JSON array of one notification), ``online-form`` (``payload=<that
  JSON>``, form-encoded) or ``enterprise`` (one JSON object, events with their time).
- With ``per_layer`` each batch sends one notification per layer id of ``notify_layers`` (a
  Survey123 form with a repeat edits several layers); each names the same ``serverGens`` range
  and ``layers=[0]``.
- With a key, ``x-esriHook-Signature: sha256=<base64 HMAC-SHA256(key, raw body)>``, computed
  over the body bytes as sent (the form too).
- A delivery fails on a non-2xx answer, no answer within ``timeout_s`` (schedule seconds) or
  a refused connection. The stand-in's choice: the notified generation then stays where it
  was, so the next delivery covers the range again (a consumer would find a missed range
  anyway); ``number_of_failures`` failed deliveries in a row deactivate the sender, and one
  success resets the count.

Only loopback URLs are accepted; the session ignores proxy settings from the environment.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import math
import random
import re
import threading
import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import quote, quote_plus, urlencode, urlsplit

import requests

from ...core.checks import count, finite, name as checked_name
from ...core.errors import ConfigurationError
from .server import LOOPBACK_HOSTS, THREAD_PREFIX

__all__ = ["LayerWebhookSender", "WEBHOOK_STYLES", "SIGNATURE_HEADER", "signature"]

log = logging.getLogger("fme_ai_resilience.drill.standins")

#: The bodies a sender can send.
WEBHOOK_STYLES = ("online-json", "online-form", "enterprise")
#: The header carrying the body's signature.
SIGNATURE_HEADER = "x-esriHook-Signature"
_USER_AGENT = "ArcGIS webhook (fme-ai-resilience stand-in)"
_ESCAPE = re.compile(r"%[0-9A-F]{2}")
_JOIN_S = 5.0

#: One delivery: (monotonic seconds, HTTP status or None when no answer came, (low, high)).
DeliveryRow = Tuple[float, Optional[int], Tuple[int, int]]


def signature(key: str, data: bytes) -> str:
    """``sha256=`` and the base64 of HMAC-SHA256(``key``, ``data``): the header's value, and
    the challenge's answer for ``data`` = the token."""
    digest = hmac.new(key.encode("utf-8"), data, hashlib.sha256).digest()
    return "sha256=" + base64.b64encode(digest).decode("ascii")


def _loopback(field: str, url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme != "http" or (parts.hostname or "") not in LOOPBACK_HOSTS:
        raise ConfigurationError(field, url, "must be an http:// URL on loopback")
    return url


class LayerWebhookSender:
    """Notifies ``hook_url`` (on loopback) of ``layer``'s changes like an ArcGIS webhook.

    ``layer`` is a started :class:`~.feature_layer.FeatureLayerStandIn`. ``from_gen`` is
    the generation notifications start after (None: the layer's generation at
    :meth:`register`, as a webhook created then). ``name``, ``org_id`` and (from ``seed``)
    the webhook id and challenge tokens fill the bodies. ``session`` defaults to a
    ``requests.Session`` that ignores proxy settings. Raises ConfigurationError for a URL
    off loopback or a bad setting. Counters: :meth:`snapshot`.
    """

    def __init__(self, layer: Any, hook_url: str, *, signature_key: Optional[str] = None,
                 interval_s: float = 30.0, style: str = "online-json",
                 number_of_failures: int = 5, timeout_s: float = 10.0,
                 per_layer: bool = False, notify_layers: Sequence[int] = (0,),
                 name: str = "fme-ai-resilience", org_id: str = "StandInOrg0000001",
                 seed: int = 0, from_gen: Optional[int] = None,
                 session: Optional[requests.Session] = None) -> None:
        self.layer = layer
        self.hook_url = _loopback("hook_url", hook_url)
        _loopback("layer.service_url", layer.service_url)
        if signature_key is not None and not signature_key:
            raise ConfigurationError("signature_key", signature_key, "must not be empty")
        self.signature_key = signature_key
        self.interval_s = finite("interval_s", interval_s, above=0)
        if style not in WEBHOOK_STYLES:
            raise ConfigurationError("style", style, f"must be one of {list(WEBHOOK_STYLES)}")
        self.style = style
        self.number_of_failures = count("number_of_failures", number_of_failures, minimum=1)
        self.timeout_s = finite("timeout_s", timeout_s, above=0)
        self.per_layer = bool(per_layer)
        self.notify_layers = tuple(count("notify_layers", i) for i in notify_layers)
        if not self.notify_layers:
            raise ConfigurationError("notify_layers", notify_layers, "must name a layer")
        self.name = checked_name("name", name)
        self.org_id = org_id
        self.from_gen = None if from_gen is None else count("from_gen", from_gen)
        self._rng = random.Random(f"layer-webhook:{seed}")
        self.webhook_id = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        if session is None:
            session = requests.Session()
            session.trust_env = False
        self._session = session
        self._lock = threading.Lock()        # the counters
        self._sending = threading.Lock()     # one batch at a time
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._registered = False
        self._deactivated = False
        self._failures = 0
        self._last: Optional[int] = self.from_gen
        self._deliveries: List[DeliveryRow] = []

    # --- registration ----------------------------------------------------------------------

    def register(self) -> bool:
        """Send the challenge (with a key) and record whether it was answered right."""
        ok = True
        if self.signature_key is not None:
            token = self._rng.getrandbits(128).to_bytes(16, "big").hex()
            joiner = "&" if urlsplit(self.hook_url).query else "?"
            try:
                answer = self._session.get(
                    self.hook_url + joiner + urlencode({"crc_token": token}),
                    timeout=self.layer.real_seconds(self.timeout_s), allow_redirects=False,
                    headers={"User-Agent": _USER_AGENT})
                body = answer.json() if answer.status_code == 200 else None
                ok = (isinstance(body, dict) and body.get("response_token")
                      == signature(self.signature_key, token.encode("utf-8")))
            except (requests.RequestException, ValueError):
                ok = False
        with self._lock:
            self._registered = ok
            if ok and self._last is None:
                self._last = self.layer.changes.current()
        return ok

    # --- sending ---------------------------------------------------------------------------

    def send_due(self) -> Optional[bool]:
        """Notify the changes since the last notified generation, if any: None when nothing
        was sent (no change, not registered, deactivated), else whether every delivery of the
        batch was accepted (only then does the notified generation move)."""
        with self._sending:
            with self._lock:
                if not self._registered or self._deactivated or self._last is None:
                    return None
                low = self._last
            high = self.layer.changes.current()
            if high <= low:
                return None
            events = self.layer.changes.events(low, high)
            layers = self.notify_layers if self.per_layer else (0,)
            ok = True
            for layer_id in layers:
                status = self._post(*self._body(layer_id, low, high, events))
                accepted = status is not None and 200 <= status < 300
                with self._lock:
                    self._deliveries.append((self.layer.clock.monotonic(), status, (low, high)))
                    self._failures = 0 if accepted else self._failures + 1
                    if self._failures >= self.number_of_failures:
                        self._deactivated = True
                    ok = ok and accepted
                    if self._deactivated:
                        break
            if ok:
                with self._lock:
                    self._last = high
            return ok

    def changes_url(self, low: int, high: int) -> str:
        """The ``extractChanges`` URL of ``(low, high]``, before percent-encoding."""
        return (f"{self.layer.service_url}/extractChanges?serverGens=[{low},{high}]"
                "&async=true&returnUpdates=true&returnDeletes=false&returnAttachments=false"
                "&layers=[0]")

    def _body(self, layer_id: int, low: int, high: int,
              events: List[str]) -> Tuple[bytes, str]:
        """The body of one notification and its content type."""
        encoded = _ESCAPE.sub(lambda m: m.group(0).lower(),
                              quote(self.changes_url(low, high), safe=""))
        now_ms = int(self.layer.clock.now() * 1000)
        if self.style == "enterprise":
            note: Any = {"serviceType": "FeatureServer", "id": self.webhook_id,
                         "name": self.name, "folderName": "",
                         "serviceName": self.layer.service_name, "changesUrl": encoded,
                         "events": [{"eventType": e, "when": now_ms} for e in events]}
        else:
            note = [{"name": self.name, "layerId": layer_id, "orgId": self.org_id,
                     "serviceName": self.layer.service_name, "lastUpdatedTime": now_ms,
                     "changesUrl": encoded, "events": list(events)}]
        text = json.dumps(note, separators=(",", ":"))
        if self.style == "online-form":
            return ("payload=" + quote_plus(text)).encode("ascii"), \
                "application/x-www-form-urlencoded"
        return text.encode("utf-8"), "application/json"

    def _post(self, body: bytes, content_type: str) -> Optional[int]:
        headers = {"Content-Type": content_type, "User-Agent": _USER_AGENT}
        if self.signature_key is not None:
            headers[SIGNATURE_HEADER] = signature(self.signature_key, body)
        try:
            answer = self._session.post(self.hook_url, data=body, headers=headers,
                                        timeout=self.layer.real_seconds(self.timeout_s),
                                        allow_redirects=False)
            answer.close()
            return answer.status_code
        except requests.RequestException as exc:
            log.debug("layer webhook delivery to %s failed: %s", self.hook_url, exc)
            return None

    # --- the schedule ----------------------------------------------------------------------

    def start(self) -> "LayerWebhookSender":
        """Run :meth:`send_due` every interval on a daemon thread (a no-op when running)."""
        with self._lock:
            if self._thread is not None:
                return self
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"{THREAD_PREFIX}layer-webhook")
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._until_next_tick()):
            try:
                self.send_due()
            except Exception:  # noqa: BLE001 (a schedule keeps running, as ArcGIS's does)
                log.exception("the layer webhook sender failed")

    def _until_next_tick(self) -> float:
        """Real seconds to the schedule's next tick, a whole number of intervals from the
        layer's schedule start (as ArcGIS keeps its own schedule, whenever a receiver came up
        and however long the last batch took: every subject is notified at the same times)."""
        now = self.layer.schedule_time()
        tick = math.floor(now / self.interval_s + 1e-9) * self.interval_s + self.interval_s
        return self.layer.real_seconds(tick - now)

    def stop(self) -> None:
        """Stop the schedule and join its thread (a delivery under way finishes first)."""
        with self._lock:
            thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join(_JOIN_S + self.layer.real_seconds(self.timeout_s))
        self._session.close()

    def __enter__(self) -> "LayerWebhookSender":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- counters --------------------------------------------------------------------------

    def snapshot(self) -> Dict[str, Any]:
        """Its ``notificationStatus``: ``deliveries`` (each ``(monotonic s, status or None,
        (low, high))``, in order), ``failures_in_a_row``, ``deactivated``, ``registered``,
        ``notified_gen`` (the generation notified up to; None before registration)."""
        with self._lock:
            return {"deliveries": list(self._deliveries), "failures_in_a_row": self._failures,
                    "deactivated": self._deactivated, "registered": self._registered,
                    "notified_gen": self._last}

    def __repr__(self) -> str:
        return f"LayerWebhookSender({self.hook_url!r}, style={self.style!r})"
