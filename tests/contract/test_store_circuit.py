"""The breaker's and ladder's store operations, held by every backend (contract tests)."""
from __future__ import annotations

import threading

import pytest

from fme_ai_resilience.core.resilience.breaker import BreakerMode, BreakerState, CircuitState
from fme_ai_resilience.core.resilience.degrade import LadderState, Level
from fme_ai_resilience.store import open_store

T0 = 1_790_000_000.0


def opened(at=T0, generation=1):
    return BreakerState(state=CircuitState.OPEN, generation=generation, changed_at=at,
                        open_until=at + 60, trips=1)


def half_open(store, service="vision", slots=3, at=T0 + 60):
    store.breaker_get(service, now=T0)
    assert store.breaker_swap(service, 0, opened(), 0)
    target = BreakerState(state=CircuitState.HALF_OPEN, generation=2, changed_at=at, trips=1)
    assert store.breaker_swap(service, 1, target, slots)
    return target


def test_missing_circuit_created_closed_existing_never_overwritten(store):
    """The first read creates CLOSED/0; later reads (a new process) see the open row unchanged."""
    first = store.breaker_get("vision", now=T0)
    assert first == BreakerState(changed_at=T0)
    assert store.breaker_swap("vision", 0, opened(T0 + 5), 0)
    again = store.breaker_get("vision", now=T0 + 30)
    assert again == opened(T0 + 5)
    assert store.breaker_list() == {"vision": opened(T0 + 5)}


def test_peek_reads_without_creating(store):
    """breaker_peek of a missing circuit answers CLOSED/0 and stores nothing; else the row."""
    assert store.breaker_peek("typo") == BreakerState()
    assert store.breaker_list() == {}
    store.breaker_get("vision", now=T0)
    assert store.breaker_swap("vision", 0, opened(T0 + 5), 0)
    assert store.breaker_peek("vision") == opened(T0 + 5)
    assert list(store.breaker_list()) == ["vision"]
    with pytest.raises(ValueError, match="service"):
        store.breaker_peek("")


def test_swap_is_compare_and_set_on_generation(store):
    """Only the first of two writers from the same generation applies its change."""
    store.breaker_get("vision", now=T0)
    assert store.breaker_swap("vision", 0, opened(T0 + 1), 0)
    assert not store.breaker_swap("vision", 0, opened(T0 + 2), 0)
    assert store.breaker_get("vision", now=T0 + 3).changed_at == T0 + 1
    forced = BreakerState(state=CircuitState.OPEN, mode=BreakerMode.FORCED_OPEN, generation=2,
                          changed_at=T0 + 1, open_until=T0 + 61, trips=1)
    assert store.breaker_swap("vision", 1, forced, 0)
    assert store.breaker_get("vision", now=T0 + 4).mode is BreakerMode.FORCED_OPEN


def test_swap_refuses_bad_arguments(store):
    """A generation that does not grow, or slots for a non-half-open state, are errors."""
    store.breaker_get("vision", now=T0)
    with pytest.raises(ValueError, match="generation"):
        store.breaker_swap("vision", 1, opened(generation=1), 0)
    with pytest.raises(ValueError, match="HALF_OPEN"):
        store.breaker_swap("vision", 0, opened(), 3)
    with pytest.raises(ValueError, match="service"):
        store.breaker_get("", now=T0)


def test_half_open_admits_exactly_k_claims(store):
    """k slots: k distinct claims succeed, the next is refused."""
    half_open(store, slots=3)
    claims = [store.breaker_claim_probe("vision", 2, 30.0, now=T0 + 61) for _ in range(4)]
    assert claims[3] is None
    assert sorted(slot for slot, _ in claims[:3]) == [0, 1, 2]
    assert store.breaker_claim_probe("vision", 1, 30.0, now=T0 + 61) is None   # old round


def test_silent_probe_slot_frees_after_timeout_with_new_token(store):
    """A claim not reported within the probe timeout is claimed again; the old report is void."""
    half_open(store, slots=1)
    slot, token = store.breaker_claim_probe("vision", 2, 30.0, now=T0 + 61)
    assert store.breaker_claim_probe("vision", 2, 30.0, now=T0 + 90) is None
    again = store.breaker_claim_probe("vision", 2, 30.0, now=T0 + 91)
    assert again is not None and again[0] == slot and again[1] != token
    assert not store.breaker_report_probe("vision", 2, slot, token, True, now=T0 + 92)
    assert store.breaker_report_probe("vision", 2, slot, again[1], False, now=T0 + 92)
    assert not store.breaker_report_probe("vision", 2, slot, again[1], True, now=T0 + 93)
    assert store.breaker_probe_tally("vision", 2) == (0, 1)
    assert store.breaker_claim_probe("vision", 2, 30.0, now=T0 + 200) is None   # reported


def test_tally_counts_reported_probes_of_the_round(store):
    """Successes and failures of round ``generation`` only."""
    half_open(store, slots=3)
    claims = [store.breaker_claim_probe("vision", 2, 30.0, now=T0 + 61) for _ in range(3)]
    for (slot, token), ok in zip(claims, (True, False, True)):
        assert store.breaker_report_probe("vision", 2, slot, token, ok, now=T0 + 62)
    assert store.breaker_probe_tally("vision", 2) == (2, 1)
    assert store.breaker_probe_tally("vision", 1) == (0, 0)


def test_leaving_half_open_removes_its_slots(store):
    """After the round ends (here by reset) no leftover slot can be claimed."""
    half_open(store, slots=3)
    assert store.breaker_swap("vision", 2, BreakerState(generation=3, changed_at=T0 + 70), 0)
    assert store.breaker_claim_probe("vision", 2, 30.0, now=T0 + 71) is None
    assert store.breaker_claim_probe("vision", 3, 30.0, now=T0 + 71) is None


def test_circuits_are_per_service(store):
    """Two services keep separate rows and slots."""
    half_open(store, "vision", slots=1)
    store.breaker_get("fallback", now=T0)
    assert store.breaker_claim_probe("fallback", 2, 30.0, now=T0 + 61) is None
    assert store.breaker_claim_probe("vision", 2, 30.0, now=T0 + 61) is not None
    assert set(store.breaker_list()) == {"vision", "fallback"}


def test_ladder_created_at_l0_and_swapped_by_generation(store):
    """The ladder row starts at L0; compare-and-set keeps level, override and calm_since."""
    assert store.degrade_get(now=T0) == LadderState(changed_at=T0)
    target = LadderState(level=Level.FALLBACK, override=Level.PAUSED, generation=1,
                         changed_at=T0 + 1, calm_since=T0 + 2)
    assert store.degrade_swap(0, target)
    assert not store.degrade_swap(0, LadderState(level=Level.SAMPLE, generation=1))
    assert store.degrade_get(now=T0 + 5) == target
    with pytest.raises(ValueError, match="generation"):
        store.degrade_swap(1, target)



def test_concurrent_claimers_get_exactly_k_slots(shared_ledger_url):
    """Twelve connections racing for 5 slots: exactly 5 claims, all on different slots."""
    with open_store(shared_ledger_url) as s:
        half_open(s, slots=5)
    barrier = threading.Barrier(12)
    got, lock = [], threading.Lock()

    def claimer():
        with open_store(shared_ledger_url) as mine:
            barrier.wait()
            for _ in range(3):
                claim = mine.breaker_claim_probe("vision", 2, 30.0, now=T0 + 61)
                if claim is not None:
                    with lock:
                        got.append(claim)

    threads = [threading.Thread(target=claimer) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(slot for slot, _ in got) == [0, 1, 2, 3, 4]


def test_concurrent_swaps_from_one_generation_apply_once(shared_ledger_url):
    """Eight engines applying the same transition: exactly one wins."""
    with open_store(shared_ledger_url) as s:
        s.breaker_get("vision", now=T0)
    barrier = threading.Barrier(8)
    wins = []

    def swapper(i):
        with open_store(shared_ledger_url) as mine:
            barrier.wait()
            wins.append(mine.breaker_swap("vision", 0, opened(T0 + i), 0))

    threads = [threading.Thread(target=swapper, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(wins) == [False] * 7 + [True]
