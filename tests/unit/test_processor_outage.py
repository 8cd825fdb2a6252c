"""An outage of the Vision AI service on default settings: the breaker bounds the calls into
it, no photo spends its attempt budget on it, and the fleet recovers within one probe
interval of the service's return."""
from __future__ import annotations

import json
import random

import pytest
import requests
import responses

from fme_ai_resilience.core.resilience.breaker import CircuitState, outage_probe_bound
from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.intake.keys import trace_id_for
from fme_ai_resilience.core.ledger import Status
from fme_ai_resilience.services.processing.processor import Processor, VisionRoute
from fme_ai_resilience.services.processing.sinks import CollectingSink
from fme_ai_resilience.services.vision import Photo, VisionClient
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission

VISION = "http://vision.test/analyze"
T0 = 1_790_000_000.0
ANSWER = {"condition": "damaged", "confidence": 0.9, "labels": [], "model_version": "m-1"}


def _engine(settings, ledger, clock, n):
    client = VisionClient(VISION, "generic", "sk-test-0123456789abcdef",
                          session=requests.Session(), clock=clock, rng=random.Random(n))
    return Processor(settings, VisionRoute.of(client, "vision"), CollectingSink(),
                     store=ledger, download=photo, clock=clock, rng=random.Random(10 + n),
                     owner=f"e{n}")


def photo(url, token):
    return Photo(b"\xff\xd8\xff" + url.encode(), "image/jpeg", url)


@pytest.mark.parametrize("outage_s", [7.0, 120.0, 600.0])
@responses.activate
def test_an_outage_spends_no_attempt_budget_and_the_fleet_recovers_within_a_probe_interval(
        tmp_path, outage_s):
    """Thirty photos, three engines on default settings, the service answering 503 to
    everything for ``outage_s``: no task dies, every photo gets one usable answer, the first
    comes within one probe interval of the return, and the calls after the trip stay within
    the probe bound."""
    clock = FakeClock(T0)
    log = []

    def vision(request):
        down = clock.now() < T0 + outage_s
        log.append((clock.now(), down))
        if down:
            return 503, {}, "unavailable"
        return 200, {"Content-Type": "application/json"}, json.dumps(ANSWER)

    responses.add_callback(responses.POST, VISION, callback=vision)
    settings = Settings()
    with open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True) as ledger:
        for i in range(30):
            key = f"k{i}"
            ledger.register(Submission(idempotency_key=key, feature_global_id=f"F-{key}",
                                       trace_id=trace_id_for(key),
                                       attachment_url=f"https://photos.test/{i}",
                                       attachment_global_id=f"A-{key}", asset_type="hydrant"),
                            1000, now=T0)
        engines = [_engine(settings, ledger, clock, n) for n in range(3)]
        keys = [f"k{i}" for i in range(30)]
        while clock.now() < T0 + outage_s + 300:
            for engine in engines:
                engine.run_batch()
            statuses = {ledger.get(k).status for k in keys}
            if statuses == {Status.SUCCEEDED}:
                break
            assert Status.DEAD not in statuses, [
                (k, ledger.get(k).failure_class, ledger.get(k).last_error) for k in keys
                if ledger.get(k).status is Status.DEAD][:3]
            clock.advance(0.5)
        records = [ledger.get(k) for k in keys]
    assert {r.status for r in records} == {Status.SUCCEEDED}
    ok = [at for at, down in log if not down]
    assert len(ok) == 30                                   # one usable answer per photo
    assert ok[0] - (T0 + outage_s) <= settings.breaker.cooldown_max_s + 1.0
    failed = [at for at, down in log if down]
    if len(failed) >= settings.breaker.min_calls:       # the circuit opened at the last
        tripped = failed[settings.breaker.min_calls - 1]
        after_trip = [at for at in failed if at > tripped + settings.breaker.cache_ttl_s]
        assert len(after_trip) <= outage_probe_bound(settings.breaker, outage_s, facts=30)



def _run_until_settled(settings, ledger, clock, keys, *, limit_s):
    """Register a photo per key, oldest first, and run three engines until every task is
    SUCCEEDED or DEAD (or ``limit_s`` passed)."""
    for n, key in enumerate(keys):
        ledger.register(Submission(idempotency_key=key, feature_global_id=f"F-{key}",
                                   trace_id=trace_id_for(key),
                                   attachment_url=f"https://photos.test/{key}",
                                   attachment_global_id=f"A-{key}"), 1000, now=T0 + n / 100)
    engines = [_engine(settings, ledger, clock, n) for n in range(3)]
    while clock.now() < T0 + limit_s and not {ledger.get(k).status for k in keys} <= {
            Status.DEAD, Status.SUCCEEDED}:
        for engine in engines:
            engine.run_batch()
        clock.advance(0.5)


@responses.activate
def test_a_photo_the_service_never_answers_cannot_keep_the_circuit_open_for_ever(tmp_path):
    """An outage opens the circuit; the service comes back for every photo but the oldest,
    which it answers 500 for ever. Its failed probe waits behind the next probe, so that
    probe is another photo's and closes the circuit; every other photo is analysed, and the
    one photo, its latest failures all its own, spends its attempts and ends a dead letter
    instead of holding the circuit open for ever."""
    clock = FakeClock(T0)
    outage_s = 30.0

    def vision(request):
        if clock.now() < T0 + outage_s or b"poison" in request.body:
            return 500, {}, "cannot"
        return 200, {"Content-Type": "application/json"}, json.dumps(ANSWER)

    responses.add_callback(responses.POST, VISION, callback=vision)
    settings = Settings()
    with open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True) as ledger:
        keys = ["poison"] + [f"k{i}" for i in range(29)]
        _run_until_settled(settings, ledger, clock, keys, limit_s=1800)
        assert {ledger.get(k).status for k in keys[1:]} == {Status.SUCCEEDED}
        assert ledger.get("poison").status is Status.DEAD


@responses.activate
def test_two_photos_the_service_never_answers_cannot_keep_each_other_waiting(tmp_path):
    """After an outage the service answers every photo but two: one it answers 500 for ever,
    one out of schema for ever (that photo's drift, not the model's). Their failed probes
    alternate, so neither one's latest failures are all its own; yet the one photo's drift
    is no outage of the other's, and no failure that only those two photos meet is the
    service's: both spend their attempts and end dead letters with their causes, and every
    other photo is analysed (the refused photos line up behind each probe in random order,
    so neither of the two stands first in every round)."""
    clock = FakeClock(T0)
    outage_s = 30.0

    def vision(request):
        if clock.now() < T0 + outage_s or b"poison-500" in request.body:
            return 500, {}, "cannot"
        if b"poison-drift" in request.body:
            return 200, {"Content-Type": "application/json"}, json.dumps({"state": "?"})
        return 200, {"Content-Type": "application/json"}, json.dumps(ANSWER)

    responses.add_callback(responses.POST, VISION, callback=vision)
    settings = Settings()
    with open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True) as ledger:
        keys = ["poison-500", "poison-drift"] + [f"k{i}" for i in range(28)]
        _run_until_settled(settings, ledger, clock, keys, limit_s=3600)
        assert {ledger.get(k).status for k in keys[2:]} == {Status.SUCCEEDED}, [
            (k, r.status, r.error_class, r.last_error, r.attempt_count, ledger.breaker_list())
            for k, r in ((k, ledger.get(k)) for k in keys) if r.status is not Status.SUCCEEDED][:4]
        assert [ledger.get(k).status for k in keys[:2]] == [Status.DEAD, Status.DEAD]
        drifted = ledger.get("poison-drift")    # its attempts went on the outage and the drift
        assert drifted.failure_class.value in ("FORMAT", "BUDGET")
        assert "schema" in drifted.last_error


@responses.activate
def test_the_photos_an_open_circuit_turns_away_wait_as_the_breaker_settings_say(tmp_path):
    """A dead service, ``breaker.line_s`` 4 and ``behind_s`` 6 (not the defaults, 1 and 1.5):
    the photo whose failure opened the circuit waits ``behind_s`` past the first probe time,
    and each photo the open circuit turned away at a random place within ``line_s`` of it.
    Both are settings, so a time-compressed run scales them with every other time."""
    clock = FakeClock(T0)
    responses.add(responses.POST, VISION, status=503, body="unavailable")
    settings = Settings().with_values({"breaker.line_s": "4", "breaker.behind_s": "6"})
    with open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True) as ledger:
        keys = [f"k{i}" for i in range(12)]
        for key in keys:
            ledger.register(Submission(idempotency_key=key, feature_global_id=f"F-{key}",
                                       trace_id=trace_id_for(key),
                                       attachment_url=f"https://photos.test/{key}",
                                       attachment_global_id=f"A-{key}", asset_type="hydrant"),
                            1000, now=T0)
        _engine(settings, ledger, clock, 0).run_batch()
        circuit = ledger.breaker_get("vision", now=clock.now())
        deferred = [ledger.get(k).next_attempt_at - circuit.open_until for k in keys
                    if ledger.get(k).status is Status.DEFERRED]
    assert circuit.state is CircuitState.OPEN
    opener = [w for w in deferred if w == pytest.approx(6.0)]
    turned_away = [w for w in deferred if w != pytest.approx(6.0)]
    assert len(opener) == 1 and len(turned_away) >= 5, deferred
    assert all(0.0 <= w <= 4.0 for w in turned_away), deferred
    assert any(w > 1.0 for w in turned_away), deferred      # beyond the default line
