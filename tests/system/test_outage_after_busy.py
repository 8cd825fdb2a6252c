"""An outage after a busy healthy period is seen in a handful of calls.

The pipeline on its default settings, time-compressed (SQLite ledger, two ``process --loop``
workers, the compensator): a minute and a half of steady traffic with several calls in flight,
then the Vision AI answers 503 to everything for a while, then it is back. Counted at the
stand-in: the calls into the outage stay within the drill's probe bound (the breaker's run of
consecutive "down" failures, one call per slot the fleet had in flight, counted at the
stand-in in the busy period, and the probes of its schedule; never capped at the photos
there are), the first usable answer after the return comes within the probe interval then in
force (plus what the engines and a busy machine add), every photo is analysed once.

Rounds: ``FAIR_BUSY_OUTAGE_ROUNDS`` (default 1), seeds from ``FAIR_BUSY_OUTAGE_SEED``
(default 1); each round draws its outage's length.
"""
from __future__ import annotations

import os
import random
import sys
import threading
import time

import pytest

from fme_ai_resilience.drill.bounds import probe_bound, probe_interval_s
from fme_ai_resilience.drill.standins import FaultSchedule
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.survey123 import parse_webhook

from helpers.pipeline_world import (BUSY_MACHINE_S, World, spawn, spawn_processes,
                                    stop_processes, wait_until_settled)
from helpers.scaled_world import scaled_defaults


pytestmark = pytest.mark.integration

ROUNDS = int(os.environ.get("FAIR_BUSY_OUTAGE_ROUNDS", "1"))
FIRST_SEED = int(os.environ.get("FAIR_BUSY_OUTAGE_SEED", "1"))
#: Real seconds per production second: wide enough that :data:`BUSY_MACHINE_S` stays well
#: under a probe interval (at 0.05 a one-second stall was 20 production seconds).
SCALE = 0.2
WORKERS = 2
#: Production seconds of healthy traffic before the outage, and between two deliveries.
HEALTHY_S = 90.0
EVERY_S = 0.4
LATENCY_S = 2.0
#: What the engines may add to a probe interval before the probe's answer is seen
#: (production seconds): the state cache, a worker's poll for a free slot, a claim and a
#: download.
SLACK_S = 5.0


@pytest.mark.long
@pytest.mark.parametrize("seed", range(FIRST_SEED, FIRST_SEED + ROUNDS))
def test_an_outage_after_a_busy_healthy_period_is_seen_in_a_handful_of_calls(tmp_path, seed):
    """See the module docstring: one randomised round."""
    rng = random.Random(seed)
    length_s = rng.uniform(20.0, 80.0)
    outage = (HEALTHY_S, HEALTHY_S + length_s)
    photos = int((outage[1] + 30.0) / EVERY_S)
    policy = Settings().breaker
    schedule = FaultSchedule(latency_s=LATENCY_S, latency_jitter_s=1.0, outages=[outage])
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with World(schedule, scale=SCALE, seed=seed) as world, \
            open_store(url, init_schema=True) as store:
        store.set_config(scaled_defaults(world, SCALE), now=time.time())
        subs = [sub for body in world.bodies(photos) for sub in parse_webhook(body)]
        keys = [sub.idempotency_key for sub in subs]
        procs = spawn_processes(url, WORKERS)
        compensator = spawn([sys.executable, "-m", "fme_ai_resilience", "compensate", "--db",
                             url, "--loop", "--interval", f"{60 * SCALE:g}", "--no-reconcile"])

        def arrive():
            for sub in subs:
                store.register(sub, 10_000, now=time.time())
                time.sleep(EVERY_S * SCALE)

        busy = []

        def watch_the_busy_period():
            """The most calls the service had in flight before the outage began."""
            peak = 0
            while world.vision.schedule_time() < outage[0]:
                peak = max(peak, world.vision.concurrency()["in_flight"])
                time.sleep(0.005)
            busy.append(peak)

        feeder = threading.Thread(target=arrive, daemon=True)
        watcher = threading.Thread(target=watch_the_busy_period, daemon=True)
        try:
            world.vision.reset()       # schedule time starts with the first delivery
            feeder.start()
            watcher.start()
            feeder.join()
            wait_until_settled(store, keys, timeout_s=240, procs=procs)
            watcher.join(5)
        finally:
            stop_processes(procs + [compensator])
        vision = world.vision.snapshot()
        statuses = {store.get(k).status.value for k in keys}
    assert statuses == {"SUCCEEDED"}
    assert sum(vision["analysed_by_sha256"].values()) == photos
    into = vision["outages"][0]["calls"]
    assert busy and busy[0] >= 3, busy          # a busy healthy period: calls in flight
    bound = probe_bound(policy, length_s, engines=WORKERS, fastest_call_s=LATENCY_S * SCALE,
                        in_flight=busy[0])
    assert into <= bound, (into, bound, busy)
    back = [at for at, _, outcome in vision["log"] if outcome == "ok" and at >= outage[1]]
    lag_s = SLACK_S + BUSY_MACHINE_S / SCALE
    assert back[0] - outage[1] <= probe_interval_s(policy, length_s) + lag_s, (
        back[0] - outage[1], [(round(at, 1), o) for at, _, o in vision["log"]
                              if outage[0] - 2 < at < outage[1] + 40 and o != "ok"])
