"""The processor's throughput against the bound a Vision AI of fixed latency sets, and its
ledger round trips per completed task.

Run: ``.venv/bin/python bench/processor.py`` (PostgreSQL at ``$FAIR_BENCH_PG_URL``, default
``postgresql://postgres@127.0.0.1:5432/test``; ``--backends sqlite`` without one).

N engine processes (``--engines``, default 4) work through N x ``--tasks-per-engine`` photos
with a loopback Vision stand-in that answers every call after ``--latency`` seconds (default
0.2). An engine can finish at most one task per L, so the fleet's bound is N / L tasks/s; what
the library adds (claim, download, checkpoints, the call log, validation, the table sink's
completion) shows as the distance from that bound. Side by side in each round, subjects
interleaved, on the same stand-ins and photos:

* ``bare loop``: each engine downloads its share of the photos and posts each to the stand-in
  with plain ``requests``, nothing recorded (the floor of the HTTP work itself);
* ``processor``: each engine runs ``Processor.run_batch`` (built by ``build_processor`` from
  settings, ``writeback.sink=table``) until no task is due, on a ledger holding the tasks.

Throughput is completed tasks over the wall time from the start signal to the last engine's
end; the median of ``--rounds`` is reported. Round trips are the ledger statements each engine
sent (``BEGIN``/``COMMIT`` included; on SQLite, the statements the library ran), counted in the
engine process and divided by the tasks it completed; the empty claim that ends each engine's
run is included.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import resource
import statistics
import sys
import time
from typing import Any, Dict, List, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from intake import BACKENDS  # noqa: E402  (the throw-away databases of the intake bench)

from fme_ai_resilience.drill.standins import FaultSchedule, PhotoHost, VisionStandIn  # noqa: E402
from fme_ai_resilience.core.intake.keys import compose_key, trace_id_for
from fme_ai_resilience.store import open_store  # noqa: E402
from fme_ai_resilience.core.intake.submission import Submission

TARGET = 0.9   # of the bound N / L


# -- counting the ledger's statements in an engine process ---------------------------------------
class _Count:
    statements = 0


def _count_statements() -> None:
    """Count every statement the store sends, whichever driver sends it: SQLite's trace
    callback; for PostgreSQL, a counting cursor on each connection the store's driver opens
    (psycopg2: the connection's cursor factory; pg8000: the store's cursor wrapper)."""
    import sqlite3

    from fme_ai_resilience.store import pg_drivers, sqlite as sqlite_store

    def counted() -> None:
        _Count.statements += 1

    connect = sqlite3.connect

    def counted_sqlite(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(lambda _sql: counted())
        return conn
    sqlite_store.sqlite3.connect = counted_sqlite   # type: ignore[attr-defined]

    pg8000_execute = pg_drivers._Pg8000Cursor.execute

    def pg8000_counted(self: Any, sql: str, params: Any = None) -> None:
        counted()
        return pg8000_execute(self, sql, params)
    pg_drivers._Pg8000Cursor.execute = pg8000_counted   # type: ignore[method-assign]

    try:
        import psycopg2.extensions
    except ImportError:
        return

    class Cursor(psycopg2.extensions.cursor):
        def execute(self, query: Any, vars: Any = None) -> Any:   # noqa: A002 - driver's name
            counted()
            return super().execute(query, vars)

    psycopg2_connect = pg_drivers._Psycopg2.connect

    def psycopg2_counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        conn = psycopg2_connect(self, *args, **kwargs)
        conn.cursor_factory = Cursor
        return conn
    pg_drivers._Psycopg2.connect = psycopg2_counted   # type: ignore[method-assign]


# -- the engines ----------------------------------------------------------------------------------
def _processor_engine(url: str, values: Dict[str, str], start: Any, out: Any) -> None:
    _count_statements()
    from fme_ai_resilience.core.ledger import Status
    from fme_ai_resilience.services.pipeline import build_processor
    from fme_ai_resilience.services.processing.processor import Stop
    from fme_ai_resilience.core.config.settings import Settings

    store = open_store(url)
    processor = build_processor(Settings().with_values(values), store=store,
                                owner=f"bench-{os.getpid()}")
    store.counts()                       # connected before the start, as a running engine is
    operations = _count_operations(store)
    before = _Count.statements
    start.wait()
    cpu = _cpu_s()
    done = 0
    while True:
        report = processor.run_batch()
        done += report.count(Status.SUCCEEDED)
        if report.stopped is not Stop.CLAIM_LIMIT:
            break
    operations["_cpu_ms"] = int((_cpu_s() - cpu) * 1000)
    out.put((time.time(), done, _Count.statements - before, dict(operations)))
    store.close()


def _cpu_s() -> float:
    """The CPU seconds this process used so far (user and system, every thread)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _count_operations(store: Any) -> Dict[str, int]:
    """Count the calls of each public store operation (the processor, its breakers and its
    ladder all go through this one store)."""
    counts: Dict[str, int] = {}
    for name in dir(store):
        method = getattr(store, name)
        if name.startswith("_") or not callable(method):
            continue

        def counted(*args: Any, _name: str = name, _method: Any = method, **kwargs: Any) -> Any:
            counts[_name] = counts.get(_name, 0) + 1
            return _method(*args, **kwargs)
        setattr(store, name, counted)
    return counts


def _bare_engine(endpoint: str, photos: Sequence[str], start: Any, out: Any) -> None:
    import requests

    session = requests.Session()
    start.wait()
    cpu = _cpu_s()
    done = 0
    for url in photos:
        image = session.get(url, timeout=30).content
        answer = session.post(endpoint, data=image, timeout=30,
                              headers={"Content-Type": "application/octet-stream"})
        done += answer.status_code == 200 and "condition" in answer.json()
    out.put((time.time(), done, 0, {"_cpu_ms": int((_cpu_s() - cpu) * 1000)}))


Run = Tuple[float, int, int, Dict[str, int]]


def _run_engines(target: Any, args_per_engine: List[tuple]) -> Run:
    ctx = multiprocessing.get_context("spawn")   # clean engines: no inherited connections
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*a, start, out)) for a in args_per_engine]
    for p in procs:
        p.start()
    time.sleep(1.5)                              # every engine imported and connected
    began = time.time()
    start.set()
    results: List[Run] = []
    while len(results) < len(procs):
        try:
            results.append(out.get(timeout=1))
        except queue.Empty:
            failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if failed:
                raise SystemExit(f"an engine failed (exit codes {failed}); see its stderr")
    for p in procs:
        p.join(30)
    operations: Dict[str, int] = {}
    for r in results:
        for name, n in r[3].items():
            operations[name] = operations.get(name, 0) + n
    return (max(r[0] for r in results) - began, sum(r[1] for r in results),
            sum(r[2] for r in results), operations)


# -- one round -----------------------------------------------------------------------------------
def _register(url: str, photos: PhotoHost, names: Sequence[str]) -> None:
    with open_store(url) as store:
        store.clear()
        now = time.time()
        for name in names:
            key = compose_key(f"feature-{name}", f"photo-{name}")
            store.register(Submission(key, f"feature-{name}", trace_id_for(key),
                                      attachment_global_id=f"photo-{name}",
                                      attachment_url=photos.url_for(name)), 10**6, now=now)


def measure(url: str, engines: int, per_engine: int, latency_s: float,
            rounds: int) -> Dict[str, List[Run]]:
    results: Dict[str, List[Run]] = {"bare loop": [], "processor": []}
    with VisionStandIn(FaultSchedule(latency_s=latency_s)) as vision, PhotoHost() as photos:
        host = photos.url.split("//", 1)[1].rstrip("/")
        values = {"vision.endpoint": vision.endpoint, "download.allowed_hosts": host,
                  "download.allow_http_hosts": "127.0.0.1",
                  "download.allow_private_hosts": "127.0.0.1", "writeback.sink": "table",
                  "intake.watermark": "100000"}
        with open_store(url, init_schema=True):
            pass
        for r in range(rounds):
            order = ["bare loop", "processor"] if r % 2 == 0 else ["processor", "bare loop"]
            for subject in order:
                names = [f"{subject[0]}{r}-{i}.jpg" for i in range(engines * per_engine)]
                for name in names:
                    photos.add(name)
                if subject == "processor":
                    _register(url, photos, names)
                    run = _run_engines(_processor_engine,
                                       [(url, values) for _ in range(engines)])
                else:
                    shares = [[photos.url_for(n) for n in names[i::engines]]
                              for i in range(engines)]
                    run = _run_engines(_bare_engine, [(vision.endpoint, s) for s in shares])
                results[subject].append(run)
    return results


def report(backend: str, results: Dict[str, List[Run]], engines: int,
           latency_s: float, tasks: int) -> bool:
    bound = engines / latency_s
    ok = True
    for subject, runs in results.items():
        rates = [done / wall for wall, done, _, _ in runs]
        rate = statistics.median(rates)
        trips = statistics.median(stmts / max(done, 1) for _, done, stmts, _ in runs)
        cpu_ms = statistics.median(ops["_cpu_ms"] / max(done, 1) for _, done, _, ops in runs)
        complete = all(done == tasks for _, done, _, _ in runs)
        shown = f"{trips:.1f}" if subject == "processor" else ""
        print(f"| {backend} | {subject} | {rate:.2f} | {rate / bound:.2f} | {shown} | "
              f"{cpu_ms:.1f} | {'all' if complete else 'MISSING'} |")
        if subject == "processor":
            ok = ok and complete and rate / bound >= TARGET
    return ok


def breakdown(backend: str, runs: List[Run]) -> None:
    """The store operations per completed task, summed over the rounds."""
    done = sum(r[1] for r in runs)
    total: Dict[str, int] = {}
    for r in runs:
        for name, n in r[3].items():
            if not name.startswith("_"):
                total[name] = total.get(name, 0) + n
    shown = ", ".join(f"{name} {n / done:.2f}" for name, n in
                      sorted(total.items(), key=lambda kv: (-kv[1], kv[0])))
    print(f"{backend}: store operations per completed task: {shown}")


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--engines", type=int, default=4)
    parser.add_argument("--tasks-per-engine", type=int, default=25)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(list(argv) or None)
    tasks = args.engines * args.tasks_per_engine
    bound = args.engines / args.latency
    print(f"{args.engines} engines, {tasks} tasks, Vision latency {args.latency:g} s: "
          f"bound N/L = {bound:.2f} tasks/s; median of {args.rounds} rounds")
    print("| backend | subject | tasks/s | of N/L | ledger statements per task "
          "| engine CPU ms per task | completed |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    ok = True
    measured = {}
    for backend in args.backends.split(","):
        with BACKENDS[backend]() as url:
            measured[backend] = measure(url, args.engines, args.tasks_per_engine,
                                        args.latency, args.rounds)
        ok = report(backend, measured[backend], args.engines, args.latency, tasks) and ok
    for backend, results in measured.items():
        breakdown(backend, results["processor"])
    print(f"target: the processor at >= {TARGET:g} of N/L on every backend: "
          f"{'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
