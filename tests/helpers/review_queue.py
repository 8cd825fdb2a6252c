"""A ledger with one photo waiting in the review queue, for the tests that resolve it."""
from __future__ import annotations

import random
import time

import requests
import responses

from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.services.processing.processor import Processor, VisionRoute
from fme_ai_resilience.services.processing.sinks import PostgresTableSink
from fme_ai_resilience.services.resilience.degrade import Degradation
from fme_ai_resilience.services.vision import VisionClient
from fme_ai_resilience.store import open_store

from helpers.processing import SKIP_BENCHES, VISION, Photos, register, submission


def review_queue(db):
    """A ledger at ``db`` whose bench photo ``b1`` waits in the review queue (skipped by the
    deployment's policy at L3)."""
    clock = FakeClock(time.time())
    with open_store(db, init_schema=True) as store:
        register(store, submission("b1", photo="b1", asset_type="bench"), now=clock.now())
        Degradation(store=store, clock=clock).set_override("L3")
        client = VisionClient(VISION, "generic", "sk-test-0123456789abcdef",
                              session=requests.Session(), clock=clock, rng=random.Random(1))
        with responses.RequestsMock(assert_all_requests_are_fired=False):
            Processor(Settings.from_mapping(SKIP_BENCHES), VisionRoute.of(client, "vision"),
                      PostgresTableSink(), store=store, download=Photos(), clock=clock,
                      rng=random.Random(2)).run_batch()
        store.set_config({"writeback.sink": "table"}, now=clock.now())
        assert store.review_item("b1") is not None
