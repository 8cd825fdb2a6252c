"""PostgreSQL-only behaviour: connection reuse and healing, prepared statements, plans."""
from __future__ import annotations

import pytest

from fme_ai_resilience.core.ledger import RegisterOutcome, TaskOutcome
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission

from helpers.postgres import pg8000_url, pg_run


pytestmark = pytest.mark.postgres
T0 = 1_790_000_000.0


@pytest.fixture(params=("psycopg2", "pg8000"))
def pg_any(request, pg_store_url):
    """A store on each PostgreSQL driver."""
    url = pg_store_url if request.param == "psycopg2" else pg8000_url(pg_store_url)
    store = open_store(url)
    assert store.driver == request.param
    store.clear()
    yield store
    store.close()


def test_reconnects_after_the_server_drops_an_idle_connection(pg_any, pg_store_url):
    """A connection the server terminated is replaced before the next operation."""
    pg_any.register(Submission("k", "F", "t"), 10, now=T0)
    pid = pg_any._conn.get_backend_pid()
    # Wait for the backend to be gone, as after a restart (termination is asynchronous).
    pg_run(pg_store_url, "SELECT pg_terminate_backend(%s, 5000)", (pid,))
    assert pg_any.register(Submission("k", "F", "t"), 10, now=T0).outcome is \
        RegisterOutcome.DUPLICATE_IN_PROGRESS
    assert pg_any._conn.get_backend_pid() != pid


def test_one_connection_is_reused(pg_ledger):
    """Operations share the store's single connection."""
    pg_ledger.counts()
    conn = pg_ledger._conn
    pg_ledger.register(Submission("k", "F", "t"), 10, now=T0)
    pg_ledger.claim("e", 1, 60, now=T0)
    assert pg_ledger._conn is conn


def test_without_prepared_statements_the_contract_holds(pg_store_url):
    """prepare=False (for PgBouncer in transaction mode) runs the same SQL unprepared."""
    store = open_store(pg_store_url, prepare=False)
    store.clear()
    assert store.register(Submission("k", "F", "t"), 10, now=T0).outcome is RegisterOutcome.NEW
    (task,) = store.claim("e", 1, 60, now=T0)
    assert store.complete("k", task.lease_token, TaskOutcome.ACCEPTED, {"a": 1}, now=T0)
    assert not store.complete("k", task.lease_token, TaskOutcome.ACCEPTED, {"a": 1}, now=T0)
    assert store._prepared == set()
    store.close()


def test_backlog_check_and_claim_use_the_in_progress_index(pg_ledger, pg_store_url):
    """With many finished rows, the backlog counts and the claim never scan the table (the
    claim walks its own in-progress index, in priority order)."""
    # (the metrics' triggers off for the bulk insert: these rows are the plans' ballast)
    pg_run(pg_store_url,
           "SET session_replication_role = replica;"
           " INSERT INTO ai_task_registry (task_key, status, payload, created_at, updated_at,"
           " completed_at) SELECT 'old' || i, 'SUCCEEDED', '{}', i, i, i"
           " FROM generate_series(1, 20000) AS i")
    pg_run(pg_store_url, "ANALYZE ai_task_registry")
    for i in range(3):
        pg_ledger.register(Submission(f"k{i}", "F", "t"), 10, now=T0)
    plans = {}
    for name, params in (
            ("register", {"key": "x", "source": "s", "trace_id": "t", "feature_global_id": "f",
                          "attachment_global_id": None, "event_type": "addData",
                          "payload": "{}", "now": T0, "due_at": T0, "received_at": None,
                          "ceiling": 10,
                          "park": True, "count_limit": 11, "park_ceiling": 100,
                          "priority": 0}),
            ("claim", {"owner": "e", "limit": 5, "now": T0, "expires_at": T0 + 60}),
            ("backlog", {"count_limit": 2 ** 62}), ("backlog", {"count_limit": 35000})):
        with pg_ledger._conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("EXPLAIN " + pg_ledger._queries[name], params)
            plans[name, params.get("count_limit")] = "\n".join(row[0] for row in cur.fetchall())
            cur.execute("ROLLBACK")
    for (name, _), plan in plans.items():
        # claims walk the in-progress rows in claim order: critical types first, then due
        index = "ai_task_registry_claim_idx" if name == "claim" else "ai_task_registry_live_idx"
        assert index in plan, plan
        assert "Seq Scan on ai_task_registry" not in plan, plan


def test_registered_columns_are_read_from_the_payload(pg_ledger, pg_store_url):
    """The searchable columns hold the submission's fields, cleaned like its payload."""
    s = Submission(idempotency_key="k-cols", feature_global_id="f\x00gid", trace_id="t-1",
                   attachment_global_id="a-gid", event_type="editData", source="reconciler")
    assert pg_ledger.register(s, 10, now=T0).outcome is RegisterOutcome.NEW
    plain = Submission(idempotency_key="k-none", feature_global_id="f2", trace_id="t-2")
    assert pg_ledger.register(plain, 10, now=T0).outcome is RegisterOutcome.NEW
    rows = pg_run(pg_store_url, "SELECT task_key, source, trace_id, feature_global_id, "
                  "attachment_global_id, event_type FROM ai_task_registry "
                  "WHERE task_key IN ('k-cols', 'k-none') ORDER BY task_key")
    assert rows == [("k-cols", "reconciler", "t-1", "f\ufffdgid", "a-gid", "editData"),
                    ("k-none", "survey123", "t-2", "f2", None, "addData")]


def test_an_interrupted_prepare_does_not_break_later_registrations(pg_ledger):
    """Interrupted between PREPARE and recording it (a signal, Ctrl-C), the store starts the
    next operation on a new connection instead of preparing the statement a second time."""

    class Interrupting(set):
        def add(self, name):
            raise KeyboardInterrupt

    pg_ledger.claim("warm-up", 1, 60, now=T0)  # a live connection whose register is not prepared yet
    pg_ledger._prepared = Interrupting(pg_ledger._prepared)
    s = Submission(idempotency_key="k-int", feature_global_id="f", trace_id="t")
    with pytest.raises(KeyboardInterrupt):
        pg_ledger.register(s, 10, now=T0)  # interrupted after PREPARE, before the registration ran
    assert pg_ledger.register(s, 10, now=T0).outcome is RegisterOutcome.NEW
    assert pg_ledger.register(s, 10, now=T0).outcome is RegisterOutcome.DUPLICATE_IN_PROGRESS


def _lost_mid_statement(pg_ledger, pg_store_url, operation):
    """Run ``operation`` while another session holds the task's row, terminate the store's
    backend as it waits, then let the row go: the statement is lost mid-flight."""
    import threading
    import time

    import psycopg2

    holder = psycopg2.connect(pg_store_url)
    with holder.cursor() as cur:
        cur.execute("SELECT 1 FROM ai_task_registry WHERE task_key = 'k' FOR UPDATE")
    outcome = {}

    def run():
        try:
            outcome["value"] = operation()
        except Exception as exc:  # noqa: BLE001 - reported to the test
            outcome["error"] = exc

    pid = pg_ledger._conn.get_backend_pid()
    worker = threading.Thread(target=run)
    worker.start()
    for _ in range(200):
        if pg_run(pg_store_url, "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND "
                                "wait_event_type = 'Lock'", (pid,)):
            break
        time.sleep(0.02)
    pg_run(pg_store_url, "SELECT pg_terminate_backend(%s, 5000)", (pid,))
    holder.rollback()
    holder.close()
    worker.join(10)
    return outcome


def test_a_checkpoint_lost_mid_statement_is_sent_again(pg_any, pg_store_url):
    """A fenced checkpoint is the same written twice: after a lost connection it is sent again
    on a new one and lands, so the stage is not redone."""
    from fme_ai_resilience.core.ledger import Stage

    pg_any.register(Submission("k", "F", "t"), 10, now=T0)
    (task,) = pg_any.claim("e", 1, 60, now=T0)
    outcome = _lost_mid_statement(pg_any, pg_store_url, lambda: pg_any.checkpoint(
        "k", task.lease_token, Stage.ANALYZED, {"condition": "fair"}, now=T0 + 1))
    assert outcome == {"value": True}
    assert pg_any.get("k").checkpoints["analyzed"] == {"condition": "fair"}


def test_a_completion_lost_mid_statement_is_not_guessed(pg_any, pg_store_url):
    """A completion may have committed: it is reported unavailable, never sent twice."""
    from fme_ai_resilience.core.errors import StoreUnavailable

    pg_any.register(Submission("k", "F", "t"), 10, now=T0)
    (task,) = pg_any.claim("e", 1, 60, now=T0)
    outcome = _lost_mid_statement(pg_any, pg_store_url, lambda: pg_any.complete(
        "k", task.lease_token, TaskOutcome.ACCEPTED, {"a": 1}, now=T0 + 1))
    assert isinstance(outcome.get("error"), StoreUnavailable)


def test_terminating_the_other_sessions_cuts_them_and_they_heal(pg_any, pg_store_url):
    """terminate_other_sessions cuts the other stores' connections (not its own); each
    reconnects on its next operation."""
    import time

    other = open_store(pg_any.url)
    other.counts()
    pid = other._conn.get_backend_pid()
    assert pg_any.terminate_other_sessions() >= 1
    for _ in range(100):     # termination is asynchronous
        if not pg_run(pg_store_url, "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)):
            break
        time.sleep(0.02)
    assert other.counts() == pg_any.counts() and other._conn.get_backend_pid() != pid
    other.close()


def test_a_plain_url_takes_psycopg2_and_a_named_driver_is_honoured(pg_store_url):
    """postgresql:// uses psycopg2 when installed; postgresql+pg8000:// and
    postgresql+psycopg2:// name the driver; both reach the same ledger."""
    tail = pg_store_url.split("://", 1)[1]
    with open_store(pg_store_url) as plain, open_store("postgresql+pg8000://" + tail) as pure, \
            open_store("postgresql+psycopg2://" + tail) as named:
        assert (plain.driver, pure.driver, named.driver) == ("psycopg2", "pg8000", "psycopg2")
        plain.clear()
        pure.register(Submission("k-pure", "F", "t"), 10, now=T0)
        assert named.get("k-pure").status == plain.get("k-pure").status


@pytest.mark.parametrize("driver", ["psycopg2", "pg8000"])
def test_a_session_the_server_ends_while_it_is_set_up_is_opened_again(driver, pg_store_url):
    """A restart or ``pg_terminate_backend`` that ends a connection between its connect and its
    session setup (what an engine starting during a failover meets) costs one more connect,
    not the operation: the store opens a new session and answers."""
    if driver == "pg8000":
        pytest.importorskip("pg8000", reason="pg8000 is not installed: pip install pg8000")
    url = pg_store_url if driver == "psycopg2" else pg8000_url(pg_store_url)
    store = open_store(url)
    real, ended = store._driver.connect, []

    def connect_then_end(*args, **kwargs):
        conn = real(*args, **kwargs)
        if not ended:   # the first session only
            pid = conn.get_backend_pid()
            ended.append(pg_run(pg_store_url, "SELECT pg_terminate_backend(%s, 5000)",
                                (pid,)))
        return conn

    store._driver.connect = connect_then_end   # (the driver object may be shared: undone)
    try:
        assert store.counts() is not None
    finally:
        del store._driver.connect
        store.close()
    assert ended == [[(True,)]]
