"""No dead letter is silent: every dead letter of a photo that still exists is flagged on the
layer with its cause and told through the notification path.

The pipeline on its default settings, time-compressed (SQLite ledger, two ``process --loop``
workers, the compensator), against a Vision AI whose model answers out of schema for a kind of
photo, every time (that photo's drift, not the model's): those photos end FORMAT dead letters,
and the layer says ``FAILED`` (``failed:FORMAT`` in the model field) for each, never
``AWAITING_ANALYSIS`` for a photo nothing will pick up; a notification names each; every other
photo is analysed.
"""
from __future__ import annotations

import sys
import time

import pytest

from fme_ai_resilience.drill.standins import FaultSchedule
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.survey123 import parse_webhook

from helpers.pipeline_world import (spawn, spawn_processes, stop_processes,
                            wait_until_settled)
from helpers.pipeline_world import World
from helpers.scaled_world import scaled_defaults


pytestmark = pytest.mark.integration

SCALE = 0.05


@pytest.mark.long
def test_a_photo_the_model_never_answers_in_schema_is_flagged_failed_and_told(tmp_path):
    """See the module docstring."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    schedule = FaultSchedule(latency_s=1.0, drift_rate=0.2)
    with World(schedule, scale=SCALE, seed=2) as world, \
            open_store(url, init_schema=True) as store:
        store.set_config(scaled_defaults(world, SCALE), now=time.time())
        subs = [sub for body in world.bodies(12) for sub in parse_webhook(body)]
        for sub in subs:
            store.register(sub, 10_000, now=time.time())
            time.sleep(2.0 * SCALE)
        procs = spawn_processes(url, 2)
        compensator = spawn([sys.executable, "-m", "fme_ai_resilience", "compensate", "--db",
                             url, "--loop", "--interval", f"{60 * SCALE:g}",
                             "--no-reconcile"])
        try:
            statuses = wait_until_settled(store, [s.idempotency_key for s in subs],
                                          timeout_s=150, procs=procs)
            time.sleep(3 * 60 * SCALE)          # a compensator pass or two after the last
        finally:
            stop_processes(procs + [compensator])
        told = {n.task_key: n for n in store.pending_notifications(1000)}
        drifting = [(sub, feature) for sub, feature in zip(subs, world.features)
                    if world.vision.drifts(feature.attachments[0].data)]
        assert drifting and len(drifting) < len(subs)
        for sub, feature in zip(subs, world.features):
            attrs = world.layer.attributes_of(feature.global_id)
            if (sub, feature) in drifting:
                assert statuses[sub.idempotency_key] == "DEAD"
                assert store.get(sub.idempotency_key).failure_class.value == "FORMAT"
                assert (attrs["ai_status"], attrs["ai_model"]) == ("FAILED", "failed:FORMAT")
                note = told[sub.idempotency_key]
                assert note.kind == "analysis-failed" and "FORMAT" in note.subject
            else:
                assert statuses[sub.idempotency_key] == "SUCCEEDED"
                assert attrs["ai_status"] in ("ACCEPTED", "REVIEW")
                assert sub.idempotency_key not in told
