"""ArcGIS feature-layer webhooks end to end on loopback: photos that reach the pipeline only as
thin, signed notifications of the layer's changes are each analysed once and written once.

The world is the drill's stand-ins: a feature layer with change tracking (its first
``extractChanges`` job fails, every job answers asynchronously after a pending poll) and a
Vision AI service. The layer's webhook sender registers with the intake gateway served in this
process (the signature key's challenge) and notifies it of the layer's changes, once per layer
of a form with a repeat; the processor runs in this process on a SQLite ledger. The judges are
the stand-ins: the Vision AI's answers per photo, the layer's rows and writes per photo and its
``extractChanges`` counters; what the gateway answered each delivery is seen by the sender.
"""
from __future__ import annotations

import time
from collections import Counter
from typing import Any, Dict, List, Sequence, Tuple

import pytest
import requests

from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.core.intake.keys import compose_key, normalise_global_id
from fme_ai_resilience.core.ledger import Status
from fme_ai_resilience.drill.standins import (FaultSchedule, FeatureLayerStandIn,
                                              LayerWebhookSender)
from fme_ai_resilience.drill.world import WRITEBACK_FIELDS
from fme_ai_resilience.services.pipeline import build_processor
from fme_ai_resilience.services.processing.processor import Stop
from fme_ai_resilience.store import open_store

from helpers.pipeline_world import TERMINAL, GatewayServer, World, loopback_settings

KEY = "layer-hook-signature-key"
#: Photos per feature of the twelve features, in two batches of edits (two notified ranges).
FIRST = (1, 2, 3, 1, 2, 3, 2)
SECOND = (3, 1, 2, 1, 2)
#: How long the processor may take to settle every task before the test fails: a bound on
#: the loop, not a measured time.
SETTLE_S = 60.0


class LayerWorld(World):
    """The pipeline's world with a layer whose first ``extractChanges`` job fails and whose
    jobs answer ``Pending`` once before they complete."""

    def __init__(self, *, seed: int = 7) -> None:
        super().__init__(FaultSchedule(latency_s=0.01), seed=seed)
        self.layer = FeatureLayerStandIn(seed=seed, fields=WRITEBACK_FIELDS,
                                         changes_failures=1, changes_polls_pending=1)


class RecordingSession(requests.Session):
    """The sender's session: keeps every POST it sent and what the gateway answered."""

    def __init__(self) -> None:
        super().__init__()
        self.trust_env = False
        self.posted: List[Tuple[str, bytes, Dict[str, str]]] = []
        self.answers: List[Tuple[int, Dict[str, Any]]] = []

    def post(self, url, data=None, **kwargs):  # type: ignore[override]
        self.posted.append((url, data, dict(kwargs.get("headers") or {})))
        answer = super().post(url, data=data, **kwargs)
        self.answers.append((answer.status_code, answer.json()))
        return answer

    def redeliver(self, index: int) -> Tuple[int, Dict[str, Any]]:
        """POST the ``index``-th delivery again, byte for byte with its signature."""
        url, body, headers = self.posted[index]
        answer = requests.post(url, data=body, headers=headers, timeout=10)
        return answer.status_code, answer.json()


def _photos(layer: FeatureLayerStandIn) -> Dict[Tuple[str, str], str]:
    """Every photo the layer holds, ``(feature GlobalID, photo GlobalID)`` as the layer spells
    them, with its SHA-256."""
    return {(feature, photo): sha for feature, photos in layer.photos().items()
            for photo, sha, _ in photos}


def _key(feature: str, photo: str) -> str:
    """The task key intake gives a photo."""
    return compose_key(normalise_global_id(feature), normalise_global_id(photo))


def _settle(processor: Any, store: Any, keys: Sequence[str]) -> Dict[str, str]:
    """Run batches until the ledger holds every key and no task is unfinished; the keys'
    statuses."""
    deadline = time.monotonic() + SETTLE_S
    statuses: Dict[str, str] = {}
    while time.monotonic() < deadline:
        report = processor.run_batch()
        records = {k: store.get(k) for k in keys}
        statuses = {k: r.status.value if r else "absent" for k, r in records.items()}
        unfinished = sum(n for s, n in store.counts().items() if s not in TERMINAL)
        if not unfinished and all(s in TERMINAL for s in statuses.values()):
            return statuses
        if report.stopped is Stop.NO_DUE_TASK:
            time.sleep(0.02)    # a task waits out its backoff
    raise AssertionError(f"not settled: ledger {store.counts()}, "
                         f"keys {Counter(statuses.values())}")


def _outcomes(answer: Dict[str, Any]) -> List[str]:
    return [s["outcome"] for s in answer["submissions"]]


@pytest.mark.parametrize("style", ["online-json", "online-form", "enterprise"])
def test_photos_announced_only_by_layer_webhooks_are_each_analysed_and_written_once(
        tmp_path, style):
    """Two signed ranges sent once per layer, and a redelivery: every photo analysed once,
    one row with its answer on the layer, the failed extractChanges job retried."""
    db_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with LayerWorld() as world, open_store(db_url, init_schema=True) as store:
        values = loopback_settings(world, **{
            "writeback.table_url": f"{world.layer.service_url}/1"})
        store.set_config(values, now=time.time())
        with GatewayServer(db_url, arcgis_signature_key=KEY) as gateway:
            session = RecordingSession()
            sender = LayerWebhookSender(world.layer, f"{gateway.url}/layer-hook",
                                        signature_key=KEY, style=style, per_layer=True,
                                        notify_layers=(0, 1), session=session)
            assert sender.register() is True
            for photos in FIRST:
                world.layer.add_feature(photos=photos)
            assert sender.send_due() is True
            for photos in SECOND:
                world.layer.add_feature(photos=photos)
            assert sender.send_due() is True
            assert sender.send_due() is None                      # nothing new to notify
            redelivered = session.redeliver(0)
            processor = build_processor(Settings.from_mapping(values), store=store,
                                        owner="engine-0")
            photos = _photos(world.layer)
            statuses = _settle(processor, store, [_key(*p) for p in photos])
            redelivered_done = session.redeliver(0)
            notifications = {s["key"] for _, a in session.answers for s in a["submissions"]}
            notified = {k: store.get(k) for k in notifications}
            vision = world.vision.snapshot()
            layer = world.layer.snapshot()
            deliveries = sender.snapshot()["deliveries"]
            sender.stop()

    # the sender: four deliveries (two ranges, two layers each), every one taken
    assert [status for _, status, _ in deliveries] == [202] * 4
    outcomes = [_outcomes(answer) for _, answer in session.answers]
    # each batch's second notification (the repeat's layer) asks for the same changes (the
    # stand-in's changesUrl names layers=[0] for both; Enterprise notifies per service): a
    # duplicate of the first, so one extractChanges per range
    assert outcomes == [["NEW"], ["DUPLICATE_IN_PROGRESS"]] * 2
    assert redelivered[0] == 202 and _outcomes(redelivered[1]) == ["DUPLICATE_IN_PROGRESS"]
    assert redelivered_done[0] == 200 and _outcomes(redelivered_done[1]) == ["DUPLICATE_DONE"]
    # the Vision AI: every photo the layer holds analysed exactly once, nothing else paid
    assert len(photos) == sum(FIRST) + sum(SECOND)
    analysed = vision["analysed_by_sha256"]
    assert {sha: analysed.get(sha) for sha in photos.values()} == {
        sha: 1 for sha in photos.values()}
    assert sum(analysed.values()) == vision["total"] == len(set(photos.values()))
    # the layer: one row per photo, written once; the failed job and its retry
    assert layer["rows_added"] == {photo: 1 for photo in photos}
    written = {photo: writes for photo, writes in layer["table_rows"].values()}
    assert {photo: len(writes) for photo, writes in written.items()} == {p: 1 for p in photos}
    assert {photo: writes[0][1]["ai_condition"] for photo, writes in written.items()} == {
        photo: vision["answers"][sha][0] for photo, sha in photos.items()}
    assert layer["writes"] == {}                              # no feature edited by a notification
    assert layer["change_jobs_failed"] == 1
    assert layer["extract_changes"] == len(notifications) + 1
    assert layer["results_served"] == len(notifications)
    # the ledger, beside them: every photo and every notification finished
    assert set(statuses.values()) == {Status.SUCCEEDED.value}
    assert {r.status for r in notified.values()} == {Status.SUCCEEDED}


def test_the_write_back_s_own_edits_notified_back_cost_no_second_answer(tmp_path):
    """The write-back's own edits, notified back as updates, resolve into photos already done:
    no second answer, no second write."""
    db_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with LayerWorld(seed=9) as world, open_store(db_url, init_schema=True) as store:
        values = loopback_settings(world)
        store.set_config(values, now=time.time())
        with GatewayServer(db_url, arcgis_signature_key=KEY) as gateway:
            session = RecordingSession()
            sender = LayerWebhookSender(world.layer, f"{gateway.url}/layer-hook",
                                        signature_key=KEY, session=session)
            assert sender.register() is True
            features = [world.layer.add_feature(photos=1) for _ in range(6)]
            assert sender.send_due() is True
            processor = build_processor(Settings.from_mapping(values), store=store,
                                        owner="engine-0")
            photos = _photos(world.layer)
            keys = [_key(*p) for p in photos]
            _settle(processor, store, keys)
            generation = world.layer.changes.current()
            assert sender.send_due() is True                      # the write-back's updates
            statuses = _settle(processor, store, keys)
            assert sender.send_due() is None                      # nothing written since
            vision = world.vision.snapshot()
            layer = world.layer.snapshot()
            sender.stop()

    first, echo = session.answers
    assert first[1]["status"] == "accepted" and echo[1]["status"] == "accepted"
    assert echo[1]["submissions"][0]["key"] != first[1]["submissions"][0]["key"]
    assert vision["analysed_by_sha256"] == {sha: 1 for sha in photos.values()}
    assert vision["total"] == len(features) == len(photos)
    assert layer["writes"] == {f.global_id: 1 for f in features}
    assert {feature: layer["last_written"][feature]["ai_condition"] for feature, _ in photos} \
        == {feature: vision["answers"][sha][0] for (feature, _), sha in photos.items()}
    assert layer["server_gen"] == generation                  # the echo wrote nothing
    assert (layer["change_jobs_failed"], layer["extract_changes"], layer["results_served"]) \
        == (1, 3, 2)                                          # the first job failed, retried
    assert set(statuses.values()) == {Status.SUCCEEDED.value}
