"""Every threshold in one frozen ``Settings`` value, grouped, with the seed's defaults.

Settings arrive as strings from FME published parameters (``fme.macroValues``), environment
variables and the ``resilience_config`` table, so the loaders convert and validate once, at the
boundary; every bad value raises :class:`ConfigurationError` naming the field and the value.

Names: ``group.field`` (``breaker.failure_rate``) or ``GROUP_FIELD`` (``BREAKER_FAILURE_RATE``);
environment variables and published parameters carry the ``FAIR_`` prefix
(``FAIR_BREAKER_FAILURE_RATE``). An empty string means "not set" (an optional FME parameter
left blank) and keeps the default; an unknown name is an error even when its value is empty.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import enum
import functools
import json
import math
import re
import typing
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Dict, FrozenSet, Mapping, Optional, Tuple
from urllib.parse import urlsplit

from ..resilience.backoff import Jitter
from ..intake.capacity import CapacityPlan, plan_capacity
from ..checks import (MAX_SETTING_NUMBER, count, finite, hostname_problem, ratio, read_count,
                      read_number)
from ..resilience.concurrency import ConcurrencySettings
from ..errors import ConfigurationError
from ..ledger import OverloadMode, WhenDegraded
from .pipeline_settings import (SECRET_SETTINGS, ArcGISSettings, CompensationSettings,
                                CostSettings, VisionSettings, WritebackSettings)
from ..text.redact import REDACTED
from ..resilience.timeouts import TimeoutBudget

__all__ = ["Settings", "RetrySettings", "BreakerSettings", "DegradeSettings", "IntakeSettings",
           "ProcessingSettings", "ValidationSettings", "DownloadSettings", "AlertSettings",
           "VisionSettings", "ArcGISSettings", "WritebackSettings", "CompensationSettings",
           "CostSettings", "DatabaseSettings", "ConcurrencySettings", "SECRET_SETTINGS",
           "ENV_PREFIX", "MAX_COUNT", "RETIRED"]

ENV_PREFIX = "FAIR_"

#: The largest count any setting may hold (the ledger stores counts as 32-bit integers).
MAX_COUNT = 2 ** 31 - 1
#: Tighter maxima of particular counts: a half-open round creates one ledger row per probe.
MAX_COUNTS = {"half_open_probes": 1000}
#: Settings that no longer exist, with what replaced them (a deployment still naming one is
#: told what to write instead).
RETIRED = {"intake.park_ceiling_factor": "was replaced by intake.park_ceiling, a number of "
                                         "rows (default 100000): the park ceiling is a storage "
                                         "limit, not a multiple of the engine watermark",
           "breaker.slow_call_rate": "is retired: slow calls no longer open the circuit (slow "
                                     "is not down); they lower the fleet's concurrency "
                                     "(concurrency.*) and lengthen its time to first byte, "
                                     "and a run of breaker.consecutive_failures calls that say "
                                     "the service is down opens it (docs/breaker.md)"}


def _check(group: str, name: str, value: Any, ok: bool, reason: str) -> None:
    if not ok:
        raise ConfigurationError(f"{group}.{name}", value, reason)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _positive(group: str, obj: Any, *names: str, allow_zero: bool = False) -> None:
    """Counts and durations that must be > 0 (or >= 0 with ``allow_zero``) and finite."""
    whole = {f.name for f in dataclasses.fields(obj) if f.type in ("int", int)}
    for name in names:
        label, value = f"{group}.{name}", getattr(obj, name)
        if name in whole:
            count(label, value, minimum=0 if allow_zero else 1,
                  maximum=MAX_COUNTS.get(name, MAX_COUNT))
        elif allow_zero:
            finite(label, value, minimum=0, maximum=MAX_SETTING_NUMBER)
        else:
            finite(label, value, above=0, maximum=MAX_SETTING_NUMBER)


def _ratio(group: str, obj: Any, *names: str, allow_zero: bool = True) -> None:
    for name in names:
        ratio(f"{group}.{name}", getattr(obj, name), allow_zero=allow_zero)


def _enum(group: str, obj: Any, name: str, kind: "type[enum.Enum]") -> None:
    """An enum field given by value (``"full"``) or as the member, stored as the member."""
    value = getattr(obj, name)
    try:
        object.__setattr__(obj, name, kind(value))
    except ValueError:
        raise ConfigurationError(f"{group}.{name}", value,
                                 f"must be one of {[m.value for m in kind]}") from None


def _names(group: str, obj: Any, *names: str) -> None:
    """Tuple-of-names fields: a list or tuple of strings, stored as a tuple."""
    for name in names:
        value = getattr(obj, name)
        ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
        _check(group, name, value, ok, "must be a list of names")
        object.__setattr__(obj, name, tuple(value))


#: An HTTP header name (RFC 9110 token), as ``download.host_headers`` may name one.
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}")

@dataclass(frozen=True)
class RetrySettings:
    """Backoff and attempt budgets (docs/retries.md).

    ``task_attempts`` is 5 so that the defaults fit their own task budget: five attempts of
    the 30 s per-call limit and four inline waits of 5 s take 170 s of the 180 s budget
    (docs/retries.md explains the choice).
    """

    backoff_base_s: float = 1.0
    backoff_cap_s: float = 60.0
    jitter: Jitter = Jitter.FULL
    task_attempts: int = 5
    max_inline_wait_s: float = 5.0
    fleet_retry_ratio: float = 0.1
    fleet_retry_floor_per_s: float = 0.2
    fleet_window_s: float = 60.0

    def __post_init__(self) -> None:
        _positive("retry", self, "backoff_base_s", "backoff_cap_s", "task_attempts",
                  "fleet_window_s")
        _positive("retry", self, "max_inline_wait_s", "fleet_retry_floor_per_s", allow_zero=True)
        _ratio("retry", self, "fleet_retry_ratio")
        _enum("retry", self, "jitter", Jitter)
        _check("retry", "backoff_cap_s", self.backoff_cap_s,
               self.backoff_cap_s >= self.backoff_base_s, "must be >= backoff_base_s")


@dataclass(frozen=True)
class BreakerSettings:
    """The shared circuit breaker (docs/breaker.md).

    Detection: ``consecutive_failures`` calls in a row that say the service is down (refused
    connections, 502/503/504, time-to-first-byte timeouts the fleet had already waited longer
    for), about two photos at least, open the circuit whatever the window's successes; the
    failure rate over ``window_s`` (at least ``min_calls`` calls) catches partial failure.
    Slow calls never open it (slow is not down): ``slow_call_s`` only says which calls
    ``status`` and ``calibrate`` count as slow.
    Recovery is a probe schedule: an open circuit admits one probe (``half_open_probes``)
    after ``cooldown_s``, then after each failed probe the interval doubles
    (``cooldown_factor``) up to ``cooldown_max_s``, the longest the fleet takes to learn that
    a service is back, whatever the outage's length.
    ``drift_calls`` answers in a row that do not match the schema, about at least two
    photos, mean the model drifted: they open the circuit whatever the window holds, the
    photos wait deferred for the fix, and the drifted model gets only the probes.
    """

    failure_rate: float = 0.5
    min_calls: int = 20
    window_s: float = 60.0
    slow_call_s: float = 20.0
    consecutive_failures: int = 5
    cooldown_s: float = 5.0
    cooldown_max_s: float = 30.0
    cooldown_factor: float = 2.0
    half_open_probes: int = 1
    close_ratio: float = 0.8
    probe_timeout_s: float = 60.0
    cache_ttl_s: float = 1.0
    drift_calls: int = 3

    def __post_init__(self) -> None:
        # A rate of 0 would trip a healthy service and close on a round of failed probes.
        _ratio("breaker", self, "failure_rate", "close_ratio", allow_zero=False)
        _positive("breaker", self, "min_calls", "window_s", "slow_call_s", "cooldown_s",
                  "cooldown_max_s", "half_open_probes", "probe_timeout_s", "drift_calls",
                  "consecutive_failures")
        _positive("breaker", self, "cache_ttl_s", allow_zero=True)
        finite("breaker.cooldown_factor", self.cooldown_factor, minimum=1)
        _check("breaker", "cooldown_max_s", self.cooldown_max_s,
               self.cooldown_max_s >= self.cooldown_s, "must be >= cooldown_s")
        _check("breaker", "cache_ttl_s", self.cache_ttl_s, self.cache_ttl_s <= 1.0,
               "engines must see a state change within 1 s")
        _check("breaker", "drift_calls", self.drift_calls, self.drift_calls >= 2,
               "must be >= 2 (answers about two photos tell drift from one odd photo)")
        _check("breaker", "consecutive_failures", self.consecutive_failures,
               self.consecutive_failures >= 2,
               "must be >= 2 (failures about two photos tell an outage from one odd photo)")


@dataclass(frozen=True)
class DegradeSettings:
    """The degradation ladder L0-L4 (docs/breaker.md).

    Backlog thresholds are multiples of the intake watermark. A level is entered when its
    signal reaches the threshold and left only after every signal has stayed below
    ``exit_ratio`` x its threshold for ``hold_s`` seconds, then straight to the level the
    signals still justify (hysteresis).
    ``critical_types`` are asset types always analysed (until L4) and claimed first; at L1 a
    ``sample_ratio`` share of the others is still analysed. A photo a level holds back stays
    owed (DEFERRED, analysed once the ladder allows), unless its asset type is one of
    ``non_critical_types`` and ``when_degraded`` is ``skip``: then it is SKIPPED for manual
    review (never analysed, in the review queue).
    """

    sample_backlog: float = 1.0
    critical_backlog: float = 3.0
    pause_backlog: float = 6.0
    fallback_error_rate: float = 0.3
    exit_ratio: float = 0.7
    hold_s: float = 300.0
    sample_ratio: float = 0.25
    critical_types: Tuple[str, ...] = ()
    non_critical_types: Tuple[str, ...] = ()
    when_degraded: WhenDegraded = WhenDegraded.DEFER

    def __post_init__(self) -> None:
        _positive("degrade", self, "sample_backlog", "critical_backlog", "pause_backlog",
                  "hold_s")
        _ratio("degrade", self, "fallback_error_rate", "exit_ratio", "sample_ratio")
        _check("degrade", "critical_backlog", self.critical_backlog,
               self.sample_backlog <= self.critical_backlog <= self.pause_backlog,
               "must lie between sample_backlog and pause_backlog")
        _names("degrade", self, "critical_types", "non_critical_types")
        _enum("degrade", self, "when_degraded", WhenDegraded)
        both = sorted(set(self.critical_types) & set(self.non_critical_types))
        _check("degrade", "non_critical_types", self.non_critical_types, not both,
               f"names {both} also in degrade.critical_types")


@dataclass(frozen=True)
class IntakeSettings:
    """Intake capacity and backpressure (docs/intake.md).

    ``watermark`` 0 means "derive it": engines x latency promise / mean processing time.
    In ``park`` mode (the default: Survey123 never retries a refused webhook) submissions past
    the watermark are stored DEFERRED up to ``park_ceiling`` unfinished tasks: a storage limit
    (rows), far above any burst a field crew sends, not an engine limit. A delivery refused
    anyway (429/503 with photos not stored) leaves a refusal record for reconciliation, at most
    ``max_refusal_records`` of them (past it they are logged and counted).
    Retry-After uses the drain rate measured over the last ``drain_window_s`` once at least
    ``drain_min_completions`` tasks finished in it, the planned rate before that. The dead
    letters of invalid bodies are kept at most ``max_invalid_per_minute`` a minute and
    ``max_invalid_total`` in all (past them a body is answered 400 and only counted).
    ``feature_services`` are the FeatureServer URLs the deployment serves: when set, a webhook
    naming any other ``serviceUrl`` is a dead letter (UNKNOWN_SERVICE), and their hosts are
    the photo hosts a download may reach (with ``download.allowed_hosts``).
    """

    engines: int = 8
    mean_processing_s: float = 20.0
    latency_promise_s: float = 120.0
    watermark: int = 0
    backpressure_ratio: float = 0.8
    overload_mode: OverloadMode = OverloadMode.PARK
    park_ceiling: int = 100_000
    max_body_bytes: int = 1024 * 1024
    max_depth: int = 32
    max_attachments: int = 200
    drain_window_s: float = 300.0
    drain_min_completions: int = 10
    max_invalid_per_minute: int = 120
    max_invalid_total: int = 10_000
    max_refusal_records: int = 100_000
    feature_services: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _names("intake", self, "feature_services")
        object.__setattr__(self, "feature_services", tuple(dict.fromkeys(
            _feature_service(url) for url in self.feature_services)))
        _positive("intake", self, "engines", "mean_processing_s", "latency_promise_s",
                  "max_body_bytes", "max_depth", "max_attachments", "drain_window_s",
                  "drain_min_completions")
        _positive("intake", self, "max_invalid_per_minute", "max_invalid_total",
                  "max_refusal_records", "watermark", allow_zero=True)
        _positive("intake", self, "park_ceiling")
        _ratio("intake", self, "backpressure_ratio")
        _enum("intake", self, "overload_mode", OverloadMode)
        if self.watermark == 0:
            derived = self.engines * self.latency_promise_s / self.mean_processing_s
            _check("intake", "watermark", self.watermark, derived <= MAX_COUNT,
                   f"derived from engines x latency_promise_s / mean_processing_s it would "
                   f"exceed {MAX_COUNT}: set it")
        watermark = self.capacity.watermark
        _check("intake", "park_ceiling", self.park_ceiling, self.park_ceiling >= watermark,
               f"must be >= the watermark ({watermark} tasks)")

    @functools.cached_property
    def capacity(self) -> CapacityPlan:
        """The Little's-law plan for these engines, processing time and latency promise, with
        ``watermark`` in place of the derived one when it is set (48 by default)."""
        plan = plan_capacity(self.engines, self.mean_processing_s, self.latency_promise_s)
        return dataclasses.replace(plan, watermark=self.watermark) if self.watermark else plan

    def serves(self, service_url: Optional[str]) -> bool:
        """Whether ``service_url`` is one of ``feature_services`` (scheme and host compared
        without case, the default port and trailing slashes ignored, the path without case as
        ArcGIS reads it). False when none is configured."""
        return service_url is not None and _service_identity(service_url) in self._served

    @functools.cached_property
    def _served(self) -> FrozenSet[Optional[str]]:
        return frozenset(_service_identity(url) for url in self.feature_services)


_DEFAULT_PORTS = {"https": 443, "http": 80}
_LITERAL_V6 = re.compile(r"^[0-9a-f:.]+$")


def _service_identity(url: str) -> Optional[str]:
    """How a feature-service URL is compared: ``scheme://host[:port]/path``, case-folded, the
    default port and trailing slashes dropped; None when it is not an http(s) URL with a host
    and without credentials, query or fragment."""
    try:
        parts = urlsplit(str(url).strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower().rstrip(".")
    if scheme not in _DEFAULT_PORTS or not host or parts.query or parts.fragment \
            or "@" in parts.netloc:
        return None
    if ":" in host:
        if not _LITERAL_V6.match(host):
            return None
        host = f"[{host}]"
    elif hostname_problem(host, numeric_last_label=True):
        return None
    where = "" if port in (None, _DEFAULT_PORTS[scheme]) else f":{port}"
    return f"{scheme}://{host}{where}{parts.path.rstrip('/')}".casefold()


def _feature_service(url: str) -> str:
    """A configured feature-service URL as stored: checked, without a trailing slash."""
    if _service_identity(url) is None:
        raise ConfigurationError("intake.feature_services", url,
                                 "must be an http(s) FeatureServer URL without credentials, "
                                 "query or fragment")
    parts = urlsplit(url.strip())
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


@dataclass(frozen=True)
class ProcessingSettings:
    """How the processor takes work from the ledger.

    A batch claims at most ``claim_limit`` tasks, each leased for ``lease_s`` (renewed while
    its worker lives). ``job_runtime_limit_s`` is the FME job's runtime limit (``tm_ttc``;
    0: none): a batch stops claiming when what is left of it cannot fit another worst-case
    task.
    """

    lease_s: float = 300.0
    claim_limit: int = 10
    job_runtime_limit_s: float = 0.0

    def __post_init__(self) -> None:
        _positive("processing", self, "lease_s", "claim_limit")
        _positive("processing", self, "job_runtime_limit_s", allow_zero=True)


@dataclass(frozen=True)
class ValidationSettings:
    """Confidence policy for AI conclusions (docs/vision.md).

    ``thresholds`` overrides ``confidence_threshold`` per asset type
    (``"hydrant=0.8,valve=0.9"`` as a string).
    """

    confidence_threshold: float = 0.75
    thresholds: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    conditions: Tuple[str, ...] = ("good", "fair", "damaged")

    def __post_init__(self) -> None:
        _ratio("validation", self, "confidence_threshold")
        _check("validation", "thresholds", self.thresholds,
               isinstance(self.thresholds, Mapping), "must map asset types to numbers")
        for asset, value in self.thresholds.items():
            _check("validation", f"thresholds[{asset}]", value,
                   _number(value) and 0.0 <= value <= 1.0,
                   "must be between 0 and 1")
        object.__setattr__(self, "thresholds", MappingProxyType(dict(self.thresholds)))
        _names("validation", self, "conditions")
        _check("validation", "conditions", self.conditions, len(self.conditions) > 0,
               "needs at least one condition")

    def threshold_for(self, asset_type: Optional[str]) -> float:
        """The confidence an assessment of ``asset_type`` must reach."""
        return self.thresholds.get(asset_type or "", self.confidence_threshold)


@dataclass(frozen=True)
class DownloadSettings:
    """Photo download limits and the photo hosts beyond those of ``intake.feature_services``.

    ``allowed_hosts`` entries are ``host``, ``.domain`` (its subdomains too) or either with
    ``:port``; ``allow_http_hosts`` may be fetched over plain http (port 80 unless an
    ``allowed_hosts`` entry names one); ``allow_private_hosts`` may resolve to private,
    loopback or link-local addresses (an on-premises ArcGIS Enterprise).

    The ArcGIS token goes only to the hosts of ``intake.feature_services`` and the
    write-back's layers, never to a host that is only on ``allowed_hosts``. A photo host that
    needs a credential of its own gets it from ``host_headers`` (a secret): a JSON object
    ``{"photos.example.com": {"Authorization": "Bearer ..."}}``, each host's headers sent only
    over https to that exact host (an ``allowed_hosts`` host), never after a redirect elsewhere.
    """

    max_photo_bytes: int = 20 * 1024 * 1024
    max_redirects: int = 3
    allowed_hosts: Tuple[str, ...] = ()
    allow_http_hosts: Tuple[str, ...] = ()
    allow_private_hosts: Tuple[str, ...] = ()
    host_headers: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        _positive("download", self, "max_photo_bytes")
        _positive("download", self, "max_redirects", allow_zero=True)
        _names("download", self, "allowed_hosts", "allow_http_hosts", "allow_private_hosts")
        self.headers_by_host()

    def headers_by_host(self) -> Dict[str, Dict[str, str]]:
        """``host_headers`` read: host (lower case) -> header name -> value; raises
        ConfigurationError (the value never shown) when it is not such a JSON object."""
        if not isinstance(self.host_headers, str):
            raise ConfigurationError("download.host_headers", REDACTED, "must be JSON text")
        if not self.host_headers.strip():
            return {}
        try:
            found = json.loads(self.host_headers)
        except ValueError:
            found = None
        ok = isinstance(found, dict) and all(
            isinstance(host, str) and not hostname_problem(host.lower()) and isinstance(v, dict)
            and v and all(isinstance(n, str) and _HEADER_NAME.fullmatch(n) and isinstance(t, str)
                          and "\r" not in t and "\n" not in t for n, t in v.items())
            for host, v in found.items())
        if not ok:
            raise ConfigurationError("download.host_headers", REDACTED,
                                     'must be a JSON object {"host": {"Header": "value"}}')
        return {host.lower().rstrip("."): dict(v) for host, v in found.items()}


@dataclass(frozen=True)
class AlertSettings:
    """When ``check`` turns a signal into an alert (docs/observability.md), over ``window_s``.

    Format anomalies above ``anomaly_rate`` of the AI calls: alert; the end-to-end P95 above
    ``e2e_p95_warning_ratio`` of the latency promise: warn; the backlog above
    ``backlog_ratio`` of the watermark: backpressure (warn); dead letters above
    ``dead_letter_ratio`` of the tasks finished in the window: alert; the review queue's
    oldest photo waiting longer than ``review_age_s``: warn.
    """

    anomaly_rate: float = 0.05
    e2e_p95_warning_ratio: float = 0.8
    backlog_ratio: float = 0.8
    window_s: float = 900.0
    dead_letter_ratio: float = 0.1
    review_age_s: float = 86400.0

    def __post_init__(self) -> None:
        _ratio("alerts", self, "anomaly_rate", "e2e_p95_warning_ratio", "backlog_ratio",
               "dead_letter_ratio")
        _positive("alerts", self, "window_s", "review_age_s")


@dataclass(frozen=True)
class DatabaseSettings:
    """How long one ledger operation may wait, applied to every connection a store opens.

    PostgreSQL: ``connect_timeout_s`` to connect; ``statement_timeout_s`` for any statement and
    ``lock_timeout_s`` for any lock wait (a row or table another session holds), past which the
    operation is StoreUnavailable (intake answers 503 + Retry-After); TCP keepalives find a
    server that vanished in ``keepalives_idle_s + keepalives_count x keepalives_interval_s``.
    Migrations (``db init``) run without these two limits. SQLite: ``busy_timeout_s`` is how
    long a writer waits for another process's write lock. Read when a store is opened (from
    ``FAIR_DATABASE_*``, ``--set`` or published parameters; not from ``resilience_config``, which
    lives in the store).
    """

    connect_timeout_s: float = 5.0
    statement_timeout_s: float = 10.0
    lock_timeout_s: float = 3.0
    keepalives_idle_s: float = 15.0
    keepalives_interval_s: float = 5.0
    keepalives_count: int = 3
    busy_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        _positive("database", self, "connect_timeout_s", "statement_timeout_s", "lock_timeout_s",
                  "keepalives_idle_s", "keepalives_interval_s", "keepalives_count",
                  "busy_timeout_s")


@dataclass(frozen=True)
class Settings:
    """All settings, grouped. Build variants with :meth:`with_values` or ``dataclasses.replace``."""

    timeouts: TimeoutBudget = field(default_factory=TimeoutBudget)
    retry: RetrySettings = field(default_factory=RetrySettings)
    breaker: BreakerSettings = field(default_factory=BreakerSettings)
    degrade: DegradeSettings = field(default_factory=DegradeSettings)
    intake: IntakeSettings = field(default_factory=IntakeSettings)
    processing: ProcessingSettings = field(default_factory=ProcessingSettings)
    validation: ValidationSettings = field(default_factory=ValidationSettings)
    download: DownloadSettings = field(default_factory=DownloadSettings)
    alerts: AlertSettings = field(default_factory=AlertSettings)
    vision: VisionSettings = field(default_factory=VisionSettings)
    arcgis: ArcGISSettings = field(default_factory=ArcGISSettings)
    writeback: WritebackSettings = field(default_factory=WritebackSettings)
    compensation: CompensationSettings = field(default_factory=CompensationSettings)
    cost: CostSettings = field(default_factory=CostSettings)
    database: DatabaseSettings = field(default_factory=DatabaseSettings)
    concurrency: ConcurrencySettings = field(default_factory=ConcurrencySettings)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], prefix: str = "") -> "Settings":
        """Settings from string values such as ``fme.macroValues`` (see the module docstring).

        With a ``prefix`` only keys starting with it are read (others, such as FME's own
        macros, are ignored); without one every key must name a setting.
        """
        return cls().with_values(values, prefix=prefix)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "Settings":
        """Settings from the ``FAIR_*`` variables of ``environ`` (``os.environ``, passed in by
        the caller) over the defaults."""
        return cls.from_mapping(environ, prefix=ENV_PREFIX)

    def with_values(self, values: Mapping[str, Any], prefix: str = "") -> "Settings":
        """A copy with the given values (strings or typed) applied over this one.

        With a ``prefix``, names whose group is not a settings group (``FAIR_TEST_PG_URL``)
        belong to something else and are skipped; a known group with an unknown field is a typo
        and raises :class:`ConfigurationError`, whatever its value (an empty value too). An
        empty value or None for a real setting means "not set" and keeps the current value.
        """
        changes: Dict[str, Dict[str, Any]] = {}
        known_groups = _groups()
        for key, raw in values.items():
            name, written_prefix = str(key), ""
            if prefix:
                if not name.upper().startswith(prefix.upper()):
                    continue
                written_prefix, name = name[:len(prefix)], name[len(prefix):]
                if _split(name)[0] not in known_groups:
                    continue
            blank = raw is None or (isinstance(raw, str) and raw.strip() == "")
            if blank and "%s.%s" % _split(name) in RETIRED:
                continue   # a retired parameter an older workspace still publishes, left blank
            group, attr = _resolve(name, key, raw, prefix=written_prefix)
            if blank:
                continue   # a real setting left blank keeps its value; a typo raised above
            changes.setdefault(group, {})[attr] = _convert(group, attr, raw)
        groups = {}
        for group, attrs in changes.items():
            groups[group] = dataclasses.replace(getattr(self, group), **attrs)
        return dataclasses.replace(self, **groups)

    def as_flat_dict(self, *, reveal_secrets: bool = False) -> Dict[str, Any]:
        """Every setting as ``{"group.field": value}``, for display and the config table.

        A secret setting that is set shows as ``[REDACTED]`` unless ``reveal_secrets``.
        """
        out: Dict[str, Any] = {}
        for g in dataclasses.fields(self):
            group = getattr(self, g.name)
            for f in dataclasses.fields(group):
                name = f"{g.name}.{f.name}"
                value = getattr(group, f.name)
                if isinstance(value, Mapping):
                    value = dict(value)
                elif isinstance(value, enum.Enum):
                    value = value.value
                elif name in SECRET_SETTINGS and value and not reveal_secrets:
                    value = REDACTED
                out[name] = value
        return out


def _groups() -> Dict[str, type]:
    hints = typing.get_type_hints(Settings)
    return {f.name: hints[f.name] for f in dataclasses.fields(Settings)}


def _split(name: str) -> Tuple[str, str]:
    group, _, attr = name.partition("." if "." in name else "_")
    return group.lower(), attr.lower()


def _resolve(name: str, original: Any, raw: Any, prefix: str = "") -> Tuple[str, str]:
    groups = _groups()
    group, attr = _split(name)
    if group in groups and attr in {f.name for f in dataclasses.fields(groups[group])}:
        return group, attr
    if f"{group}.{attr}" in RETIRED:
        raise ConfigurationError(str(original), raw, RETIRED[f"{group}.{attr}"])
    known = [f"{g}.{f.name}" for g, kind in groups.items() for f in dataclasses.fields(kind)]
    close = difflib.get_close_matches(f"{group}.{attr}", known, n=1, cutoff=0.8)
    hint = f" (did you mean {prefix}{_spelled_like(name, close[0])}?)" if close else ""
    # A misspelt secret is still a secret: no value of a group holding one reaches a message.
    secret = any(s.startswith(f"{group}.") for s in SECRET_SETTINGS) or (
        close and close[0] in SECRET_SETTINGS)
    raise ConfigurationError(str(original), REDACTED if secret else raw,
                             f"is not a known setting{hint}")


def _spelled_like(name: str, setting: str) -> str:
    """``setting`` (``group.field``) written the way ``name`` is: dotted, or GROUP_FIELD."""
    if "." in name:
        return setting
    flat = setting.replace(".", "_")
    return flat.upper() if name.isupper() else flat


def _convert(group: str, attr: str, raw: Any) -> Any:
    hint = typing.get_type_hints(_groups()[group])[attr]
    label = f"{group}.{attr}"
    shown = REDACTED if label in SECRET_SETTINGS else raw  # a secret never reaches a message
    if not isinstance(raw, str):
        if hint is int and isinstance(raw, float) and raw.is_integer():
            return int(raw)
        _check(group, attr, shown, _typed_ok(hint, raw), f"cannot be a {type(raw).__name__}")
        return raw
    text = raw.strip()

    def bad(reason: str) -> ConfigurationError:
        return ConfigurationError(label, shown, reason)

    if hint is bool:
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise bad("expected true/false")
    if hint is int:
        return read_count(label, raw)
    if hint is float:
        return read_number(label, raw)
    if hint is str:
        return text
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(text)
        except ValueError:
            raise bad(f"must be one of {[m.value for m in hint]}") from None
    origin = typing.get_origin(hint)
    if origin is tuple:
        return tuple(part.strip() for part in text.split(",") if part.strip())
    if origin in (collections.abc.Mapping, dict):
        pairs = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            k, sep, v = part.partition("=")
            if not sep or not k.strip():
                raise bad(f"expected name=value pairs, got {part!r}")
            pairs[k.strip()] = read_number(label, v)
        return pairs
    raise bad(f"cannot read a value of type {hint}")  # pragma: no cover


def _typed_ok(hint: Any, raw: Any) -> bool:
    """Whether a typed (non-string) value has a type the field can take."""
    if hint is bool:
        return isinstance(raw, bool)
    if hint in (int, float):
        return _number(raw)
    if hint is str:
        return False
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return isinstance(raw, hint)
    origin = typing.get_origin(hint)
    if origin is tuple:
        return isinstance(raw, (list, tuple))
    if origin in (collections.abc.Mapping, dict):
        return isinstance(raw, Mapping)
    return True
