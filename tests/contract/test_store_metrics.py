"""The ledger's metrics, on every backend: counters and histograms its triggers keep in the
event's own transaction, monotonic across a pruned call log and a requeued dead letter, and an
existing ledger brought along by the upgrade."""
from __future__ import annotations

import math

import pytest

from fme_ai_resilience.core.errors import FailureClass
from fme_ai_resilience.core.ledger import CallRecord, FormatAnomaly, TaskOutcome
from fme_ai_resilience.core.observe.totals import BUCKETS_S
from fme_ai_resilience.store import open_store, sqlfiles

from helpers.ledger_rows import T0, claimed, register


def counts(store, name):
    return {labels: n for labels, n in
            store.ledger_metrics(now=T0 + 1000).counter(name).items()}


def everything(store):
    m = store.ledger_metrics(now=T0 + 1000)
    return dict(m.counters), {k: (h.counts, h.total) for k, h in m.histograms.items()}


def test_the_ledger_counts_calls_dead_letters_finished_tasks_and_anomalies(store):
    """Each event counted once, by its labels, as it is written."""
    store.record_call(CallRecord("vision", T0, 0.4))
    store.record_call(CallRecord("vision", T0, 2.0, "TIMEOUT"))
    store.record_call(CallRecord("vision", T0, 0.3))
    store.record_anomaly(FormatAnomaly("vision", T0, ("bad",), "{}"))
    a = claimed(store, "a")
    store.complete("a", a.lease_token, TaskOutcome.ACCEPTED, {"reused": True}, now=T0 + 5)
    s = claimed(store, "s")
    store.complete("s", s.lease_token, TaskOutcome.SKIPPED, {}, now=T0 + 5, review=True)
    d = claimed(store, "d")
    store.bury("d", d.lease_token, FailureClass.AUTH, "401", now=T0 + 5)
    assert counts(store, "ai_calls") == {
        (("outcome", "ok"), ("service", "vision")): 2,
        (("outcome", "TIMEOUT"), ("service", "vision")): 1}
    assert counts(store, "dead_letters") == {(("cause", "AUTH"),): 1}
    assert counts(store, "tasks_completed") == {
        (("kind", "analysed"), ("status", "SUCCEEDED")): 1,
        (("kind", "skipped_by_policy"), ("status", "SUCCEEDED")): 1,
        (("kind", "dead_letter"), ("status", "DEAD")): 1}
    assert counts(store, "reused_analyses") == {(): 1}
    assert counts(store, "format_anomalies") == {(): 1}


def test_counters_and_histograms_never_decrease_across_a_prune_and_a_requeue(store):
    """Pruning the call log and anomalies and requeueing a dead letter take nothing back; the
    requeued task dying again counts a second dead letter."""
    store.record_call(CallRecord("vision", T0, 0.4, phases={"connect": 0.01, "ttfb": 0.3}))
    store.record_anomaly(FormatAnomaly("vision", T0, ("bad",), "{}"))
    d = claimed(store, "d")
    store.bury("d", d.lease_token, FailureClass.BUDGET, "spent", now=T0 + 5)
    before_counters, before_histograms = everything(store)
    assert store.prune(calls_before=T0 + 10_000, anomalies_before=T0 + 10_000).calls == 1
    assert store.requeue(["d"], now=T0 + 20) == 1
    after_counters, after_histograms = everything(store)
    assert after_counters == before_counters and after_histograms == before_histograms
    (again,) = store.claim("e", 1, 60, now=T0 + 30)
    store.bury("d", again.lease_token, FailureClass.BUDGET, "spent", now=T0 + 31)
    assert counts(store, "dead_letters") == {(("cause", "BUDGET"),): 2}
    assert counts(store, "tasks_completed") == {(("kind", "dead_letter"), ("status", "DEAD")): 2}


def test_histograms_hold_intake_latency_from_arrival_call_phases_and_end_to_end(store):
    """A registration 0.3 s after its webhook arrived, a call with its phases and a task
    analysed 40 s after registration land in their buckets with their sums."""
    register(store, "k", now=T0, received_at=T0 - 0.3)
    register(store, "no-arrival", now=T0)          # reconciliation: no webhook, no latency
    (task,) = [t for t in store.claim("e", 2, 60, now=T0) if t.key == "k"]
    store.complete("k", task.lease_token, TaskOutcome.ACCEPTED, {}, now=T0 + 40)
    store.record_call(CallRecord("vision", T0, 1.5, phases={"connect": 0.02, "ttfb": 1.2,
                                                             "body": 0.28}))
    m = store.ledger_metrics(now=T0 + 100)
    (intake,) = m.histogram("intake_latency_seconds").values()
    assert intake.count == 1 and intake.total == pytest.approx(0.3)
    assert dict(intake.cumulative())[0.25] == 0 and dict(intake.cumulative())[0.5] == 1
    (e2e,) = m.histogram("end_to_end_seconds").values()
    assert e2e.count == 1 and e2e.total == pytest.approx(40)
    assert dict(e2e.cumulative())[30.0] == 0 and dict(e2e.cumulative())[60.0] == 1
    phases = {dict(k)["phase"]: h for k, h in m.histogram("ai_call_duration_seconds").items()}
    assert {p: round(h.total, 3) for p, h in phases.items()} == {
        "total": 1.5, "connect": 0.02, "ttfb": 1.2, "body": 0.28}
    assert all(h.count == 1 for h in phases.values())


def test_a_value_past_every_bound_lands_in_the_inf_bucket(store):
    """A two-hour call is counted in +Inf only, and its seconds in the sum."""
    store.record_call(CallRecord("vision", T0, 7200.0))
    (total,) = [h for k, h in store.ledger_metrics(now=T0).histogram(
        "ai_call_duration_seconds").items() if dict(k)["phase"] == "total"]
    assert total.counts[-1] == 1 and total.count == 1 and total.total == 7200.0
    assert total.cumulative()[-1] == (math.inf, 1) and total.cumulative()[-2] == (3600.0, 0)


def test_the_ledgers_bucket_bounds_are_the_exporters(store):
    """The buckets the triggers fill are the ones /metrics writes, +Inf last."""
    assert store.metric_buckets() == BUCKETS_S + (math.inf,)


def test_reading_the_metrics_writes_nothing(store):
    """No ladder row is created by a scrape: a ledger never degraded reads L0."""
    m = store.ledger_metrics(now=T0)
    assert m.ladder is None and dict(m.breakers) == {}
    assert store.ledger_metrics(now=T0).ladder is None


def _before_the_metrics(monkeypatch):
    real = sqlfiles.schema

    def older(dialect):
        bootstrap, migrations = real(dialect)
        return bootstrap, tuple(m for m in migrations if m[0] < 9)
    monkeypatch.setattr(sqlfiles, "schema", older)


@pytest.fixture(params=("sqlite", "postgresql"))
def ledger_before_metrics(request, tmp_path, monkeypatch):
    """A ledger at migration 8 holding a finished task, a dead letter and a logged call."""
    if request.param == "postgresql":
        from helpers.postgres import pg_run
        base = request.getfixturevalue("pg_url")
        name = f"premetrics_{abs(hash(str(tmp_path))) % 10**8}"
        pg_run(base, f"DROP SCHEMA IF EXISTS {name} CASCADE")
        pg_run(base, f"CREATE SCHEMA {name}")
        url = f"{base}?options=-csearch_path%3D{name}"
    else:
        url = f"sqlite:///{tmp_path / 'old.db'}"
    _before_the_metrics(monkeypatch)
    with open_store(url, init_schema=True) as store:
        assert store.schema_version() == 8
        register(store, "a", now=T0, received_at=T0 - 2)
        (a,) = store.claim("e", 1, 60, now=T0)
        store.complete("a", a.lease_token, TaskOutcome.ACCEPTED, {"reused": True}, now=T0 + 9)
        d = claimed(store, "d")
        store.bury("d", d.lease_token, FailureClass.BUDGET, "spent", now=T0 + 5)
        store.record_call(CallRecord("vision", T0, 0.7, "SERVER"))
    monkeypatch.undo()
    return url


def test_the_upgrade_brings_an_existing_ledger_along(ledger_before_metrics):
    """Migration 9 starts the counts from what the ledger holds, then counts on."""
    with open_store(ledger_before_metrics, init_schema=True) as store:
        assert store.schema_version() == 9
        assert counts(store, "dead_letters") == {(("cause", "BUDGET"),): 1}
        assert counts(store, "tasks_completed") == {
            (("kind", "analysed"), ("status", "SUCCEEDED")): 1,
            (("kind", "dead_letter"), ("status", "DEAD")): 1}
        assert counts(store, "reused_analyses") == {(): 1}
        assert counts(store, "ai_calls") == {(("outcome", "SERVER"), ("service", "vision")): 1}
        m = store.ledger_metrics(now=T0 + 100)
        (intake,) = m.histogram("intake_latency_seconds").values()
        (e2e,) = m.histogram("end_to_end_seconds").values()
        assert (intake.count, intake.total, e2e.count, e2e.total) == (1, 2.0, 1, 9.0)
        store.record_call(CallRecord("vision", T0 + 200, 0.1))
        assert counts(store, "ai_calls")[(("outcome", "ok"), ("service", "vision"))] == 1


def test_engines_counting_the_same_event_on_postgresql_do_not_wait_on_each_other(
        pg_ledger_url):
    """Each PostgreSQL session counts into its own shard of a count (by its backend's pid):
    while one engine's transaction holds its count uncommitted, another engine counts the same
    event and commits at once; the reader sums the shards."""
    import psycopg2

    conns = []
    try:
        while True:   # two sessions whose counts fall in different shards
            conn = psycopg2.connect(pg_ledger_url)
            conns.append(conn)
            shards = {c.get_backend_pid() % 16 for c in conns}
            if len(shards) == 2:
                break
        first, second = conns[0], conns[-1]
        with first.cursor() as cur:     # a transaction left open, its count held
            cur.execute("SELECT metric_count('ai_calls', %s)", ('{"outcome": "ok"}',))
        second.autocommit = True
        with second.cursor() as cur:
            cur.execute("SET lock_timeout = '2s'")
            cur.execute("SELECT metric_count('ai_calls', %s)", ('{"outcome": "ok"}',))
        first.commit()
    finally:
        for conn in conns:
            conn.close()
    with open_store(pg_ledger_url) as store:
        counts = store.ledger_metrics(now=T0).counters
    assert counts[("ai_calls", (("outcome", "ok"),))] == 2
