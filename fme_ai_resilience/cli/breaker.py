"""``fme-ai-resilience breaker``: show and steer the shared circuit breakers.

``show`` prints every circuit (or one) with its recent call window; ``open``/``close`` force
the circuit, ``disable`` keeps metrics only, ``reset`` returns it to automatic and closed;
these four act only on a known service (one with a ``circuit_state`` row or calls in
``ai_call_log``) unless given ``--create``, so a misspelt name is refused instead of forcing
open a circuit nobody uses. ``calibrate`` suggests thresholds from the call log (``--apply``
stores them in ``resilience_config``, for every service) and refuses a history without one
hourly bucket of at least ``breaker.min_calls`` calls.
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
from typing import Any, Dict, List

from ..core.resilience.breaker import BreakerMode, BreakerState, Manual
from ..core.clock import SystemClock
from ..core.errors import ConfigurationError
from ..services.resilience.calibrate import calibrate
from ..services.resilience.breaker import CircuitBreaker, known_service
from ..store import SqlStore
from .common import (EXIT_FAILED, EXIT_OK, add_db_option, command, exit_codes, ledger,
                     number, service_name)

__all__ = ["add_parser", "describe", "effective"]

COMMANDS = {"open": ("force the circuit of --service open: refuse every call until reset",
                     Manual.FORCE_OPEN),
            "close": ("force the circuit of --service closed: admit every call, never trip",
                      Manual.FORCE_CLOSED),
            "disable": ("disable the circuit of --service: admit every call, keep metrics only",
                        Manual.DISABLE),
            "reset": ("return the circuit of --service to automatic, CLOSED", Manual.RESET)}
KNOWN = ("Acts only on a known service, one with a circuit_state row or calls in the "
         "ai_call_log table; any other name is refused unless --create is given.")


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("breaker", help="show and steer the shared circuit breakers",
                              description="Show and steer the circuit breakers every engine "
                                          "shares through the ledger.",
                              epilog=exit_codes())
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    text = "the state of every circuit, or of --service, with its recent call window"
    show = actions.add_parser("show", help=text, description=text[0].upper() + text[1:] + ".",
                              epilog=exit_codes())
    show.add_argument("--service", type=service_name, help="one protected service (default: every circuit)")
    show.add_argument("--json", action="store_true", help="print JSON")
    add_db_option(show)
    show.set_defaults(func=run_show)
    for name, (text, manual) in COMMANDS.items():
        sub = actions.add_parser(name, help=text,
                                 description=f"{text[0].upper()}{text[1:]}. {KNOWN}",
                                 epilog=exit_codes("the ledger could not do it"))
        sub.add_argument("--service", required=True, type=service_name, help="the protected service (required)")
        sub.add_argument("--create", action="store_true",
                         help="steer a service no engine has used yet (default: refuse it)")
        add_db_option(sub)
        sub.set_defaults(func=run_command, command_value=manual.value)
    text = "suggest thresholds from the service's call log"
    cal = actions.add_parser(
        "calibrate", help=text,
        description="Suggest breaker.failure_rate from the P95 of the service's hourly "
                    "failure rates plus a margin (the slow-call rate's P95 is shown beside "
                    "it). Hours "
                    "with fewer than breaker.min_calls calls are left out; without one such "
                    "hour nothing is suggested or stored.",
        epilog=exit_codes("too few calls to learn from, or the ledger could not do it"))
    cal.add_argument("--service", required=True, type=service_name, help="the protected service (required)")
    cal.add_argument("--days", type=number(above=0, maximum=366), default=7.0, metavar="DAYS",
                     help="history to look at, in days (default: 7)")
    cal.add_argument("--margin", type=number(minimum=0, maximum=1), default=0.1,
                     metavar="RATE", help="added to the baseline P95 rate (default: 0.1)")
    cal.add_argument("--apply", action="store_true",
                     help="store the suggestion in resilience_config, where it applies to "
                          "every service")
    cal.add_argument("--json", action="store_true", help="print JSON")
    add_db_option(cal)
    cal.set_defaults(func=run_calibrate)


def _unknown(service: str, *, store: SqlStore) -> str:
    """Why ``service`` is not known, with the circuits it may have meant."""
    circuits: List[str] = sorted(store.breaker_list())
    close = difflib.get_close_matches(service, circuits, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"no circuit and no calls in the call log{hint}"


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
            if not known_service(args.service, store=store):
                print(f"note: {args.service} is not a known service: "
                      f"{_unknown(args.service, store=store)}", file=sys.stderr)
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
        if not args.create and not known_service(args.service, store=store):
            circuits = ", ".join(sorted(store.breaker_list())) or "none"
            why = _unknown(args.service, store=store)
            raise ConfigurationError("--service", args.service,
                                     f"is not a known service: {why}; known circuits: "
                                     f"{circuits}; pass --create to steer a new one")
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
        applied = bool(args.apply and advice.learned)
        if applied:
            store.set_config(advice.as_settings(), now=clock.now())
    if args.json:
        print(json.dumps({**vars(advice), "applied": applied}, indent=2))
        return EXIT_OK if advice.learned else EXIT_FAILED
    if not advice.learned:
        print(f"{args.service}: {advice.shortfall(f' in the last {args.days:g} days')}; keep the "
              f"defaults", file=sys.stderr)
        return EXIT_FAILED
    print(f"{args.service}: {advice.calls} calls in {advice.buckets} hourly buckets")
    print(f"  baseline failure rate P95 {advice.baseline_failure_p95:.1%} -> suggest "
          f"breaker.failure_rate={advice.failure_rate:.3f}")
    print(f"  baseline slow-call rate P95 {advice.baseline_slow_p95:.1%} (slow calls never "
          f"open the circuit: they lower the fleet's concurrency)")
    if args.apply:
        print("  stored in resilience_config (every service's breaker reads it)")
    return EXIT_OK
