"""The settings of the pipeline's outer world: the Vision AI service, ArcGIS, the write-back,
the compensator's budgets and retention, and what an AI call costs.

Part of :class:`~fme_ai_resilience.core.config.settings.Settings` (groups ``vision``, ``arcgis``,
``writeback``, ``compensation``, ``cost``); read from text the same way as every other group.
Secret values (:data:`SECRET_SETTINGS`) never appear in a ``repr``, an error message or a
displayed configuration.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Tuple

from ..checks import count, finite
from ..errors import ConfigurationError

__all__ = ["VisionSettings", "ArcGISSettings", "WritebackSettings", "CompensationSettings",
           "CostSettings", "SECRET_SETTINGS", "PROVIDER_NAMES", "SINKS", "MAX_COST_PER_CALL"]

#: The settings whose values are secrets: shown as ``[REDACTED]`` wherever settings are shown.
SECRET_SETTINGS = frozenset({"vision.key", "arcgis.token", "arcgis.client_secret",
                             "arcgis.password", "download.host_headers"})
#: The most one Vision AI call may cost (``cost.per_call``), in any currency.
MAX_COST_PER_CALL = 1_000_000.0
#: The Vision AI providers the client speaks (``fme_ai_resilience.services.vision.PROVIDERS``).
PROVIDER_NAMES = ("azure-v4", "google", "rekognition", "openai", "generic")
#: Where the processor writes a conclusion.
SINKS = ("feature_layer", "table", "collect")


def _one_of(label: str, value: str, choices: Tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigurationError(label, value, f"must be one of {list(choices)}")


_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SERVICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _field_names(group: str, obj: object, *names: str) -> None:
    """ArcGIS field names: a letter or underscore, then letters, digits and underscores."""
    for name in names:
        value = getattr(obj, name)
        if not (isinstance(value, str) and _FIELD_NAME.fullmatch(value)):
            raise ConfigurationError(f"{group}.{name}", value, "must be a field name")


def _url_or_empty(label: str, value: str) -> None:
    if not isinstance(value, str) or (value and not value.startswith(("https://", "http://"))):
        raise ConfigurationError(label, value, "must be an http(s) URL or empty")


@dataclass(frozen=True)
class VisionSettings:
    """The Vision AI service the processor calls.

    ``endpoint`` empty means not configured (the processor refuses to start). ``service`` names
    it in the call log and the shared breaker. ``fallback_endpoint``/``fallback_model`` are the
    lighter model the degradation ladder switches to from L2 (empty: no fallback). ``prompt``
    empty keeps the library's prompt (OpenAI-compatible providers).
    """

    provider: str = "generic"
    endpoint: str = ""
    key: str = field(default="", repr=False)
    model: str = "gpt-4o-mini"
    service: str = "vision"
    fallback_endpoint: str = ""
    fallback_model: str = ""
    prompt: str = ""
    max_response_bytes: int = 2 * 1024 * 1024

    def __post_init__(self) -> None:
        _one_of("vision.provider", self.provider, PROVIDER_NAMES)
        _url_or_empty("vision.endpoint", self.endpoint)
        _url_or_empty("vision.fallback_endpoint", self.fallback_endpoint)
        if not (isinstance(self.service, str) and _SERVICE_NAME.fullmatch(self.service)):
            raise ConfigurationError("vision.service", self.service,
                                     "must be a name (letters, digits, '.', '_', '-')")
        count("vision.max_response_bytes", self.max_response_bytes, minimum=1)

    @property
    def fallback_service(self) -> str:
        """The fallback model's name in the call log and the breaker."""
        return f"{self.service}-fallback"


@dataclass(frozen=True)
class ArcGISSettings:
    """How the processor authenticates to the portal and the feature services.

    One of: ``token`` (a static token), ``client_id`` + ``client_secret`` (OAuth app
    credentials, client-credentials grant at ``<portal_url>/sharing/rest/oauth2/token``),
    ``username`` + ``password`` (``generateToken``), or ``web_connection`` (a named FME web
    connection, inside FME only). Tokens are refreshed ``token_refresh_margin_s`` before they
    expire. The submitter's own portal token is never stored, so the processor needs one of
    these to download photos and write back. An ArcGIS layer webhook's ``extractChanges`` job
    is polled from ``changes_poll_s`` apart (each wait 1.5 times the last, at most ten times
    the first) for up to ``changes_wait_s``.
    """

    portal_url: str = "https://www.arcgis.com"
    token: str = field(default="", repr=False)
    client_id: str = ""
    client_secret: str = field(default="", repr=False)
    username: str = ""
    password: str = field(default="", repr=False)
    web_connection: str = ""
    token_refresh_margin_s: float = 120.0
    request_timeout_s: float = 30.0
    changes_wait_s: float = 20.0
    changes_poll_s: float = 0.5

    def __post_init__(self) -> None:
        _url_or_empty("arcgis.portal_url", self.portal_url)
        finite("arcgis.token_refresh_margin_s", self.token_refresh_margin_s, minimum=0)
        finite("arcgis.request_timeout_s", self.request_timeout_s, above=0)
        finite("arcgis.changes_wait_s", self.changes_wait_s, above=0)
        finite("arcgis.changes_poll_s", self.changes_poll_s, above=0)
        if bool(self.client_id) != bool(self.client_secret):
            raise ConfigurationError("arcgis.client_secret" if self.client_id
                                     else "arcgis.client_id", "",
                                     "client_id and client_secret go together")
        if bool(self.username) != bool(self.password):
            raise ConfigurationError("arcgis.password" if self.username else "arcgis.username",
                                     "", "username and password go together")


@dataclass(frozen=True)
class WritebackSettings:
    """Where and how a conclusion is written.

    ``sink``: ``feature_layer`` (applyEdits on the feature, by GlobalID; or rows of a related
    table when ``table_url`` is set), ``table`` (an ``asset_condition`` row in the ledger's own
    database, in the same transaction as the task's completion) or ``collect`` (handed to the
    FME workspace, whose writers write it). ``layer_url`` empty: the submission's own layer.
    The ``*_field`` settings name the fields written.
    """

    sink: str = "feature_layer"
    layer_url: str = ""
    table_url: str = ""
    parent_field: str = "parentglobalid"
    photo_field: str = "ai_photo_globalid"
    condition_field: str = "ai_condition"
    confidence_field: str = "ai_confidence"
    outcome_field: str = "ai_status"
    model_field: str = "ai_model"
    trace_field: str = "ai_trace_id"
    assessed_at_field: str = "ai_assessed_at"

    def __post_init__(self) -> None:
        _one_of("writeback.sink", self.sink, SINKS)
        _url_or_empty("writeback.layer_url", self.layer_url)
        _url_or_empty("writeback.table_url", self.table_url)
        _field_names("writeback", self, "parent_field", "photo_field", "condition_field",
                     "confidence_field", "outcome_field", "model_field", "trace_field",
                     "assessed_at_field")


@dataclass(frozen=True)
class CompensationSettings:
    """What the compensator (WS-03) does per run, and how far it goes.

    Dead letters of a transient cause (attempt budget spent) are requeued automatically up to
    ``requeue_budget`` times each, the n-th after ``requeue_backoff_s x 2**(n-1)`` (capped at
    ``requeue_backoff_cap_s``), at most ``batch`` per run. The call log and format anomalies are
    kept ``retention_days``. Reconciliation looks ``reconcile_window_s`` back on the layer's
    ``date_field`` (epoch ms).
    """

    requeue_budget: int = 3
    requeue_backoff_s: float = 300.0
    requeue_backoff_cap_s: float = 6 * 3600.0
    batch: int = 200
    retention_days: float = 14.0
    reconcile_window_s: float = 24 * 3600.0
    reconcile_backfill: bool = False
    date_field: str = "CreationDate"
    crew_field: str = "crew"

    def __post_init__(self) -> None:
        count("compensation.requeue_budget", self.requeue_budget)
        finite("compensation.requeue_backoff_s", self.requeue_backoff_s, above=0)
        finite("compensation.requeue_backoff_cap_s", self.requeue_backoff_cap_s,
               minimum=self.requeue_backoff_s)
        count("compensation.batch", self.batch, minimum=1)
        finite("compensation.retention_days", self.retention_days, above=0)
        finite("compensation.reconcile_window_s", self.reconcile_window_s, above=0)
        _field_names("compensation", self, "date_field", "crew_field")


@dataclass(frozen=True)
class CostSettings:
    """What one Vision AI call costs (``per_call``, in ``currency``, at most
    :data:`MAX_COST_PER_CALL`: more is a typo, and the spend must stay a finite number), for
    the spend signal."""

    per_call: float = 0.0
    currency: str = "USD"

    def __post_init__(self) -> None:
        finite("cost.per_call", self.per_call, minimum=0, maximum=MAX_COST_PER_CALL)
