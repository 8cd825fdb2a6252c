"""The published parameters of the three workspaces, one list for all of them.

Each :class:`PublishedParameter` names a ``FAIR_<GROUP>_<FIELD>`` parameter of a setting in
:mod:`fme_ai_resilience.core.config.settings` (or, like ``FAIR_DB``, something that is not a
setting) and the workspaces that publish it. The generator (:mod:`fme_ai_resilience.core.fme.fmw`)
writes them into each ``.fmw``; the PythonCaller reads them back with
``Settings.from_mapping(fme.macroValues, prefix="FAIR_")``. Every settings parameter defaults to
blank, which keeps the library default (or the ``resilience_config`` row), so a template never pins
a threshold by accident; the prompt says what blank means.

Adding a parameter is one line in :data:`PARAMETERS`, e.g. once ``vision.endpoint`` exists::

    _setting("vision.endpoint", "Vision AI endpoint URL", PROCESSOR),
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from ..errors import ConfigurationError
from ..config.settings import ENV_PREFIX, SECRET_SETTINGS, Settings

__all__ = ["PublishedParameter", "PARAMETERS", "WORKSPACES", "INTAKE", "PROCESSOR",
           "COMPENSATOR", "DB_PARAMETER", "BODY_PARAMETER", "HEADERS_PARAMETER",
           "parameters_for", "parameter_name", "setting_text", "changed_settings"]

INTAKE = "WS-01_intake"
PROCESSOR = "WS-02_processor"
COMPENSATOR = "WS-03_compensator"
#: The templates, by file name without ``.fmw`` / ``.py``.
WORKSPACES = (INTAKE, PROCESSOR, COMPENSATOR)

#: The ledger URL every workspace needs (not a setting: the ledger holds the settings table).
DB_PARAMETER = "FAIR_DB"
#: WS-01's webhook body and headers (a JSON object), when the feature does not carry them.
BODY_PARAMETER = "FAIR_WEBHOOK_BODY"
HEADERS_PARAMETER = "FAIR_WEBHOOK_HEADERS"

_NAME = re.compile(r"FAIR_[A-Z0-9]+(_[A-Z0-9]+)*")
#: What a prompt may hold: it ends a GUI line, where Tcl's special characters would be read.
_PROMPT = re.compile(r"[A-Za-z0-9 .,:/()=+_-]+")


def parameter_name(setting: str) -> str:
    """The published parameter of a setting: ``timeouts.ttfb_s`` -> ``FAIR_TIMEOUTS_TTFB_S``."""
    return ENV_PREFIX + setting.replace(".", "_").upper()


@dataclass(frozen=True)
class PublishedParameter:
    """One published parameter: its ``name``, the ``setting`` it sets (None when it is not a
    setting), the ``prompt`` Workbench shows, its ``default`` (blank: the library's), whether
    it is a ``secret`` (never given a default in a file, never printed), whether it is
    ``required`` (FME refuses to run without it) and the ``workspaces`` that publish it."""

    name: str
    setting: Optional[str]
    prompt: str
    default: str = ""
    secret: bool = False
    required: bool = False
    workspaces: Tuple[str, ...] = WORKSPACES

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ConfigurationError("name", self.name, "must look like FAIR_GROUP_FIELD")
        if self.setting is not None and parameter_name(str(self.setting)) != self.name:
            raise ConfigurationError("name", self.name,
                                     f"must be {parameter_name(str(self.setting))} for "
                                     f"setting {self.setting}")
        if not isinstance(self.prompt, str) or not _PROMPT.fullmatch(self.prompt):
            raise ConfigurationError("prompt", self.prompt,
                                     "must be letters, digits, spaces and .,:/()=+_-")
        if not isinstance(self.default, str) or "\n" in self.default or '"' in self.default:
            raise ConfigurationError("default", self.default, "must be one line of text")
        if self.secret and self.default:
            raise ConfigurationError("default", "[REDACTED]",
                                     f"{self.name} is a secret: it gets no default in a file")
        workspaces = tuple(self.workspaces)
        unknown = [w for w in workspaces if w not in WORKSPACES]
        if not workspaces or unknown:
            raise ConfigurationError("workspaces", self.workspaces,
                                     f"must name some of {list(WORKSPACES)}")
        object.__setattr__(self, "workspaces", workspaces)

    def __repr__(self) -> str:
        default = "[REDACTED]" if self.secret else self.default
        return (f"PublishedParameter({self.name!r}, setting={self.setting!r}, "
                f"default={default!r}, workspaces={self.workspaces!r})")


def setting_text(value: Any) -> str:
    """A setting's value as a published parameter carries it, read back to the same value by
    ``Settings.from_mapping`` (``120.0`` -> ``"120.0"``, a list -> ``"a,b"``)."""
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v!r}" for k, v in value.items())
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    return str(value)


def _shown(value: Any) -> str:
    """A setting's default as an operator would type it."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={v:g}" for k, v in value.items()) or "none"
    if isinstance(value, (tuple, list)):
        return ", ".join(str(v) for v in value) or "none"
    return str(value) or "none"


_DEFAULTS = Settings().as_flat_dict()


def _setting(setting: str, prompt: str, *workspaces: str,
             blank: Optional[str] = None) -> PublishedParameter:
    """An optional text parameter for ``setting``, secret when the setting is; its prompt
    ends with what blank means (``blank``, or the library's default)."""
    shown = blank if blank is not None else _shown(_DEFAULTS[setting])
    return PublishedParameter(parameter_name(setting), setting, f"{prompt} (blank: {shown})",
                              secret=setting in SECRET_SETTINGS, workspaces=workspaces)


#: Every published parameter of the templates, in the order Workbench lists them.
PARAMETERS: Tuple[PublishedParameter, ...] = (
    PublishedParameter(DB_PARAMETER, None, "Ledger database URL, sqlite:/// or postgresql://",
                       secret=True, required=True),
    # the webhook, as the Automation passes it (a body holds the submitter's portal token)
    PublishedParameter(BODY_PARAMETER, None, "Webhook body JSON, the Automation message "
                       "(blank: the feature message attribute)", secret=True,
                       workspaces=(INTAKE,)),
    PublishedParameter(HEADERS_PARAMETER, None, "Webhook headers as a JSON object "
                       "(blank: the feature webhook.headers attribute)", secret=True,
                       workspaces=(INTAKE,)),
    # what intake needs to answer a burst (WS-01), and what the compensator's ladder and
    # alerts measure against (WS-03)
    _setting("intake.engines", "FME engines processing tasks", INTAKE, COMPENSATOR),
    _setting("intake.mean_processing_s", "Mean processing time of one task, s",
             INTAKE, COMPENSATOR),
    _setting("intake.latency_promise_s", "Latency promise, s", *WORKSPACES),
    _setting("intake.watermark", "Backlog watermark, tasks, 0 derives it", INTAKE, COMPENSATOR),
    _setting("intake.overload_mode", "Past the watermark: park or reject", INTAKE),
    _setting("intake.park_ceiling", "Park ceiling, unfinished tasks stored at most (rows)",
             INTAKE),
    _setting("intake.max_body_bytes", "Largest webhook body, bytes", INTAKE),
    _setting("intake.max_attachments", "Most photos in one body", INTAKE),
    _setting("intake.feature_services", "FeatureServer URLs served, comma-separated",
             INTAKE, PROCESSOR),
    # the processor: claiming, retries, time limits, validation, download, breaker
    _setting("processing.claim_limit", "Tasks one job claims", PROCESSOR),
    _setting("processing.lease_s", "Lease on each claimed task, s", PROCESSOR),
    _setting("processing.job_runtime_limit_s", "The job runtime limit, tm_ttc, s", PROCESSOR,
             blank="none"),
    _setting("retry.task_attempts", "Attempt budget of one task", PROCESSOR, COMPENSATOR),
    _setting("retry.backoff_base_s", "Backoff base, s", PROCESSOR),
    _setting("retry.backoff_cap_s", "Longest backoff, s", PROCESSOR),
    _setting("retry.max_inline_wait_s", "Longest wait inside an engine, s", PROCESSOR),
    _setting("timeouts.connect_s", "Vision AI connect timeout, s", PROCESSOR),
    _setting("timeouts.tls_s", "Vision AI TLS handshake timeout, s", PROCESSOR),
    _setting("timeouts.ttfb_s", "Vision AI time to first byte, s", PROCESSOR),
    _setting("timeouts.body_s", "Vision AI body read timeout, s", PROCESSOR),
    _setting("validation.confidence_threshold", "Confidence to accept a conclusion",
             PROCESSOR),
    _setting("validation.thresholds", "Confidence by asset type, type=value", PROCESSOR),
    _setting("validation.conditions", "Conditions an assessment may conclude", PROCESSOR),
    _setting("download.max_photo_bytes", "Largest photo, bytes", PROCESSOR),
    _setting("download.allowed_hosts", "More hosts photos may come from", PROCESSOR),
    _setting("download.allow_http_hosts", "Photo hosts reached over plain http", PROCESSOR),
    _setting("download.allow_private_hosts", "Photo hosts on private addresses, on premises",
             PROCESSOR),
    _setting("download.host_headers", "Credentials of photo hosts (JSON, secret)", PROCESSOR),
    _setting("breaker.failure_rate", "Failure rate that opens the breaker",
             PROCESSOR, COMPENSATOR),
    _setting("breaker.min_calls", "Calls before the breaker may open", PROCESSOR),
    _setting("breaker.slow_call_s", "A call this long is slow, s", PROCESSOR),
    _setting("breaker.cooldown_s", "Breaker cooldown, s", PROCESSOR, COMPENSATOR),
    _setting("degrade.critical_types", "Asset types always analysed", PROCESSOR),
    _setting("degrade.non_critical_types", "Asset types a degraded pipeline may skip",
             PROCESSOR),
    _setting("degrade.when_degraded", "Non-critical types when degraded: defer or skip",
             PROCESSOR),
    # the Vision AI service (WS-03 evaluates its breakers by name)
    _setting("vision.provider", "Vision AI provider: azure-v4, google, rekognition, openai, "
             "generic", PROCESSOR),
    _setting("vision.endpoint", "Vision AI endpoint URL", PROCESSOR,
             blank="none, the processor refuses to start"),
    _setting("vision.key", "Vision AI API key", PROCESSOR),
    _setting("vision.model", "Model asked for, OpenAI-compatible providers", PROCESSOR),
    _setting("vision.service", "Vision AI name in the call log and the breaker",
             PROCESSOR, COMPENSATOR),
    _setting("vision.fallback_endpoint", "Lighter model endpoint from L2", PROCESSOR,
             COMPENSATOR, blank="no fallback"),
    _setting("vision.fallback_model", "Lighter model name", PROCESSOR, blank="vision.model"),
    _setting("vision.prompt", "Prompt, OpenAI-compatible providers", PROCESSOR,
             blank="the library prompt"),
    # the processor's ArcGIS credential (and WS-03's, to read the layer it reconciles)
    _setting("arcgis.portal_url", "Portal that issues tokens", PROCESSOR, COMPENSATOR),
    _setting("arcgis.token", "ArcGIS token, static", PROCESSOR, COMPENSATOR),
    _setting("arcgis.client_id", "OAuth app client id", PROCESSOR, COMPENSATOR),
    _setting("arcgis.client_secret", "OAuth app client secret", PROCESSOR, COMPENSATOR),
    _setting("arcgis.username", "ArcGIS named user", PROCESSOR, COMPENSATOR),
    _setting("arcgis.password", "ArcGIS named user password", PROCESSOR, COMPENSATOR),
    _setting("arcgis.web_connection", "FME web connection to ArcGIS", PROCESSOR, COMPENSATOR),
    # where a conclusion goes (the layer is also what WS-03 reconciles against)
    _setting("writeback.sink", "Write to feature_layer, table or collect", PROCESSOR),
    _setting("writeback.layer_url", "Layer written and reconciled", PROCESSOR, COMPENSATOR,
             blank="the submission layer, no reconciliation"),
    _setting("writeback.table_url", "Related table to add rows to", PROCESSOR,
             blank="update the feature"),
    _setting("writeback.condition_field", "Field for the condition", PROCESSOR),
    _setting("writeback.confidence_field", "Field for the confidence", PROCESSOR),
    _setting("writeback.outcome_field", "Field for the outcome", PROCESSOR),
    _setting("writeback.model_field", "Field for the model version", PROCESSOR),
    _setting("writeback.trace_field", "Field for the trace id", PROCESSOR),
    _setting("writeback.assessed_at_field", "Field for the assessment time", PROCESSOR),
    _setting("writeback.parent_field", "Related table field for the feature GlobalID",
             PROCESSOR),
    _setting("writeback.photo_field", "Related table field for the photo GlobalID",
             PROCESSOR),
    # the compensator: the ladder it evaluates and the alerts it raises
    _setting("degrade.sample_backlog", "Backlog for L1 sampling, x watermark", COMPENSATOR),
    _setting("degrade.critical_backlog", "Backlog for L3 critical only, x watermark",
             COMPENSATOR),
    _setting("degrade.pause_backlog", "Backlog for L4 pause, x watermark", COMPENSATOR),
    _setting("degrade.hold_s", "Calm time before the ladder steps down, s", COMPENSATOR),
    _setting("alerts.anomaly_rate", "Format anomaly rate worth an alert", COMPENSATOR),
    _setting("alerts.e2e_p95_warning_ratio", "End-to-end P95 warning, x latency promise",
             COMPENSATOR),
    _setting("alerts.backlog_ratio", "Backlog warning, x watermark", COMPENSATOR),
    _setting("alerts.window_s", "Window the signals cover, s", COMPENSATOR),
    _setting("alerts.dead_letter_ratio", "Dead letters worth an alert, x tasks finished",
             COMPENSATOR),
    _setting("alerts.review_age_s", "Review queue age worth a warning, s", COMPENSATOR),
    _setting("cost.per_call", "Price of one Vision AI call", COMPENSATOR),
    # the compensator's budgets and the reconciliation window
    _setting("compensation.requeue_budget", "Automatic requeues of a spent task", COMPENSATOR),
    _setting("compensation.requeue_backoff_s", "Wait before the first requeue, s",
             COMPENSATOR),
    _setting("compensation.requeue_backoff_cap_s", "Longest wait before a requeue, s",
             COMPENSATOR),
    _setting("compensation.batch", "Rows one step touches per run", COMPENSATOR),
    _setting("compensation.retention_days", "Days the call log is kept", COMPENSATOR),
    _setting("compensation.reconcile_window_s", "Reconciliation looks back, s", COMPENSATOR),
    _setting("compensation.reconcile_backfill", "Register what reconciliation finds missing",
             COMPENSATOR),
    _setting("compensation.date_field", "Layer creation date field", COMPENSATOR),
    _setting("compensation.crew_field", "Layer crew field, for gaps by crew", COMPENSATOR),
)


def parameters_for(workspace: str) -> Tuple[PublishedParameter, ...]:
    """The published parameters of one template, in :data:`PARAMETERS` order.

    Raises :class:`ConfigurationError` for a name that is not one of :data:`WORKSPACES`.
    """
    if workspace not in WORKSPACES:
        raise ConfigurationError("workspace", workspace, f"must be one of {list(WORKSPACES)}")
    return tuple(p for p in PARAMETERS if workspace in p.workspaces)


def changed_settings(settings: Settings, workspace: str) -> Dict[str, str]:
    """The published parameters of ``workspace`` whose settings differ from the library's
    defaults in ``settings``, with their values as text (parameter name -> value)."""
    values = settings.as_flat_dict(reveal_secrets=True)   # secret parameters: see deployment
    return {p.name: setting_text(values[p.setting]) for p in parameters_for(workspace)
            if p.setting is not None and values[p.setting] != _DEFAULTS[p.setting]}
