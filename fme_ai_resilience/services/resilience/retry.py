"""The retry engine: runs a callable under a
:class:`~fme_ai_resilience.core.resilience.retry.RetryPolicy`.

:class:`Retrying` calls the function, asks the policy what to do after each failed attempt and
waits only through the injected clock. A callable that raises is classified
(:func:`classify_exception` by default, which knows the exceptions of this library, of
requests and urllib3 and the standard library's); an exception the classifier does not know
is not retried, and one the engine gives up on is re-raised unchanged.
"""
from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

import requests.exceptions as rq
import urllib3.exceptions as u3

from ...core.clock import Clock, Deadline, SystemClock
from ...core.errors import CircuitOpenError, ErrorClass, FormatError, UnsafeURL
from ...core.resilience.retry import (AttemptRecord, DecisionKind, RetryDecision, RetryEvent,
                                      RetryGate, RetryHistory, RetryHook, RetryPolicy)

__all__ = ["Classifier", "classify_exception", "RunResult", "Retrying"]

log = logging.getLogger("fme_ai_resilience.core.resilience.retry")

Classifier = Callable[[BaseException], Optional[ErrorClass]]


def classify_exception(exc: BaseException) -> Optional[ErrorClass]:
    """The error class of an exception from requests, urllib3, the stdlib or this library.

    ``None`` for anything else: such exceptions are not retried.
    """
    if isinstance(exc, CircuitOpenError):
        return ErrorClass.CIRCUIT_OPEN
    if isinstance(exc, FormatError):
        return ErrorClass.BAD_FORMAT
    if isinstance(exc, UnsafeURL):
        return exc.error_class   # UNSAFE_URL, or CONFIGURATION for a policy admitting nothing
    found = _classify_http_library(exc)
    if found is not None:
        return found
    if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError from 3.10
        return ErrorClass.TTFB_TIMEOUT
    if isinstance(exc, ConnectionError):
        return ErrorClass.CONNECTION_ERROR
    return None


def _classify_http_library(exc: BaseException) -> Optional[ErrorClass]:
    if isinstance(exc, u3.NewConnectionError):  # a ConnectTimeoutError subclass in urllib3
        return ErrorClass.CONNECTION_ERROR
    if isinstance(exc, (rq.ConnectTimeout, u3.ConnectTimeoutError)):
        return ErrorClass.CONNECT_TIMEOUT
    if isinstance(exc, (rq.Timeout, u3.ReadTimeoutError, u3.TimeoutError)):
        return ErrorClass.TTFB_TIMEOUT
    if isinstance(exc, (rq.ChunkedEncodingError, u3.ProtocolError)):
        return ErrorClass.BODY_TIMEOUT if _mentions_timeout(exc) else ErrorClass.CONNECTION_ERROR
    if isinstance(exc, (rq.ConnectionError, u3.MaxRetryError)):
        return ErrorClass.CONNECTION_ERROR
    return None


def _mentions_timeout(exc: BaseException) -> bool:
    return "timed out" in str(exc).lower() or "timeout" in str(exc).lower()


# -- the loop -------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunResult:
    """The end of :meth:`Retrying.run`: the last decision and what the last attempt produced.

    ``value`` is the callable's last return value (an outcome or any value on success);
    ``exception`` is set when the last attempt raised and the decision is PARK.
    """

    decision: RetryDecision
    value: Any = None
    exception: Optional[BaseException] = None

    @property
    def ok(self) -> bool:
        return self.decision.kind is DecisionKind.SUCCESS


@dataclass(frozen=True)
class _Raised:
    error_class: ErrorClass
    retry_after_s: Optional[float]


class Retrying:
    """Runs a callable under a :class:`RetryPolicy`, waiting only through the injected clock.

    ``classifier`` maps an exception to an :class:`ErrorClass` (None: re-raise at once);
    ``gate`` is the optional fleet-wide retry budget; ``hooks`` receive a :class:`RetryEvent`
    after each failed attempt.
    """

    def __init__(self, policy: Optional[RetryPolicy] = None, *, clock: Optional[Clock] = None,
                 rng: Optional[random.Random] = None, classifier: Classifier = classify_exception,
                 gate: Optional[RetryGate] = None, hooks: Iterable[RetryHook] = ()) -> None:
        self.policy = policy or RetryPolicy()
        self.clock = clock or SystemClock()
        self.rng = rng if rng is not None else random.Random()
        self.classifier = classifier
        self.gate = gate
        self.hooks = tuple(hooks)

    def run(self, fn: Callable[..., Any], *args: Any, history: Optional[RetryHistory] = None,
            deadline: Optional[Deadline] = None, **kwargs: Any) -> RunResult:
        """Call ``fn(*args, **kwargs)`` until success, a park or giving up.

        Returns a :class:`RunResult` for SUCCESS, PARK and a GIVE_UP on a returned outcome.
        Raises the callable's own exception, unchanged, when the engine gives up on it or the
        classifier does not know it.
        """
        history = history if history is not None else _EMPTY
        policy = self.policy
        # The policy's own deadline starts now but is only built once something fails.
        started = self.clock.now() if deadline is None and policy.deadline_s is not None \
            else None
        while True:
            exc: Optional[BaseException] = None
            try:
                value = fn(*args, **kwargs)
            except Exception as raised:
                error_class = self.classifier(raised)
                if error_class is None:
                    raise
                exc, value = raised, None
                outcome: Any = _Raised(error_class, getattr(raised, "retry_after_s", None))
            else:
                outcome = value
                if getattr(value, "error_class", None) is None:
                    done = history.with_attempt(AttemptRecord(None, self.clock.now()))
                    return RunResult(RetryDecision(DecisionKind.SUCCESS, done), value)
            if started is not None and deadline is None:
                deadline = Deadline(started, policy.deadline_s)  # type: ignore[arg-type]
            decision = policy.decide(history, outcome, now=self.clock.now(), rng=self.rng,
                                     deadline=deadline, gate=self.gate)
            self._notify(decision, exc)
            if decision.kind is DecisionKind.RETRY:
                self.clock.sleep(decision.wait_s)
                history = decision.history
                continue
            if decision.kind is DecisionKind.GIVE_UP and exc is not None:
                raise exc
            return RunResult(decision, value, exc)

    def _notify(self, decision: RetryDecision, exc: Optional[BaseException]) -> None:
        log.debug("attempt %d failed with %s: %s", decision.attempt,
                  decision.error_class.value if decision.error_class else "-", decision.reason)
        if not self.hooks:
            return
        event = RetryEvent(decision.attempt, decision.error_class, decision.kind,
                           # type: ignore[arg-type]
                           decision.wait_s, decision.until, decision.failure_class,
                           decision.reason, exc)
        for hook in self.hooks:
            hook(event)


_EMPTY = RetryHistory()
