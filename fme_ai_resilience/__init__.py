"""Keep a Survey123 -> FME Flow -> Vision AI pipeline whole under bursts, duplicates and outages.

The names a user needs are importable from here (``from fme_ai_resilience import open_store,
VisionClient``); each is loaded from the module that holds it on first use, so importing the
package costs almost nothing (FME imports it on every translation). docs/architecture.md maps
every module; the adapters keep their own short paths: ``fme_ai_resilience.gateway`` and
``fme_ai_resilience.cli``.
"""
from __future__ import annotations

import importlib
from typing import Any, Dict, List

__version__ = "0.1.0"

_P = "fme_ai_resilience"

#: Each re-exported name and the module that holds it.
_EXPORTS: Dict[str, str] = {
    # time
    "Clock": f"{_P}.clock", "SystemClock": f"{_P}.clock", "FakeClock": f"{_P}.clock",
    "Deadline": f"{_P}.clock",
    # the exception tree and the failure vocabulary
    **{name: f"{_P}.errors" for name in (
        "ResilienceError", "InvalidPayload", "ConfigurationError", "FormatError", "UnsafeURL",
        "DownloadError", "CircuitOpenError", "FlowError", "ArcGISError", "TokenError",
        "StoreError", "StoreUnavailable", "SchemaMissing", "ErrorClass", "FailureClass")},
    "CLASSIFICATION": f"{_P}.classification", "classify_status": f"{_P}.classification",
    # settings, budgets and capacity
    "Settings": f"{_P}.settings", "TimeoutBudget": f"{_P}.timeouts",
    "check_budget": f"{_P}.task_budget", "task_budget_s": f"{_P}.task_budget",
    "plan_capacity": f"{_P}.capacity", "CapacityPlan": f"{_P}.capacity",
    # retries
    "Backoff": f"{_P}.backoff", "Jitter": f"{_P}.backoff",
    "parse_retry_after": f"{_P}.backoff", "RetryPolicy": f"{_P}.retry",
    "RetryHistory": f"{_P}.retry", "DecisionKind": f"{_P}.retry",
    "RetryBudget": f"{_P}.retry_budget", "Retrying": f"{_P}.services.retrying",
    "classify_exception": f"{_P}.services.retrying",
    "FleetRetryGate": f"{_P}.services.fleet_retry_gate",
    # breaker and degradation ladder
    "CircuitState": f"{_P}.breaker", "BreakerMode": f"{_P}.breaker", "Permit": f"{_P}.breaker",
    "CircuitOpen": f"{_P}.breaker", "CircuitBreaker": f"{_P}.services.shared_breaker",
    "Level": f"{_P}.degrade", "Degradation": f"{_P}.services.shared_ladder",
    # the ledger and intake
    "Status": f"{_P}.ledger", "TaskOutcome": f"{_P}.ledger", "OverloadMode": f"{_P}.ledger",
    "RegisterOutcome": f"{_P}.ledger", "Stage": f"{_P}.ledger", "Task": f"{_P}.ledger",
    "CallRecord": f"{_P}.ledger", "Refusal": f"{_P}.ledger", "open_store": f"{_P}.store",
    "Store": f"{_P}.store",
    "Submission": f"{_P}.submission", "parse_webhook": f"{_P}.survey123",
    "idempotency_key": f"{_P}.keys", "decide": f"{_P}.services.intake",
    "IntakeAnswer": f"{_P}.services.intake", "LiveSettings": f"{_P}.services.live_settings",
    "FlowClient": f"{_P}.services.flow",
    # validation and the Vision AI service
    "Verdict": f"{_P}.validate", "VerdictKind": f"{_P}.validate",
    **{name: f"{_P}.services.vision" for name in (
        "VisionClient", "VisionOutcome", "Credentials", "Assessment", "normalize",
        "fetch_photo", "check_url", "DownloadPolicy", "Photo", "AwsCredentials", "PROVIDERS")},
    # ArcGIS: the feature layer and the processor's credential
    "FeatureLayer": f"{_P}.services.arcgis",
    **{name: f"{_P}.services.credentials" for name in (
        "TokenProvider", "StaticToken", "OAuthAppToken", "UserToken", "FmeWebConnectionToken",
        "token_provider_from_settings")},
    # secrets
    "redact_text": f"{_P}.redact", "redact_url": f"{_P}.redact",
}

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
