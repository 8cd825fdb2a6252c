"""The fleet's pace after a 429: tasks parked behind it never starve the service of calls."""
from __future__ import annotations

import heapq
import math
import tempfile

from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.ledger import CallRecord
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
        wait = pacer.take(max_wait_s).wait_s
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


def test_a_call_that_waited_reads_a_429_another_engine_met_and_tells_its_siblings(tmp_path):
    """An engine's pacer read the service unpaced; another engine's call is refused (Retry-
    After 30 s). A call of the first engine that waited (for room in the fleet) finds the
    pace slowed, 30 s off; the read refreshes its pacer's cache, so its next call parks too
    instead of calling past the pace until the cache would have expired."""
    clock = FakeClock()
    with open_store(f"sqlite:///{tmp_path / 'ledger.db'}", init_schema=True) as store:
        engine = CallPacer("vision", store=store, clock=clock, cache_ttl_s=1.0)
        other = CallPacer("vision", store=store, clock=clock, cache_ttl_s=1.0)
        waited = engine.take(5.0)
        assert waited == (0.0, 0.0)                  # not paced: no slot, no wait
        other.refused(30.0, 0.0)
        clock.advance(0.1)                           # within the cache's second
        assert 29.0 < engine.slowed_since(waited) <= 30.0
        assert engine.take(5.0).wait_s > 5.0         # the next call parks
        store.pace_relax("vision", 0.001, 0.01)      # the pace goes off
        clock.advance(30.0)
        assert engine.slowed_since(waited) == 0.0 and engine.take(5.0) == (0.0, 0.0)

def test_calls_refused_together_at_one_pace_slow_it_once(tmp_path):
    """Calls in flight at one pace, in two engines' threads, all refused: the pace doubles once
    (each refusal doubling it again would pace the fleet far below what the service allows,
    and recovering takes about 33 calls per halving). A refusal at the new pace doubles it."""
    clock = FakeClock()
    with open_store(f"sqlite:///{tmp_path / 'ledger.db'}", init_schema=True) as store:
        engines = [CallPacer("vision", store=store, clock=clock, cache_ttl_s=1.0)
                   for _ in range(2)]
        unpaced = [engine.take(MAX_WAIT_S) for engine in engines for _ in range(3)]
        assert {slot.interval_s for slot in unpaced} == {0.0}
        for engine, slot in zip(engines * 3, unpaced):
            engine.refused(1.0, slot.interval_s)
        assert store.pace_get("vision") == 0.1
        clock.advance(1.0)
        paced = [engine.take(MAX_WAIT_S) for engine in engines for _ in range(2)]
        assert {slot.interval_s for slot in paced} == {0.1}
        for engine, slot in zip(engines * 2, paced):
            engine.refused(None, slot.interval_s)
        assert store.pace_get("vision") == 0.2
        late = engines[0].take(MAX_WAIT_S)
        engines[1].refused(None, paced[0].interval_s)   # a call made at 0.1, refused late
        assert store.pace_get("vision") == 0.2
        engines[0].refused(None, late.interval_s)
        assert store.pace_get("vision") == 0.4


class Bucket:
    """A service allowing ``rate`` calls a second with a burst of ``burst``; a refused call's
    Retry-After is the whole seconds until a token is back (as Azure rounds it)."""

    window_s = 1.0

    def __init__(self, rate, burst):
        self.rate, self.burst, self.tokens, self.at = rate, burst, float(burst), None

    def call(self, at):
        if self.at is not None:
            self.tokens = min(self.burst, self.tokens + (at - self.at) * self.rate)
        self.at = at
        if self.tokens >= 1:
            self.tokens -= 1
            return None
        return float(math.ceil((1 - self.tokens) / self.rate))


class Quota:
    """A service allowing ``per_window`` calls in each fixed ``window_s`` window; a refused
    call's Retry-After says when the window ends."""

    def __init__(self, per_window, window_s):
        self.per_window, self.window_s, self.used = per_window, window_s, {}

    def call(self, at):
        window = int(at // self.window_s)
        if self.used.get(window, 0) < self.per_window:
            self.used[window] = self.used.get(window, 0) + 1
            return None
        return (window + 1) * self.window_s - at


def fleet_against(service, *, engines=4, threads=3, call_s=0.5, photos=300, start=600.0):
    """``engines`` engines of ``threads`` threads each, every thread asking its engine's
    pacer for a slot, waiting for it inline (within MAX_WAIT_S) or parking, calling, and
    logging the call as the processor does, on one clock. Returns ``(photos done, seconds
    taken, {window: calls refused})``."""
    clock = FakeClock(start=start)
    refused_in = {}
    with tempfile.TemporaryDirectory() as folder, \
            open_store(f"sqlite:///{folder}/ledger.db", init_schema=True) as store:
        pacers = [CallPacer("vision", store=store, clock=clock, cache_ttl_s=1.0)
                  for _ in range(engines)]
        workers = engines * threads
        events = [(start + i * 0.01, i, "ask", None) for i in range(workers)]
        done = 0
        while events and done < photos:
            at, worker, step, data = heapq.heappop(events)
            clock.advance(max(0.0, at - clock.now()))
            pacer = pacers[worker % engines]
            if step == "ask":
                slot = pacer.take(MAX_WAIT_S)
                park = slot.wait_s > MAX_WAIT_S
                heapq.heappush(events, (clock.now() + slot.wait_s, worker,
                                        "ask" if park else "call", slot))
            elif step == "call":
                later = pacer.slowed_since(data) if data.wait_s > 0 else 0.0
                if later > 0:
                    heapq.heappush(events, (clock.now() + later, worker, "ask", None))
                    continue
                refused = service.call(clock.now())
                heapq.heappush(events, (clock.now() + call_s, worker, "end",
                                        (data, clock.now(), refused)))
            else:
                slot, started, retry_after = data
                if retry_after is None:
                    pacer.passed()
                    done += 1
                else:
                    window = int(started // service.window_s)
                    refused_in[window] = refused_in.get(window, 0) + 1
                    pacer.refused(retry_after, slot.interval_s)
                store.record_call(CallRecord("vision", started, call_s,
                                             None if retry_after is None else "RATE_LIMITED"))
                heapq.heappush(events, (clock.now(), worker, "ask", None))
    return done, clock.now() - start, refused_in


def test_a_quota_is_found_from_the_calls_it_took_and_its_windows_are_used_whole():
    """A quota of 30 calls a minute, 300 photos, 4 engines of 3 threads: the first windows'
    refusals show the fleet one call every two seconds, so each later window refuses at most
    the one call that finds its end (doubling alone, undone by each window's 30 successes,
    refused most threads at the end of every window), and the photos take the ten windows
    the quota needs, not more."""
    done, seconds, refused_in = fleet_against(Quota(30, 60.0))
    assert done == 300 and seconds <= 11 * 60.0, (seconds, refused_in)
    assert all(n <= 1 for window, n in refused_in.items() if window >= 12), refused_in


def test_a_token_bucket_is_drained_at_its_rate_with_few_refusals():
    """A service allowing 20 calls a second (a burst of 4), 300 photos on 12 threads of 0.05 s
    calls: every photo analysed at about the service's rate, under one refusal in ten."""
    done, seconds, refused_in = fleet_against(Bucket(20.0, 4), call_s=0.05)
    assert done == 300 and seconds <= 300 / 20.0 * 2, (seconds, refused_in)
    assert sum(refused_in.values()) <= 30, refused_in


def test_a_429_long_after_the_last_one_reads_nothing_into_the_quiet_between():
    """A 429 a hundred seconds after the previous one (Retry-After 1 s), five calls between:
    the spell shows how few calls were asked, not what the service allows, so the pace is the
    doubling's 0.1 s, not 20 s a call capped at 1 s. The same five calls in the 2 s before
    a 429 do show the service's rate."""
    def pace_after(gap_s):
        clock = FakeClock(start=1000.0)
        with tempfile.TemporaryDirectory() as folder, \
                open_store(f"sqlite:///{folder}/ledger.db", init_schema=True) as store:
            store.record_call(CallRecord("vision", clock.now(), 0.05, "RATE_LIMITED"))
            for i in range(5):
                store.record_call(CallRecord("vision", clock.now() + (i + 1) * gap_s / 6,
                                             0.05, None))
            clock.advance(gap_s)
            CallPacer("vision", store=store, clock=clock, cache_ttl_s=1.0).refused(1.0, 0.0)
            return store.pace_get("vision")

    assert pace_after(100.0) == 0.1
    assert pace_after(1.5) == 1.5 / 5
