"""Worker processes for the multi-process ledger tests (imported by spawned children)."""
from __future__ import annotations

import os
import time
from collections import Counter

from fme_ai_resilience.core.ledger import TaskOutcome
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission

T0 = 1_790_000_000.0


def submission(i: int) -> Submission:
    return Submission(idempotency_key=f"key-{i:05d}", feature_global_id=f"F{i}",
                      trace_id=f"t{i}")


def register_all(url, n_keys, barrier, results):
    """Register keys 0..n_keys-1 as soon as every process is ready; report outcome counts."""
    store = open_store(url)
    store.counts()  # connect before the start line
    barrier.wait(timeout=60)
    seen = Counter()
    for i in range(n_keys):
        seen[store.register(submission(i), 1_000_000, now=T0).outcome.value] += 1
    store.close()
    results.put((os.getpid(), dict(seen)))


def claim_until_empty(url, barrier, results, now=T0, batch=7):
    """Claim and complete in batches until nothing is due; report (key, token) pairs claimed."""
    store = open_store(url)
    store.counts()
    barrier.wait(timeout=60)
    claimed, completed = [], 0
    while True:
        tasks = store.claim(f"engine-{os.getpid()}", batch, 600.0, now=now)
        if not tasks:
            break
        for task in tasks:
            claimed.append((task.key, task.lease_token))
            completed += store.complete(task.key, task.lease_token, TaskOutcome.ACCEPTED,
                                        {"by": os.getpid()}, now=now)
    store.close()
    results.put((os.getpid(), claimed, completed))


def hold_leases(url, limit, lease_s, results):
    """Claim ``limit`` tasks, report their tokens, then hang until killed."""
    store = open_store(url)
    tasks = store.claim("doomed-engine", limit, lease_s, now=T0)
    results.put([(t.key, t.lease_token) for t in tasks])
    while True:
        time.sleep(60)


def reap_and_finish(url, barrier, results, now, max_attempts):
    """After expiry: reap, claim and complete what is due; report completions that took effect."""
    store = open_store(url)
    store.counts()
    barrier.wait(timeout=60)
    store.reap_expired(max_attempts, now=now)
    done = []
    while True:
        tasks = store.claim(f"rescuer-{os.getpid()}", 3, 600.0, now=now)
        if not tasks:
            break
        for task in tasks:
            if store.complete(task.key, task.lease_token, TaskOutcome.ACCEPTED, None, now=now):
                done.append(task.key)
    store.close()
    results.put(done)


def open_fresh_and_register(url, first_key, n_keys, barrier, results):
    """Open a SQLite ledger that may not exist yet the moment every process is ready, then
    register ``n_keys`` keys of its own; report how many were new."""
    barrier.wait(timeout=60)
    store = open_store(url)
    new = sum(store.register(submission(first_key + i), 1_000_000, now=T0).outcome.value
              == "NEW" for i in range(n_keys))
    store.close()
    results.put((os.getpid(), new))
