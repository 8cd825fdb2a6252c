"""Model drift handled like an outage: answers out of schema about several photos open the
circuit within a few calls, the drifted model gets only probes, the alert is raised, and the
photos wait deferred, neither dead nor paid again, until the model is fixed; one odd photo is
still that photo's FORMAT dead letter."""
from __future__ import annotations

import json
import random

import requests
import responses

from fme_ai_resilience.breaker import CircuitState, outage_probe_bound
from fme_ai_resilience.clock import FakeClock
from fme_ai_resilience.errors import FailureClass
from fme_ai_resilience.keys import trace_id_for
from fme_ai_resilience.ledger import LayerStatus, Status
from fme_ai_resilience.services.observe import read_signals
from fme_ai_resilience.services.processor import Processor, VisionRoute
from fme_ai_resilience.services.sinks import CollectingSink
from fme_ai_resilience.services.vision import Photo, VisionClient
from fme_ai_resilience.settings import Settings
from fme_ai_resilience.store import open_store
from fme_ai_resilience.submission import Submission

VISION = "http://vision.test/analyze"
T0 = 1_790_000_000.0
ANSWER = {"condition": "damaged", "confidence": 0.9, "labels": [], "model_version": "m-1"}
DRIFTED = {"verdict": {"state": "damaged", "score": 90}, "model": "m-2"}


def photo(url, token):
    return Photo(b"\xff\xd8\xff" + url.encode(), "image/jpeg", url)


def fleet(tmp_path, clock, photos):
    ledger = open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True)
    for i in range(photos):
        key = f"k{i}"
        ledger.register(Submission(idempotency_key=key, feature_global_id=f"F-{key}",
                                   trace_id=trace_id_for(key),
                                   attachment_url=f"https://photos.test/{i}",
                                   attachment_global_id=f"A-{key}", asset_type="hydrant"),
                        1000, now=T0)
    engines = [Processor(Settings(), VisionRoute.of(VisionClient(
        VISION, "generic", "sk-test-0123456789abcdef", session=requests.Session(),
        clock=clock, rng=random.Random(n)), "vision"), CollectingSink(), store=ledger,
        download=photo, clock=clock, rng=random.Random(10 + n), owner=f"e{n}")
        for n in range(3)]
    return ledger, engines


@responses.activate
def test_a_drifted_model_is_detected_in_a_few_calls_and_its_photos_wait_for_the_fix(tmp_path):
    """Twenty photos, three engines, a model answering out of schema until it is fixed after
    five minutes: the circuit opens after ``drift_calls`` such answers, later calls into the
    drifted model stay within the probe bound, the format alert is raised, no photo dies,
    and after the fix every photo gets its one valid answer."""
    clock = FakeClock(T0)
    fix_s = 300.0
    log = []

    def vision(request):
        drifted = clock.now() < T0 + fix_s
        log.append((clock.now(), drifted))
        return 200, {"Content-Type": "application/json"}, json.dumps(
            DRIFTED if drifted else ANSWER)

    responses.add_callback(responses.POST, VISION, callback=vision)
    policy = Settings().breaker
    alerts = set()
    ledger, engines = fleet(tmp_path, clock, 20)
    keys = [f"k{i}" for i in range(20)]
    with ledger:
        while clock.now() < T0 + fix_s + 120:
            for engine in engines:
                engine.run_batch()
            alerts.update(a.signal for a in read_signals(Settings(), store=ledger,
                                                         now=clock.now()).alerts)
            statuses = {ledger.get(k).status for k in keys}
            assert Status.DEAD not in statuses, [
                (k, ledger.get(k).failure_class, ledger.get(k).last_error) for k in keys
                if ledger.get(k).status is Status.DEAD][:3]
            if statuses == {Status.SUCCEEDED}:
                break
            clock.advance(0.5)
        records = [ledger.get(k) for k in keys]
    assert {r.status for r in records} == {Status.SUCCEEDED}
    drifted = [at for at, bad in log if bad]
    opened = drifted[policy.drift_calls - 1]
    burst = [at for at in drifted if at <= opened + policy.cache_ttl_s]
    assert len(burst) <= policy.drift_calls + len(engines)    # other engines' 1 s caches
    probes = [at for at in drifted if at > opened + policy.cache_ttl_s]
    assert len(probes) <= outage_probe_bound(policy, fix_s, facts=20)
    assert "format_anomalies" in alerts
    assert len([at for at, bad in log if not bad]) == 20      # one valid answer each
    first_valid = min(at for at, bad in log if not bad)
    assert first_valid - (T0 + fix_s) <= policy.cooldown_max_s + 1.0


@responses.activate
def test_one_photo_answered_out_of_schema_is_its_own_format_dead_letter(tmp_path):
    """Only one photo's answers break the schema: the circuit stays closed for the others
    and that photo becomes a FORMAT dead letter after its one retry."""
    clock = FakeClock(T0)

    def vision(request):
        odd = b"photos.test/0" in request.body
        return 200, {"Content-Type": "application/json"}, json.dumps(
            DRIFTED if odd else ANSWER)

    responses.add_callback(responses.POST, VISION, callback=vision)
    ledger, engines = fleet(tmp_path, clock, 6)
    with ledger:
        for _ in range(120):
            for engine in engines:
                engine.run_batch()
            clock.advance(0.5)
        odd = ledger.get("k0")
        others = [ledger.get(f"k{i}") for i in range(1, 6)]
        state = ledger.breaker_peek("vision").state
    assert (odd.status, odd.failure_class) == (Status.DEAD, FailureClass.FORMAT)
    assert {r.status for r in others} == {Status.SUCCEEDED}
    assert state is CircuitState.CLOSED


@responses.activate
def test_photos_held_by_a_drifted_model_are_shown_on_the_layer_as_awaiting_analysis(tmp_path):
    """While the drifted model's circuit is open every photo it holds is flagged
    AWAITING_ANALYSIS once (none dead); after the fix each gets its answer written."""
    clock = FakeClock(T0)
    fix_s = 60.0

    def vision(request):
        return 200, {"Content-Type": "application/json"}, json.dumps(
            DRIFTED if clock.now() < T0 + fix_s else ANSWER)

    responses.add_callback(responses.POST, VISION, callback=vision)
    ledger, engines = fleet(tmp_path, clock, 8)
    keys = [f"k{i}" for i in range(8)]
    flags, done = [], []
    with ledger:
        while clock.now() < T0 + fix_s + 120:
            for engine in engines:
                engine.run_batch()
                for c in engine.sink.take():
                    (done if c.outcome is not None else flags).append((c.task.key, c.layer))
            if clock.now() < T0 + fix_s:
                assert Status.DEAD not in {ledger.get(k).status for k in keys}
            if len(done) == 8:
                break
            clock.advance(0.5)
    assert sorted(k for k, _ in flags) == keys              # each held photo, once
    assert {layer for _, layer in flags} == {LayerStatus.AWAITING_ANALYSIS}
    assert sorted(k for k, _ in done) == keys
