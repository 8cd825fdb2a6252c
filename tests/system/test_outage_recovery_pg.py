"""A Vision AI outage on PostgreSQL with a worker killed in it: every photo analysed once.

The pipeline on its default settings (only what reaches the loopback stand-ins is configured,
and a short lease so that a killed worker's tasks come back within the test): webhooks
delivered through the gateway while the Vision AI stand-in answers 503 to everything for a
while, some webhooks never delivered and found by ``reconcile --backfill``, three
``process --loop`` workers and a compensator, one worker SIGKILLed during the outage. Each
round draws its own seed, outage window, victim and kill time. Judged at the stand-ins: every
photo gets exactly one usable Vision answer and its assessment on the layer, none is skipped,
the first usable answer after the service's return comes within the probe interval then in
force, the calls into the dead service stay within the probe bound, and nothing is left
PENDING after the drain.

Rounds: ``FAIR_OUTAGE_ROUNDS`` (default 1), seeds from ``FAIR_OUTAGE_SEED`` (default 1),
photos ``FAIR_OUTAGE_PHOTOS`` (default 40)::

    FAIR_OUTAGE_ROUNDS=10 .venv/bin/python -m pytest tests/system/test_outage_recovery_pg.py
"""
from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time

import pytest

from fme_ai_resilience.core.resilience.breaker import cooldown_s, outage_probe_bound
from fme_ai_resilience.drill.standins import FaultSchedule, Survey123Sender
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.core.intake.survey123 import parse_webhook

from helpers.pipeline_world import (BUSY_MACHINE_S, GatewayServer, World, spawn,
                                    spawn_processes, stop_processes, wait_until_settled)


pytestmark = pytest.mark.postgres

ROUNDS = int(os.environ.get("FAIR_OUTAGE_ROUNDS", "1"))
FIRST_SEED = int(os.environ.get("FAIR_OUTAGE_SEED", "1"))
#: One photo per feature (the feature-level write-back holds one assessment per feature, so
#: each photo's answer can be judged on the layer); 40 stay under the derived watermark.
FEATURES = int(os.environ.get("FAIR_OUTAGE_PHOTOS", "40"))
NEVER_DELIVERED = 4
LEASE_S = 3.0
#: What the engines may add to a probe interval before the probe's answer is seen: the state
#: cache (1 s), the loop's idle poll, a claim and a download; and a busy machine's stall.
SLACK_S = 2.5 + BUSY_MACHINE_S


def loopback(world):
    """Only what the stand-ins need: where they are, and a short lease (a killed worker's
    tasks come back after it)."""
    return {"vision.endpoint": world.vision.endpoint,
            "intake.feature_services": world.layer.service_url,
            "download.allowed_hosts": world.photos.url.split("//", 1)[1].rstrip("/"),
            "download.allow_http_hosts": "127.0.0.1",
            "download.allow_private_hosts": "127.0.0.1",
            "processing.lease_s": str(LEASE_S)}


def run_cli(*args, timeout=120):
    done = subprocess.run([sys.executable, "-m", "fme_ai_resilience", *args],
                          capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.long
@pytest.mark.parametrize("seed", range(FIRST_SEED, FIRST_SEED + ROUNDS))
def test_an_outage_with_a_killed_worker_analyses_every_photo_once(pg_ledger, pg_store_url, seed):
    """See the module docstring: one randomised round."""
    rng = random.Random(seed)
    start_s = rng.uniform(4.0, 7.0)
    length_s = rng.uniform(3.0, 12.0)
    outage = (start_s, start_s + length_s)
    policy = Settings().breaker
    with World(FaultSchedule(latency_s=0.05, outages=(outage,)), seed=seed) as world:
        pg_ledger.set_config(loopback(world), now=time.time())
        features = [world.layer.add_feature(photos=1) for _ in range(FEATURES)]
        sender = Survey123Sender("http://127.0.0.1:9/unused")
        bodies = [sender.body_for(f) for f in features]
        missing = set(rng.sample(range(FEATURES), NEVER_DELIVERED))
        keys = [sub.idempotency_key for body in bodies for sub in parse_webhook(body)]
        procs = spawn_processes(pg_store_url, 3)
        compensator = spawn([sys.executable, "-m", "fme_ai_resilience", "compensate", "--db",
                             pg_store_url, "--loop", "--interval", "0.5", "--no-reconcile"])
        victim = rng.randrange(3)
        kill_at = rng.uniform(*outage)
        killed = []

        def kill():
            while world.vision.schedule_time() < kill_at:
                time.sleep(0.05)
            procs[victim].kill()
            killed.append(world.vision.schedule_time())

        chaos = threading.Thread(target=kill)
        try:
            with GatewayServer(pg_store_url) as gateway:
                chaos.start()
                post = Survey123Sender(gateway.url)
                last_s = outage[1] + 1.0          # deliveries before, during and after
                for i, body in enumerate(bodies):
                    due = i * last_s / FEATURES
                    while world.vision.schedule_time() < due:
                        time.sleep(0.02)
                    if i not in missing:
                        assert post.send(body).status == 202
            chaos.join()
            window = (str(time.time() - 3600), str(time.time() + 60))
            code, out, err = run_cli("reconcile", "--db", pg_store_url, "--layer",
                                     world.layer.layer_url, "--since", window[0], "--until",
                                     window[1], "--backfill", "--json")
            assert code == 0, err[-2000:]
            survivors = [p for n, p in enumerate(procs) if n != victim]
            wait_until_settled(pg_ledger, keys, timeout_s=90, procs=survivors)
        finally:
            chaos.join()
            stop_processes(procs + [compensator])
        counts = pg_ledger.counts()
        vision = world.vision.snapshot()
        layer = {f.global_id: world.layer.attributes_of(f.global_id) for f in features}

    assert killed and outage[0] <= killed[0] <= outage[1] + BUSY_MACHINE_S
    truths = {f.attachments[0].sha256: (f.global_id, world.vision.truth(f.attachments[0].data))
              for f in features}
    # one usable answer per photo, counted at the Vision stand-in
    assert vision["analysed_by_sha256"] == {sha: 1 for sha in truths}
    # every assessment on the layer, none skipped
    for sha, (gid, (condition, _)) in truths.items():
        attrs = layer[gid]
        assert attrs["ai_status"] in ("ACCEPTED", "REVIEW"), (gid, attrs)
        assert attrs["ai_condition"] == condition, (gid, attrs)
    # calls into the dead service: a burst until the circuit opens, then single probes, one
    # per probe interval; the first usable answer after the return comes within the interval
    # in force then (the open circuit's rounds, counted at the stand-in)
    log = vision["log"]
    failed = [at for at, _, outcome in log if outcome == "outage"]
    gaps = [b - a for a, b in zip(failed, failed[1:])]
    probes = sum(1 for gap in gaps if gap >= policy.cooldown_s - 1.0)
    assert probes <= outage_probe_bound(policy, length_s, facts=FEATURES)
    rounds = [at for at, gap in zip(failed[1:], gaps) if gap >= policy.cooldown_s - 1.0]
    assert all(b - a >= policy.cooldown_s - 1.0 for a, b in zip(rounds, rounds[1:]))
    back = [at for at, _, outcome in log if outcome == "ok" and at >= outage[1]]
    interval = cooldown_s(policy, probes + 1)
    assert interval <= policy.cooldown_max_s <= 30.0
    assert back[0] - outage[1] <= interval + SLACK_S, (back[0] - outage[1], interval, [
        (round(at, 2), outcome) for at, _, outcome in log if at > outage[0] - 1][:60])
    # nothing left owed after the drain
    assert {s: n for s, n in counts.items() if n} == {"SUCCEEDED": FEATURES}, counts
