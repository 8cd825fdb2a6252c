"""``fme-ai-resilience degrade``: show the degradation ladder, hold it at a level, release it."""
from __future__ import annotations

import argparse
import json
from typing import Any

from ..core.clock import SystemClock
from ..core.resilience.degrade import LadderState, Level, model_for
from ..services.resilience.degrade import Degradation
from .common import EXIT_OK, add_db_option, command, exit_codes, ledger

__all__ = ["add_parser", "describe"]


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "degrade", help="show or override the degradation ladder L0-L4",
        description="Show the degradation ladder every engine shares, hold it at a level or "
                    "release it.", epilog=exit_codes())
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    text = "the level in force, the computed level, any override and the model in use"
    show = actions.add_parser("show", help="the level in force and why", epilog=exit_codes(),
                              description=f"Show {text}.")
    show.add_argument("--json", action="store_true", help="print JSON")
    add_db_option(show)
    show.set_defaults(func=run, level=None, clear=False)
    put = actions.add_parser("set", help="hold the ladder at LEVEL until 'degrade auto'",
                             epilog=exit_codes(),
                             description="Hold the ladder at LEVEL for every engine until "
                                         "'degrade auto' clears the override.")
    put.add_argument("level", help="L0-L4, 0-4 or a name (normal, sample, fallback, "
                                   "critical_only, paused)")
    add_db_option(put)
    put.set_defaults(func=run, json=False, clear=False)
    auto = actions.add_parser("auto", help="clear the override: back to the computed level",
                              epilog=exit_codes(),
                              description="Clear the override: every engine returns to the "
                                          "level the signals call for.")
    add_db_option(auto)
    auto.set_defaults(func=run, json=False, level=None, clear=True)


def describe(state: LadderState) -> dict:
    """The ladder as a JSON-ready dict."""
    return {"level": state.effective.label, "name": state.effective.name.lower(),
            "computed": state.level.label,
            "override": state.override.label if state.override is not None else None,
            "model": model_for(state.effective).value, "generation": state.generation,
            "changed_at": state.changed_at, "calm_since": state.calm_since}


@command
def run(args: argparse.Namespace) -> int:
    wanted = Level.parse(args.level) if args.level is not None else None
    with ledger(args) as (store, settings):
        ladder = Degradation(settings.degrade, store=store, clock=SystemClock())
        if args.clear:
            state = ladder.clear_override()
        elif wanted is not None:
            state = ladder.set_override(wanted)
        else:
            state = ladder.state(fresh=True)
    info = describe(state)
    if args.json:
        print(json.dumps(info, indent=2))
        return EXIT_OK
    how = f"override (computed {info['computed']})" if info["override"] else "automatic"
    print(f"{info['level']} {info['name']}: {how}; model {info['model']}")
    return EXIT_OK
