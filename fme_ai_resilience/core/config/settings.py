"""Every threshold in one frozen ``Settings`` value: the settings groups composed and loaded.

Each group lives beside the policy that reads it (``RetrySettings`` with the retry policy,
``BreakerSettings`` with the breaker, ``DegradeSettings`` with the ladder, ``IntakeSettings``
with intake's policy, ``ValidationSettings`` with validation, ``ConcurrencySettings`` with the
fleet's limit); this module composes them into one value and loads it.

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
import json
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Tuple

from ..checks import hostname_problem, read_count, read_number
from ..errors import ConfigurationError
from ..intake.policy import IntakeSettings
from ..resilience.breaker import BreakerSettings
from ..resilience.concurrency import ConcurrencySettings
from ..resilience.degrade import DegradeSettings
from ..resilience.retry import RetrySettings
from ..resilience.timeouts import TimeoutBudget
from ..text.redact import REDACTED
from ..vision.validate import ValidationSettings
from .fields import (MAX_COUNT, check_field, is_number, name_fields, positive_fields,
                     ratio_fields)
from .pipeline_settings import (SECRET_SETTINGS, ArcGISSettings, CompensationSettings,
                                CostSettings, VisionSettings, WritebackSettings)

__all__ = ["Settings", "RetrySettings", "BreakerSettings", "DegradeSettings", "IntakeSettings",
           "ProcessingSettings", "ValidationSettings", "DownloadSettings", "AlertSettings",
           "VisionSettings", "ArcGISSettings", "WritebackSettings", "CompensationSettings",
           "CostSettings", "DatabaseSettings", "ConcurrencySettings", "SECRET_SETTINGS",
           "ENV_PREFIX", "MAX_COUNT", "RETIRED"]

ENV_PREFIX = "FAIR_"

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


#: An HTTP header name (RFC 9110 token), as ``download.host_headers`` may name one.
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}")











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
        positive_fields("processing", self, "lease_s", "claim_limit")
        positive_fields("processing", self, "job_runtime_limit_s", allow_zero=True)




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
        positive_fields("download", self, "max_photo_bytes")
        positive_fields("download", self, "max_redirects", allow_zero=True)
        name_fields("download", self, "allowed_hosts", "allow_http_hosts", "allow_private_hosts")
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
        ratio_fields("alerts", self, "anomaly_rate", "e2e_p95_warning_ratio", "backlog_ratio",
               "dead_letter_ratio")
        positive_fields("alerts", self, "window_s", "review_age_s")


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
        positive_fields("database", self, "connect_timeout_s", "statement_timeout_s", "lock_timeout_s",
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

    def secret_values(self) -> Tuple[str, ...]:
        """The values of the secret settings that are set (each header value of
        ``download.host_headers`` too), for scrubbing wherever text is stored or shown."""
        flat = self.as_flat_dict(reveal_secrets=True)
        found = [flat[name] for name in sorted(SECRET_SETTINGS) if flat.get(name)]
        for headers in self.download.headers_by_host().values():
            for value in headers.values():   # "Bearer abc": the credential alone too
                found += [value, value.split()[-1] if value.split() else ""]
        return tuple(dict.fromkeys(v for v in found if isinstance(v, str) and v.strip()))


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
        check_field(group, attr, shown, _typed_ok(hint, raw), f"cannot be a {type(raw).__name__}")
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
        return is_number(raw)
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
