"""``fme-ai-resilience plan``: the capacity and time-budget calculator.

Prints the backlog watermark (Little's law), the task budget (1.5 x the latency promise), the
worst-case task time of the retry policy and whether it fits the task budget, the lease
(``processing.lease_s``) and FME's job runtime limit (``tm_ttc``). Settings come from
``FAIR_*`` environment variables, then ``--set group.field=value``, then the explicit options.
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Dict, List, Optional

from ..retry import RetryPolicy
from ..settings import Settings
from ..task_budget import check_budget
from .common import (EXIT_FAILED, EXIT_OK, command, exit_codes, number, setting_default,
                     settings_from_args, whole)

__all__ = ["add_parser", "build_plan", "format_plan"]


#: The options that set a setting: ``(option, setting, type, help)``. Only the form of a value
#: is checked when parsing; its range is the setting's, whose message names it.
SETTING_OPTIONS = (
    ("--engines", "intake.engines", whole, "FME engines processing tasks"),
    ("--mean-seconds", "intake.mean_processing_s", number, "mean processing time of one task"),
    ("--latency-seconds", "intake.latency_promise_s", number, "the business latency promise"),
    ("--attempts", "retry.task_attempts", whole, "task-wide attempt budget"),
    ("--job-limit-seconds", "processing.job_runtime_limit_s", number,
     "FME's job runtime limit tm_ttc, 0 for none (not checked)"),
    ("--tasks-per-job", "processing.claim_limit", whole,
     "tasks one processor job works through, for the job limit"),
)


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "plan", help="capacity and time-budget calculator",
        description="The backlog watermark (Little's law), the task budget (1.5 x the latency "
                    "promise), the worst-case task time of the retry policy, and whether it "
                    "fits the task budget, the lease (processing.lease_s) and FME's job runtime "
                    "limit. Settings come from FAIR_* environment variables, then --set, then "
                    "the options below. The ledger is not read.",
        epilog=exit_codes("with --check, the configuration does not fit",
                          usage="a bad option or setting"))
    for option, setting, kind, text in SETTING_OPTIONS:
        p.add_argument(option, dest=setting, type=kind(), metavar="N" if kind is whole else "S",
                       help=f"{text} {setting_default(setting)}")
    p.add_argument("--set", dest="values", action="append", default=[], metavar="NAME=VALUE",
                   help="any setting, e.g. --set timeouts.ttfb_s=15; repeatable (default: "
                        "none)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--check", action="store_true",
                   help="exit 1 when the configuration does not fit")
    p.set_defaults(func=run)


def _settings(args: argparse.Namespace) -> Settings:
    return settings_from_args(args.values, {setting: getattr(args, setting)
                                            for _, setting, _, _ in SETTING_OPTIONS})


def build_plan(settings: Settings, job_limit_s: Optional[float] = None,
               tasks_per_job: Optional[int] = None) -> Dict[str, Any]:
    """The plan as a JSON-ready dict (what ``--json`` prints).

    ``job_limit_s`` and ``tasks_per_job`` default to ``processing.job_runtime_limit_s`` (0: the
    job limit is not checked) and ``processing.claim_limit``.
    """
    intake, timeouts = settings.intake, settings.timeouts
    capacity = intake.capacity
    policy = RetryPolicy.from_settings(settings)
    if job_limit_s is None:
        job_limit_s = settings.processing.job_runtime_limit_s or None
    per_job = tasks_per_job if tasks_per_job is not None else settings.processing.claim_limit
    check = check_budget(policy, timeouts, intake.latency_promise_s, job_limit_s, per_job,
                         lease_s=settings.processing.lease_s)
    watermark = capacity.watermark
    return {
        "engines": intake.engines,
        "mean_processing_s": intake.mean_processing_s,
        "latency_promise_s": intake.latency_promise_s,
        "drain_rate_per_s": capacity.drain_rate_per_s,
        "watermark": watermark,
        "watermark_source": "configured" if intake.watermark else "derived",
        "backpressure_at": int(watermark * intake.backpressure_ratio),
        "per_call_timeout_s": timeouts.total_s,
        "timeouts_s": {"connect": timeouts.connect_s, "tls": timeouts.tls_s,
                       "ttfb": timeouts.ttfb_s, "body": timeouts.body_s},
        "task_attempts": policy.max_attempts,
        "max_inline_wait_s": policy.max_inline_wait_s,
        "task_budget_s": check.task_budget_s,
        "worst_case_task_s": round(check.worst_case_s, 3),
        "inline_attempts": check.inline_attempts,
        "fits_task_budget": check.fits_task_budget,
        "lease_s": check.lease_s,
        "fits_lease": check.fits_lease,
        "job_limit_s": check.job_limit_s,
        "tasks_per_job": check.tasks_per_job,
        "fits_job_limit": check.fits_job_limit,
        "fits": check.fits,
        "problems": list(check.problems()),
    }


def _yes_no(value: Optional[bool]) -> str:
    return "not checked" if value is None else ("yes" if value else "no")


def format_plan(plan: Dict[str, Any]) -> str:
    """The plan as the text ``plan`` prints."""
    t = plan["timeouts_s"]
    lines: List[str] = [
        "Capacity (Little's law)",
        f"  engines:              {plan['engines']}",
        f"  mean processing time: {plan['mean_processing_s']:g} s",
        f"  latency promise:      {plan['latency_promise_s']:g} s",
        f"  drain rate:           {plan['drain_rate_per_s']:.3g} tasks/s",
        f"  watermark:            {plan['watermark']} tasks ({plan['watermark_source']})",
        f"  backpressure from:    {plan['backpressure_at']} tasks",
        "Time budget",
        f"  per call:             {plan['per_call_timeout_s']:g} s (connect {t['connect']:g} "
        f"+ TLS {t['tls']:g} + TTFB {t['ttfb']:g} + body {t['body']:g})",
        f"  task budget:          {plan['task_budget_s']:g} s (1.5 x latency promise)",
        f"  worst-case task time: {plan['worst_case_task_s']:g} s ({plan['task_attempts']} "
        f"attempts, inline waits up to {plan['max_inline_wait_s']:g} s)",
        f"  fits task budget:     {_yes_no(plan['fits_task_budget'])}",
        f"  fits lease:           {_yes_no(plan['fits_lease'])} "
        f"(processing.lease_s {plan['lease_s']:g} s)",
        f"  fits FME job limit:   {_yes_no(plan['fits_job_limit'])}"
        + (f" (tm_ttc {plan['job_limit_s']:g} s, {plan['tasks_per_job']} tasks per job)"
           if plan["job_limit_s"] is not None else ""),
    ]
    lines += [f"  ! {problem}" for problem in plan["problems"]]
    return "\n".join(lines)


@command
def run(args: argparse.Namespace) -> int:
    plan = build_plan(_settings(args))
    print(json.dumps(plan, indent=2, sort_keys=True) if args.json else format_plan(plan))
    return EXIT_FAILED if args.check and not plan["fits"] else EXIT_OK
