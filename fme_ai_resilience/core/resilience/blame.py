"""Whose failure a failed Vision AI call is: the service's, the photo's, or nobody's; pure.

Slow is not down (docs/breaker.md). What a failure says decides what follows it:

* :func:`says_down` marks the failures that say the service is **down**: a connection refused
  or never made, a gateway's 502/503/504, and a time-to-first-byte timeout only when the
  fleet had already given the service longer than its configured limit (a first timeout says
  the service queues or thinks: the next call waits longer, the fleet's concurrency shrinks).
  A run of ``breaker.consecutive_failures`` of them opens the circuit.
* Once the breaker has recorded a failure, it is the **service's** when
  :func:`suspects_service` (a probe's failure, or the one that opened the circuit, of a class
  a service that is down answers with) and the service's latest calls say it fails for other
  photos too (:func:`~fme_ai_resilience.core.resilience.breaker.down_for_others`): the photo then waits for
  the next probe, no attempt spent; otherwise the **photo's**: its attempt counts and the
  retry policy decides.

:class:`Recorded` is what ``CircuitBreaker.record`` answers: the state after the call, the
blame and the wait that follows a failure the service is blamed for.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional

from .breaker import BreakerState, CircuitState, effective_state
from ..checks import finite
from ..errors import ConfigurationError, ErrorClass

__all__ = ["Blame", "Recorded", "says_down", "suspects_service", "DOWN_STATUSES",
           "SERVICE_CLASSES"]

#: The HTTP statuses of a gateway whose service is not there (502, 503, 504).
DOWN_STATUSES = frozenset({502, 503, 504})
#: The classes a service that is down (or whose model drifted) answers with: the failures the
#: service may be blamed for (a 429 sets the pace instead).
SERVICE_CLASSES = frozenset({ErrorClass.CONNECT_TIMEOUT, ErrorClass.CONNECTION_ERROR,
                             ErrorClass.TTFB_TIMEOUT, ErrorClass.BODY_TIMEOUT,
                             ErrorClass.TRUNCATED, ErrorClass.SERVER_ERROR,
                             ErrorClass.BAD_FORMAT})


class Blame(str, enum.Enum):
    """Whose a call's failure is."""

    NONE = "none"        # no failure: an answer
    SERVICE = "service"  # the service (or its model) is down: wait for the next probe
    PHOTO = "photo"      # this photo's: the attempt counts, the retry policy decides


@dataclass(frozen=True)
class Recorded:
    """What recording one call says: the breaker's ``state`` after it, whose failure it was
    and, when the service is blamed, ``wait_s`` (seconds until the photo's next try: just
    behind the next probe)."""

    state: BreakerState
    blame: Blame = Blame.NONE
    wait_s: Optional[float] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "blame", Blame(self.blame))
        if (self.blame is Blame.SERVICE) != (self.wait_s is not None):
            raise ConfigurationError("wait_s", self.wait_s,
                                     "is set exactly when the service is blamed")
        if self.wait_s is not None:
            finite("wait_s", self.wait_s, minimum=0)


def says_down(error_class: Optional[ErrorClass], status_code: Optional[int], *,
              waited_longer: bool) -> bool:
    """Whether a failed call says the service is down (see the module docstring).

    ``waited_longer`` is whether the call waited longer for its first byte than the configured
    ``timeouts.ttfb_s`` (the fleet had already raised its limit for a slow service, or the
    call ran to what its deadline allowed).
    """
    if error_class is None:
        return False
    error_class = ErrorClass(error_class)
    if error_class in (ErrorClass.CONNECT_TIMEOUT, ErrorClass.CONNECTION_ERROR):
        return True
    if error_class is ErrorClass.SERVER_ERROR:
        return status_code in DOWN_STATUSES
    if error_class is ErrorClass.TTFB_TIMEOUT:
        return waited_longer
    return False


def suspects_service(error_class: Optional[ErrorClass], *, probe: bool,
                     after: BreakerState) -> bool:
    """Whether a failed call may be the service's rather than the photo's: a class a service
    that is down (or a drifted model) answers with, from a half-open ``probe`` or the call
    that left the circuit open (``after`` is the state once it was recorded). The service's
    latest calls then decide (:func:`~fme_ai_resilience.core.resilience.breaker.down_for_others`)."""
    if error_class is None or ErrorClass(error_class) not in SERVICE_CLASSES:
        return False
    return probe or effective_state(after) is CircuitState.OPEN
