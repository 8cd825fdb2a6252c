"""The failure vocabulary: the exception tree and the error and failure classes.

Exception tree::

    ResilienceError                      root of everything this library raises
    ├── InvalidPayload (ValueError)      a webhook body or record that cannot be processed
    ├── ConfigurationError (ValueError)  a setting with a bad value, naming field and value
    ├── FormatError                      a remote answer that does not match its schema (drift)
    │                                    or reports an error instead of a result
    ├── UnsafeURL                        a photo URL refused by the download policy (SSRF guard)
    ├── DownloadError                    a photo could not be fetched; carries its ErrorClass
    ├── CircuitOpenError                 the shared breaker refuses calls; carries retry_after_s
    ├── LeaseLost                        the task's lease lapsed: nothing more may be written
    ├── FlowError                        FME Flow did not answer a request usefully
    ├── ArcGISError                      an ArcGIS REST call failed; carries its ErrorClass
    │   └── TokenError                   the portal issued no token (credentials, outage)
    └── StoreError                       the ledger could not do what was asked
        └── StoreUnavailable             the database cannot serve us now (unreachable,
            │                            locked, past a time limit)
            └── SchemaMissing            the database has no ledger tables: run db init

Remote failures of the Vision AI service are *not* exceptions: they come back as outcomes
carrying an :class:`ErrorClass`, which ``fme_ai_resilience.core.resilience.classification`` maps to
what the retry engine does about it (docs/retries.md).
"""
from __future__ import annotations

import enum
from typing import Any, Optional, Sequence

__all__ = ["ResilienceError", "InvalidPayload", "ConfigurationError", "FormatError", "UnsafeURL",
           "DownloadError", "CircuitOpenError", "LeaseLost", "FlowError", "ArcGISError", "TokenError",
           "StoreError", "StoreUnavailable", "SchemaMissing", "SCHEMA_MISSING", "ErrorClass",
           "FailureClass"]

#: What a ledger without its tables says (in answers, /healthz and the command line).
SCHEMA_MISSING = "schema missing: run db init"


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
    """A setting or an argument has a value that cannot be used.

    ``field`` names it (``breaker.failure_rate``, ``now``), ``value`` is what was given and
    ``reason`` what is wrong with it.
    """

    def __init__(self, field: str, value: Any, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field}={value!r}: {reason}")


class FormatError(ResilienceError):
    """The remote answer does not have the expected shape.

    ``error_class`` makes it usable as an attempt outcome: BAD_FORMAT for drift, or the class
    of the error an answer reports instead of a result (an error inside an HTTP 200 body).
    """

    def __init__(self, message: str, *, errors: Sequence[str] = (), provider: str = "",
                 error_class: Optional["ErrorClass"] = None) -> None:
        self.errors = tuple(errors)
        self.provider = provider
        self.error_class = ErrorClass.BAD_FORMAT if error_class is None else ErrorClass(error_class)
        super().__init__(message)


class UnsafeURL(ResilienceError):
    """The URL is refused by the download policy.

    ``error_class`` is UNSAFE_URL, the request's fault (a BAD_REQUEST dead letter), or with
    ``configuration=True`` CONFIGURATION, the deployment's: a policy that admits no host at
    all refuses every photo whatever the request names (docs/pipeline.md, "Whose fault").
    """

    retry_after_s: Optional[float] = None

    def __init__(self, reason: str, *, configuration: bool = False) -> None:
        self.reason = reason
        self.configuration = configuration
        super().__init__(f"unsafe URL: {reason}")

    @property
    def error_class(self) -> ErrorClass:
        return ErrorClass.CONFIGURATION if self.configuration else ErrorClass.UNSAFE_URL


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


class LeaseLost(ResilienceError):
    """The task's lease lapsed and may be another holder's: nothing more is written for it.

    Raised just before a write would leave for the layer (or the related table) from a
    holder whose lease could not be renewed, so a holder frozen past its lease never writes
    over its successor's result or a reviewer's verdict.
    """


class FlowError(ResilienceError):
    """FME Flow did not answer a request usefully (status, network or shape)."""


class ArcGISError(ResilienceError):
    """An ArcGIS REST call failed: no answer, an HTTP error, or an error inside an HTTP 200 body.

    ``error_class`` and ``retry_after_s`` make it usable as an attempt outcome; ``code`` is
    ArcGIS's own error code (498 invalid token, 400 ...) when the answer carried one, and
    ``status_code`` the HTTP status. ``reason`` is already free of secrets.
    """

    def __init__(self, error_class: "ErrorClass", reason: str, *, operation: str = "",
                 status_code: Optional[int] = None, code: Optional[int] = None,
                 retry_after_s: Optional[float] = None) -> None:
        self.error_class = ErrorClass(error_class)
        self.reason = reason
        self.operation = operation
        self.status_code = status_code
        self.code = code
        self.retry_after_s = retry_after_s
        where = f"ArcGIS {operation}" if operation else "ArcGIS call"
        said = [f"HTTP {status_code}"] if status_code is not None else []
        if code is not None and code != status_code:
            said.append(f"code {code}")
        status = f" ({', '.join(said)})" if said else ""
        super().__init__(f"{where} failed{status}: {self.error_class.value}: {reason}")


class TokenError(ArcGISError):
    """The portal issued no token: AUTH for refused credentials, a transient class for an outage."""


class StoreError(ResilienceError):
    """The ledger could not complete the operation."""


class StoreUnavailable(StoreError):
    """The ledger database cannot be reached."""


class SchemaMissing(StoreUnavailable):
    """The ledger database has no tables: run `fme-ai-resilience db init`.

    A StoreUnavailable: intake answers 503 with Retry-After, and the work succeeds once an
    operator has run ``db init`` (PostgreSQL never creates its schema by itself).
    """


class ErrorClass(str, enum.Enum):
    """Why one call to a remote service failed. Stored by value in the ledger and call log."""

    CONNECT_TIMEOUT = "CONNECT_TIMEOUT"
    TTFB_TIMEOUT = "TTFB_TIMEOUT"
    BODY_TIMEOUT = "BODY_TIMEOUT"
    CONNECTION_ERROR = "CONNECTION_ERROR"
    #: The answer was cut short: the connection ended before the body its Content-Length
    #: promised, or the JSON ends before it is whole. A transport failure, retried like a
    #: 5xx; only a complete answer out of schema is BAD_FORMAT.
    TRUNCATED = "TRUNCATED"
    RATE_LIMITED = "RATE_LIMITED"
    SERVER_ERROR = "SERVER_ERROR"
    BAD_REQUEST = "BAD_REQUEST"
    AUTH = "AUTH"
    NOT_FOUND = "NOT_FOUND"
    BAD_FORMAT = "BAD_FORMAT"
    #: The deployment's setup refused it: a write-back field that does not exist, a URL that
    #: is no layer, no permission to edit, no photo host configured at all. Fixed by a
    #: person, never by retrying.
    CONFIGURATION = "CONFIGURATION"
    UNSAFE_URL = "UNSAFE_URL"
    CIRCUIT_OPEN = "CIRCUIT_OPEN"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"


class FailureClass(str, enum.Enum):
    """Why a task became a dead letter (``ai_task_registry.failure_class``)."""

    INVALID_PAYLOAD = "INVALID_PAYLOAD"
    UNKNOWN_SERVICE = "UNKNOWN_SERVICE"
    BAD_REQUEST = "BAD_REQUEST"
    AUTH = "AUTH"
    NOT_FOUND = "NOT_FOUND"
    FORMAT = "FORMAT"
    #: The deployment's setup stopped the task: a write-back refused for it (fields, layer,
    #: permission), no photo host or layer configured at all; a paid analysis is kept, and
    #: the task is requeued once the setup is fixed.
    CONFIGURATION = "CONFIGURATION"
    BUDGET = "BUDGET"

    @property
    def requeue_automatically(self) -> bool:
        """Whether the compensator may requeue it without a person deciding first."""
        return self is FailureClass.BUDGET

    @property
    def evidence(self) -> bool:
        """Whether its rows are evidence of a body that never became a task (an unparseable
        body, a body for a service the deployment does not serve): requeued only by force."""
        return self in (FailureClass.INVALID_PAYLOAD, FailureClass.UNKNOWN_SERVICE)
