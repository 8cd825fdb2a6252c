"""Every outbound call of ``process`` stops at its budget, whatever the server does: Vision AI,
ArcGIS applyEdits and the OAuth token call trickling their headers, a Vision AI reading the
upload slowly. The hold is measured at the hostile server."""
from __future__ import annotations

import time

import pytest

from fme_ai_resilience.store import open_store
from fme_ai_resilience.testing import installed_fmetools

from helpers.hostile import SLOW_READ, TRICKLE, Front
from helpers.one_task import OneTask


BUDGET = {"timeouts.connect_s": "0.5", "timeouts.tls_s": "0.5", "timeouts.ttfb_s": "1.0",
          "timeouts.body_s": "0.5", "arcgis.request_timeout_s": "1.0"}
VISION_LIMIT_S = 0.5 + 1.0      # connect + TTFB
ARCGIS_LIMIT_S = 1.0 + 1.0      # (connect, read) of arcgis.request_timeout_s
MARGIN_S = 1.0


@pytest.fixture
def world(tmp_path, monkeypatch):
    for name in ("FAIR_DB_URL", "FAIR_LOG_FORMAT", "FAIR_ARCGIS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    one = OneTask(tmp_path)
    yield one
    one.close()


def held_within(front, limit_s):
    front.wait_held()
    assert front.held, "the hostile server saw no call"
    assert all(seconds <= limit_s + MARGIN_S for _, seconds in front.held), front.held


def test_a_trickling_vision_service_is_held_no_longer_than_its_budget(world):
    """Guarantee: a Vision AI trickling its headers holds ``process`` no longer than connect
    + TTFB per call."""
    with Front(lambda method, path: TRICKLE) as vision:
        world.register(world.layer.url, {**BUDGET, "vision.endpoint": vision.url + "/analyze"})
        world.process()
    held_within(vision, VISION_LIMIT_S)


def test_a_trickling_applyedits_is_held_no_longer_than_its_budget(world):
    """Guarantee: an ArcGIS layer trickling its applyEdits answer is given up at the (connect,
    read) limit of arcgis.request_timeout_s."""
    rule = (lambda method, path: TRICKLE if "applyEdits" in path else None)
    with Front(rule, upstream_port=int(world.layer.url.rsplit(":", 1)[1])) as layer:
        world.register(layer.url, BUDGET)
        world.process()
    assert world.vision.snapshot()["total"] >= 1, "the photo was never analysed"
    held_within(layer, ARCGIS_LIMIT_S)


def test_a_trickling_oauth_token_call_is_held_no_longer_than_its_budget(world, monkeypatch):
    """Guarantee: a portal trickling its OAuth token answer is given up at the (connect, read)
    limit of arcgis.request_timeout_s."""
    monkeypatch.setenv("FAIR_ARCGIS_CLIENT_ID", "app-id")
    monkeypatch.setenv("FAIR_ARCGIS_CLIENT_SECRET", "app-secret-77ab")
    with Front(lambda method, path: TRICKLE) as portal:
        world.register(world.layer.url, {**BUDGET, "arcgis.portal_url": portal.url})
        world.process()
    assert any("/oauth2/token" in path for path, _ in portal.held), portal.held
    held_within(portal, ARCGIS_LIMIT_S)


def test_a_slow_reading_vision_service_fails_as_ttfb_within_the_budget(tmp_path, monkeypatch):
    """Guarantee: a Vision AI reading a 4 MiB upload slowly fails as TTFB_TIMEOUT (the upload
    counts in TTFB) at about connect + TTFB, never as a connection error at the connect
    timeout."""
    monkeypatch.delenv("FAIR_DB_URL", raising=False)
    world = OneTask(tmp_path, photo_bytes=b"\xff\xd8\xff\xe0" + b"\x11" * (4 * 1024 * 1024))
    try:
        with Front(lambda method, path: SLOW_READ, bytes_per_s=256 * 1024) as vision:
            world.register(world.layer.url, {**BUDGET, "timeouts.ttfb_s": "2.0",
                                             "download.max_photo_bytes": str(8 * 1024 * 1024),
                                             "vision.endpoint": vision.url + "/analyze"})
            took = world.process()
        assert vision.seen, "the Vision AI saw no call"
        # two attempts (retry.task_attempts), each at most connect + TTFB
        assert took <= 2 * (0.5 + 2.0) + 2 * MARGIN_S, took
        with open_store(world.db) as store:
            classes = {s.error_class for s in store.call_samples(since=time.time() - 600)
                       if s.service != "arcgis"}
        assert "TTFB_TIMEOUT" in classes and "CONNECTION_ERROR" not in classes, classes
    finally:
        world.close()


def test_inside_fme_calls_follow_fmes_proxy_and_keep_their_budget(world):
    """Guarantee: inside FME (fmetools importable) the calls go through FMERequestsSession and
    the proxy FME is configured with, and a trickling answer through that proxy still stops
    at connect + TTFB."""
    upstream = int(world.layer.url.rsplit(":", 1)[1])
    rule = (lambda method, path: TRICKLE if path.startswith("/analyze") else None)
    with Front(rule, upstream_port=upstream) as proxy, \
            installed_fmetools(proxies={"http": proxy.url}) as session_class:
        world.register(world.layer.url, {**BUDGET,
                                         "vision.endpoint": "http://vision.fme-proxy.test/analyze"})
        world.process()
        assert session_class.made, "no FMERequestsSession was made"
    assert any(b"vision.fme-proxy.test" in head for head in proxy.seen), proxy.seen
    held_within(proxy, VISION_LIMIT_S)
