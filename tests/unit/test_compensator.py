"""The compensator (WS-03) on a real ledger with a fake clock: reaping, requeues by cause,
notifications, breaker and ladder evaluation, reconciliation and retention."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import pytest

from fme_ai_resilience.core.resilience.breaker import CircuitState
from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.errors import FailureClass
from fme_ai_resilience.core.intake.keys import compose_key, trace_id_for
from fme_ai_resilience.core.ledger import CallRecord, FormatAnomaly, Status
from fme_ai_resilience.services.compensation.compensator import Compensator, requeue_delay_s
from fme_ai_resilience.services.resilience.breaker import CircuitBreaker
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission

T0 = 1_790_000_000.0
F1, F2, F3 = ("{0000000%d-1111-4111-8111-111111111111}" % i for i in (1, 2, 3))


@pytest.fixture
def clock():
    return FakeClock(T0)


@pytest.fixture
def ledger(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'l.db'}", init_schema=True)
    yield store
    store.close()


def dead(ledger, key, failure_class, at=T0):
    ledger.register(Submission(key, f"F-{key}", trace_id_for(key)), 1000, now=at)
    (task,) = ledger.claim("e", 1, 60, now=at)
    ledger.bury(key, task.lease_token, failure_class, "gone", now=at)


def test_an_expired_lease_is_reaped_back_to_pending(ledger, clock):
    """A crashed engine's task goes back to PENDING with the lost attempt counted."""
    ledger.register(Submission("k", "F", trace_id_for("k")), 10, now=T0)
    ledger.claim("crashed", 1, 30, now=T0)
    clock.advance(31)
    report = Compensator(Settings(), store=ledger, clock=clock).run(reconcile=False)
    assert report.reaped.requeued == 1
    assert (ledger.get("k").status, ledger.get("k").attempt_count) == (Status.PENDING, 1)


def test_transient_dead_letters_come_back_with_backoff_up_to_the_budget(ledger, clock):
    """BUDGET dead letters are requeued due after a doubling delay, at most requeue_budget
    times; FORMAT waits for the operator; NOT_FOUND never comes back."""
    dead(ledger, "spent", FailureClass.BUDGET)
    dead(ledger, "drift", FailureClass.FORMAT)
    dead(ledger, "gone", FailureClass.NOT_FOUND)
    settings = Settings().with_values({"compensation.requeue_budget": "1"})
    report = Compensator(settings, store=ledger, clock=clock).run(reconcile=False)
    assert report.requeued == {"BUDGET": 1}
    spent = ledger.get("spent")
    assert spent.status is Status.PENDING and spent.next_attempt_at == T0 + 300
    assert ledger.get("drift").status is Status.DEAD and ledger.get("gone").status is Status.DEAD
    clock.advance(300)
    (task,) = ledger.claim("e", 1, 60, now=clock.now())
    ledger.bury("spent", task.lease_token, FailureClass.BUDGET, "again", now=clock.now())
    assert Compensator(settings, store=ledger, clock=clock).run(
        reconcile=False).requeued == {"BUDGET": 0}
    assert Compensator(settings, store=ledger, clock=clock).run(
        reconcile=False, requeue_format=True).requeued["FORMAT"] == 1


def test_requeue_delays_double_and_are_capped():
    """300, 600, 1200 ... seconds, never past the cap."""
    assert [requeue_delay_s(n, 300, 1000) for n in range(4)] == [300, 600, 1000, 1000]


def test_a_missing_photo_notifies_once_and_is_handed_over_once(ledger, clock):
    """NOT_FOUND: one notification per task, whatever the number of runs."""
    dead(ledger, "gone", FailureClass.NOT_FOUND)
    compensator = Compensator(Settings(), store=ledger, clock=clock)
    assert compensator.run(reconcile=False).notified == 1
    assert compensator.run(reconcile=False).notified == 0
    (note,) = compensator.take_notifications()
    assert note.task_key == "gone" and "not retried" in note.body
    assert compensator.take_notifications() == []


def test_an_open_breaker_turns_half_open_after_its_cooldown_with_nobody_calling(ledger, clock):
    """The compensator applies what is due even when no engine calls."""
    settings = Settings()
    breaker = CircuitBreaker("vision", settings.breaker, store=ledger, clock=clock)
    for _ in range(settings.breaker.min_calls):
        breaker.record(breaker.allow(), CallRecord("vision", clock.now(), 0.1, "SERVER_ERROR"))
    assert breaker.state(fresh=True).state is CircuitState.OPEN
    clock.advance(settings.breaker.cooldown_s)
    report = Compensator(settings, store=ledger, clock=clock).run(reconcile=False)
    assert report.breakers["vision"].state is CircuitState.HALF_OPEN


def test_retention_prunes_the_call_log_and_anomalies(ledger, clock):
    """Rows older than compensation.retention_days go."""
    ledger.record_call(CallRecord("vision", T0 - 15 * 86400, 0.1))
    ledger.record_call(CallRecord("vision", T0, 0.1))
    ledger.record_anomaly(FormatAnomaly("generic", T0 - 15 * 86400, ("x",), "{}"))
    report = Compensator(Settings(), store=ledger, clock=clock).run(reconcile=False)
    assert (report.pruned.calls, report.pruned.anomalies) == (1, 1)


@dataclass(frozen=True)
class Info:
    id: int
    global_id: str
    url: str
    content_type: str = "image/jpeg"
    name: str = "photo.jpg"


@dataclass(frozen=True)
class Group:
    parent_object_id: int
    parent_global_id: str
    attachments: Tuple[Info, ...]


class FakeLayer:
    """Three features created on two days; F3 without photos."""

    url = "https://gis.test/arcgis/rest/services/inspection/FeatureServer/0"

    def __init__(self):
        day = 86400_000
        self.features = [
            {"objectid": 1, "globalid": F1, "CreationDate": 1_790_000_000_000 - day,
             "asset_type": "hydrant", "crew": "north-2"},
            {"objectid": 2, "globalid": F2, "CreationDate": 1_790_000_000_000,
             "asset_type": "valve", "crew": "north-2"},
            {"objectid": 3, "globalid": F3, "CreationDate": 1_790_000_000_000,
             "asset_type": "valve", "crew": "south-1"}]
        self.queries: List[dict] = []

    def query(self, where="1=1", *, out_fields=("*",), date_field=None, since_ms=None,
              until_ms=None, **kwargs):
        self.queries.append({"date_field": date_field, "since_ms": since_ms,
                             "until_ms": until_ms})
        return [f for f in self.features if since_ms <= f["CreationDate"] < until_ms]

    def query_attachments(self, *, object_ids: Optional[List[int]] = None, **kwargs):
        photos = {1: [Info(10, "{AAAAAAAA-0000-4000-8000-000000000001}", self.url + "/1/a/10")],
                  2: [Info(20, "{AAAAAAAA-0000-4000-8000-000000000002}", self.url + "/2/a/20"),
                      Info(21, "{AAAAAAAA-0000-4000-8000-000000000003}", self.url + "/2/a/21")]}
        return [Group(oid, "", tuple(photos[oid])) for oid in object_ids if oid in photos]


def test_reconciliation_reports_gaps_by_day_asset_type_and_crew(ledger, clock):
    """Webhooks that never arrived show up as gaps; what intake registered does not."""
    present = compose_key(F2.strip("{}").lower(), "aaaaaaaa-0000-4000-8000-000000000002")
    ledger.register(Submission(present, F2, trace_id_for(present)), 100, now=T0)
    layer = FakeLayer()
    report = Compensator(Settings(), store=ledger, layer=layer, clock=clock).run().reconciled
    assert layer.queries[0] == {"date_field": "CreationDate",
                                "since_ms": int((T0 - 86400) * 1000),
                                "until_ms": int(T0 * 1000)}
    assert report.features == 1 and report.expected == 1  # only F1 is in the last 24 h


def test_reconciliation_backfills_the_missing_photos(ledger, clock):
    """With backfill every missing photo becomes a PENDING task from source reconcile."""
    present = compose_key(F2.strip("{}").lower(), "aaaaaaaa-0000-4000-8000-000000000002")
    ledger.register(Submission(present, F2, trace_id_for(present)), 100, now=T0)
    settings = Settings().with_values({"compensation.reconcile_window_s": str(3 * 86400)})
    clock.advance(60)
    report = Compensator(settings, store=ledger, layer=FakeLayer(), clock=clock).run(
        backfill=True).reconciled
    assert (report.features, report.expected, len(report.missing), report.backfilled) == (
        3, 4, 3, 3)
    assert dict(report.by_crew) == {"north-2": 2, "south-1": 1}
    assert dict(report.by_asset_type) == {"hydrant": 1, "valve": 2}
    assert len(report.by_day) == 2
    for gap in report.missing:
        record = ledger.get(gap.key)
        assert record.status is Status.PENDING and record.source == "reconcile"
    unknown = compose_key(F3.strip("{}").lower(), None)
    assert ledger.get(unknown).payload["attachments_unknown"] is True
    again = Compensator(settings, store=ledger, layer=FakeLayer(), clock=clock).run(
        backfill=True).reconciled
    assert again.missing == () and again.backfilled == 0


def test_a_photo_without_a_globalid_is_left_out_with_a_warning(ledger, clock, caplog):
    """Intake keys photos by GlobalID: one the layer lists without it cannot be matched, and
    the feature's other photos are still reconciled."""
    layer = FakeLayer()
    listed = layer.query_attachments

    def without_globalid(**kwargs):
        groups = listed(**kwargs)
        return [Group(g.parent_object_id, "", g.attachments + (Info(99, None, "u"),))
                for g in groups]

    layer.query_attachments = without_globalid
    settings = Settings().with_values({"compensation.reconcile_window_s": str(3 * 86400)})
    clock.advance(60)
    report = Compensator(settings, store=ledger, layer=layer, clock=clock).run().reconciled
    assert (report.expected, len(report.missing)) == (4, 4)
    assert all(gap.attachment_global_id for gap in report.missing
               if gap.feature_global_id != F3.strip("{}").lower())
    assert "carry no GlobalID" in caplog.text
