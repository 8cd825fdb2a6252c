"""The layer's webhook as each subject of a layer-webhook scenario meets it.

In a scenario with :class:`~fme_ai_resilience.drill.scenarios.LayerHooks` no app webhook is
delivered: the features reach the layer at the plan's times and a
:class:`~fme_ai_resilience.drill.standins.LayerWebhookSender` on the subject's
:class:`~fme_ai_resilience.drill.world.World` notifies its receiver of the layer's changes
every ``interval_s`` (production seconds, scaled as every time of the drill), one
notification per layer of the form, from the generation before the plan's features on.

- :class:`LayerFeed` is that sender for one receiver: the library's gateway, which holds the
  signature key (:data:`SIGNATURE_KEY`) and answers the challenge at registration; every
  accepted delivery kicks the engines, as WS-01's Automation submits a WS-02 job.
- :class:`TriggerFeed` is the baselines' receiver and sender: FME Flow's webhook trigger
  (:class:`~fme_ai_resilience.drill.baselines.trigger.WebhookTrigger`), which can answer no
  challenge, with the webhook registered without a signature key; each delivery queues one
  notification job (:class:`~fme_ai_resilience.drill.baselines.Feed`).

Each says when the deliveries covering every arrival of the plan had all been made
(:meth:`LayerFeed.last_at`): the moment a subject's last delivery is counted from.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional

import requests

from ..core.errors import ConfigurationError
from .baselines.trigger import WebhookTrigger
from .standins import LayerWebhookSender
from .timescale import TimeScale
from .world import World

__all__ = ["LayerFeed", "TriggerFeed", "SIGNATURE_KEY", "DELIVERY_TIMEOUT_S", "HOOK_PATH"]

#: The ``signatureKey`` the library's webhook is registered with (its gateway holds it).
SIGNATURE_KEY = "drill-layer-webhook-signature-key"
#: How long the layer waits for an answer to a delivery (production s; ArcGIS's default).
DELIVERY_TIMEOUT_S = 10.0
#: The path of a receiver the webhook is registered at.
HOOK_PATH = "/arcgis-layer-hook"


class _Kicking(requests.Session):
    """The sender's session: ``on_accepted`` after each delivery answered 202."""

    def __init__(self, on_accepted: Callable[[], None]) -> None:
        super().__init__()
        self.trust_env = False
        self._on_accepted = on_accepted

    def post(self, url: Any, data: Any = None, json: Any = None,
             **kwargs: Any) -> requests.Response:
        answer = super().post(url, data=data, json=json, **kwargs)
        if answer.status_code == 202:
            self._on_accepted()
        return answer


class LayerFeed:
    """``world``'s layer notifying ``hook_url`` as its scenario's ``LayerHooks`` say.

    ``signature_key`` (None: registered without one); ``on_accepted`` is called after each
    delivery answered 202. Raises ConfigurationError for a scenario without layer hooks.
    """

    def __init__(self, world: World, hook_url: str, *, signature_key: Optional[str] = None,
                 on_accepted: Optional[Callable[[], None]] = None) -> None:
        hooks = world.scenario.layer_hooks
        if hooks is None:
            raise ConfigurationError("scenario", world.scenario.name,
                                     "has no layer webhook to deliver")
        scale = TimeScale(world.time_scale)
        self.world = world
        self.sender = LayerWebhookSender(
            world.layer, hook_url, signature_key=signature_key, interval_s=hooks.interval_s,
            style=hooks.style, per_layer=len(hooks.notify_layers) > 1,
            notify_layers=hooks.notify_layers, seed=world.seed, from_gen=world.base_gen,
            # the one time scale's floor for a timeout, as every subject's timeouts get
            timeout_s=scale.production(scale.real(DELIVERY_TIMEOUT_S, timeout=True)),
            session=_Kicking(on_accepted) if on_accepted is not None else None)
        self._target: Optional[int] = None
        self._done_at: Optional[float] = None
        self._closed = False

    def open(self) -> bool:
        """Register (the challenge, with a key) and start the schedule; whether the
        registration held (a sender whose challenge failed never sends)."""
        registered = self.sender.register()
        self.sender.start()
        return registered

    def last_at(self) -> Optional[float]:
        """When (monotonic s) the deliveries covering every arrival had all been made: the
        first moment seen with the notified generation at or past the layer's generation once
        the last feature arrived (at once when the sender is deactivated or unregistered:
        nothing more will come); None before."""
        if self._done_at is not None:
            return self._done_at
        state = self.sender.snapshot()
        if state["deactivated"] or not state["registered"]:
            self._done_at = time.monotonic()
            return self._done_at
        layer = self.world.layer
        if self._target is None:
            if layer.schedule_time() < self.world.last_arrival_s:
                return None
            self._target = layer.changes.current()
        if (state["notified_gen"] or 0) >= self._target:
            self._done_at = time.monotonic()
        return self._done_at

    def wait(self, deadline: float) -> Optional[float]:
        """Wait until :meth:`last_at` is known or ``deadline`` (monotonic s); it."""
        while self.last_at() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.last_at()

    def close(self) -> int:
        """Stop the schedule (a delivery under way finishes); the deliveries made."""
        if not self._closed:
            self._closed = True
            self.sender.stop()
        return len(self.sender.snapshot()["deliveries"])


class TriggerFeed:
    """A baseline's layer webhook: FME Flow's webhook trigger receiving ``world``'s layer's
    unsigned notifications (a :class:`~fme_ai_resilience.drill.baselines.Feed`)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.trigger: Optional[WebhookTrigger] = None
        self.feed: Optional[LayerFeed] = None

    def open(self, submit: Callable[[bytes], None]) -> None:
        self.trigger = WebhookTrigger(submit).start()
        self.feed = LayerFeed(self.world, self.trigger.url + HOOK_PATH)
        self.feed.open()

    def last_at(self) -> Optional[float]:
        return self.feed.last_at() if self.feed is not None else None

    def close(self) -> int:
        made = self.feed.close() if self.feed is not None else 0
        if self.trigger is not None:
            self.trigger.stop()
        return made
