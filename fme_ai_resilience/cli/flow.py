"""``fme-ai-resilience flow deploy``: put the three workspaces on FME Flow and schedule them.

Everything is read and decided before anything is written: the ``.fmw`` files are checked
(the same checks as ``workspaces check``; nothing is sent when one fails), FME Flow's build
is read (which picks the REST version of each request and the templates: the PythonCaller
version 4 ones of ``--dir/fme2023-2024`` below FME Flow 2025), then its time zone (an IANA
name or the fixed offset FME Flow answers, ``+0000``), and every request body is made. Then,
through FME Flow's REST API: the secrets go into FME Flow deployment parameters (the ledger
URL as ``fair_db``, and any secret setting), referenced from the published parameters as
``$(fair_db)``; the repository is created when missing; WS-01, WS-02 and WS-03 are uploaded
(replacing older copies); two schedules are created or updated, WS-02 every minute on its own
queue and WS-03 every 10 minutes. ``--automation DIR`` also writes the Automation (webhook ->
WS-01, schedules -> WS-02 and WS-03, success and failure topics) for an administrator to
build; ``--submit`` starts one WS-02 job at once.

Secrets never go on the command line: the FME Flow token and the ledger URL (which may carry
a password) are read from environment variables whose *names* the options give, and never
printed. Settings that differ from the library defaults (``FAIR_*`` variables, then ``--set``)
travel with the schedules as published parameters, and the processor's runtime limit is
computed from them.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..core.fme.automation import automation_plan, automation_steps
from ..core.fme.deployment import (DEFAULT_QUEUE, DEPLOYMENT_PARAMETERS_FROM_BUILD,
                                   V4_TEMPLATES_BELOW_BUILD, JobRequest, Schedule, describe,
                                   intake_job, processor_job, reference, schedules,
                                   with_references)
from ..core.fme.fmw_v4 import V4_FOLDER
from ..core.fme.parameters import DB_PARAMETER, WORKSPACES
from ..core.text.redact import redact_url
from ..services.flow.client import FlowClient, is_fixed_offset
from .common import (DB_ENV, EXIT_FAILED, EXIT_OK, EXIT_USAGE, command, exit_codes,
                     settings_from_args)
from .workspaces import DEFAULT_DIR, check_file

__all__ = ["add_parser"]

TOKEN_ENV = "FME_FLOW_TOKEN"
#: Connect and read limits of each request; an upload or a schedule write can take a while.
TIMEOUT_S = (5.0, 60.0)


def add_parser(subparsers: Any) -> None:
    codes = exit_codes("a workspace fails its check or FME Flow refused a request",
                       usage="an unset token or ledger variable, a missing file, a bad "
                             "setting")
    p = subparsers.add_parser(
        "flow", help="deploy the workspaces to FME Flow", epilog=codes,
        description="Put the three workspaces on FME Flow and schedule them.")
    actions = p.add_subparsers(dest="flow_command", metavar="ACTION", required=True)
    deploy = actions.add_parser(
        "deploy", help="upload the workspaces and create or update their schedules",
        epilog=codes,
        description="Upload WS-01, WS-02 and WS-03 to a repository (created when missing) and "
                    "schedule WS-02 every minute on its own queue and WS-03 every 10 minutes. "
                    "Secrets are read from environment variables, never from options.")
    deploy.add_argument("--url", required=True,
                        help="FME Flow base URL, e.g. https://flow (required)")
    deploy.add_argument("--token-env", default=TOKEN_ENV, metavar="VAR",
                        help=f"environment variable holding the FME Flow token "
                             f"(default: {TOKEN_ENV})")
    deploy.add_argument("--repository", required=True, metavar="NAME",
                        help="the FME Flow repository to put the workspaces in (required)")
    deploy.add_argument("--dir", default=DEFAULT_DIR,
                        help=f"where the .fmw files are (default: {DEFAULT_DIR})")
    deploy.add_argument("--queue", default=DEFAULT_QUEUE,
                        help=f"the queue WS-02 runs on, which FME Flow's administrator creates "
                             f"and assigns engines (default: {DEFAULT_QUEUE})")
    deploy.add_argument("--db-env", default=DB_ENV, metavar="VAR",
                        help=f"environment variable holding the ledger URL the schedules pass "
                             f"as FAIR_DB (default: {DB_ENV})")
    deploy.add_argument("--set", dest="values", action="append", default=[],
                        metavar="NAME=VALUE",
                        help="any setting, e.g. --set processing.claim_limit=20; repeatable "
                             "(default: none)")
    deploy.add_argument("--time-zone", metavar="ZONE",
                        help="FME Flow's time zone (an IANA name, e.g. Europe/Oslo, or an "
                             "offset, e.g. +0100), for when the server does not report it; "
                             "schedules begin in it (default: the zone FME Flow reports)")
    deploy.add_argument("--secrets", choices=("deployment-parameters", "schedules"),
                        default="deployment-parameters",
                        help="where the ledger URL and secret settings go: FME Flow "
                             "deployment parameters, referenced as $(fair_db) (FME Flow "
                             "2023 and later), or the schedules' published parameters "
                             "(default: deployment-parameters)")
    deploy.add_argument("--no-schedules", action="store_true",
                        help="make no classic schedules (the Automation runs WS-02 and "
                             "WS-03 instead; default: make them)")
    deploy.add_argument("--automation", metavar="DIR",
                        help="also write the Automation (webhook -> WS-01, schedules -> "
                             "WS-02 and WS-03, success and failure topics) into DIR, for an "
                             "administrator to build (default: none)")
    deploy.add_argument("--submit", action="store_true",
                        help="also submit one WS-02 job now (default: no)")
    deploy.set_defaults(func=run_deploy)


def _usage_error(args: argparse.Namespace, files: List[Path]) -> Optional[str]:
    """What is missing before anything can be sent, or None."""
    for variable, what in ((args.token_env, "the FME Flow token"),
                           (args.db_env, "the ledger URL (FAIR_DB)")):
        if not os.environ.get(variable):
            return f"${variable} is not set: {what} is read from it"
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        return f"no such file: {', '.join(missing)} (run 'workspaces build')"
    if args.automation and args.secrets != "deployment-parameters":
        return (f"--automation writes an Automation that passes FAIR_DB as "
                f"{reference(DB_PARAMETER)}: it needs --secrets deployment-parameters, which "
                f"creates that deployment parameter")
    return None


def _templates(directory: Path, build: int) -> List[Path]:
    """The workspace files FME Flow build ``build`` gets (see the module docstring)."""
    folder = directory / V4_FOLDER if build < V4_TEMPLATES_BELOW_BUILD else directory
    return [folder / f"{name}.fmw" for name in WORKSPACES]


def _with_references(jobs: Dict[str, JobRequest]) -> Tuple[Dict[str, JobRequest],
                                                            Dict[str, str]]:
    values: Dict[str, str] = {}
    out = {}
    for key, job in jobs.items():
        out[key], found = with_references(job)
        values.update(found)
    return out, values


@command
def run_deploy(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    files = [directory / f"{name}.fmw" for name in WORKSPACES]
    wrong = _usage_error(args, files)
    if wrong:
        print(f"error: {wrong}", file=sys.stderr)
        return EXIT_USAGE
    token, db_url = os.environ[args.token_env], os.environ[args.db_env]
    settings = settings_from_args(args.values, {})
    present = files + [f for f in _templates(directory, 0) if f.is_file()]
    problems: List[str] = [f"{f}: {p}" for f in present for p in check_file(f)]
    if problems:
        print("\n".join(problems))
        print("error: the workspaces do not pass 'workspaces check'; nothing was deployed",
              file=sys.stderr)
        return EXIT_FAILED
    # -- read and decide everything: nothing is written to FME Flow before this is done --
    client = FlowClient(args.url, token, timeout_s=TIMEOUT_S, time_zone=args.time_zone)
    routes = client.routes()
    print(f"FME Flow {redact_url(client.base_url)}: build {client.build}, REST "
          + ", ".join(f"{op} {api}" for op, api in routes.items()))
    build = client.build or 0
    uploads = _templates(directory, build)
    if uploads != files:
        missing = [str(f) for f in uploads if not f.is_file()]
        if missing:
            print(f"error: FME Flow build {build} needs the PythonCaller version 4 templates: "
                  f"no such file: {', '.join(missing)} (run 'workspaces build --fme 2024')",
                  file=sys.stderr)
            return EXIT_USAGE
        print(f"templates: {V4_FOLDER} (PythonCaller version 4: FME Flow before 2025)")
    begin = None
    if not args.no_schedules:
        zone = client.time_zone()
        begin = client.schedule_begin()
        print(f"time zone: {zone}" + (" (a fixed offset: daylight saving is not followed; "
                                      "the schedules' crons run every minute and every 10 "
                                      "minutes whatever the hour)" if is_fixed_offset(zone)
                                      else ""))
    processor, compensator = schedules(args.repository, settings, db_url=db_url,
                                       queue=args.queue)
    jobs = {"intake": intake_job(args.repository, settings, db_url=db_url),
            "processor": processor.job, "compensator": compensator.job,
            "submit": processor_job(args.repository, settings, db_url=db_url,
                                    queue=args.queue)}
    referenced, secrets = _with_references(jobs)
    keep = args.secrets == "deployment-parameters" and build >= DEPLOYMENT_PARAMETERS_FROM_BUILD
    if args.automation and not keep:
        print(f"error: FME Flow build {build} predates deployment parameters, which the "
              f"Automation's {reference(DB_PARAMETER)} names: nothing was deployed (leave "
              f"out --automation)", file=sys.stderr)
        return EXIT_USAGE
    if args.secrets == "deployment-parameters" and not keep:
        print(f"note: FME Flow build {build} predates deployment parameters: the secrets go "
              "into the schedules' published parameters")
    used = referenced if keep else jobs
    processor = dataclasses.replace(processor, job=used["processor"])
    compensator = dataclasses.replace(compensator, job=used["compensator"])
    if args.automation:   # local files, written before FME Flow is: a failure here stops all
        try:
            written = _write_automation(
                Path(args.automation), referenced["intake"],
                dataclasses.replace(processor, job=referenced["processor"]),
                dataclasses.replace(compensator, job=referenced["compensator"]))
        except OSError as exc:
            print(f"error: cannot write the Automation into {args.automation} "
                  f"({type(exc).__name__}: {exc.strerror or exc}): nothing was deployed",
                  file=sys.stderr)
            return EXIT_USAGE
        print(f"automation: {', '.join(str(w) for w in written)}")
    # -- write --
    if keep:
        for name, value in sorted(secrets.items()):
            outcome = client.put_deployment_parameter(name, value)
            print(f"deployment parameter {name}: {outcome}")
    created = client.ensure_repository(args.repository, "fme-ai-resilience workspaces")
    print(f"repository {args.repository}: {'created' if created else 'exists'}")
    for path in uploads:
        outcome = client.upload_workspace(args.repository, path.name, path.read_bytes())
        print(f"{path.name}: uploaded ({outcome})")
    if not args.no_schedules:
        for schedule in (processor, compensator):
            outcome = client.put_schedule(schedule, begin=begin)
            print(f"schedule {schedule.category}/{schedule.name}: {outcome}, cron "
                  f"'{schedule.cron}', {', '.join(describe(schedule.job))}")
    if args.submit:
        job = used["submit"]
        print(f"job {client.submit_job(job)}: {job.workspace} submitted, "
              f"{', '.join(describe(job))}")
    return EXIT_OK


def _write_automation(directory: Path, intake: JobRequest, processor: Schedule,
                      compensator: Schedule) -> List[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    plan = automation_plan(intake, processor, compensator)
    targets = [directory / "fme-ai-resilience-automation.json",
               directory / "fme-ai-resilience-automation.md"]
    targets[0].write_text(json.dumps(plan, indent=2) + "\n", encoding="utf-8")
    targets[1].write_text(automation_steps(plan), encoding="utf-8")
    return targets
