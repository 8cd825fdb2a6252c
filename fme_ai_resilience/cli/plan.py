"""``fme-ai-resilience plan``: the capacity and time-budget calculator.

Prints the backlog watermark (Little's law) and the park ceiling, in tasks and in submissions
of ``--photos-per-submission`` photos; with ``--burst N``, what a burst of N submissions does
(its tasks, how many are parked past the watermark, whether it fits under the park ceiling and
how long the parked backlog takes to drain at the planned rate); the task budget (1.5 x the
latency promise), the worst-case task time of the retry policy and whether it fits the task
budget, the lease (``processing.lease_s``) and FME's job runtime limit (``tm_ttc``); and what
the fleet's adaptive concurrency and the time budget that follows a slow service do with the
settings (``concurrency.*``, the breaker's run of consecutive down failures), the defaults a
GIS engineer need not tune explained. Settings come from ``FAIR_*`` environment variables,
then ``--set group.field=value``, then the explicit options.
"""
from __future__ import annotations

import argparse
import json
import math
from typing import Any, Dict, List, Optional

from ..core.config.fields import MAX_COUNT
from ..core.checks import count
from ..core.resilience.retry import RetryPolicy
from ..core.config.settings import Settings
from ..core.resilience.task_budget import check_budget
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
        description="The backlog watermark (Little's law) and the park ceiling, a burst's "
                    "parked tasks and drain time (--burst, --photos-per-submission), the task "
                    "budget (1.5 x the latency promise), the worst-case task time of the retry "
                    "policy, and whether it fits the task budget, the lease (processing.lease_s) "
                    "and FME's job runtime limit. Settings come from FAIR_* environment "
                    "variables, then --set, then the options below. The ledger is not read.",
        epilog=exit_codes("with --check, the configuration does not fit",
                          usage="a bad option or setting"))
    for option, setting, kind, text in SETTING_OPTIONS:
        p.add_argument(option, dest=setting, type=kind(), metavar="N" if kind is whole else "S",
                       help=f"{text} {setting_default(setting)}")
    p.add_argument("--photos-per-submission", type=whole(minimum=1, maximum=MAX_COUNT),
                   default=1, metavar="N",
                   help="photos one survey submission carries: each is a task (default: 1)")
    p.add_argument("--burst", type=whole(minimum=1, maximum=MAX_COUNT), metavar="SUBMISSIONS",
                   help="size a burst of this many submissions arriving at once (a crew "
                        "syncing after an offline day): parked tasks, park ceiling, drain time "
                        "(default: none)")
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
               tasks_per_job: Optional[int] = None, photos_per_submission: int = 1,
               burst: Optional[int] = None) -> Dict[str, Any]:
    """The plan as a JSON-ready dict (what ``--json`` prints).

    ``job_limit_s`` and ``tasks_per_job`` default to ``processing.job_runtime_limit_s`` (0: the
    job limit is not checked) and ``processing.claim_limit``; ``burst`` submissions of
    ``photos_per_submission`` photos each are sized when given.
    """
    photos = count("--photos-per-submission", photos_per_submission, minimum=1)
    intake, timeouts = settings.intake, settings.timeouts
    capacity = intake.capacity
    policy = RetryPolicy.from_settings(settings)
    if job_limit_s is None:
        job_limit_s = settings.processing.job_runtime_limit_s or None
    per_job = tasks_per_job if tasks_per_job is not None else settings.processing.claim_limit
    check = check_budget(policy, timeouts, intake.latency_promise_s, job_limit_s, per_job,
                         lease_s=settings.processing.lease_s)
    watermark = capacity.watermark
    sized = None if burst is None else _burst(count("--burst", burst, minimum=1), photos,
                                              watermark, intake.park_ceiling,
                                              capacity.drain_rate_per_s)
    problems = list(check.problems())
    if sized is not None and not sized["fits_park_ceiling"]:
        problems.append(f"a burst of {sized['submissions']} submissions x {photos} photos "
                        f"({sized['tasks']} tasks) passes the park ceiling of "
                        f"{intake.park_ceiling} tasks: {sized['refused_submissions']} "
                        f"submissions would be refused 429 (raise intake.park_ceiling)")
    fleet = settings.concurrency
    return {
        "concurrency": {
            "start": fleet.start, "ceiling": fleet.ceiling, "per_engine": fleet.per_engine,
            "engines_can_fill": intake.engines * fleet.per_engine,
            "ttfb_s_at_first": timeouts.ttfb_s,
            "ttfb_s_at_most": round(max(timeouts.ttfb_s, check.task_budget_s - (
                timeouts.connect_s + timeouts.tls_s + timeouts.body_s)), 3),
            "consecutive_failures": settings.breaker.consecutive_failures},
        "engines": intake.engines,
        "mean_processing_s": intake.mean_processing_s,
        "latency_promise_s": intake.latency_promise_s,
        "drain_rate_per_s": capacity.drain_rate_per_s,
        "watermark": watermark,
        "watermark_source": "configured" if intake.watermark else "derived",
        "backpressure_at": int(watermark * intake.backpressure_ratio),
        "photos_per_submission": photos,
        "watermark_submissions": watermark // photos,
        "park_ceiling": intake.park_ceiling,
        "park_ceiling_submissions": intake.park_ceiling // photos,
        "burst": sized,
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
        "fits": check.fits and (sized is None or sized["fits_park_ceiling"]),
        "problems": problems,
    }


def _burst(submissions: int, photos: int, watermark: int, park_ceiling: int,
           rate_per_s: float) -> Dict[str, Any]:
    """What ``submissions`` arriving at once do, no task finishing meanwhile (the worst case)."""
    tasks = submissions * photos
    refused = max(0, submissions - park_ceiling // photos)
    kept = tasks - refused * photos
    parked = max(0, kept - watermark)
    return {"submissions": submissions, "photos_per_submission": photos, "tasks": tasks,
            "parked": parked, "parked_drain_s": round(parked / rate_per_s, 3),
            "drain_s": round(kept / rate_per_s, 3), "fits_park_ceiling": refused == 0,
            "refused_submissions": refused}


def _duration(seconds: float) -> str:
    """``2130`` as ``35 min 30 s``, ``3725`` as ``1 h 2 min 5 s``."""
    whole = int(math.ceil(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours} h"] if hours else []
    if hours or minutes:
        parts.append(f"{minutes} min")
    parts.append(f"{secs} s")
    return " ".join(parts)


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
        f"  watermark:            {plan['watermark']} tasks ({plan['watermark_source']})"
        + _in_submissions(plan, plan["watermark_submissions"]),
        f"  backpressure from:    {plan['backpressure_at']} tasks",
        f"  park ceiling:         {plan['park_ceiling']} tasks"
        + _in_submissions(plan, plan["park_ceiling_submissions"]),
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
    c = plan["concurrency"]
    lines += [
        "Concurrency (adaptive, one limit shared by every engine)",
        f"  calls in flight:      {c['start']} at first, growing while answers come back fast "
        f"and clean, at most {c['ceiling']} (concurrency.ceiling)",
        f"  per engine:           {c['per_engine']} at once (concurrency.per_engine; "
        f"{plan['engines']} engines could fill {c['engines_can_fill']})",
        "  shrinks on:           latency growth, TTFB timeouts, 429, 5xx, refused or cut "
        "connections",
        f"  slow service:         {c['ttfb_s_at_first']:g} s to the first byte at first, up to "
        f"{c['ttfb_s_at_most']:g} s (what the task budget leaves) while it answers slowly",
        f"  outage seen after:    {c['consecutive_failures']} calls in a row that say it is "
        f"down (breaker.consecutive_failures)",
    ]
    burst = plan["burst"]
    if burst is not None:
        rate = plan["drain_rate_per_s"]
        lines += [
            "Burst (no task finishing while it arrives)",
            f"  burst:                {burst['submissions']} submissions x "
            f"{burst['photos_per_submission']} photos = {burst['tasks']} tasks",
            f"  parked:               {burst['parked']} tasks past the watermark, drained in "
            f"{_duration(burst['parked_drain_s'])} at {rate:.3g} tasks/s",
            f"  whole burst drained:  {_duration(burst['drain_s'])} (the last photo analysed "
            f"then)",
            "  fits park ceiling:    "
            + ("yes" if burst["fits_park_ceiling"] else
               f"no: {burst['refused_submissions']} submissions refused 429"),
        ]
    lines += [f"  ! {problem}" for problem in plan["problems"]]
    return "\n".join(lines)


def _in_submissions(plan: Dict[str, Any], submissions: int) -> str:
    photos = plan["photos_per_submission"]
    return f" = {submissions} submissions of {photos} photos" if photos > 1 else ""


@command
def run(args: argparse.Namespace) -> int:
    plan = build_plan(_settings(args), photos_per_submission=args.photos_per_submission,
                      burst=args.burst)
    print(json.dumps(plan, indent=2, sort_keys=True) if args.json else format_plan(plan))
    return EXIT_FAILED if args.check and not plan["fits"] else EXIT_OK
