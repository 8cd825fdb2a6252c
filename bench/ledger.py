"""Ledger registration on PostgreSQL, side by side with a bare-insert floor and procrastinate.

Run: ``.venv/bin/python bench/ledger.py`` (needs ``.[postgres,bench]`` and a server; the admin
URL is ``$FAIR_BENCH_PG_URL``, default ``postgresql://postgres@127.0.0.1:5432/test``).

The bench creates a throw-away database and drops it at the end. The subjects share it:

* ``floor``: a raw ``INSERT ... ON CONFLICT DO NOTHING RETURNING`` of the same row into the
  same table, with its indexes (the least an idempotent registration of this row can cost), and
  for context the same into a bare two-column table (key and JSON payload);
* ``ledger 10k`` / ``ledger 1M``: ``Store.register`` (insert-or-report-existing plus the capped
  backlog check) on a ledger already holding 10,000 / 1,000,000 finished rows;
* ``procrastinate``: ``Task.defer`` of procrastinate 3 (psycopg 3) with the same payload, as it
  ships (the connector's own pool, which checks each connection as it is handed out) and, for
  context, at its cheapest (a pool of one without that check).

Two scenarios, every operation committed on its own (fsync and synchronous_commit on):

* **one client** (latency): one connection per subject, one operation at a time, subjects
  interleaved in rounds with the order rotated; ops/s is the inverse of the mean latency;
* **burst** (throughput; the decisions/s targets are judged here): ``--clients`` OS processes
  (default 8, the engines of the default capacity plan) register at once, each on its own
  connection, as when a field crew's phones come back online; decisions/s is the total over
  the wall time from the first start to the last finish. Subjects take turns, in rounds, the
  order rotated.

The ledger's backlog is kept under the watermark (48, park ceiling 480, the default intake
settings) by marking registered rows SUCCEEDED (the steady state of an intake whose
processors keep up): with one client every 40 registrations, outside the timing; in the burst
every 5 ms from a separate process, whose work competes with the clients for the machine. The
same-row floor's table is drained the same way, so both carry the same churn; procrastinate's
jobs are left as they are.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
import uuid
from typing import Any, Callable, Dict, List, Tuple

import psycopg2

from fme_ai_resilience.core.ledger import OverloadMode, RegisterOutcome
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission

ADMIN_URL = os.environ.get("FAIR_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
CEILING, PARK_CEILING, DRAIN_EVERY = 48, 480, 40
T0 = 1_790_000_000.0

PREFILL = """
INSERT INTO {schema}.ai_task_registry (task_key, status, source, trace_id, payload,
    attempt_count, outcome, created_at, updated_at, completed_at)
SELECT md5('prefill' || i), 'SUCCEEDED', 'survey123', md5('trace' || i),
    '{{"prefill": true}}', 1, 'ACCEPTED', {t0} - i, {t0} - i, {t0} - i
FROM generate_series(1, {n}) AS i
"""
FLOOR_DDL = "CREATE TABLE floor_registry (task_key text PRIMARY KEY, payload jsonb NOT NULL)"
FLOOR_PREFILL = ("INSERT INTO floor_registry SELECT md5('prefill' || i), '{\"prefill\": true}' "
                 "FROM generate_series(1, %s) AS i")
#: The same-row floor is prepared once per connection, as the ledger's hot statements are.
ROW_FLOOR_PREPARE = (
    "PREPARE floor_insert AS INSERT INTO ledger_floor.ai_task_registry (task_key, status, "
    "source, trace_id, feature_global_id, attachment_global_id, event_type, payload, "
    "next_attempt_at, created_at, updated_at) "
    "VALUES ($1, 'PENDING', $2, $3, $4, $5, $6, $7, $8, $9, $10) "
    "ON CONFLICT (task_key) DO NOTHING RETURNING task_key")
ROW_FLOOR_EXECUTE = "EXECUTE floor_insert (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
FLOOR_INSERT = ("INSERT INTO floor_registry (task_key, payload) VALUES (%s, %s) "
                "ON CONFLICT (task_key) DO NOTHING RETURNING task_key")
DRAIN = ("UPDATE {schema}.ai_task_registry SET status = 'SUCCEEDED', outcome = 'ACCEPTED', "
         "completed_at = %s, next_attempt_at = NULL WHERE status IN ('PENDING', 'DEFERRED')")
#: Targets: decisions/s (throughput) ratios under the burst, the p99 ratio with one client;
#: the one-client throughput ratios are printed beside them without a verdict.
FLOOR_TARGET, PROCRASTINATE_TARGET, P99_TARGET = 0.7, 3.0, 1.2
BURST_DRAIN_PAUSE_S = 0.005
BURST_TIMEOUT_S = 300.0


def submission(i: int) -> Submission:
    """A realistic one-photo submission (about 820 bytes of JSON)."""
    gid = str(uuid.UUID(int=i + 1)).upper()
    return Submission(
        idempotency_key=uuid.uuid4().hex + uuid.uuid4().hex[:8],
        feature_global_id=f"{{{gid}}}", trace_id=uuid.uuid4().hex, object_id=i,
        attachment_global_id=str(uuid.uuid4()), attachment_id=i,
        attachment_url=f"https://services.example.com/arcgis/rest/services/Hydrants/"
                       f"FeatureServer/0/{i}/attachments/{i}",
        content_type="image/jpeg", question="photo", delivery_id=str(uuid.uuid4()),
        layer_url="https://services.example.com/arcgis/rest/services/Hydrants/FeatureServer/0",
        asset_type="hydrant", attributes={"inspector": "field-07", "condition_reported": "fair",
                                          "pressure_psi": 62, "notes": "paint peeling"})


def percentile(sorted_s: List[float], q: float) -> float:
    return sorted_s[min(len(sorted_s) - 1, int(q * len(sorted_s)))]


class Subject:
    """One thing being timed: a name and a function doing one registration."""

    def __init__(self, name: str, op: Callable[[Submission], None],
                 after: Callable[[int], None] = lambda n: None) -> None:
        self.name, self.op, self.after = name, op, after
        self.latencies: List[float] = []
        self.round_p99s: List[float] = []
        self.busy_s = 0.0
        self.done = 0
        self.close: Callable[[], None] = lambda: None

    def run(self, subs: List[Submission]) -> None:
        first = len(self.latencies)
        for s in subs:
            start = time.perf_counter()
            self.op(s)
            elapsed = time.perf_counter() - start
            self.latencies.append(elapsed)
            self.busy_s += elapsed
            self.done += 1
            self.after(self.done)
        self.round_p99s.append(percentile(sorted(self.latencies[first:]), 0.99))

    def summary(self) -> Dict[str, float]:
        lat = sorted(self.latencies)
        return {"ops": len(lat), "per_s": len(lat) / self.busy_s,
                "p50_ms": percentile(lat, 0.50) * 1e3, "p99_ms": percentile(lat, 0.99) * 1e3,
                "mean_ms": statistics.fmean(lat) * 1e3,
                # Robust to bursts of load from other processes on a shared machine: the
                # p99 of each round, then the median over rounds.
                "p99_rounds_ms": statistics.median(self.round_p99s) * 1e3}


def ledger_subject(name: str, url: str, schema: str, admin) -> Subject:
    store = open_store(f"{url}?options=-csearch_path%3D{schema}")
    drain_sql = DRAIN.format(schema=schema)

    def op(s: Submission) -> None:
        reg = store.register(s, CEILING, OverloadMode.PARK, PARK_CEILING, now=T0)
        if reg.outcome is not RegisterOutcome.NEW:
            raise RuntimeError(f"{name}: expected NEW, got {reg}")

    def after(done: int) -> None:
        if done % DRAIN_EVERY == 0:
            with admin.cursor() as cur:
                cur.execute(drain_sql, (T0,))

    subject = Subject(name, op, after)
    subject.close = store.close
    return subject


def floor_subject(url: str, same_row: bool = True, admin: Any = None) -> Subject:
    """The raw INSERT: the ledger's row into the ledger's table (prepared once, as the ledger's
    statements are), or (``same_row=False``) key and payload into a bare table. With ``admin``
    the same-row floor's table is drained like the ledger's (same churn), outside the timing."""
    conn = psycopg2.connect(url)
    conn.autocommit = True
    cur = conn.cursor()
    if same_row:
        cur.execute(ROW_FLOOR_PREPARE)

    def row_op(s: Submission) -> None:
        cur.execute(ROW_FLOOR_EXECUTE, (
            s.idempotency_key, s.source, s.trace_id, s.feature_global_id,
            s.attachment_global_id, s.event_type, json.dumps(s.to_payload()), T0, T0, T0))
        if not cur.fetchall():
            raise RuntimeError("floor: key already there")

    def bare_op(s: Submission) -> None:
        cur.execute(FLOOR_INSERT, (s.idempotency_key, json.dumps(s.to_payload())))
        if not cur.fetchall():
            raise RuntimeError("floor: key already there")

    def after(done: int) -> None:
        if admin is not None and same_row and done % DRAIN_EVERY == 0:
            with admin.cursor() as cur:
                cur.execute(DRAIN.format(schema="ledger_floor"), (T0,))

    subject = Subject("floor (raw INSERT, same row)" if same_row else
                      "floor (raw INSERT, bare table)", row_op if same_row else bare_op, after)
    subject.close = conn.close
    return subject


def procrastinate_subject(url: str, shipped: bool = True, name: str = "") -> Subject:
    """``Task.defer`` through procrastinate's sync connector.

    ``shipped``: the connector builds its own pool with its defaults, as procrastinate sets it
    up (the pool checks each connection as it hands it out: one more round trip per defer).
    Otherwise a pool of one autocommit connection without that check (no BEGIN/COMMIT around
    each defer either): procrastinate at its cheapest.
    """
    import procrastinate
    import psycopg_pool

    if shipped:
        app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=url))
        pool = None
        app.open()
    else:
        app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector())
        pool = psycopg_pool.ConnectionPool(url, min_size=1, max_size=1, open=False,
                                           kwargs={"autocommit": True})
        pool.open(wait=True)
        app.open(pool)

    @app.task(name="analyse_photo", queue="photos")
    def analyse_photo(**payload):  # pragma: no cover - never run, only deferred
        return None

    def op(s: Submission) -> None:
        analyse_photo.defer(**s.to_payload())

    subject = Subject(name or ("procrastinate defer" if shipped
                               else "procrastinate defer, cheapest"), op)
    subject.close = lambda: (app.close(), pool.close() if pool is not None else None)
    return subject


def apply_procrastinate_schema(url: str) -> None:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=url))
    app.open()
    try:
        app.schema_manager.apply_schema()
    finally:
        app.close()


# -- burst: several client processes at once -------------------------------------------------

def _burst_op(kind: str, url: str) -> Callable[[Submission], None]:
    """One client's registration function for ``kind`` (built inside the client process)."""
    if kind == "floor":
        return floor_subject(url).op
    if kind == "ledger":
        store = open_store(f"{url}?options=-csearch_path%3Dledger_small")

        def op(s: Submission) -> None:
            if store.register(s, CEILING, OverloadMode.PARK, PARK_CEILING, now=T0).outcome not in (
                    RegisterOutcome.NEW, RegisterOutcome.PARKED):
                raise RuntimeError("ledger: a new key was not stored")
        return op
    return procrastinate_subject(url, shipped=(kind == "procrastinate")).op


def _burst_client(kind: str, url: str, first: int, ops: int, barrier: Any, out: Any) -> None:
    try:
        op = _burst_op(kind, url)
        subs = [submission(first + i) for i in range(ops + 20)]
        for s in subs[:20]:  # warm the connection and its caches, untimed
            op(s)
        barrier.wait(timeout=BURST_TIMEOUT_S)
        start = time.perf_counter()
        for s in subs[20:]:
            op(s)
        out.put((start, time.perf_counter()))
    except BaseException as exc:  # reported, so the run stops instead of waiting for it
        barrier.abort()
        out.put(f"{type(exc).__name__}: {exc}")


def _drainer(url: str, schema: str, stop: Any) -> None:
    conn = psycopg2.connect(url)
    conn.autocommit = True
    with conn.cursor() as cur:
        while not stop.is_set():
            cur.execute(DRAIN.format(schema=schema), (T0,))
            time.sleep(BURST_DRAIN_PAUSE_S)
    conn.close()


#: The table each burst subject's drainer keeps under the watermark (procrastinate's jobs stay).
DRAINED = {"floor": "ledger_floor", "ledger": "ledger_small"}
BURST_KINDS = (("floor", "floor (raw INSERT, same row)"), ("ledger", "ledger"),
               ("procrastinate", "procrastinate defer"),
               ("procrastinate-cheapest", "procrastinate defer, cheapest"))


def burst(url: str, clients: int, ops: int, rounds: int) -> Dict[str, List[float]]:
    """Decisions/s of each subject per round, ``clients`` processes at once."""
    ctx = multiprocessing.get_context("spawn")  # clean processes: no inherited connections
    per_s: Dict[str, List[float]] = {label: [] for _, label in BURST_KINDS}
    first = 100_000_000
    for r in range(rounds):
        order = BURST_KINDS[r % len(BURST_KINDS):] + BURST_KINDS[:r % len(BURST_KINDS)]
        for kind, label in order:
            barrier, out, stop = ctx.Barrier(clients), ctx.Queue(), ctx.Event()
            drainer = None
            if kind in DRAINED:
                drainer = ctx.Process(target=_drainer, args=(url, DRAINED[kind], stop),
                                      daemon=True)
                drainer.start()
            procs = []
            for _ in range(clients):
                procs.append(ctx.Process(target=_burst_client,
                                         args=(kind, url, first, ops, barrier, out),
                                         daemon=True))
                first += ops + 20
            for proc in procs:
                proc.start()
            answers = [out.get(timeout=BURST_TIMEOUT_S) for _ in procs]
            for proc in procs:
                proc.join(timeout=BURST_TIMEOUT_S)
            drained = drainer is None or drainer.is_alive()
            stop.set()
            if drainer is not None:
                drainer.join(timeout=BURST_TIMEOUT_S)
            failures = [a for a in answers if isinstance(a, str)]
            if failures:
                raise RuntimeError(f"{label}: {len(failures)} client(s) failed: {failures[0]}")
            if not drained:
                raise RuntimeError(f"{label}: the drainer died during the burst")
            spans: List[Tuple[float, float]] = answers
            wall = max(end for _, end in spans) - min(start for start, _ in spans)
            per_s[label].append(clients * ops / wall)
    return per_s


# -- one client at a time --------------------------------------------------------------------

def one_client(url: str, work: Any, ops: int, rounds: int, small: int,
               large: int) -> Dict[str, Dict[str, float]]:
    subjects = [floor_subject(url, admin=work),
                ledger_subject(f"ledger, {small:,} rows", url, "ledger_small", work),
                procrastinate_subject(url, shipped=True),
                ledger_subject(f"ledger, {large:,} rows", url, "ledger_large", work),
                procrastinate_subject(url, shipped=False),
                floor_subject(url, same_row=False)]
    try:
        for s in subjects:  # warm up each connection and its caches, untimed
            s.run([submission(i) for i in range(100)])
            s.latencies, s.round_p99s, s.busy_s = [], [], 0.0
        per_round = max(1, ops // rounds)
        counter = 1000
        for r in range(rounds):
            order = subjects[r % len(subjects):] + subjects[:r % len(subjects)]
            for s in order:
                s.run([submission(counter + i) for i in range(per_round)])
                counter += per_round
        return {s.name: s.summary() for s in subjects}
    finally:
        for s in subjects:
            s.close()


def verdict(value: float, target: float, at_least: bool = True) -> str:
    ok = value >= target if at_least else value <= target
    return f"{value:>6.2f}x  (target {'>=' if at_least else '<='} {target}: " \
           f"{'met' if ok else 'NOT met'})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=6000, help="operations per subject, one client")
    parser.add_argument("--rounds", type=int, default=10, help="rounds, one client")
    parser.add_argument("--large", type=int, default=1_000_000, help="rows in the large ledger")
    parser.add_argument("--small", type=int, default=10_000, help="rows in the small ledger")
    parser.add_argument("--clients", type=int, default=8, help="client processes in the burst")
    parser.add_argument("--burst-ops", type=int, default=300,
                        help="operations per client per burst")
    parser.add_argument("--burst-rounds", type=int, default=5, help="bursts per subject")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    admin = psycopg2.connect(ADMIN_URL)
    admin.autocommit = True
    name = f"fair_bench_ledger_{os.getpid()}"
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    url = ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    work = None
    try:
        work = psycopg2.connect(url)
        work.autocommit = True
        for schema, rows in (("ledger_small", args.small), ("ledger_large", args.large),
                             ("ledger_floor", args.small)):
            with work.cursor() as cur:
                cur.execute(f"CREATE SCHEMA {schema}")
            store = open_store(f"{url}?options=-csearch_path%3D{schema}", init_schema=True)
            store.close()
            t = time.perf_counter()
            with work.cursor() as cur:
                cur.execute(PREFILL.format(schema=schema, t0=T0, n=rows))
                cur.execute(f"VACUUM ANALYZE {schema}.ai_task_registry")
            print(f"prefilled {schema} with {rows:,} rows in {time.perf_counter() - t:.1f}s",
                  file=sys.stderr)
        with work.cursor() as cur:
            cur.execute(FLOOR_DDL)
            cur.execute(FLOOR_PREFILL, (args.small,))
            cur.execute("VACUUM ANALYZE floor_registry")
        apply_procrastinate_schema(url)
        one = one_client(url, work, args.ops, args.rounds, args.small, args.large)
        bursts = burst(url, args.clients, args.burst_ops, args.burst_rounds)
    finally:
        if work is not None:
            work.close()
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()

    floor, small, proc, large, cheapest, bare = one.values()
    print(f"One client, one operation at a time ({args.ops} operations per subject, "
          f"{args.rounds} rounds)")
    print(f"{'subject':<32}{'ops':>7}{'ops/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'p99/round':>11}")
    for label, r in one.items():
        print(f"{label:<32}{r['ops']:>7}{r['per_s']:>9.0f}{r['p50_ms']:>9.3f}"
              f"{r['p99_ms']:>9.3f}{r['p99_rounds_ms']:>11.3f}")
    print(f"{'ledger/floor':<40}{small['per_s'] / floor['per_s']:>6.2f}x")
    print(f"{'ledger/floor, bare table':<40}{small['per_s'] / bare['per_s']:>6.2f}x")
    print(f"{'ledger/procrastinate':<40}{small['per_s'] / proc['per_s']:>6.2f}x")
    print(f"{'ledger/procrastinate, cheapest':<40}{small['per_s'] / cheapest['per_s']:>6.2f}x")
    # Each round's p99, then the median over rounds: robust to bursts of load from other
    # processes on a shared machine, which the p99 of all operations together is not.
    print(f"{f'p99 at {args.large:,} / at {args.small:,} rows':<40}"
          f"{verdict(large['p99_rounds_ms'] / small['p99_rounds_ms'], P99_TARGET, False)}")
    print(f"{'same, p99 of all operations together':<40}"
          f"{large['p99_ms'] / small['p99_ms']:>6.2f}x")
    print(f"{'p50, same':<40}{large['p50_ms'] / small['p50_ms']:>6.2f}x")
    print()
    print(f"Burst: {args.clients} client processes at once, {args.burst_ops} operations each, "
          f"{args.burst_rounds} rounds (median decisions/s; every round in brackets)")
    med = {label: statistics.median(v) for label, v in bursts.items()}
    for label, values in bursts.items():
        print(f"{label:<32}{med[label]:>9.0f}/s   [{', '.join(f'{v:.0f}' for v in values)}]")
    b_floor, b_ledger, b_proc, b_cheap = (med[label] for _, label in BURST_KINDS)
    print(f"{'ledger/floor':<40}{verdict(b_ledger / b_floor, FLOOR_TARGET)}")
    print(f"{'ledger/procrastinate':<40}{verdict(b_ledger / b_proc, PROCRASTINATE_TARGET)}")
    print(f"{'ledger/procrastinate, cheapest':<40}{b_ledger / b_cheap:>6.2f}x")
    print(f"total wall time {time.perf_counter() - started:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
