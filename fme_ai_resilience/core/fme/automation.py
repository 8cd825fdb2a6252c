"""The FME Flow Automation of the pipeline, written down for an administrator to build.

One Automation carries the three workspaces: a Webhook trigger runs WS-01 with the webhook's
body and headers, a Schedule trigger every minute runs WS-02 on its own queue, another every
10 minutes runs WS-03, and each action's success and failure publish to a topic of its own
(``FAIR_JOB_SUCCESS``, ``FAIR_JOB_FAILURE``) that an email or a monitor can follow. Safe
points administrators to Automations rather than classic schedules.

FME Flow exports and imports Automations in a format Safe does not publish, so
:func:`automation_plan` is the project's own description (``format`` names it), every
setting of every trigger and action as the Automations editor asks for it, and
:func:`automation_steps` the same as steps to click through. Secrets appear only as
references to deployment parameters (:func:`~.deployment.reference`). docs/fme-flow.md,
Automations.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping

from .deployment import JobRequest, Schedule
from .parameters import BODY_PARAMETER, HEADERS_PARAMETER

__all__ = ["automation_plan", "automation_steps", "PLAN_FORMAT", "SUCCESS_TOPIC",
           "FAILURE_TOPIC", "WEBHOOK_VALUES"]

PLAN_FORMAT = "fme-ai-resilience automation plan 1"
SUCCESS_TOPIC = "FAIR_JOB_SUCCESS"
FAILURE_TOPIC = "FAIR_JOB_FAILURE"
#: What the Webhook trigger hands the intake: its output keys, as the Automations editor
#: offers them, for WS-01's published parameters.
WEBHOOK_VALUES: Mapping[str, str] = {BODY_PARAMETER: "{message}",
                                     HEADERS_PARAMETER: "{webhook.headers}"}


def _action(job: JobRequest, trigger: str) -> Dict[str, Any]:
    d = job.directives
    directives: Dict[str, Any] = {}
    if d.queue:
        directives["queue"] = d.queue
    if d.max_runtime_s:
        directives["maxJobRuntime"] = d.max_runtime_s
    if d.max_queued_s:
        directives["maxTimeInQueue"] = d.max_queued_s
    return {"id": job.workspace.rsplit(".", 1)[0], "type": "Run a Workspace", "after": trigger,
            "repository": job.repository, "workspace": job.workspace,
            "publishedParameters": dict(job.parameters), "directives": directives,
            "onSuccess": {"type": "Publish to a topic", "topic": SUCCESS_TOPIC},
            "onFailure": {"type": "Publish to a topic", "topic": FAILURE_TOPIC}}


def automation_plan(intake: JobRequest, processor: Schedule,
                    compensator: Schedule) -> Dict[str, Any]:
    """The Automation as a JSON-ready value: ``intake`` is WS-01's job (its parameters
    without the webhook's, which the trigger gives), the schedules carry WS-02's and WS-03's
    jobs and crons. Values of secret parameters must already be references."""
    webhook_job = JobRequest(intake.repository, intake.workspace,
                             {**intake.parameters, **WEBHOOK_VALUES}, intake.directives,
                             intake.secrets)
    return {
        "format": PLAN_FORMAT,
        "name": "fme-ai-resilience",
        "description": "Survey123 -> WS-01 intake; WS-02 processor every minute; WS-03 "
                       "compensator every 10 minutes (docs/fme-flow.md)",
        "topics": [SUCCESS_TOPIC, FAILURE_TOPIC],
        "triggers": [
            {"id": "survey123-webhook", "type": "Webhook",
             "settings": {"allowedMethods": ["POST"], "parseJson": False},
             "outputKeys": ["message", "webhook.headers"]},
            {"id": "every-minute", "type": "Schedule",
             "settings": {"recurrence": "cron", "cron": processor.cron}},
            {"id": "every-10-minutes", "type": "Schedule",
             "settings": {"recurrence": "cron", "cron": compensator.cron}},
        ],
        "actions": [_action(webhook_job, "survey123-webhook"),
                    _action(processor.job, "every-minute"),
                    _action(compensator.job, "every-10-minutes")],
    }


def automation_steps(plan: Mapping[str, Any]) -> str:
    """The plan as the steps to build it in FME Flow's Automations editor (Markdown)."""
    lines = ["# The fme-ai-resilience Automation", "",
             "Build it in FME Flow (*Automations > Create Automation*), or import it where "
             "your FME Flow imports this plan's format. Every value below is in "
             "`fme-ai-resilience-automation.json` beside this file.", "",
             f"1. Create the topics `{SUCCESS_TOPIC}` and `{FAILURE_TOPIC}` "
             "(*Notifications > Topics*), and subscribe an email to the failure topic.",
             "2. Check the deployment parameters `flow deploy` made (*Resources > Deployment "
             "Parameters*): each secret below is `$(name)` of one of them."]
    step = 3
    triggers = {t["id"]: t for t in plan["triggers"]}
    for action in plan["actions"]:
        trigger = triggers[action["after"]]
        if trigger["type"] == "Webhook":
            what = ("a *Webhook* trigger (method POST; give its URL to the Survey123 "
                    "webhook, with its portal info turned off, `includePortalInfo`: the body "
                    "travels as a published parameter, which FME writes into the job log, "
                    "and must then hold no submitter token)")
        else:
            what = f"a *Schedule* trigger, cron `{trigger['settings']['cron']}`"
        params = ", ".join(f"`{k}` = `{v}`" for k, v in action["publishedParameters"].items())
        directives = ", ".join(f"{k} {v}" for k, v in action["directives"].items()) or "none"
        lines.append(f"{step}. Add {what}, connected to a *Run a Workspace* action on "
                     f"`{action['repository']}/{action['workspace']}` with the published "
                     f"parameters {params}; job directives: {directives}. Connect its "
                     f"success port to *Publish to a topic* `{SUCCESS_TOPIC}` and its failure "
                     f"port to `{FAILURE_TOPIC}`.")
        step += 1
    lines += [f"{step}. Turn the Automation on. If the classic schedules `flow deploy` made "
              "also run WS-02 and WS-03, disable them (or deploy with `--no-schedules`): "
              "two runs at once are harmless (the ledger's claims are atomic) but waste "
              "engines.", ""]
    return "\n".join(lines)
