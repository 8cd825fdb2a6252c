"""The layerhooks scenario says what it plays, and a baseline's notification job reads the
bodies ArcGIS sends."""
from __future__ import annotations

import json
from urllib.parse import quote_plus

import pytest

from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.drill.baselines.notification import read_notifications
from fme_ai_resilience.drill.scenarios import SCENARIOS, LayerHooks

NOTE = {"name": "hook", "layerId": 0, "changesUrl": "https%3a%2f%2fx%2fextractChanges"}


def test_layerhooks_notifies_in_batches_on_arcgis_minimum_schedule_with_a_failing_first_job():
    """No app webhook, no redelivery or lost webhook of the app's: the layer's webhook every
    30 s (ArcGIS's minimum), two notifications a batch, the first extractChanges job failing."""
    scenario = SCENARIOS["layerhooks"]
    hooks = scenario.layer_hooks
    assert hooks is not None and hooks.interval_s >= 30.0
    assert hooks.notify_layers == (0, 1) and hooks.changes_failures == 1
    assert hooks.polls_pending >= 1 and hooks.style == "online-json"
    assert scenario.never_delivered == 0 and scenario.redelivery_rate == 0.0
    assert "layer webhook" in scenario.meets
    assert all(s.layer_hooks is None for n, s in SCENARIOS.items() if n != "layerhooks")


def test_a_change_is_notified_at_the_schedules_next_tick():
    """A change is notified at the next multiple of the interval (a change on a tick waits
    for the next)."""
    hooks = LayerHooks(interval_s=30.0)
    assert hooks.next_notification_s(0.0) == pytest.approx(30.0)
    assert hooks.next_notification_s(29.0) == pytest.approx(30.0)
    assert hooks.next_notification_s(30.0) == pytest.approx(60.0)
    assert hooks.next_notification_s(95.0) == pytest.approx(120.0)
    with pytest.raises(ConfigurationError, match="layer_hooks"):
        LayerHooks(interval_s=0.0)


@pytest.mark.parametrize("body", [
    json.dumps([NOTE]).encode(),                                # ArcGIS Online
    json.dumps(NOTE),                                           # Enterprise: one object
    ("payload=" + quote_plus(json.dumps([NOTE]))).encode(),     # the form variant
])
def test_a_notification_job_reads_every_body_arcgis_sends(body):
    """A JSON array, one object, or ``payload=<json>`` in a form: the same notification."""
    assert read_notifications(body) == [NOTE]


@pytest.mark.parametrize("body", [b"[]", b"{}x", b"[1, 2]", b"null"])
def test_a_body_without_a_notification_is_refused(body):
    """Nothing to read: a ValueError the job logs, never a crash."""
    with pytest.raises(ValueError):
        read_notifications(body)
