"""One engine of the fleet, as its own OS process: calls the stand-in through the shared breaker.

    python breaker_worker.py breaker DB_URL SERVICE_URL SECONDS POLICY_JSON
    python breaker_worker.py budget DB_URL SERVICE_URL TASKS POLICY_JSON
    python breaker_worker.py peek DB_URL SERVICE_URL 0 POLICY_JSON

Prints one JSON line with what it did, and stops by itself. ``peek`` starts, connects, then
waits for a line on its standard input before it looks: a process started late, on a busy
machine, is ready before the moment it is told to look at.
"""
from __future__ import annotations

import json
import random
import sys
import time

import requests

from fme_ai_resilience.core.resilience.breaker import BreakerPolicy, Permit
from fme_ai_resilience.services.resilience.breaker import CircuitBreaker
from fme_ai_resilience.core.clock import SystemClock
from fme_ai_resilience.core.errors import ErrorClass
from fme_ai_resilience.core.resilience.classification import classify_status
from fme_ai_resilience.core.ledger import CallRecord
from fme_ai_resilience.core.resilience.retry import DecisionKind, RetryHistory, RetryPolicy
from fme_ai_resilience.services.resilience.retry_budget import FleetRetryGate
from fme_ai_resilience.core.resilience.retry_budget import RetryBudget
from fme_ai_resilience.core.resilience.backoff import Backoff, Jitter
from fme_ai_resilience.store import open_store

SERVICE = "vision"


class Outcome:
    def __init__(self, error_class, retry_after_s=None):
        self.error_class = error_class
        self.retry_after_s = retry_after_s


def call(session, url, attempt_kind):
    started = time.time()
    try:
        status = session.get(url, headers={"X-Attempt": attempt_kind}, timeout=2).status_code
        error = classify_status(status)
    except requests.RequestException:
        status, error = None, ErrorClass.CONNECTION_ERROR
    return started, time.time() - started, status, error


def run_breaker(store, url, seconds, policy):
    clock = SystemClock()
    breaker = CircuitBreaker(SERVICE, policy, store=store, clock=clock)
    session = requests.Session()
    stop = time.time() + seconds
    made = refused = probes = 0
    while time.time() < stop:
        decision = breaker.allow()
        if not isinstance(decision, Permit):
            refused += 1
            time.sleep(min(0.05, max(0.005, decision.retry_after_s)))
            continue
        started, duration, status, error = call(session, url, "probe" if decision.is_probe
                                                else "first")
        made += 1
        probes += decision.is_probe
        breaker.record(decision, CallRecord(SERVICE, started, duration,
                                            error.value if error else None, status))
        time.sleep(0.01)
    return {"made": made, "refused": refused, "probes": probes}


def run_budget(store, url, tasks, budget_args):
    budget = RetryBudget(**budget_args)
    gate = FleetRetryGate(SERVICE, budget, store=store, cache_ttl_s=0.5)
    policy = RetryPolicy(max_attempts=4, max_inline_wait_s=1.0,
                         backoff=Backoff(0.005, 0.02, Jitter.FULL))
    rng = random.Random()
    session = requests.Session()
    first = retries = parked = 0
    for _ in range(int(tasks)):
        history = RetryHistory()
        retry = False
        while True:
            started, duration, status, error = call(session, url, "retry" if retry else "first")
            store.record_call(CallRecord(SERVICE, started, duration,
                                         error.value if error else None, status, retry=retry))
            first += not retry
            retries += retry
            decision = policy.decide(history, Outcome(error), now=time.time(), rng=rng, gate=gate)
            history = decision.history
            if decision.kind is not DecisionKind.RETRY:
                parked += decision.kind is DecisionKind.PARK
                break
            time.sleep(decision.wait_s)
            retry = True
    return {"first": first, "retries": retries, "parked": parked}


def main(argv):
    mode, db_url, url, amount, params = argv[1:6]
    params = json.loads(params)
    store = open_store(db_url)
    try:
        if mode == "breaker":
            result = run_breaker(store, url, float(amount), BreakerPolicy(**params))
        elif mode == "budget":
            result = run_budget(store, url, amount, params)
        else:
            breaker = CircuitBreaker(SERVICE, BreakerPolicy(**params), store=store,
                                     clock=SystemClock())
            store.counts()                       # connected before it is told to look
            sys.stdin.readline()
            seen = breaker.state()
            if seen.state.value != "OPEN" or time.time() > (seen.open_until or 0) - 0.5:
                print(json.dumps({"too_late": True, "state": seen.state.value}), flush=True)
                return 0     # started too slowly to test anything: never claim a probe slot
            decision = breaker.allow()
            result = {"permitted": isinstance(decision, Permit), "state": seen.state.value,
                      "generation": seen.generation, "changed_at": seen.changed_at,
                      "open_until": seen.open_until}
    finally:
        store.close()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
