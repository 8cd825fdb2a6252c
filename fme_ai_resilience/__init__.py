"""Keep a Survey123 -> FME Flow -> Vision AI pipeline whole under bursts, duplicates and outages.

The names a user needs are importable from here (``from fme_ai_resilience import open_store,
VisionClient``); each is loaded from the module that holds it on first use, so importing the
package costs almost nothing (FME imports it on every translation). docs/architecture.md maps
every module; the adapters keep their own short paths: ``fme_ai_resilience.gateway`` and
``fme_ai_resilience.cli``.
"""
from __future__ import annotations

import importlib
from typing import Any, Dict, List, Tuple

__version__ = "0.1.0"

_P = "fme_ai_resilience"

#: The modules that hold the re-exported names, and the names each one gives.
_HOLDERS: Dict[str, Tuple[str, ...]] = {
    # time
    "core.clock": ("Clock", "SystemClock", "FakeClock", "Deadline"),
    # the exception tree and the failure vocabulary
    "core.errors": (
        "ResilienceError", "InvalidPayload", "ConfigurationError", "FormatError", "UnsafeURL",
        "DownloadError", "CircuitOpenError", "FlowError", "ArcGISError", "TokenError",
        "StoreError", "StoreUnavailable", "SchemaMissing", "ErrorClass", "FailureClass"),
    "core.resilience.classification": ("CLASSIFICATION", "classify_status"),
    # settings, budgets and capacity
    "core.config.settings": ("Settings",),
    "core.resilience.timeouts": ("TimeoutBudget",),
    "core.resilience.task_budget": ("check_budget", "task_budget_s"),
    "core.intake.capacity": ("plan_capacity", "CapacityPlan"),
    # retries
    "core.resilience.backoff": ("Backoff", "Jitter", "parse_retry_after"),
    "core.resilience.retry": ("RetryPolicy", "RetryHistory", "DecisionKind"),
    "core.resilience.retry_budget": ("RetryBudget",),
    "services.resilience.retry": ("Retrying", "classify_exception"),
    "services.resilience.retry_budget": ("FleetRetryGate",),
    # breaker and degradation ladder
    "core.resilience.breaker": ("CircuitState", "BreakerMode", "Permit", "CircuitOpen"),
    "services.resilience.breaker": ("CircuitBreaker",),
    "core.resilience.degrade": ("Level",),
    "services.resilience.degrade": ("Degradation",),
    # the ledger and intake
    "core.ledger": ("Status", "TaskOutcome", "OverloadMode", "RegisterOutcome", "Stage", "Task",
                    "CallRecord", "Refusal"),
    "store": ("open_store", "Store"),
    "core.intake.submission": ("Submission",),
    "core.intake.survey123": ("parse_webhook",),
    "core.intake.keys": ("idempotency_key",),
    "services.intake.webhook": ("receive", "decide", "IntakeAnswer"),
    "services.config.settings": ("LiveSettings",),
    "services.flow.client": ("FlowClient",),
    # validation and the Vision AI service
    "core.vision.validate": ("Verdict", "VerdictKind"),
    "services.vision": (
        "VisionClient", "VisionOutcome", "Credentials", "Assessment", "normalize",
        "fetch_photo", "check_url", "DownloadPolicy", "Photo", "AwsCredentials", "PROVIDERS"),
    # ArcGIS: the feature layer and the processor's credential
    "services.arcgis.layer": ("FeatureLayer",),
    "services.arcgis.credentials": (
        "TokenProvider", "StaticToken", "OAuthAppToken", "UserToken", "FmeWebConnectionToken",
        "token_provider_from_settings"),
    # secrets
    "core.text.redact": ("redact_text", "redact_url"),
}

#: Each re-exported name and the module that holds it.
_EXPORTS: Dict[str, str] = {name: f"{_P}.{module}" for module, names in _HOLDERS.items()
                            for name in names}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    """Load a re-exported name from the module that holds it, on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
