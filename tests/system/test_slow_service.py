"""Slow is not down: the pipeline on its default settings against a Vision AI that is slow.

The whole pipeline as a new user runs it (SQLite ledger, two ``process --loop`` workers, the
compensator on its loop), time-compressed: every default wait and time limit times
``SCALE``, the stand-ins' schedules in production seconds on the same scale. Judged at the
stand-ins: every photo's answer on the layer, the answers the Vision AI computed per photo
(each one billed), and the calls in flight it counted, against the fleet's adaptive limit
the ledger held at that moment (the limit's whole slots, sampled while the run lasts).

Rounds: ``FAIR_SLOW_ROUNDS`` (default 1) with seeds from ``FAIR_SLOW_SEED`` (default 1)::

    FAIR_SLOW_ROUNDS=10 .venv/bin/python -m pytest tests/system/test_slow_service.py
"""
from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from fme_ai_resilience.drill.standins import FaultSchedule
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.survey123 import parse_webhook

from helpers.pipeline_world import (spawn, spawn_processes, stop_processes,
                            wait_until_settled)
from helpers.pipeline_world import World
from helpers.scaled_world import WIDE_PHASES, FleetWatch, scaled_defaults


pytestmark = pytest.mark.integration

ROUNDS = int(os.environ.get("FAIR_SLOW_ROUNDS", "1"))
FIRST_SEED = int(os.environ.get("FAIR_SLOW_SEED", "1"))
SEEDS = range(FIRST_SEED, FIRST_SEED + ROUNDS)
#: Real seconds per production second.
SCALE = 0.05
#: The answers a slow service may compute per photo (the first calls, given the default
#: time to first byte, are each answered once more at the longer wait).
ANSWERS_PER_PHOTO = 1.25
DEFAULT_TTFB_S = Settings().timeouts.ttfb_s


def run(world, db_url, photos, *, arrive_every_s=0.0, timeout_s=150.0, **settings):
    """Register ``photos`` one-photo features (``arrive_every_s`` production seconds apart),
    run two workers and the compensator on the scaled defaults (and ``settings``) until every
    task settled; returns the statuses and the watch."""
    with open_store(db_url, init_schema=True) as store:
        store.set_config(scaled_defaults(world, SCALE, **settings), now=time.time())
        subs = [sub for body in world.bodies(photos) for sub in parse_webhook(body)]
        keys = [sub.idempotency_key for sub in subs]

        def arrive():
            for sub in subs:
                store.register(sub, 10_000, now=time.time())
                time.sleep(arrive_every_s * SCALE)

        procs = spawn_processes(db_url, 2)
        compensator = spawn([sys.executable, "-m", "fme_ai_resilience", "compensate", "--db",
                             db_url, "--loop", "--interval", f"{60 * SCALE:g}",
                             "--no-reconcile"])
        feeder = threading.Thread(target=arrive, daemon=True)
        try:
            with FleetWatch(world, db_url) as watch:
                feeder.start()
                feeder.join()
                statuses = wait_until_settled(store, keys, timeout_s=timeout_s, procs=procs)
        finally:
            stop_processes(procs + [compensator])
        return statuses, watch


def judge(world, statuses, watch, photos, *, answers_per_photo=ANSWERS_PER_PHOTO):
    """Every photo analysed and on the layer with the Vision AI's answer for its bytes; at
    most ``answers_per_photo`` answers computed per photo; the calls in flight at the service
    never above the fleet's limit, each of them (a call given up on too) holding a slot."""
    assert set(statuses.values()) == {"SUCCEEDED"}, statuses
    vision = world.vision.snapshot()
    for feature in world.features:
        attrs = world.layer.attributes_of(feature.global_id)
        condition, _ = world.vision.truth(feature.attachments[0].data)
        assert attrs["ai_status"] in ("ACCEPTED", "REVIEW"), attrs
        assert attrs["ai_condition"] == condition, attrs
    answers = sum(vision["analysed_by_sha256"].values())
    assert answers <= answers_per_photo * photos, (answers, vision["by_outcome"])
    assert vision["peak_in_flight"] <= watch.peak_limit <= Settings().concurrency.ceiling
    assert watch.uncounted() == []
    return vision


@pytest.mark.parametrize("seed", SEEDS)
def test_a_service_slower_than_the_default_time_to_first_byte_gets_every_photo_analysed(
        tmp_path, seed):
    """A Vision AI answering every call correctly, a few seconds over the default time to
    first byte (far inside the task budget): every photo analysed and on the layer, about one
    answer computed per photo, and never more calls in flight at the service than the
    fleet's limit."""
    schedule = FaultSchedule(latency_s=DEFAULT_TTFB_S + 5.0, latency_jitter_s=2.0)
    with World(schedule, scale=SCALE, seed=seed) as world:
        statuses, watch = run(world, f"sqlite:///{tmp_path / 'l.db'}", 8)
        vision = judge(world, statuses, watch, 8)
    assert vision["by_outcome"]["ok"] >= 8


@pytest.mark.long
@pytest.mark.parametrize("seed", SEEDS)
def test_a_service_that_slows_down_gradually_and_recovers_loses_nothing(tmp_path, seed):
    """Two seconds, then slower over five minutes to 30 s (past the default time to first
    byte), then back: photos arriving throughout are all analysed, about once each, within
    the fleet's limit."""
    ramp = [(0.0, 2.0), (300.0, DEFAULT_TTFB_S + 10.0), (420.0, DEFAULT_TTFB_S + 10.0),
            (600.0, 2.0)]
    schedule = FaultSchedule(latency_profile=ramp, latency_jitter_s=1.0)
    with World(schedule, scale=SCALE, seed=seed) as world:
        statuses, watch = run(world, f"sqlite:///{tmp_path / 'l.db'}", 24,
                              arrive_every_s=25.0, timeout_s=200.0)
        judge(world, statuses, watch, 24)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_service_slow_only_for_some_photos_loses_nothing(tmp_path, seed):
    """Most photos answered in two seconds, a third of them in 30 (past the default time to
    first byte): every photo analysed within the fleet's limit, each fast photo once and each
    slow one at most twice. A slow photo's first call may run out of the default wait, the
    service computing its answer all the same, when no slow answer has taught the fleet to
    wait longer yet; how many do depends on how many are in flight together, which a busy
    machine changes, so the bound is per photo, not a share of the whole."""
    schedule = FaultSchedule(latency_s=2.0, latency_jitter_s=1.0, slow_photo_rate=0.3,
                             slow_photo_latency_s=DEFAULT_TTFB_S + 10.0)
    with World(schedule, scale=SCALE, seed=seed) as world:
        statuses, watch = run(world, f"sqlite:///{tmp_path / 'l.db'}", 20,
                              arrive_every_s=3.0)
        vision = judge(world, statuses, watch, 20, answers_per_photo=2.0)
        slow = {f.attachments[0].sha256 for f in world.features
                if world.vision.slow(f.attachments[0].data)}
    answers = vision["analysed_by_sha256"]
    assert slow and len(answers) == 20, answers
    assert {sha: n for sha, n in answers.items() if sha not in slow} == {
        f.attachments[0].sha256: 1 for f in world.features
        if f.attachments[0].sha256 not in slow}
    assert all(answers[sha] <= 2 for sha in slow), answers


@pytest.mark.parametrize("seed", SEEDS)
def test_answers_cut_short_once_twice_three_times_leave_no_photo_dead(tmp_path, seed):
    """Half the photos have their first one, two or three answers cut mid-body (the
    connection closing early, or a Content-Length that matches the cut): every photo is
    analysed in the end, none dead, none shown as awaiting analysis. Each photo is paid for
    once whole: the call's phase limits are :data:`WIDE_PHASES` (at SCALE the body's would be
    0.2 s), as cut answers, not slow ones, are the test."""
    schedule = FaultSchedule(latency_s=1.0, cut_photo_rate=0.5, cut_answers=3)
    with World(schedule, scale=SCALE, seed=seed) as world:
        statuses, watch = run(world, f"sqlite:///{tmp_path / 'l.db'}", 12, **WIDE_PHASES)
        cuts = sorted(world.vision.cut_count(f.attachments[0].data) for f in world.features)
        assert set(statuses.values()) == {"SUCCEEDED"}, statuses
        for feature in world.features:
            attrs = world.layer.attributes_of(feature.global_id)
            assert attrs["ai_status"] in ("ACCEPTED", "REVIEW"), attrs
        vision = world.vision.snapshot()
    assert vision["by_outcome"]["truncated"] == sum(cuts) and max(cuts) >= 2
    assert vision["analysed_by_sha256"] == {
        f.attachments[0].sha256: 1 for f in world.features}
