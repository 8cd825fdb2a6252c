"""What a task's run works with: the Vision AI routes and the collaborators the processor hands
the stage runner (:class:`~fme_ai_resilience.services.processing.task_run.TaskRun`) in one frozen
value, so neither reads the other's insides.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping, Optional, Sequence

from ...core.clock import Clock
from ...core.resilience.degrade import Model
from ...core.ledger import Task
from ...core.resilience.retry import RetryPolicy
from ...core.config.settings import Settings
from ...store.base import Store
from ...core.intake.submission import Submission
from ..resilience.concurrency import FleetLimit
from ..resilience.retry_budget import FleetRetryGate
from ..resilience.pace import CallPacer
from ..resilience.breaker import CircuitBreaker
from ..resilience.degrade import Degradation
from .sinks import Sink
from ..vision import Photo, VisionClient

__all__ = ["Collaborators", "VisionRoute", "PhotoLister", "Downloader"]

#: How the processor lists the photos of a feature whose webhook carried no photo list:
#: ``(task) -> submissions`` (one per photo, keys from the GlobalIDs).
PhotoLister = Callable[[Task], Sequence[Submission]]
#: How the processor fetches a photo: ``(url, token) -> Photo``, raising DownloadError/UnsafeURL.
Downloader = Callable[[str, Optional[str]], Photo]



@dataclass(frozen=True)
class VisionRoute:
    """A model the processor may call: its client, its name in the breaker and the call log,
    and ``model`` (what makes two answers comparable: provider, endpoint, model, prompt)."""

    client: VisionClient
    service: str
    model: str

    @classmethod
    def of(cls, client: VisionClient, service: str) -> "VisionRoute":
        """A route whose model key is derived from the client's configuration."""
        options = client.options
        described = json.dumps({"provider": client.provider, "endpoint": client.endpoint,
                                "model": options.model, "prompt": options.prompt,
                                "conditions": list(options.conditions)}, sort_keys=True)
        return cls(client, service, hashlib.sha256(described.encode()).hexdigest()[:16])


@dataclass(frozen=True, init=False, repr=False)
class Collaborators:
    """What a task's run works with, handed over explicitly by the processor (keyword-only).

    ``routes`` maps each model to its route; ``breakers``, ``pacers`` and ``limits`` (the
    fleet's concurrency limits) are keyed by service; ``download`` fetches a photo; ``token`` gives the ArcGIS token (``(now) -> str``, None for
    public layers); ``lister`` lists the photos of a webhook that carried none.
    """

    settings: Settings
    store: Store
    clock: Clock
    rng: random.Random
    routes: Mapping[Model, VisionRoute]
    breakers: Mapping[str, CircuitBreaker]
    pacers: Mapping[str, CallPacer]
    limits: Mapping[str, FleetLimit]
    ladder: Degradation
    policy: RetryPolicy
    gate: FleetRetryGate
    sink: Sink
    download: Downloader
    token: Optional[Callable[[float], Optional[str]]]
    lister: Optional[PhotoLister]

    def __init__(self, *, settings: Settings, store: Store, clock: Clock, rng: random.Random,
                 routes: Mapping[Model, VisionRoute], breakers: Mapping[str, CircuitBreaker],
                 pacers: Mapping[str, CallPacer], limits: Mapping[str, FleetLimit],
                 ladder: Degradation, policy: RetryPolicy, gate: FleetRetryGate, sink: Sink,
                 download: Downloader,
                 token: Optional[Callable[[float], Optional[str]]] = None,
                 lister: Optional[PhotoLister] = None) -> None:
        values = dict(settings=settings, store=store, clock=clock, rng=rng,
                      routes=MappingProxyType(dict(routes)),
                      breakers=MappingProxyType(dict(breakers)),
                      pacers=MappingProxyType(dict(pacers)),
                      limits=MappingProxyType(dict(limits)), ladder=ladder, policy=policy,
                      gate=gate, sink=sink, download=download, token=token, lister=lister)
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return (f"Collaborators(routes={[r.service for r in self.routes.values()]!r}, "
                f"sink={self.sink.name!r})")
