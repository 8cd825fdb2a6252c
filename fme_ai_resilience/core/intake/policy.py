"""Intake's policy: the capacity and backpressure settings the intake reads (docs/intake.md),
and which feature services a deployment serves."""
from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass
from typing import FrozenSet, Optional, Tuple
from urllib.parse import urlsplit

from ..checks import hostname_problem
from ..config.fields import (MAX_COUNT, check_field, enum_field, name_fields, positive_fields,
                             ratio_fields)
from ..errors import ConfigurationError
from ..ledger import OverloadMode
from .capacity import CapacityPlan, plan_capacity

__all__ = ["IntakeSettings", "service_identity"]


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
        name_fields("intake", self, "feature_services")
        object.__setattr__(self, "feature_services", tuple(dict.fromkeys(
            _feature_service(url) for url in self.feature_services)))
        positive_fields("intake", self, "engines", "mean_processing_s", "latency_promise_s",
                  "max_body_bytes", "max_depth", "max_attachments", "drain_window_s",
                  "drain_min_completions")
        positive_fields("intake", self, "max_invalid_per_minute", "max_invalid_total",
                  "max_refusal_records", "watermark", allow_zero=True)
        positive_fields("intake", self, "park_ceiling")
        ratio_fields("intake", self, "backpressure_ratio")
        enum_field("intake", self, "overload_mode", OverloadMode)
        if self.watermark == 0:
            derived = self.engines * self.latency_promise_s / self.mean_processing_s
            check_field("intake", "watermark", self.watermark, derived <= MAX_COUNT,
                   f"derived from engines x latency_promise_s / mean_processing_s it would "
                   f"exceed {MAX_COUNT}: set it")
        watermark = self.capacity.watermark
        check_field("intake", "park_ceiling", self.park_ceiling, self.park_ceiling >= watermark,
               f"must be >= the watermark ({watermark} tasks)")

    @functools.cached_property
    def capacity(self) -> CapacityPlan:
        """The Little's-law plan for these engines, processing time and latency promise, with
        ``watermark`` in place of the derived one when it is set (48 by default)."""
        plan = plan_capacity(self.engines, self.mean_processing_s, self.latency_promise_s)
        return dataclasses.replace(plan, watermark=self.watermark) if self.watermark else plan

    @property
    def hard_ceiling(self) -> int:
        """Unfinished tasks past which even a delivery intake never refuses (the rest of a
        partly stored body, an ArcGIS notification) is left out: the park ceiling plus one
        body's worth of headroom."""
        return self.park_ceiling + self.max_attachments

    def serves(self, service_url: Optional[str]) -> bool:
        """Whether ``service_url`` is one of ``feature_services`` (scheme and host compared
        without case, the default port and trailing slashes ignored, the path without case as
        ArcGIS reads it). False when none is configured."""
        return service_url is not None and service_identity(service_url) in self._served

    @functools.cached_property
    def _served(self) -> FrozenSet[Optional[str]]:
        return frozenset(service_identity(url) for url in self.feature_services)


_DEFAULT_PORTS = {"https": 443, "http": 80}
_LITERAL_V6 = re.compile(r"^[0-9a-f:.]+$")


def service_identity(url: str) -> Optional[str]:
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
    if service_identity(url) is None:
        raise ConfigurationError("intake.feature_services", url,
                                 "must be an http(s) FeatureServer URL without credentials, "
                                 "query or fragment")
    parts = urlsplit(url.strip())
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path.rstrip('/')}"
