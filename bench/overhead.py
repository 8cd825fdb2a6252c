"""Per-call overhead on the success path, side by side with the libraries users know.

Run: ``.venv/bin/python bench/overhead.py`` (needs the ``bench`` extra). Writes nothing but
stdout. Every case wraps the same trivial target; all cases of a comparison are measured in one
process, interleaved round by round, and each is reported as the best round's time per call,
its overhead over the bare call, and the ratio of that overhead to the comparison's reference.

To compare something else (a circuit breaker, say), append a :class:`Comparison` to
:data:`COMPARISONS` with its own cases; nothing else changes.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

Target = Callable[[], object]


@dataclass(frozen=True)
class Case:
    """One contender: ``make(target)`` returns a no-argument callable that calls ``target`` once."""

    name: str
    make: Callable[[Target], Target]


@dataclass(frozen=True)
class Comparison:
    """A group of cases measured together; ratios are taken against the case named ``reference``.

    ``subject`` is the case the ``target`` ratio applies to (the line the bench is about).
    """

    title: str
    cases: List[Case]
    reference: str
    subject: str
    target: Optional[float] = None
    notes: List[str] = field(default_factory=list)


def target() -> int:
    """The wrapped call: does nothing, so everything measured is the wrapper's overhead."""
    return 1


# -- retry engines ---------------------------------------------------------------------------

def _ours(fn: Target) -> Target:
    from fme_ai_resilience.core.clock import SystemClock
    from fme_ai_resilience.core.resilience.retry import RetryPolicy
    from fme_ai_resilience.services.resilience.retry import Retrying

    engine = Retrying(RetryPolicy(deadline_s=180.0), clock=SystemClock())
    run = engine.run
    return lambda: run(fn)


def _tenacity(fn: Target) -> Target:
    import tenacity

    return tenacity.retry(stop=tenacity.stop_after_attempt(6),
                          wait=tenacity.wait_random_exponential(multiplier=1, max=60),
                          retry=tenacity.retry_if_exception_type(ConnectionError))(fn)


def _stamina(fn: Target) -> Target:
    import stamina

    return stamina.retry(on=ConnectionError, attempts=6, timeout=180.0)(fn)


def _backoff(fn: Target) -> Target:
    import backoff

    return backoff.on_exception(backoff.expo, ConnectionError, max_tries=6, max_time=180)(fn)


# -- circuit breakers -------------------------------------------------------------------------

def _our_breaker():
    from fme_ai_resilience.core.resilience.breaker import BreakerPolicy
    from fme_ai_resilience.services.resilience.breaker import CircuitBreaker
    from fme_ai_resilience.core.clock import SystemClock
    from fme_ai_resilience.store import open_store

    store = open_store("sqlite:///:memory:", init_schema=True)
    breaker = CircuitBreaker("vision", BreakerPolicy(), store=store, clock=SystemClock())
    breaker.allow()   # warm the state cache
    return breaker


def _ours_allow(fn: Target) -> Target:
    allow = _our_breaker().allow

    def call() -> object:
        if allow():
            return fn()
        raise RuntimeError("circuit open")
    return call


def _ours_allow_record(fn: Target) -> Target:
    from fme_ai_resilience.core.ledger import CallRecord

    breaker = _our_breaker()
    allow, record, now = breaker.allow, breaker.record, time.time

    def call() -> object:
        permit = allow()
        started = now()
        out = fn()
        record(permit, CallRecord("vision", started, now() - started))
        return out
    return call


def _pybreaker(fn: Target) -> Target:
    import pybreaker

    breaker = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=60)
    run = breaker.call
    return lambda: run(fn)


COMPARISONS: List[Comparison] = [
    Comparison(
        title="Retry engine overhead (success path)",
        cases=[Case("bare call", lambda fn: fn),
               Case("fme-ai-resilience Retrying.run", _ours),
               Case("tenacity.retry", _tenacity),
               Case("stamina.retry", _stamina),
               Case("backoff.on_exception", _backoff)],
        reference="tenacity.retry",
        subject="fme-ai-resilience Retrying.run",
        target=0.25,
        notes=["each wrapper: 6 attempts, exponential jittered backoff, retry on connection "
               "errors (stamina and ours also carry a 180 s deadline)"]),
    Comparison(
        title="Circuit breaker overhead (closed circuit, success path)",
        cases=[Case("bare call", lambda fn: fn),
               Case("fme-ai-resilience allow() (warm cache)", _ours_allow),
               Case("fme-ai-resilience allow()+record() (SQLite :memory:)", _ours_allow_record),
               Case("pybreaker.CircuitBreaker.call (in memory)", _pybreaker)],
        reference="pybreaker.CircuitBreaker.call (in memory)",
        subject="fme-ai-resilience allow() (warm cache)",
        target=1.0,
        notes=["ours shares its state through the ledger: allow() reads it through a <= 1 s "
               "cache; record() appends the call to ai_call_log (one INSERT and commit per "
               "call; here SQLite in memory, so the figure is CPU cost, not disk or network)"]),
]


def _time_per_call(fn: Target, number: int) -> float:
    clock = time.perf_counter
    start = clock()
    for _ in range(number):
        fn()
    return (clock() - start) / number


def measure(comparison: Comparison, number: int, rounds: int) -> Dict[str, float]:
    """Best time per call (seconds) of every case, measured in interleaved rounds."""
    callables = {case.name: case.make(target) for case in comparison.cases}
    for fn in callables.values():  # warm up imports, caches and the interpreter
        _time_per_call(fn, max(1, number // 10))
    best = {name: float("inf") for name in callables}
    for _ in range(rounds):
        for name, fn in callables.items():
            best[name] = min(best[name], _time_per_call(fn, number))
    return best


def report(comparison: Comparison, best: Dict[str, float]) -> List[str]:
    """The lines printed for one comparison."""
    bare = best.get("bare call", 0.0)
    ref = best[comparison.reference] - bare
    lines = [f"## {comparison.title}", "",
             "| case | per call (µs) | overhead (µs) | overhead vs " + comparison.reference + " |",
             "| --- | ---: | ---: | ---: |"]
    for case in comparison.cases:
        over = best[case.name] - bare
        ratio = "" if case.name == "bare call" else f"{over / ref:.2f}x"
        lines.append(f"| {case.name} | {best[case.name] * 1e6:.2f} | {over * 1e6:.2f} | {ratio} |")
    if comparison.target is not None:
        got = (best[comparison.subject] - bare) / ref
        verdict = "meets" if got <= comparison.target else "MISSES"
        lines += ["", f"{comparison.subject}: {got:.2f}x {comparison.reference} "
                      f"({verdict} the target of <= {comparison.target:.2f}x)"]
    lines += [f"note: {note}" for note in comparison.notes]
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds per case")
    args = parser.parse_args(argv)
    import importlib.metadata as md

    versions = ", ".join(f"{p} {md.version(p)}" for p in ("tenacity", "stamina", "backoff",
                                                            "pybreaker"))
    print(f"python {platform.python_version()} ({platform.python_implementation()}), "
          f"{platform.machine()}, {platform.system()}; {versions}")
    print(f"{args.rounds} rounds x {args.number} calls per case, best round reported\n")
    for comparison in COMPARISONS:
        print("\n".join(report(comparison, measure(comparison, args.number, args.rounds))))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
