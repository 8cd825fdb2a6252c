"""The fleet's pace after a 429: tasks parked behind it never starve the service of calls."""
from __future__ import annotations

import heapq

from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.services.resilience.pace import CallPacer
from fme_ai_resilience.store import open_store

MAX_WAIT_S = 5.0


def simulate(pacer, clock, tasks, *, seconds, max_wait_s=MAX_WAIT_S):
    """Tasks ask for a slot when due: within ``max_wait_s`` they call at it (each call goes
    through), further away they park until the slot's time. Returns the call times."""
    due = [(clock.now(), i) for i in range(tasks)]
    heapq.heapify(due)
    calls = []
    end = clock.now() + seconds
    while due and due[0][0] < end:
        at, i = heapq.heappop(due)
        if at > clock.now():
            clock.advance(at - clock.now())
        wait = pacer.wait_s(max_wait_s)
        if wait <= max_wait_s:
            calls.append(clock.now() + wait)
            pacer.passed()
        else:
            heapq.heappush(due, (clock.now() + wait, i))
    return calls


def test_parked_tasks_take_no_slot_so_the_paced_service_keeps_getting_calls(tmp_path):
    """Two hundred tasks behind a 3.2 s pace: every slot goes to a call, none is spent on a
    task that parks instead (which would push the next slot out of every task's reach)."""
    clock = FakeClock()
    with open_store(f"sqlite:///{tmp_path / 'ledger.db'}", init_schema=True) as store:
        store.pace_slow("vision", 3.2, not_before=clock.now())
        pacer = CallPacer("vision", store=store, clock=clock, cache_ttl_s=1.0)
        calls = simulate(pacer, clock, 200, seconds=120.0)
    assert len(calls) >= 30                   # 120 s at 3.2 s, the interval relaxing
    assert all(b > a for a, b in zip(calls[:30], calls[1:30]))   # one call per slot


def test_admission_widens_as_successes_come_back(tmp_path):
    """After the service refused at a 1.6 s pace, each call that goes through shortens the
    interval: the calls come closer together until the pace is off."""
    clock = FakeClock()
    with open_store(f"sqlite:///{tmp_path / 'ledger.db'}", init_schema=True) as store:
        store.pace_slow("vision", 1.6, not_before=clock.now())
        pacer = CallPacer("vision", store=store, clock=clock, cache_ttl_s=1.0)
        calls = simulate(pacer, clock, 50, seconds=600.0)
        left = store.pace_get("vision")
    gaps = [b - a for a, b in zip(calls, calls[1:])]
    assert gaps[0] > gaps[len(gaps) // 2] > gaps[-1]
    assert left < 1.6 * 0.97 ** 40
