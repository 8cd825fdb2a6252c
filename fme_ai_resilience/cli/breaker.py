"""``fme-ai-resilience breaker``: show and steer the shared circuit breakers.

``show`` prints every circuit (or one) with its recent call window; ``open``/``close`` force
the circuit, ``disable`` keeps metrics only, ``reset`` returns it to automatic and closed;
``calibrate`` suggests thresholds from the call log (``--apply`` stores them in
``resilience_config``).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict

from ..breaker import BreakerMode, BreakerState, Manual
from ..clock import SystemClock
from ..services.calibration import calibrate
from ..services.shared_breaker import CircuitBreaker
from .common import EXIT_FAILED, EXIT_OK, add_db_option, command, ledger, number

__all__ = ["add_parser", "describe", "effective"]

COMMANDS = {"open": Manual.FORCE_OPEN, "close": Manual.FORCE_CLOSED,
            "disable": Manual.DISABLE, "reset": Manual.RESET}


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("breaker", help="show and steer the shared circuit breakers",
                              description=__doc__.splitlines()[0])
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="state of every circuit, or of --service")
    show.add_argument("--service", help="one protected service")
    show.add_argument("--json", action="store_true", help="print JSON")
    add_db_option(show)
    show.set_defaults(func=run_show)
    for name, manual in COMMANDS.items():
        sub = actions.add_parser(name, help=f"{manual.value.lower().replace('_', ' ')} "
                                            "the circuit of --service")
        sub.add_argument("--service", required=True, help="the protected service")
        add_db_option(sub)
        sub.set_defaults(func=run_command, command_value=manual.value)
    cal = actions.add_parser("calibrate", help="suggest thresholds from the call log")
    cal.add_argument("--service", required=True, help="the protected service")
    cal.add_argument("--days", type=number(above=0), default=7.0,
                     help="history to look at (default 7)")
    cal.add_argument("--margin", type=number(minimum=0, maximum=1), default=0.1,
                     help="added to the baseline P95 rate (default 0.1)")
    cal.add_argument("--apply", action="store_true",
                     help="store the suggestion in resilience_config")
    cal.add_argument("--json", action="store_true", help="print JSON")
    add_db_option(cal)
    cal.set_defaults(func=run_calibrate)


def effective(state: BreakerState) -> str:
    """What callers experience: the manual mode when one is set, else the automatic state."""
    return {BreakerMode.FORCED_OPEN: "OPEN (forced)", BreakerMode.FORCED_CLOSED: "CLOSED (forced)",
            BreakerMode.DISABLED: "DISABLED (metrics only)"}.get(state.mode, state.state.value)


def describe(service: str, state: BreakerState, *, now: float) -> Dict[str, Any]:
    """One circuit as a JSON-ready dict."""
    return {"service": service, "effective": effective(state), "state": state.state.value,
            "mode": state.mode.value,
            "generation": state.generation, "changed_at": state.changed_at,
            "open_until": state.open_until, "trips": state.trips,
            "retry_after_s": max(0.0, state.open_until - now) if state.open_until else 0.0}


@command
def run_show(args: argparse.Namespace) -> int:
    with ledger(args) as (store, settings):
        policy = settings.breaker
        now = SystemClock().now()
        if args.service:
            rows = {args.service: store.breaker_peek(args.service)}  # a read creates nothing
        else:
            rows = store.breaker_list()
        out = []
        for service, state in sorted(rows.items()):
            item = describe(service, state, now=now)
            window = store.call_window(service, now - policy.window_s, policy.slow_call_s)
            item["window"] = {"seconds": policy.window_s, "calls": window.calls,
                              "failures": window.failures, "slow": window.slow,
                              "retries": window.retries}
            out.append(item)
    if args.json:
        print(json.dumps(out, indent=2))
        return EXIT_OK
    if not out:
        print("no circuits yet")
    for item in out:
        w = item["window"]
        line = (f"{item['service']}: {item['effective']} (automatic state {item['state']}, "
                f"generation {item['generation']}, trips {item['trips']})")
        if item["retry_after_s"]:
            line += f", opens for probes in {item['retry_after_s']:.0f}s"
        print(line)
        print(f"  last {w['seconds']:g}s: {w['calls']} calls, {w['failures']} failed, "
              f"{w['slow']} slow, {w['retries']} retries")
    return EXIT_OK


@command
def run_command(args: argparse.Namespace) -> int:
    with ledger(args) as (store, settings):
        breaker = CircuitBreaker(args.service, settings.breaker, store=store, clock=SystemClock())
        state = breaker.command(Manual(args.command_value))
    print(f"{args.service}: {effective(state)} (generation {state.generation})")
    return EXIT_OK


@command
def run_calibrate(args: argparse.Namespace) -> int:
    clock = SystemClock()
    with ledger(args) as (store, settings):
        advice = calibrate(args.service, args.days, settings.breaker, margin=args.margin,
                           store=store, now=clock.now())
        if args.apply and advice.buckets:
            store.set_config(advice.as_settings(), now=clock.now())
    if args.json:
        print(json.dumps({**vars(advice), "applied": bool(args.apply and advice.buckets)},
                         indent=2))
        return EXIT_OK
    if not advice.buckets:
        print(f"{args.service}: no calls in the last {args.days:g} days; keep the defaults",
              file=sys.stderr)
        return EXIT_FAILED
    print(f"{args.service}: {advice.calls} calls in {advice.buckets} hourly buckets")
    print(f"  baseline failure rate P95 {advice.baseline_failure_p95:.1%} -> suggest "
          f"breaker.failure_rate={advice.failure_rate:.3f}")
    print(f"  baseline slow-call rate P95 {advice.baseline_slow_p95:.1%} -> suggest "
          f"breaker.slow_call_rate={advice.slow_call_rate:.3f}")
    if args.apply:
        print("  stored in resilience_config")
    return EXIT_OK
