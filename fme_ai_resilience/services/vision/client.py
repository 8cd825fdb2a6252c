"""The Vision AI client: one call, a per-phase time budget, and a structured outcome.

``VisionClient.analyze(image, trace_id)`` never raises for a remote failure. Whatever comes
back — a timeout in any phase, a refused connection, 429/5xx, an HTML error page, an answer cut
short (TRUNCATED: a transport failure, retried like a 5xx), oversize JSON, ``null`` content, a
refusal, an error inside an HTTP 200 body, a drifted schema (BAD_FORMAT: only a complete
answer out of schema) — is a :class:`VisionOutcome` carrying its
:class:`~fme_ai_resilience.core.errors.ErrorClass`, the
HTTP status, the parsed Retry-After, the seconds spent per phase, the phase that ran out and a
redacted excerpt of the body. API keys and tokens never reach outcomes, excerpts or logs.
"""
from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Optional, Sequence, Union

import requests

from ...core.resilience.backoff import retry_after_from_headers
from ...core.text.caseless import get_ignoring_case
from ...core.clock import Clock, SystemClock
from ...core.errors import ConfigurationError, ErrorClass, FormatError, InvalidPayload
from ...core.intake.keys import as_trace_id
from ...core.ledger import CallRecord, FormatAnomaly
from ...core.text.redact import excerpt as make_excerpt
from ...core.text.redact import redact_text, scrub_secrets
from ...core.resilience.timeouts import TimeoutBudget
from ...core.text.untrusted_json import cut_short, decode_value
from .builders import Credentials, Image, RequestOptions, build_request
from ..http.sessions import session_for
from .phases import exchange
from ...core.vision.providers import (MAX_DEPTH, PROVIDERS, Assessment, ConditionRules,
                                      GenericMapping, detect_error, normalize)

__all__ = ["VisionClient", "VisionOutcome", "traceparent", "EXCERPT_LIMIT",
           "DEFAULT_MAX_RESPONSE_BYTES"]

log = logging.getLogger("fme_ai_resilience.vision")

EXCERPT_LIMIT = 2048
DEFAULT_MAX_RESPONSE_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class VisionOutcome:
    """The result of one Vision AI call; ``error_class`` is None exactly when ``ok``.

    ``phases`` holds seconds spent in ``connect``, ``ttfb`` and ``body``; ``timed_out_phase``
    names the one that ran out. ``excerpt`` is the redacted start (<= 2 KB) of the body;
    ``errors`` the schema errors of a BAD_FORMAT answer; ``detail`` a short redacted reason.
    """

    ok: bool
    assessment: Optional[Assessment] = None
    error_class: Optional[ErrorClass] = None
    retry_after_s: Optional[float] = None
    status_code: Optional[int] = None
    phases: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    timed_out_phase: Optional[str] = None
    excerpt: str = ""
    duration_s: float = 0.0
    trace_id: str = ""
    provider: str = ""
    model_version: Optional[str] = None
    errors: tuple = ()
    detail: str = ""

    def __post_init__(self) -> None:
        if self.ok != (self.error_class is None):
            raise ConfigurationError("error_class", self.error_class,
                                     f"must be None exactly when ok (ok={self.ok})")
        if self.ok and self.assessment is None:
            raise ConfigurationError("assessment", None, "an ok outcome needs one")
        if len(self.excerpt) > EXCERPT_LIMIT:
            raise ConfigurationError("excerpt", f"{len(self.excerpt)} characters",
                                     f"must be at most {EXCERPT_LIMIT}")
        if self.error_class is not None:
            object.__setattr__(self, "error_class", ErrorClass(self.error_class))
        object.__setattr__(self, "phases", MappingProxyType(dict(self.phases)))
        object.__setattr__(self, "errors", tuple(self.errors))

    def to_call_record(self, service: str, started_at: float, retry: bool = False,
                       task_key: Optional[str] = None) -> CallRecord:
        """The ``ai_call_log`` row for this call (``started_at`` in epoch seconds)."""
        return CallRecord(service=service, started_at=started_at, duration_s=self.duration_s,
                          error_class=self.error_class.value if self.error_class else None,
                          status_code=self.status_code, retry=retry, trace_id=self.trace_id,
                          task_key=task_key, phases=self.phases)

    def format_anomaly(self, observed_at: float,
                       task_key: Optional[str] = None) -> Optional[FormatAnomaly]:
        """The ``format_anomaly`` record of a BAD_FORMAT outcome (None otherwise)."""
        if self.error_class is not ErrorClass.BAD_FORMAT:
            return None
        return FormatAnomaly(provider=self.provider, observed_at=observed_at,
                             errors=self.errors or (self.detail,), excerpt=self.excerpt,
                             model_version=self.model_version, task_key=task_key,
                             trace_id=self.trace_id)


def traceparent(trace_id: str, *, rng: random.Random) -> str:
    """The W3C ``traceparent`` for a task: its trace id verbatim when it is a W3C trace id
    (the ledger's are), else :func:`~fme_ai_resilience.core.intake.keys.as_trace_id` of it, and a
    span id drawn from ``rng``."""
    span = f"{rng.getrandbits(64) or 1:016x}"
    return f"00-{as_trace_id(trace_id)}-{span}-01"


class VisionClient:
    """Calls one Vision AI endpoint for one provider under per-phase ``timeouts``.

    ``credentials`` is a :class:`Credentials` or a bare API key; ``timeouts`` a
    :class:`~fme_ai_resilience.core.resilience.timeouts.TimeoutBudget`. ``session`` defaults to one
    that measures connect times; ``clock`` to the system clock; ``rng`` (the span ids of the
    ``traceparent``) to the operating system's. ``max_response_bytes`` caps the body read
    (bytes). Raises ConfigurationError for an unknown provider.
    """

    def __init__(self, endpoint: str, provider: str,
                 credentials: Union[Credentials, str, None] = None,
                 timeouts: Optional[TimeoutBudget] = None, *,
                 session: Optional[requests.Session] = None, clock: Optional[Clock] = None,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                 rules: Optional[ConditionRules] = None, mapping: Optional[GenericMapping] = None,
                 options: Optional[RequestOptions] = None,
                 rng: Optional[random.Random] = None) -> None:
        if provider not in PROVIDERS:
            raise ConfigurationError("vision.provider", provider,
                                     f"must be one of {list(PROVIDERS)}")
        if isinstance(credentials, str):
            credentials = Credentials(api_key=credentials)
        self.endpoint = endpoint
        self.provider = provider
        self.credentials = credentials or Credentials()
        self.timeouts = timeouts or TimeoutBudget()
        self.clock = clock or SystemClock()
        self.session = session_for(session=session, clock=self.clock)
        self.max_response_bytes = int(max_response_bytes)
        self.rules = rules or ConditionRules()
        self.mapping = mapping
        self.options = options or RequestOptions()
        self._rng = rng or random.SystemRandom()

    def __repr__(self) -> str:
        return (f"VisionClient({self.provider!r}, {redact_text(self.endpoint, self._secrets)!r},"
                f" timeouts={self.timeouts!r})")

    @property
    def _secrets(self) -> Sequence[str]:
        return self.credentials.secrets

    def _clean(self, text: Any) -> str:
        return redact_text(text, self._secrets)

    def analyze(self, image: Image, trace_id: str, *,
                ttfb_s: Optional[float] = None) -> VisionOutcome:
        """Ask the service about ``image`` (bytes, or a URL for providers that take one).

        ``ttfb_s`` is this call's time-to-first-byte limit in seconds (default the
        ``timeouts.ttfb_s`` of the client's budget): a slow service's next call is given
        longer (docs/vision.md). Returns a VisionOutcome for every remote result; raises only
        ConfigurationError when the request cannot be built (e.g. a URL for Rekognition).
        """
        request = build_request(self.provider, self.endpoint, image, self.credentials,
                                self.options)
        headers = dict(request.headers)
        trace_id = as_trace_id(trace_id)   # the id the vendor sees is the one we log
        headers["traceparent"] = traceparent(trace_id, rng=self._rng)
        connect_s = self.timeouts.connect_s
        if request.url.lower().startswith("https:"):
            connect_s += self.timeouts.tls_s   # urllib3 bounds TCP and TLS with one timeout
        start = self.clock.monotonic()
        ex = exchange(request.method, request.url, headers, request.body, connect_s=connect_s,
                      ttfb_s=self.timeouts.ttfb_s if ttfb_s is None else ttfb_s,
                      body_s=self.timeouts.body_s,
                      max_bytes=self.max_response_bytes, session=self.session, clock=self.clock)
        duration = self.clock.monotonic() - start
        # an answer echoing the key (in any escaped form) keeps it nowhere: not in the
        # assessment, the excerpt or a log line
        text = scrub_secrets(ex.body.decode("utf-8", errors="replace"), self._secrets)
        common = dict(status_code=ex.status_code, phases=ex.phases, duration_s=duration,
                      trace_id=trace_id, provider=self.provider,
                      # redact a window twice the excerpt so no secret straddles the cut
                      excerpt=make_excerpt(text[:2 * EXCERPT_LIMIT], EXCERPT_LIMIT,
                                           self._secrets),
                      timed_out_phase=ex.timed_out_phase)
        outcome = self._judge(ex, text, common)
        self._log(outcome)
        return outcome

    def _fail(self, error_class: ErrorClass, detail: str, common: Mapping[str, Any],
              **extra: Any) -> VisionOutcome:
        return VisionOutcome(ok=False, error_class=error_class, detail=self._clean(detail),
                             **common, **extra)

    def _judge(self, ex: Any, text: str, common: Mapping[str, Any]) -> VisionOutcome:
        if ex.error_class is not None:
            return self._fail(ex.error_class, ex.detail, common)
        if ex.oversize:
            return self._fail(ErrorClass.BAD_FORMAT, ex.detail, common,
                              errors=(f"response body larger than {self.max_response_bytes} "
                                      "bytes",))
        unreadable = ""
        try:
            # bounded: no depth of brackets or size of number can escape as an exception
            payload = decode_value(ex.body, max_bytes=max(1, len(ex.body)),
                                   max_depth=MAX_DEPTH) if text.strip() else None
        except InvalidPayload as exc:
            payload, unreadable = None, exc.reason
        status = int(ex.status_code)
        found = detect_error(self.provider, status, payload)
        if found is not None:
            error_class, message = found
            retry_after = None
            if error_class in (ErrorClass.RATE_LIMITED, ErrorClass.SERVER_ERROR):
                retry_after = retry_after_from_headers(
                    ex.headers, message if payload is not None else None, now=self.clock.now())
            return self._fail(error_class, f"HTTP {status}: {message}", common,
                              retry_after_s=retry_after)
        if ex.truncated or (payload is None and unreadable and cut_short(text)):
            # cut short in transit (shorter than its Content-Length, or JSON that ends before
            # it is whole): a transport failure, retried like a 5xx, never a FORMAT letter
            return self._fail(ErrorClass.TRUNCATED, "the answer was cut short: "
                              + ("the connection ended before the body its Content-Length "
                                 "announced" if ex.truncated else "the JSON ends before it is "
                                 "whole"), common)
        if payload is None or status >= 300:
            why = (f"HTTP {status}: not a JSON answer" if status < 300 or payload is None else
                   f"unexpected HTTP {status}")
            ctype = get_ignoring_case(ex.headers, "Content-Type") or "?"
            return self._fail(ErrorClass.BAD_FORMAT, why, common,
                              errors=(f"{why} (Content-Type {ctype})",)
                              + ((self._clean(unreadable),) if unreadable else ()))
        try:
            assessment = normalize(self.provider, payload, rules=self.rules,
                                   mapping=self.mapping)
        except FormatError as exc:
            version = None
            if isinstance(payload, Mapping):
                version = payload.get("modelVersion") or payload.get("model")
            return self._fail(exc.error_class, exc.message, common,
                              errors=tuple(self._clean(e) for e in exc.errors),
                              model_version=version if isinstance(version, str) else None)
        return VisionOutcome(ok=True, assessment=assessment,
                             model_version=assessment.model_version, **common)

    def _log(self, outcome: VisionOutcome) -> None:
        phases = " ".join(f"{k}={v:.3f}s" for k, v in outcome.phases.items())
        if outcome.ok:
            log.info("vision %s ok trace=%s status=%s %s condition=%s confidence=%.2f",
                     self.provider, outcome.trace_id, outcome.status_code, phases,
                     outcome.assessment.condition, outcome.assessment.confidence)
        else:
            log.warning("vision %s failed trace=%s class=%s status=%s timed_out=%s %s: %s",
                        self.provider, outcome.trace_id, outcome.error_class.value,
                        outcome.status_code, outcome.timed_out_phase, phases, outcome.detail)
