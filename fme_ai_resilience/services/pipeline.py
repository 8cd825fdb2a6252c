"""The processor and the compensator as the settings describe them.

:func:`build_processor` and :func:`build_compensator` are what the ``process`` and
``compensate`` commands and the PythonCaller callers run, so WS-02 outside FME is the same code
as inside it. From the settings they make the Vision AI clients (the primary model and, with
``vision.fallback_endpoint``, the lighter one the ladder switches to), the ArcGIS token
provider, one :class:`~.writeback.Layers` whose every request goes into ``ai_call_log``, the
sink ``writeback.sink`` names, the photo lister for webhooks without an attachment list (and
for ArcGIS layer webhooks' notifications, through ``extractChanges``) and
the guarded downloader's policy.
"""
from __future__ import annotations

import random
from typing import Optional

import requests

from ..core.clock import Clock, SystemClock
from ..core.errors import ConfigurationError
from ..core.config.readiness import require_workable
from ..core.config.settings import Settings
from ..store.base import Store
from .compensation.compensator import Compensator
from .arcgis.credentials import TokenProvider, token_provider_from_settings
from .processing.processor import Processor, VisionRoute
from .http.sessions import session_for
from .processing.sinks import CollectingSink, PostgresTableSink, Sink
from .vision import Credentials, RequestOptions, VisionClient
from .vision.builders import DEFAULT_PROMPT
from .processing.writeback import FeatureLayerSink, Layers, trusted_layers
from .intake.arcgis_webhook import photo_lister

__all__ = ["build_processor", "build_compensator", "build_sink", "vision_routes",
           "layers_for"]


def vision_routes(settings: Settings, *, session: Optional[requests.Session] = None,
                  clock: Optional[Clock] = None, rng: Optional[random.Random] = None
                  ) -> "tuple[VisionRoute, Optional[VisionRoute]]":
    """The primary route and the fallback one (None without ``vision.fallback_endpoint``)."""
    v = settings.vision
    if not v.endpoint:
        raise ConfigurationError("vision.endpoint", "", "the processor needs the Vision AI "
                                 "endpoint (FAIR_VISION_ENDPOINT or the published parameter)")

    def client(endpoint: str, model: str) -> VisionClient:
        options = RequestOptions(model=model, prompt=v.prompt or DEFAULT_PROMPT,
                                 conditions=settings.validation.conditions)
        return VisionClient(endpoint, v.provider, Credentials(api_key=v.key or None),
                            settings.timeouts, session=session, clock=clock,
                            max_response_bytes=v.max_response_bytes, options=options, rng=rng)

    primary = VisionRoute.of(client(v.endpoint, v.model), v.service)
    fallback = None
    if v.fallback_endpoint:
        fallback = VisionRoute.of(client(v.fallback_endpoint, v.fallback_model or v.model),
                                  v.fallback_service)
    return primary, fallback


def layers_for(settings: Settings, *, store: Store, token: Optional[TokenProvider],
               session: Optional[requests.Session] = None,
               clock: Optional[Clock] = None) -> Layers:
    """The feature layers of one process: one token, one session, every call logged."""
    return Layers(trusted=trusted_layers(settings), token=token, session=session, clock=clock,
                  on_call=store.record_call, timeout_s=settings.arcgis.request_timeout_s,
                  no_services=not settings.intake.feature_services)


def _sink(settings: Settings, layers: Layers, sink: Optional[Sink]) -> Sink:
    if sink is not None:
        return sink
    name = settings.writeback.sink
    if name == "feature_layer":
        return FeatureLayerSink(settings.writeback, layers)
    if name == "table":
        return PostgresTableSink()
    if name == "collect":
        return CollectingSink()
    raise ConfigurationError("writeback.sink", name, "is not a known sink")


def build_sink(settings: Settings, *, store: Store, session: Optional[requests.Session] = None,
               clock: Optional[Clock] = None) -> Sink:
    """The sink ``writeback.sink`` names, with the ArcGIS credential the settings name (for
    the review queue's verdicts, written where the processor writes its conclusions)."""
    clock = clock or SystemClock()
    session = session_for(session=session, clock=clock)
    provider = token_provider_from_settings(settings, session=session)
    return _sink(settings, layers_for(settings, store=store, token=provider, session=session,
                                      clock=clock), None)


def build_processor(settings: Settings, *, store: Store, sink: Optional[Sink] = None,
                    token: Optional[TokenProvider] = None, owner: str = "processor",
                    job_started: Optional[float] = None,
                    session: Optional[requests.Session] = None,
                    clock: Optional[Clock] = None,
                    rng: Optional[random.Random] = None) -> Processor:
    """The WS-02 processor the settings describe.

    ``sink`` overrides ``writeback.sink`` (the FME adapter passes its collecting sink);
    ``token`` overrides the provider the ``arcgis.*`` settings name. Raises
    ConfigurationError naming the setting for settings that cannot work: no Vision AI
    endpoint, no photo host, no layer for the ``feature_layer`` sink (``require_workable``
    of :mod:`fme_ai_resilience.core.config.readiness`).
    """
    clock = clock or SystemClock()
    session = session_for(session=session, clock=clock)
    provider = token if token is not None else token_provider_from_settings(settings,
                                                                          session=session)
    layers = layers_for(settings, store=store, token=provider, session=session, clock=clock)
    primary, fallback = vision_routes(settings, session=session, clock=clock, rng=rng)
    require_workable(settings, sink=None if sink is None else getattr(sink, "name", "custom"))
    return Processor(settings, primary, _sink(settings, layers, sink), store=store,
                     fallback=fallback,
                     token=None if provider is None else (lambda now: provider.token(now=now)),
                     lister=photo_lister(layers, clock=clock,
                                         wait_s=settings.arcgis.changes_wait_s,
                                         poll_s=settings.arcgis.changes_poll_s), owner=owner,
                     job_started=job_started,
                     clock=clock, rng=rng)


def build_compensator(settings: Settings, *, store: Store, layer_url: Optional[str] = None,
                      token: Optional[TokenProvider] = None,
                      session: Optional[requests.Session] = None,
                      clock: Optional[Clock] = None) -> Compensator:
    """The WS-03 compensator; it reconciles against ``layer_url`` (named by the operator, so
    trusted; default ``writeback.layer_url``; none: no reconciliation)."""
    clock = clock or SystemClock()
    url = layer_url or settings.writeback.layer_url
    layer = None
    if url:
        session = session_for(session=session, clock=clock)
        provider = token if token is not None else token_provider_from_settings(
            settings, session=session)
        layer = Layers(trusted=lambda u: u == url, token=provider, session=session,
                       clock=clock, on_call=store.record_call,
                       timeout_s=settings.arcgis.request_timeout_s).get(url)
    return Compensator(settings, store=store, layer=layer, clock=clock)
