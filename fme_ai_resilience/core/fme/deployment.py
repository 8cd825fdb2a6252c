"""How the workspaces run on FME Flow: schedules, job directives and the REST request bodies.

WS-02 runs every minute on its own queue, WS-03 every 10 minutes; WS-01 is started by the
webhook (an Automation, or the gateway) and gets no schedule. Each job carries directives:
the queue, the longest it may run (``maxJobRuntime``, ``tm_ttc``) and the longest it may wait
in the queue (``maxTimeInQueue``, ``tm_ttl``).

The processor's runtime limit (:func:`processor_job_runtime_s`) is what one run can need:
``claim_limit`` tasks, each bounded by the task budget (1.5 x the latency promise: the retry
policy's deadline stops starting attempts that would not finish in it), plus, per task, one
per-call time limit for the stages around the AI call (photo download, write-back), plus a
fixed minute for the job's start (engine, Python, ledger connection). Being killed costs no
correctness (the lease lapses and WS-03 requeues the task) but wastes the work in flight,
so the limit errs on the generous side.

The request bodies are built here, per REST version, in one place: the v4 job body and the v3
submit path are in docs/fme-flow.md; the repository, upload and schedule shapes and the
v3 ``TMDirectives`` are modelled on Safe's documentation and unverified against a live FME Flow
(docs/fme-flow.md says which).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Tuple

from ..checks import count
from ..checks import name as _name
from ..errors import ConfigurationError
from .parameters import (COMPENSATOR, DB_PARAMETER, INTAKE, PROCESSOR, changed_settings,
                         parameters_for)
from ..config.settings import Settings
from ..resilience.task_budget import task_budget_s

__all__ = ["JobDirectives", "JobRequest", "Schedule", "processor_job_runtime_s",
           "processor_job", "intake_job", "schedules", "job_body", "schedule_body", "SCHEDULE_CATEGORY",
           "DEFAULT_QUEUE", "PROCESSOR_CRON", "COMPENSATOR_CRON", "START_MARGIN_S",
           "PROCESSOR_INTERVAL_S", "COMPENSATOR_INTERVAL_S", "V3", "V4", "describe",
           "V4_FROM_BUILD", "OPERATIONS", "api_for", "DEPLOYMENT_PARAMETERS_FROM_BUILD",
           "deployment_parameter_name", "reference", "with_references", "is_reference",
           "V4_TEMPLATES_BELOW_BUILD"]

V4 = "v4"
V3 = "v3"

#: The first FME Flow build whose REST v4 serves each operation; below it the operation goes
#: to v3 (``/fmerest/v3``). Repositories, the job lists and engines and job submission follow
#: Safe's own CLI (safesoftware/fmeflow-cli, the ``...V4BuildThreshold`` variables and
#: ``cmd/run.go``); the CLI uploads no workspace and keeps no schedule, so those two follow job
#: submission: v3 serves both on every build below it, and a schedule carries a job request.
V4_FROM_BUILD: Mapping[str, int] = {
    "repositories": 22337, "jobs": 25208, "engines": 25208, "submit": 26018,
    "upload": 26018, "schedules": 26018,
}
OPERATIONS = tuple(V4_FROM_BUILD)

#: Below this build (FME Flow 2025.0) the workspaces deployed are the PythonCaller version 4
#: templates (``workspaces/fme2023-2024``): no release before 2025 is known to open
#: version 6.
V4_TEMPLATES_BELOW_BUILD = 25000

SCHEDULE_CATEGORY = "fme-ai-resilience"
DEFAULT_QUEUE = "fair_processor"
#: FME Flow schedules take Quartz cron expressions: seconds minutes hours day month weekday.
PROCESSOR_CRON = "0 * * * * ?"
COMPENSATOR_CRON = "0 0/10 * * * ?"
PROCESSOR_INTERVAL_S = 60
COMPENSATOR_INTERVAL_S = 600
#: What a job needs before its first task: an engine starting, Python importing, the ledger.
START_MARGIN_S = 60.0


@dataclass(frozen=True)
class JobDirectives:
    """Where and how long a job may run: ``queue`` (``tm_tag``; None: FME Flow's default),
    ``max_runtime_s`` (``tm_ttc``) and ``max_queued_s`` (``tm_ttl``), whole seconds or None."""

    queue: Optional[str] = None
    max_runtime_s: Optional[int] = None
    max_queued_s: Optional[int] = None

    def __post_init__(self) -> None:
        if self.queue is not None:
            _name("queue", self.queue)
        for label in ("max_runtime_s", "max_queued_s"):
            if getattr(self, label) is not None:
                count(label, getattr(self, label), minimum=1)


@dataclass(frozen=True)
class JobRequest:
    """One run of a workspace: its repository, file name, published parameters and directives.

    ``secrets`` names the parameters whose values never appear in a repr, a log or an error.
    """

    repository: str
    workspace: str
    parameters: Mapping[str, str] = field(default_factory=dict)
    directives: JobDirectives = field(default_factory=JobDirectives)
    secrets: FrozenSet[str] = frozenset()

    def __post_init__(self) -> None:
        _name("repository", self.repository)
        _name("workspace", self.workspace)
        for key, value in self.parameters.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ConfigurationError("parameters", key, "must map names to strings")
        object.__setattr__(self, "parameters", dict(self.parameters))
        object.__setattr__(self, "secrets", frozenset(self.secrets))

    @property
    def secret_values(self) -> Tuple[str, ...]:
        """The values to scrub from anything shown (the ledger URL may carry a password)."""
        return tuple(v for k, v in self.parameters.items() if k in self.secrets and v)

    def __repr__(self) -> str:
        return (f"JobRequest({self.repository!r}, {self.workspace!r}, "
                f"parameters={sorted(self.parameters)}, directives={self.directives!r})")


@dataclass(frozen=True)
class Schedule:
    """A recurring job: ``name`` and ``category`` identify it in FME Flow; ``cron`` is a
    Quartz expression."""

    name: str
    category: str
    cron: str
    job: JobRequest
    description: str = ""
    enabled: bool = True

    def __post_init__(self) -> None:
        for label in ("name", "category", "cron"):
            _name(label, getattr(self, label))


def processor_job_runtime_s(settings: Settings, margin_s: float = START_MARGIN_S) -> int:
    """The processor job's runtime limit in whole seconds (see the module docstring):
    ``claim_limit x (task budget + one per-call limit) + margin_s``; 2160 s by default."""
    per_task = task_budget_s(settings.intake.latency_promise_s) + settings.timeouts.total_s
    return math.ceil(settings.processing.claim_limit * per_task + margin_s)


def _parameters(workspace: str, settings: Settings, db_url: str) -> Dict[str, str]:
    """FAIR_DB, then every setting this workspace publishes that differs from the library's
    default, so the job runs with the numbers its limits were computed from."""
    _name("db_url", db_url)
    return {DB_PARAMETER: db_url, **changed_settings(settings, workspace)}


def _secrets(workspace: str) -> FrozenSet[str]:
    return frozenset(p.name for p in parameters_for(workspace) if p.secret)


def processor_job(repository: str, settings: Settings, *, db_url: str,
                  queue: str = DEFAULT_QUEUE) -> JobRequest:
    """One WS-02 run on ``queue``, with its runtime limit and a queue wait of one interval
    (a job that waited a whole minute is replaced by the next scheduled one)."""
    return JobRequest(repository, f"{PROCESSOR}.fmw", _parameters(PROCESSOR, settings, db_url),
                      JobDirectives(queue, processor_job_runtime_s(settings),
                                    PROCESSOR_INTERVAL_S), _secrets(PROCESSOR))


def intake_job(repository: str, settings: Settings, *, db_url: str) -> JobRequest:
    """One WS-01 run (the webhook's Automation action): the ledger URL and the intake
    settings that differ from the library's defaults; FME Flow's default queue and limits."""
    return JobRequest(repository, f"{INTAKE}.fmw", _parameters(INTAKE, settings, db_url),
                      JobDirectives(), _secrets(INTAKE))


def schedules(repository: str, settings: Settings, *, db_url: str,
              queue: str = DEFAULT_QUEUE) -> Tuple[Schedule, Schedule]:
    """The two schedules: WS-02 every minute on ``queue``; WS-03 every 10 minutes on FME Flow's
    default queue, never running longer than its interval."""
    compensator = JobRequest(repository, f"{COMPENSATOR}.fmw",
                             _parameters(COMPENSATOR, settings, db_url),
                             JobDirectives(None, COMPENSATOR_INTERVAL_S, COMPENSATOR_INTERVAL_S),
                             _secrets(COMPENSATOR))
    return (Schedule(PROCESSOR, SCHEDULE_CATEGORY, PROCESSOR_CRON,
                     processor_job(repository, settings, db_url=db_url, queue=queue),
                     "fme-ai-resilience: process the ledger's due tasks"),
            Schedule(COMPENSATOR, SCHEDULE_CATEGORY, COMPENSATOR_CRON, compensator,
                     "fme-ai-resilience: reap, requeue, evaluate, prune, alert"))


# --- request bodies --------------------------------------------------------------------------

def _v4_directives(d: JobDirectives) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    if d.queue is not None:
        out["queue"] = d.queue
    if d.max_runtime_s is not None:
        out["maxJobRuntime"] = d.max_runtime_s
    if d.max_queued_s is not None:
        out["maxTimeInQueue"] = d.max_queued_s
    return out


def _v3_request(job: JobRequest) -> Dict[str, Any]:
    directives: Dict[str, Any] = {}
    d = job.directives
    for key, value in (("tag", d.queue), ("ttc", d.max_runtime_s), ("ttl", d.max_queued_s)):
        if value is not None:
            directives[key] = value
    body: Dict[str, Any] = {"publishedParameters": [
        {"name": k, "value": v} for k, v in job.parameters.items()]}
    if directives:
        body["TMDirectives"] = directives
    return body


def job_body(job: JobRequest, api: str) -> Dict[str, Any]:
    """The JSON body that submits ``job``: v4 ``POST /fmeapiv4/jobs`` (fme.md), v3 ``POST
    /fmerest/v3/transformations/submit/{repository}/{workspace}`` (its ``TMDirectives`` are
    modelled)."""
    if api == V4:
        return {"repository": job.repository, "workspace": job.workspace,
                "publishedParameters": dict(job.parameters), **_v4_directives(job.directives)}
    if api == V3:
        return _v3_request(job)
    raise ConfigurationError("api", api, f"must be {V4} or {V3}")


def schedule_body(schedule: Schedule, api: str, *, begin: str) -> Dict[str, Any]:
    """The JSON body that creates or replaces ``schedule`` (modelled, both versions).

    ``begin`` is when it starts, ``YYYY-MM-DDTHH:MM:SS``. v4 flattens the job as its job
    submission does; v3 nests it under ``request`` with ``TMDirectives``.
    """
    head: Dict[str, Any] = {"name": schedule.name, "category": schedule.category,
                            "description": schedule.description, "enabled": schedule.enabled,
                            "begin": _name("begin", begin), "recurrence": "cron",
                            "cron": schedule.cron, "repository": schedule.job.repository,
                            "workspace": schedule.job.workspace}
    if api == V4:
        return {**head, "publishedParameters": dict(schedule.job.parameters),
                **_v4_directives(schedule.job.directives)}
    if api == V3:
        return {**head, "request": _v3_request(schedule.job)}
    raise ConfigurationError("api", api, f"must be {V4} or {V3}")


#: Where FME Flow keeps deployment parameters (``/fmeapiv4/deploymentparameters``, Safe's
#: CLI, v4 only). FME Flow 2023.0 introduced them; the exact first build is not known here,
#: so from 2023's builds on a deployment keeps its secrets there.
DEPLOYMENT_PARAMETERS_FROM_BUILD = 23000


def deployment_parameter_name(parameter: str) -> str:
    """The deployment parameter that holds a published parameter's secret value:
    ``FAIR_DB`` -> ``fair_db``."""
    _name("parameter", parameter)
    return parameter.lower()


def reference(name: str) -> str:
    """How a published parameter's value names a deployment parameter: ``$(fair_db)``
    (FME's macro syntax; docs/fme-flow.md lists it among what a live FME Flow confirms)."""
    return f"$({deployment_parameter_name(name)})"


def with_references(job: JobRequest) -> Tuple[JobRequest, Dict[str, str]]:
    """``job`` with each secret published parameter's value replaced by a reference to a
    deployment parameter of its own, and the values those deployment parameters must hold,
    by name. A value that already is a reference stays."""
    values: Dict[str, str] = {}
    parameters = dict(job.parameters)
    for key in sorted(job.secrets & set(parameters)):
        if parameters[key] and not is_reference(parameters[key]):
            values[deployment_parameter_name(key)] = parameters[key]
            parameters[key] = reference(key)
    return JobRequest(job.repository, job.workspace, parameters, job.directives,
                      job.secrets), values


def is_reference(value: str) -> bool:
    """Whether ``value`` is nothing but a reference, ``$(name)``."""
    return isinstance(value, str) and re.fullmatch(r"\$\([A-Za-z0-9_.-]+\)", value.strip()) \
        is not None


def api_for(operation: str, build: int) -> str:
    """The REST version FME Flow build ``build`` serves ``operation`` (one of
    :data:`OPERATIONS`) with: :data:`V4` from its threshold build on, :data:`V3` below."""
    if operation not in V4_FROM_BUILD:
        raise ConfigurationError("operation", operation, f"must be one of {', '.join(OPERATIONS)}")
    count("build", build)
    return V4 if build >= V4_FROM_BUILD[operation] else V3


def describe(job: JobRequest) -> List[str]:
    """The directives of ``job`` as short phrases for a summary line (no parameter values)."""
    d = job.directives
    return ([f"queue {d.queue}"] if d.queue else ["default queue"]) + \
        ([f"maxJobRuntime {d.max_runtime_s} s"] if d.max_runtime_s else []) + \
        ([f"maxTimeInQueue {d.max_queued_s} s"] if d.max_queued_s else [])
