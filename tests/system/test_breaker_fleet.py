"""Six real OS processes share one breaker and one retry budget through PostgreSQL."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from fme_ai_resilience.core.resilience.breaker import CircuitState
from fme_ai_resilience.store import open_store

from helpers import script
from helpers.breaker_standin import StandIn


pytestmark = pytest.mark.postgres

WORKER = script("breaker_worker.py")
PROCESSES = 6
POLICY = {"failure_rate": 0.5, "min_calls": 10, "window_s": 5.0, "slow_call_s": 5.0,
          "cooldown_s": 3.0, "cooldown_factor": 1.5, "cooldown_max_s": 10.0,
          "half_open_probes": 5, "close_ratio": 0.8, "probe_timeout_s": 5.0,
          "cache_ttl_s": 0.25}


def start(mode, db_url, url, amount, params):
    return subprocess.Popen([sys.executable, WORKER, mode, db_url, url, str(amount),
                             json.dumps(params)], stdout=subprocess.PIPE,
                            stdin=subprocess.PIPE if mode == "peek" else None, text=True)


def finish(proc, timeout=60):
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture
def fresh_store(pg_url):
    store = open_store(pg_url, init_schema=True)
    store.clear()       # the session database is shared with other tests
    yield store
    store.close()


def watch(store, until, on_change, poll_s=0.01):
    """Poll the circuit row until ``until`` (epoch s); call ``on_change`` with each new row."""
    seen = []
    while time.time() < until:
        state = store.breaker_get("vision", now=time.time())
        if not seen or state.generation != seen[-1].generation:
            seen.append(state)
            on_change(state)
        time.sleep(poll_s)
    return seen


@pytest.mark.long
def test_fleet_opens_probes_k_and_recovers(pg_url, fresh_store):
    """Zero calls while open, exactly k probes per half-open round, a late starter changes nothing."""
    k = POLICY["half_open_probes"]
    ttl = POLICY["cache_ttl_s"]
    late = {}
    with StandIn() as service:
        procs = [start("breaker", pg_url, service.url, 11.0, POLICY) for _ in range(PROCESSES)]
        # the late engine: started now, so that a busy machine's slow start of a process
        # cannot take it past the cooldown, it first looks at the circuit once it is open
        late["proc"] = start("peek", pg_url, service.url, 0, POLICY)

        def on_change(state):
            if state.state is CircuitState.OPEN and state.trips == 1 and "before" not in late:
                late["before"] = state
                late["proc"].stdin.write("look\n")
                late["proc"].stdin.flush()
            if state.state is CircuitState.OPEN and state.trips == 2:
                service.failing = False    # the service recovers during the second cooldown

        seen = watch(fresh_store, time.time() + 11.5, on_change)
        results = [finish(p) for p in procs]
        peek = finish(late["proc"])

    opens = [s for s in seen if s.state is CircuitState.OPEN]
    assert [s.trips for s in opens][:2] == [1, 2], seen
    first, second = opens[0], opens[1]
    # once every engine's cache has seen the open circuit: no call until the cooldown ends
    # (a call let through by a cache read just before it expired reaches the service after its
    # engine's process is scheduled again: a second for that, on a busy machine, of the 3 s)
    assert service.between(first.changed_at + ttl + 1.0, first.open_until - 0.001) == []
    # The round ends at the report that completes it, stamped with its engine's clock read
    # before the tally: another engine's probe may reach the service just after that stamp.
    # So a round is counted up to the next one's start, not up to its own end.
    # The first half-open round: exactly k probes, all failed, so it reopened; then nothing
    # until the second cooldown ends.
    round_one = service.between(first.open_until, second.open_until - 0.001)
    assert len(round_one) == k and {kind for _, kind in round_one} == {"probe"}
    assert second.open_until - second.changed_at == pytest.approx(4.5, abs=0.01)
    # the recovered service passes the second round's k probes and the circuit closes
    assert seen[-1].state is CircuitState.CLOSED and seen[-1].trips == 0
    closed = seen[-1]
    assert {kind for _, kind in service.between(second.open_until, closed.changed_at)} \
        == {"probe"}
    round_two = [c for c in service.between(second.open_until, time.time()) if c[1] == "probe"]
    assert len(round_two) == k
    assert service.between(closed.changed_at, time.time()), "calls flow again once closed"
    print(f"breaker fleet: {len(service.calls)} calls, rounds of {len(round_one)} and "
          f"{len(round_two)} probes, calls per process {[r['made'] for r in results]}")
    assert sum(r["probes"] for r in results) == 2 * k
    # the process started while open was refused and saw (and left) the original open row
    assert "too_late" not in peek, "the late process looked after the cooldown: machine too slow"
    assert peek["permitted"] is False and peek["state"] == "OPEN"
    assert (peek["generation"], peek["changed_at"], peek["open_until"]) == (
        first.generation, first.changed_at, first.open_until)
    assert [s.trips for s in opens].count(1) == 1, "never reset and reopened"


def test_fleet_retry_budget_holds_against_a_dead_service(pg_url, fresh_store):
    """With a 100 % failing service, retries stay within 10 % of first attempts fleet-wide."""
    budget = {"ratio": 0.1, "floor_per_s": 0.0, "window_s": 60.0}
    with StandIn() as service:
        procs = [start("budget", pg_url, service.url, 60, budget) for _ in range(PROCESSES)]
        results = [finish(p) for p in procs]
        first, retries = service.count("first"), service.count("retry")
    assert first == sum(r["first"] for r in results) == PROCESSES * 60
    assert retries == sum(r["retries"] for r in results)
    print(f"fleet budget: {first} first attempts, {retries} retries at the stand-in")
    assert retries > 0, "the budget allowed some retries"
    # the only overshoot: retries granted at once by several engines before any is logged
    assert retries <= budget["ratio"] * first + PROCESSES
    assert sum(r["parked"] for r in results) > 0
