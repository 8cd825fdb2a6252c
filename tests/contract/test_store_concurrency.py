"""The ledger under real concurrency: separate OS processes on one PostgreSQL database."""
from __future__ import annotations

import multiprocessing
import os
import signal
from collections import Counter

import pytest

from fme_ai_resilience.core.ledger import Status, TaskOutcome
from fme_ai_resilience.store import open_store

from helpers import store_workers as w


PROCESSES = 8
CTX = multiprocessing.get_context("spawn")


def _run(target, args_for, n=PROCESSES, timeout=120):
    """Start ``n`` processes of ``target`` and collect one result from each."""
    results, barrier = CTX.Queue(), CTX.Barrier(n)
    procs = [CTX.Process(target=target, args=args_for(barrier, results)) for _ in range(n)]
    for p in procs:
        p.start()
    try:
        out = [results.get(timeout=timeout) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    return out


def _outcomes(out):
    """Registration outcomes summed over the processes."""
    total = Counter()
    for _, seen in out:
        total.update(seen)
    return total


def _due_tasks(url, n):
    """Register ``n`` tasks that are due at once."""
    with open_store(url) as store:
        for i in range(n):
            store.register(w.submission(i), 1_000_000, now=w.T0 - 1)


@pytest.mark.postgres
def test_eight_processes_registering_the_same_keys_create_each_once(pg_ledger_url):
    """8 processes x the same 500 keys at once -> exactly 500 NEW in total, the rest duplicates."""
    out = _run(w.register_all, lambda b, q: (pg_ledger_url, 500, b, q))
    total = _outcomes(out)
    assert total["NEW"] == 500
    assert total["NEW"] + total["DUPLICATE_IN_PROGRESS"] == PROCESSES * 500
    with open_store(pg_ledger_url) as store:
        assert store.counts()["PENDING"] == 500


@pytest.mark.postgres
def test_eight_processes_claim_every_task_exactly_once(pg_ledger_url):
    """8 processes draining 2,000 due tasks claim each exactly once, each with token 1."""
    _due_tasks(pg_ledger_url, 2000)
    out = _run(w.claim_until_empty, lambda b, q: (pg_ledger_url, b, q))
    claims = [pair for _, claimed, _ in out for pair in claimed]
    keys = [key for key, _ in claims]
    assert len(keys) == 2000 and len(set(keys)) == 2000
    assert {token for _, token in claims} == {1}
    assert sum(completed for _, _, completed in out) == 2000
    assert sum(1 for _, claimed, _ in out if claimed) > 1, "the work was not shared"
    with open_store(pg_ledger_url) as store:
        assert store.counts()["SUCCEEDED"] == 2000


@pytest.mark.postgres
def test_killed_holder_tasks_are_reclaimed_and_completed_exactly_once(pg_ledger_url):
    """SIGKILL a lease holder: after expiry its tasks are redone once; its late writes fail."""
    _due_tasks(pg_ledger_url, 40)
    results = CTX.Queue()
    doomed = CTX.Process(target=w.hold_leases, args=(pg_ledger_url, 40, 30.0, results))
    doomed.start()
    held = results.get(timeout=60)
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.join(timeout=30)
    assert doomed.exitcode == -signal.SIGKILL and len(held) == 40

    # Before expiry nothing is reclaimable.
    with open_store(pg_ledger_url) as store:
        assert store.reap_expired(6, now=w.T0 + 29).requeued == 0
        assert store.claim("early", 10, 60, now=w.T0 + 29) == []

    out = _run(w.reap_and_finish, lambda b, q: (pg_ledger_url, b, q, w.T0 + 31, 6), n=4)
    done = [key for keys in out for key in keys]
    assert sorted(done) == sorted(key for key, _ in held)
    with open_store(pg_ledger_url) as store:
        for key, old_token in held:
            assert not store.complete(key, old_token, TaskOutcome.REVIEW, {"zombie": 1},
                                      now=w.T0 + 40)
            record = store.get(key)
            assert (record.status, record.outcome, record.attempt_count) == (
                Status.SUCCEEDED, TaskOutcome.ACCEPTED, 1)
            assert record.result is None and record.lease_token == old_token + 1


@pytest.fixture
def sqlite_url(tmp_path):
    """A fresh SQLite ledger file, as several FME engines on one host would share it."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    open_store(url, init_schema=True).close()
    return url


def test_sqlite_file_shared_by_processes_registers_and_claims_once(sqlite_url):
    """4 processes on one SQLite file: each key created once, each task claimed once."""
    out = _run(w.register_all, lambda b, q: (sqlite_url, 150, b, q), n=4)
    total = _outcomes(out)
    assert (total["NEW"], total["DUPLICATE_IN_PROGRESS"]) == (150, 450)
    out = _run(w.claim_until_empty, lambda b, q: (sqlite_url, b, q), n=4)
    keys = [key for _, claimed, _ in out for key, _ in claimed]
    assert len(keys) == 150 and len(set(keys)) == 150
    with open_store(sqlite_url) as store:
        assert store.counts()["SUCCEEDED"] == 150
