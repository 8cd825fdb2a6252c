"""The failure vocabulary: exceptions, error classes and the classification table.

Exception tree::

    ResilienceError                      root of everything this library raises
    ├── InvalidPayload (ValueError)      a webhook body or record that cannot be processed
    ├── ConfigurationError (ValueError)  a setting with a bad value, naming field and value
    ├── FormatError                      a remote answer that does not match its schema (drift)
    ├── UnsafeURL                        a photo URL refused by the download policy (SSRF guard)
    ├── DownloadError                    a photo could not be fetched; carries its ErrorClass
    ├── CircuitOpenError                 the shared breaker refuses calls; carries retry_after_s
    └── StoreError                       the ledger could not do what was asked
        └── StoreUnavailable             the database cannot be reached at all

Remote failures of the Vision AI service are *not* exceptions: they come back as outcomes
carrying an :class:`ErrorClass`, which :data:`CLASSIFICATION` maps to what the retry engine
does about it (seed section 4.2, shared/DESIGN.md section 4).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, Optional, Sequence


class ResilienceError(Exception):
    """Something in fme-ai-resilience failed."""

    def __init__(self, message: Optional[str] = None) -> None:
        if message is None:
            message = (type(self).__doc__ or type(self).__name__).strip().splitlines()[0]
        super().__init__(message)

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidPayload(ResilienceError, ValueError):
    """The payload cannot be processed."""

    def __init__(self, reason: str, *, field: Optional[str] = None) -> None:
        self.reason = reason
        self.field = field
        where = f" (at {field})" if field else ""
        super().__init__(f"invalid payload{where}: {reason}")


class ConfigurationError(ResilienceError, ValueError):
    """A setting has a value that cannot be used."""

    def __init__(self, field: str, value: Any, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"setting {field}={value!r}: {reason}")


class FormatError(ResilienceError):
    """The remote answer does not have the expected shape."""

    def __init__(self, message: str, *, errors: Sequence[str] = (), provider: str = "") -> None:
        self.errors = tuple(errors)
        self.provider = provider
        super().__init__(message)


class UnsafeURL(ResilienceError):
    """The URL is refused by the download policy."""

    retry_after_s: Optional[float] = None

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"unsafe URL: {reason}")

    @property
    def error_class(self) -> "ErrorClass":
        return ErrorClass.UNSAFE_URL


class DownloadError(ResilienceError):
    """The photo could not be fetched (timeout, HTTP error, ArcGIS error in a 200 body).

    ``error_class`` and ``retry_after_s`` make it usable as an attempt outcome.
    """

    def __init__(self, error_class: "ErrorClass", reason: str, *,
                 status_code: Optional[int] = None,
                 retry_after_s: Optional[float] = None) -> None:
        self.error_class = ErrorClass(error_class)
        self.reason = reason
        self.status_code = status_code
        self.retry_after_s = retry_after_s
        status = f" (HTTP {status_code})" if status_code is not None else ""
        super().__init__(f"photo download failed{status}: {self.error_class.value}: {reason}")


class CircuitOpenError(ResilienceError):
    """The circuit breaker is open: the protected service is not being called."""

    def __init__(self, service: str, retry_after_s: float) -> None:
        self.service = service
        self.retry_after_s = retry_after_s
        super().__init__(f"circuit for {service!r} is open; retry after {retry_after_s:.1f}s")


class StoreError(ResilienceError):
    """The ledger could not complete the operation."""


class StoreUnavailable(StoreError):
    """The ledger database cannot be reached."""


class ErrorClass(str, enum.Enum):
    """Why one call to a remote service failed. Stored by value in the ledger and call log."""

    CONNECT_TIMEOUT = "CONNECT_TIMEOUT"
    TTFB_TIMEOUT = "TTFB_TIMEOUT"
    BODY_TIMEOUT = "BODY_TIMEOUT"
    CONNECTION_ERROR = "CONNECTION_ERROR"
    RATE_LIMITED = "RATE_LIMITED"
    SERVER_ERROR = "SERVER_ERROR"
    BAD_REQUEST = "BAD_REQUEST"
    AUTH = "AUTH"
    NOT_FOUND = "NOT_FOUND"
    BAD_FORMAT = "BAD_FORMAT"
    UNSAFE_URL = "UNSAFE_URL"
    CIRCUIT_OPEN = "CIRCUIT_OPEN"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"


class FailureClass(str, enum.Enum):
    """Why a task became a dead letter (``ai_task_registry.failure_class``)."""

    INVALID_PAYLOAD = "INVALID_PAYLOAD"
    BAD_REQUEST = "BAD_REQUEST"
    AUTH = "AUTH"
    NOT_FOUND = "NOT_FOUND"
    FORMAT = "FORMAT"
    BUDGET = "BUDGET"

    @property
    def requeue_automatically(self) -> bool:
        """Whether the compensator may requeue it without a person deciding first."""
        return self is FailureClass.BUDGET


class BackoffProfile(str, enum.Enum):
    """How long to wait between attempts for a class, relative to the policy's base and cap."""

    NONE = "none"          # never retried
    SHORT = "short"        # the service was not reached: try again soon
    STANDARD = "standard"  # exponential backoff from the policy's base
    LONG = "long"          # the service was reached but slow: give it room


@dataclass(frozen=True)
class ClassRule:
    """What the retry engine does with one :class:`ErrorClass`.

    ``max_retries`` limits retries for this class alone (``None``: only the task-wide budget
    applies). ``dead_letter`` is the failure class recorded when the class gives up.
    ``counts_attempt`` is False for refusals that never reached the service (open circuit).
    """

    retry: bool
    backoff: BackoffProfile
    max_retries: Optional[int] = None
    retry_after: bool = False
    counts_attempt: bool = True
    dead_letter: Optional[FailureClass] = FailureClass.BUDGET
    alert: bool = False

    def __post_init__(self) -> None:
        if self.max_retries is not None and self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.retry == (self.backoff is BackoffProfile.NONE):
            raise ValueError("a retried class needs a backoff profile, a final one must have none")


_R = ClassRule
_P = BackoffProfile

#: Seed section 4.2 as data: one row per error class.
CLASSIFICATION: Mapping[ErrorClass, ClassRule] = MappingProxyType({
    ErrorClass.CONNECT_TIMEOUT: _R(retry=True, backoff=_P.SHORT),
    ErrorClass.CONNECTION_ERROR: _R(retry=True, backoff=_P.SHORT),
    ErrorClass.TTFB_TIMEOUT: _R(retry=True, backoff=_P.LONG),
    ErrorClass.BODY_TIMEOUT: _R(retry=True, backoff=_P.STANDARD),
    ErrorClass.RATE_LIMITED: _R(retry=True, backoff=_P.STANDARD, retry_after=True),
    ErrorClass.SERVER_ERROR: _R(retry=True, backoff=_P.STANDARD, retry_after=True),
    ErrorClass.BAD_FORMAT: _R(retry=True, backoff=_P.STANDARD, max_retries=1,
                              dead_letter=FailureClass.FORMAT, alert=True),
    ErrorClass.BAD_REQUEST: _R(retry=False, backoff=_P.NONE, dead_letter=FailureClass.BAD_REQUEST),
    ErrorClass.UNSAFE_URL: _R(retry=False, backoff=_P.NONE, dead_letter=FailureClass.BAD_REQUEST,
                              alert=True),
    ErrorClass.AUTH: _R(retry=False, backoff=_P.NONE, dead_letter=FailureClass.AUTH, alert=True),
    ErrorClass.NOT_FOUND: _R(retry=False, backoff=_P.NONE, dead_letter=FailureClass.NOT_FOUND,
                             alert=True),
    ErrorClass.CIRCUIT_OPEN: _R(retry=True, backoff=_P.STANDARD, retry_after=True,
                                counts_attempt=False),
    ErrorClass.BUDGET_EXHAUSTED: _R(retry=False, backoff=_P.NONE, dead_letter=FailureClass.BUDGET),
})


def rule_for(error_class: ErrorClass) -> ClassRule:
    """The classification row for ``error_class`` (every class has one)."""
    return CLASSIFICATION[ErrorClass(error_class)]


def classify_status(status: int) -> Optional[ErrorClass]:
    """The error class of an HTTP status code, or ``None`` for a success (2xx/3xx)."""
    if status < 400:
        return None
    if status == 429:
        return ErrorClass.RATE_LIMITED
    if status in (401, 403, 407):
        return ErrorClass.AUTH
    if status in (404, 410):
        return ErrorClass.NOT_FOUND
    if status == 408:
        return ErrorClass.TTFB_TIMEOUT
    if status >= 500:
        return ErrorClass.SERVER_ERROR
    return ErrorClass.BAD_REQUEST
