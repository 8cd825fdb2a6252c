"""The processor on a real SQLite ledger, a Vision service behind ``responses`` and a fake clock:
what the processor's unit tests share (``ledger`` and ``clock`` are fixtures)."""
from __future__ import annotations

import random

import pytest
import requests

from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.core.intake.keys import trace_id_for
from fme_ai_resilience.core.intake.submission import Submission
from fme_ai_resilience.services.processing.processor import Processor, VisionRoute
from fme_ai_resilience.services.processing.sinks import CollectingSink
from fme_ai_resilience.services.vision import Photo, VisionClient
from fme_ai_resilience.store import open_store

VISION = "http://vision.test/analyze"
T0 = 1_790_000_000.0
#: Benches are not critical and are skipped when degraded, by the deployment's own policy.
SKIP_BENCHES = {"degrade.critical_types": "hydrant", "degrade.non_critical_types": "bench",
                "degrade.when_degraded": "skip"}


def answer(condition="damaged", confidence=0.9):
    return {"condition": condition, "confidence": confidence,
            "labels": [{"name": "rust", "confidence": confidence}], "model_version": "m-1"}


class Photos:
    """A downloader that serves fixed bytes per URL and counts downloads."""

    def __init__(self, **by_url):
        self.by_url = by_url
        self.calls = []

    def __call__(self, url, token):
        self.calls.append((url, token))
        data = self.by_url.get(url, b"\xff\xd8\xff" + url.encode())
        if isinstance(data, Exception):
            raise data
        return Photo(data, "image/jpeg", url)


def submission(key, photo="p", asset_type="hydrant", **extra):
    return Submission(idempotency_key=key, feature_global_id=f"F-{key}",
                      trace_id=trace_id_for(key), attachment_url=f"https://photos.test/{photo}",
                      attachment_global_id=f"A-{key}", asset_type=asset_type, **extra)


@pytest.fixture
def ledger(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True)
    yield store
    store.close()


def make(ledger, clock, *, settings=None, photos=None, sink=None, **kwargs):
    settings = settings or Settings()
    client = VisionClient(VISION, "generic", "sk-test-0123456789abcdef",
                          session=requests.Session(), clock=clock, rng=random.Random(1))
    return Processor(settings, VisionRoute.of(client, "vision"), sink or CollectingSink(),
                     store=ledger, download=photos or Photos(), clock=clock,
                     rng=random.Random(2), **kwargs)


def register(ledger, *subs, now=T0):
    for s in subs:
        ledger.register(s, 1000, now=now)


@pytest.fixture
def clock():
    return FakeClock(T0)
