"""``fme-ai-resilience flow deploy``: put the three workspaces on FME Flow and schedule them.

Checks the ``.fmw`` files first (the same checks as ``workspaces check``; nothing is sent when
one fails), then, through FME Flow's REST API (v4, or v3 when v4 answers 404): creates the
repository when it is missing, uploads WS-01, WS-02 and WS-03 (replacing older copies), and
creates or updates two schedules, WS-02 every minute on its own queue and WS-03 every 10
minutes. ``--submit`` also starts one WS-02 job at once.

Secrets never go on the command line: the FME Flow token and the ledger URL (which may carry
a password, and which the schedules pass to the workspaces as ``FAIR_DB``) are read from
environment variables whose *names* the options give. Settings that differ from the library
defaults (``FAIR_*`` variables, then ``--set``) travel with the schedules as published
parameters, and the processor's runtime limit is computed from them.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, List, Optional

from ..core.fme.deployment import DEFAULT_QUEUE, describe, processor_job, schedules
from ..core.fme.parameters import WORKSPACES
from ..core.text.redact import redact_url
from ..services.flow.client import FlowClient
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
                        help="FME Flow's time zone (IANA name, e.g. Europe/Oslo), for when the "
                             "server does not report it; schedules begin in it (default: the "
                             "zone FME Flow reports)")
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
    return None


@command
def run_deploy(args: argparse.Namespace) -> int:
    files = [Path(args.dir) / f"{name}.fmw" for name in WORKSPACES]
    wrong = _usage_error(args, files)
    if wrong:
        print(f"error: {wrong}", file=sys.stderr)
        return EXIT_USAGE
    token, db_url = os.environ[args.token_env], os.environ[args.db_env]
    settings = settings_from_args(args.values, {})
    problems: List[str] = [f"{f}: {p}" for f in files for p in check_file(f)]
    if problems:
        print("\n".join(problems))
        print("error: the workspaces do not pass 'workspaces check'; nothing was deployed",
              file=sys.stderr)
        return EXIT_FAILED
    client = FlowClient(args.url, token, timeout_s=TIMEOUT_S, time_zone=args.time_zone)
    routes = client.routes()
    print(f"FME Flow {redact_url(client.base_url)}: build {client.build}, REST "
          + ", ".join(f"{op} {api}" for op, api in routes.items()))
    created = client.ensure_repository(args.repository, "fme-ai-resilience workspaces")
    print(f"repository {args.repository}: {'created' if created else 'exists'}")
    for path in files:
        outcome = client.upload_workspace(args.repository, path.name, path.read_bytes())
        print(f"{path.name}: uploaded ({outcome})")
    for schedule in schedules(args.repository, settings, db_url=db_url, queue=args.queue):
        outcome = client.put_schedule(schedule)
        print(f"schedule {schedule.category}/{schedule.name}: {outcome}, cron "
              f"'{schedule.cron}', {', '.join(describe(schedule.job))}")
    if args.submit:
        job = processor_job(args.repository, settings, db_url=db_url, queue=args.queue)
        print(f"job {client.submit_job(job)}: {job.workspace} submitted, "
              f"{', '.join(describe(job))}")
    return EXIT_OK
