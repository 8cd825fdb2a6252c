"""Intake cost: decisions per second through ``intake.receive`` against the store's bare ``register``.

Run: ``.venv/bin/python bench/intake.py`` (PostgreSQL from ``FAIR_TEST_PG_URL`` or the local
server; a throw-away database is created and dropped). Writes nothing but stdout.

For each backend (a SQLite file, PostgreSQL) distinct Survey123 bodies of one shape are taken
through two paths on an emptied ledger:

* reference ``register``: the store's one-round-trip registration of the already parsed
  :class:`Submission` (parsing done before the clock starts), with the same watermark and park
  ceiling ``receive`` derives from the default settings (so both run the same SQL: new rows up
  to the watermark of 48, parked DEFERRED after it);
* subject ``receive``: the raw body bytes through parsing, keys, the backpressure plan, the
  registration and the HTTP answer, exactly as the gateway calls it.

Each path is timed for new submissions, then for redeliveries of the same bodies (duplicates,
reported as context: no target). Both paths write into the same ledger in alternating chunks
of 20, so they share table size and machine load; each register chunk and the receive chunk
beside it form a pair, and the median of the pairs' ratios is reported (robust to load
bursts). Regression guard: ``receive`` takes at most 1.5x ``register`` for new bodies.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fme_ai_resilience.services.intake.webhook import receive
from fme_ai_resilience.core.ledger import OverloadMode
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.store import open_store  # noqa: E402
from fme_ai_resilience.core.intake.survey123 import parse_webhook

#: The regression guard: receive / register for new bodies.
TARGET_RATIO = 1.5
SAMPLE = Path(__file__).resolve().parent.parent / "tests" / "data" / "survey123_add.json"
PG_ADMIN_URL = os.environ.get("FAIR_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
HEADERS = {"Content-Type": "application/json; charset=UTF-8", "X-Survey123-Event": "addData"}
#: The phase the guard judges, then the context phase (reported, not counted).
COUNTED = ("new",)
PHASES = COUNTED + ("redelivery",)


def bodies(n: int) -> List[bytes]:
    """``n`` distinct bodies shaped like the reference sample (one photo each)."""
    template = json.loads(SAMPLE.read_text(encoding="utf-8"))
    out = []
    for i in range(n):
        data = json.loads(json.dumps(template))
        feature = "{%08X-9D3F-4E61-8A7B-0F2C3D4E5A6B}" % i
        data["feature"]["attributes"]["globalid"] = feature
        data["feature"]["attributes"]["objectid"] = i
        data["feature"]["result"]["globalId"] = feature
        photo = data["feature"]["attachments"]["photo"][0]
        photo["globalId"] = "{%08X-E4F5-4A6B-8C7D-9E0F1A2B3C4D}" % i
        photo["parentGlobalId"] = feature
        out.append(json.dumps(data).encode("utf-8"))
    return out


@contextmanager
def sqlite_url() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="fair-bench-") as tmp:
        yield f"sqlite:///{tmp}/ledger.db"


@contextmanager
def postgres_url() -> Iterator[str]:
    import psycopg2

    admin = psycopg2.connect(PG_ADMIN_URL, connect_timeout=3)
    admin.autocommit = True
    name = f"fair_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


BACKENDS: Dict[str, Callable[[], "contextmanager[str]"]] = {
    "sqlite": sqlite_url, "postgresql": postgres_url}


Measured = Dict[str, Dict[str, float]]


def measure(url: str, raw: Sequence[bytes], rounds: int, chunk: int = 20) -> Measured:
    """Per phase: median seconds per operation of each path, and the median paired ratio.

    ``raw`` is split in two halves, one per path, registered into the same emptied ledger in
    alternating chunks (which goes first alternates too). Each register chunk and the receive
    chunk run right after it form a pair; the median of the pairs' ratios is robust to load
    bursts on a shared machine, which a total over a round is not.
    """
    settings = Settings()  # the defaults: park mode and its ceilings
    ceiling, park = settings.intake.capacity.watermark, settings.intake.park_ceiling
    half = len(raw) // 2
    subs = [parse_webhook(b, HEADERS)[0] for b in raw[:half]]
    bodies_ = list(raw[half:2 * half])
    now = time.time()
    store = open_store(url, init_schema=True)

    def run_register(lo: int, hi: int) -> None:
        for s in subs[lo:hi]:
            store.register(s, ceiling, OverloadMode.PARK, park, now=now)

    def run_decide(phase: str, lo: int, hi: int) -> None:
        for b in bodies_[lo:hi]:
            receive(b, HEADERS, settings, store=store, now=now)

    samples: Dict[str, Dict[str, List[float]]] = {
        phase: {"register": [], "receive": [], "ratio": []} for phase in PHASES}
    try:
        for r in range(rounds):
            store.clear()
            for phase in PHASES:
                for lo in range(0, half, chunk):
                    hi = min(half, lo + chunk)
                    spent = {}
                    pair = [("register", run_register),
                            ("receive", functools.partial(run_decide, phase))]
                    for name, fn in (pair if (lo // chunk + r) % 2 == 0 else pair[::-1]):
                        start = time.perf_counter()
                        fn(lo, hi)
                        spent[name] = (time.perf_counter() - start) / (hi - lo)
                    got = samples[phase]
                    got["register"].append(spent["register"])
                    got["receive"].append(spent["receive"])
                    got["ratio"].append(spent["receive"] / spent["register"])
    finally:
        store.close()
    return {phase: {k: statistics.median(v) for k, v in got.items()}
            for phase, got in samples.items()}


def report(results: Dict[str, Measured], n: int, rounds: int) -> bool:
    print(f"Intake decisions vs bare register — {n // 2} bodies per path x {rounds} rounds, "
          f"medians over chunk pairs; CPython {platform.python_version()}, {platform.system()} "
          f"{platform.machine()}, {os.cpu_count()} cores")
    print()
    print("| backend | phase | register (µs) | receive (µs) | register/s | receive/s "
          "| receive / register | overhead |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    ok = True
    for backend, phases in results.items():
        for phase, m in phases.items():
            reg, dec, ratio = m["register"], m["receive"], m["ratio"]
            if phase in COUNTED:
                ok = ok and ratio <= TARGET_RATIO
            print(f"| {backend} | {phase} | {reg * 1e6:.0f} | {dec * 1e6:.0f} | {1 / reg:,.0f} "
                  f"| {1 / dec:,.0f} | {ratio:.2f}x register | {100 * (ratio - 1):+.0f} % |")
    print()
    print("redelivery: the same bodies again, answered from the existing rows (context, not "
          "counted).")
    print(f"guard: receive <= {TARGET_RATIO:g}x register for new bodies: "
          f"{'met' if ok else 'NOT met'}")
    return ok


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=400,
                        help="distinct bodies per round, half per path (<= 480: the park ceiling)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--backends", default="sqlite,postgresql",
                        help="comma-separated: sqlite, postgresql")
    args = parser.parse_args(argv)
    raw = bodies(args.n)
    results = {}
    for backend in filter(None, (b.strip() for b in args.backends.split(","))):
        if backend not in BACKENDS:
            parser.error(f"unknown backend {backend!r}")
        with BACKENDS[backend]() as url:
            results[backend] = measure(url, raw, args.rounds)
    report(results, args.n, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
