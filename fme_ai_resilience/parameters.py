"""The published parameters of the three workspaces, one list for all of them.

Each :class:`PublishedParameter` names a ``FAIR_<GROUP>_<FIELD>`` parameter of a setting in
:mod:`fme_ai_resilience.settings` (or, like ``FAIR_DB``, something that is not a setting) and
the workspaces that publish it. The generator (:mod:`fme_ai_resilience.fmw`) writes them into
each ``.fmw``; the PythonCaller reads them back with ``Settings.from_mapping(fme.macroValues,
prefix="FAIR_")``. Every settings parameter defaults to blank, which keeps the library default
(or the ``resilience_config`` row), so a template never pins a threshold by accident; the prompt
says what blank means.

Adding a parameter is one line in :data:`PARAMETERS`, e.g. once ``vision.endpoint`` exists::

    _setting("vision.endpoint", "Vision AI endpoint URL", PROCESSOR),
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from .errors import ConfigurationError
from .settings import ENV_PREFIX, Settings

__all__ = ["PublishedParameter", "PARAMETERS", "WORKSPACES", "INTAKE", "PROCESSOR",
           "COMPENSATOR", "DB_PARAMETER", "parameters_for", "parameter_name", "setting_text",
           "changed_settings"]

INTAKE = "WS-01_intake"
PROCESSOR = "WS-02_processor"
COMPENSATOR = "WS-03_compensator"
#: The templates, by file name without ``.fmw`` / ``.py``.
WORKSPACES = (INTAKE, PROCESSOR, COMPENSATOR)

#: The ledger URL every workspace needs (not a setting: the ledger holds the settings table).
DB_PARAMETER = "FAIR_DB"

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
    return str(value)


_DEFAULTS = Settings().as_flat_dict()


def _setting(setting: str, prompt: str, *workspaces: str) -> PublishedParameter:
    """An optional text parameter for ``setting``; its prompt ends with what blank means."""
    shown = _DEFAULTS.get(setting)
    if shown is not None:
        prompt = f"{prompt} (blank: {_shown(shown)})"
    return PublishedParameter(parameter_name(setting), setting, prompt, workspaces=workspaces)


#: Every published parameter of the templates, in the order Workbench lists them.
PARAMETERS: Tuple[PublishedParameter, ...] = (
    PublishedParameter(DB_PARAMETER, None, "Ledger database URL, sqlite:/// or postgresql://",
                       secret=True, required=True),
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
    _setting("breaker.failure_rate", "Failure rate that opens the breaker",
             PROCESSOR, COMPENSATOR),
    _setting("breaker.min_calls", "Calls before the breaker may open", PROCESSOR),
    _setting("breaker.slow_call_s", "A call this long is slow, s", PROCESSOR),
    _setting("breaker.cooldown_s", "Breaker cooldown, s", PROCESSOR, COMPENSATOR),
    _setting("degrade.critical_types", "Asset types always analysed", PROCESSOR),
    # the compensator: the ladder it evaluates and the alerts it raises
    _setting("degrade.sample_backlog", "Backlog for L1 sampling, x watermark", COMPENSATOR),
    _setting("degrade.critical_backlog", "Backlog for L3 critical only, x watermark",
             COMPENSATOR),
    _setting("degrade.pause_backlog", "Backlog for L4 pause, x watermark", COMPENSATOR),
    _setting("degrade.hold_s", "Calm time before the ladder steps down, s", COMPENSATOR),
    _setting("alerts.anomaly_rate", "Format anomaly rate worth an alert", COMPENSATOR),
    _setting("alerts.e2e_p95_warning_ratio", "End-to-end P95 warning, x latency promise",
             COMPENSATOR),
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
    values = settings.as_flat_dict()
    return {p.name: setting_text(values[p.setting]) for p in parameters_for(workspace)
            if p.setting is not None and values[p.setting] != _DEFAULTS[p.setting]}
