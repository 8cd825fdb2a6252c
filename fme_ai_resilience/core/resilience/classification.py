"""The classification table (docs/retries.md): what the retry engine does with each error class.

:data:`CLASSIFICATION` holds one :class:`ClassRule` per
:class:`~fme_ai_resilience.core.errors.ErrorClass`; :func:`classify_status` gives the class of an
HTTP status code (429 is RATE_LIMITED, 401/403 AUTH, 404 NOT_FOUND, 5xx SERVER_ERROR ...).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Optional

from ..errors import ConfigurationError, ErrorClass, FailureClass

__all__ = ["BackoffProfile", "ClassRule", "CLASSIFICATION", "rule_for", "classify_status"]


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
            raise ConfigurationError("max_retries", self.max_retries, "must be >= 0")
        if self.retry == (self.backoff is BackoffProfile.NONE):
            raise ConfigurationError("backoff", self.backoff, "a retried class needs a backoff "
                                     "profile, a final one must have none")


_R = ClassRule
_P = BackoffProfile

#: Seed section 4.2 as data: one row per error class.
CLASSIFICATION: Mapping[ErrorClass, ClassRule] = MappingProxyType({
    ErrorClass.CONNECT_TIMEOUT: _R(retry=True, backoff=_P.SHORT),
    ErrorClass.CONNECTION_ERROR: _R(retry=True, backoff=_P.SHORT),
    ErrorClass.TTFB_TIMEOUT: _R(retry=True, backoff=_P.LONG),
    ErrorClass.BODY_TIMEOUT: _R(retry=True, backoff=_P.STANDARD),
    ErrorClass.TRUNCATED: _R(retry=True, backoff=_P.STANDARD),
    ErrorClass.RATE_LIMITED: _R(retry=True, backoff=_P.STANDARD, retry_after=True),
    ErrorClass.SERVER_ERROR: _R(retry=True, backoff=_P.STANDARD, retry_after=True),
    ErrorClass.BAD_FORMAT: _R(retry=True, backoff=_P.STANDARD, max_retries=1,
                              dead_letter=FailureClass.FORMAT, alert=True),
    ErrorClass.BAD_REQUEST: _R(retry=False, backoff=_P.NONE, dead_letter=FailureClass.BAD_REQUEST),
    ErrorClass.UNSAFE_URL: _R(retry=False, backoff=_P.NONE, dead_letter=FailureClass.BAD_REQUEST,
                              alert=True),
    ErrorClass.AUTH: _R(retry=False, backoff=_P.NONE, dead_letter=FailureClass.AUTH, alert=True),
    ErrorClass.CONFIGURATION: _R(retry=False, backoff=_P.NONE,
                                 dead_letter=FailureClass.CONFIGURATION, alert=True),
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
