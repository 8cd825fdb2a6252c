"""The exception tree, the classification table (one test per row) and HTTP status mapping."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional

import pytest

from fme_ai_resilience.core.resilience.classification import (CLASSIFICATION, BackoffProfile,
                                                              ClassRule, classify_status,
                                                              rule_for)
from fme_ai_resilience.core.errors import (CircuitOpenError, ConfigurationError, ErrorClass,
                                           FailureClass, FormatError, InvalidPayload,
                                           ResilienceError, StoreError, StoreUnavailable,
                                           UnsafeURL)
from fme_ai_resilience.core.resilience.retry import DecisionKind, RetryHistory, RetryPolicy

E, P, F = ErrorClass, BackoffProfile, FailureClass


@dataclass(frozen=True)
class Outcome:
    error_class: Optional[ErrorClass]
    retry_after_s: Optional[float] = None


def _first_decision(error_class, retry_after_s=None, policy=None):
    policy = policy or RetryPolicy(max_inline_wait_s=1e6)
    return policy.decide(RetryHistory(), Outcome(error_class, retry_after_s), now=0.0,
                         rng=random.Random(0))


# -- seed section 4.2, row by row ------------------------------------------------------------

def test_row_connect_timeout_retries_soon():
    """Connect timeout: retried with the SHORT profile (the service was never reached)."""
    rule = rule_for(E.CONNECT_TIMEOUT)
    assert (rule.retry, rule.backoff, rule.max_retries) == (True, P.SHORT, None)
    d = _first_decision(E.CONNECT_TIMEOUT)
    assert d.kind is DecisionKind.RETRY and d.wait_s <= 0.5


def test_row_connection_error_retries_soon():
    """Connection refused or reset: retried like a connect timeout."""
    rule = rule_for(E.CONNECTION_ERROR)
    assert (rule.retry, rule.backoff) == (True, P.SHORT)
    assert _first_decision(E.CONNECTION_ERROR).kind is DecisionKind.RETRY


def test_row_ttfb_timeout_retries_with_longer_backoff():
    """TTFB timeout: retried with the LONG profile (the service is busy; give it room)."""
    rule = rule_for(E.TTFB_TIMEOUT)
    assert (rule.retry, rule.backoff, rule.retry_after) == (True, P.LONG, False)
    policy = RetryPolicy(max_inline_wait_s=1e6)
    long_max = policy.backoff.for_profile(P.LONG).max_delay(0)
    assert long_max > policy.backoff.max_delay(0)
    assert _first_decision(E.TTFB_TIMEOUT).wait_s <= long_max


def test_row_body_timeout_retries_with_standard_backoff():
    """Body read timeout: retried with standard exponential backoff."""
    rule = rule_for(E.BODY_TIMEOUT)
    assert (rule.retry, rule.backoff) == (True, P.STANDARD)
    assert _first_decision(E.BODY_TIMEOUT).kind is DecisionKind.RETRY


def test_row_429_honours_retry_after():
    """429: the server's Retry-After sets the wait."""
    rule = rule_for(E.RATE_LIMITED)
    assert (rule.retry, rule.retry_after) == (True, True)
    assert _first_decision(E.RATE_LIMITED, 3.5).wait_s == 3.5


def test_row_5xx_exponential_backoff_and_retry_after_when_given():
    """5xx: exponential backoff, or the Retry-After a 503 carries."""
    rule = rule_for(E.SERVER_ERROR)
    assert (rule.retry, rule.backoff, rule.retry_after) == (True, P.STANDARD, True)
    assert _first_decision(E.SERVER_ERROR).wait_s <= 1.0
    assert _first_decision(E.SERVER_ERROR, 7.0).wait_s == 7.0


def _assert_final(error_class, failure_class, alert):
    rule = rule_for(error_class)
    assert (rule.retry, rule.dead_letter, rule.alert) == (False, failure_class, alert)
    d = _first_decision(error_class)
    assert (d.kind, d.failure_class, d.wait_s) == (DecisionKind.GIVE_UP, failure_class, 0.0)


def test_row_400_422_dead_no_retry():
    """400/422: never retried, a BAD_REQUEST dead letter."""
    _assert_final(E.BAD_REQUEST, F.BAD_REQUEST, alert=False)


def test_row_401_403_dead_and_alert():
    """401/403: never retried, an AUTH dead letter, and an alert."""
    _assert_final(E.AUTH, F.AUTH, alert=True)


def test_row_photo_404_dead_not_found_and_notify():
    """Photo 404: never retried, a NOT_FOUND dead letter, a notification, no automatic requeue."""
    _assert_final(E.NOT_FOUND, F.NOT_FOUND, alert=True)
    assert not F.NOT_FOUND.requeue_automatically


def test_row_bad_format_retry_once_then_dead_format():
    """Unparseable or schema-violating body: one retry, then a FORMAT dead letter with alert."""
    rule = rule_for(E.BAD_FORMAT)
    assert (rule.retry, rule.max_retries, rule.dead_letter, rule.alert) == (True, 1, F.FORMAT, True)
    policy = RetryPolicy(max_inline_wait_s=1e6)
    first = _first_decision(E.BAD_FORMAT, policy=policy)
    second = policy.decide(first.history, Outcome(E.BAD_FORMAT), now=1.0, rng=random.Random(0))
    assert first.kind is DecisionKind.RETRY
    assert (second.kind, second.failure_class) == (DecisionKind.GIVE_UP, F.FORMAT)


def test_row_unsafe_url_dead_and_alert():
    """A photo URL refused by the download policy: never fetched, a BAD_REQUEST dead letter."""
    _assert_final(E.UNSAFE_URL, F.BAD_REQUEST, alert=True)


def test_row_circuit_open_parks_without_counting():
    """Open circuit: parked for the breaker's Retry-After, no attempt spent."""
    rule = rule_for(E.CIRCUIT_OPEN)
    assert (rule.retry, rule.retry_after, rule.counts_attempt) == (True, True, False)
    d = _first_decision(E.CIRCUIT_OPEN, 30.0)
    assert d.kind is DecisionKind.PARK and d.history.counted() == 0


def test_row_budget_exhausted_is_final():
    """Budget exhausted: final, a BUDGET dead letter the compensator may requeue."""
    rule = rule_for(E.BUDGET_EXHAUSTED)
    assert (rule.retry, rule.dead_letter) == (False, F.BUDGET)
    assert F.BUDGET.requeue_automatically


def test_every_error_class_has_exactly_one_row():
    """The table covers every ErrorClass, so no outcome can go unclassified."""
    assert set(CLASSIFICATION) == set(ErrorClass)
    assert rule_for("AUTH") is CLASSIFICATION[E.AUTH]


def test_class_rule_validates_itself():
    """A retried class needs a profile, a final class must have none, limits are >= 0."""
    with pytest.raises(ValueError):
        ClassRule(retry=True, backoff=P.NONE)
    with pytest.raises(ValueError):
        ClassRule(retry=False, backoff=P.SHORT)
    with pytest.raises(ValueError):
        ClassRule(retry=True, backoff=P.SHORT, max_retries=-1)


def test_table_is_read_only():
    """Nobody can change the shared table at run time."""
    with pytest.raises(TypeError):
        CLASSIFICATION[E.AUTH] = CLASSIFICATION[E.SERVER_ERROR]  # type: ignore[index]


# -- HTTP status -----------------------------------------------------------------------------

@pytest.mark.parametrize("status, expected", [
    (200, None), (204, None), (304, None),
    (400, E.BAD_REQUEST), (413, E.BAD_REQUEST), (422, E.BAD_REQUEST),
    (401, E.AUTH), (403, E.AUTH), (407, E.AUTH),
    (404, E.NOT_FOUND), (410, E.NOT_FOUND),
    (408, E.TTFB_TIMEOUT), (429, E.RATE_LIMITED),
    (500, E.SERVER_ERROR), (502, E.SERVER_ERROR), (503, E.SERVER_ERROR), (504, E.SERVER_ERROR),
])
def test_classify_status(status, expected):
    """Each HTTP status maps to the class the table expects."""
    assert classify_status(status) is expected


# -- exceptions ------------------------------------------------------------------------------

def test_exception_tree():
    """One root; payload and configuration errors are also ValueErrors."""
    for cls in (InvalidPayload, ConfigurationError, FormatError, UnsafeURL, CircuitOpenError,
                StoreError, StoreUnavailable):
        assert issubclass(cls, ResilienceError)
    assert issubclass(InvalidPayload, ValueError) and issubclass(ConfigurationError, ValueError)
    assert issubclass(StoreUnavailable, StoreError)


def test_default_message_is_the_docstring_summary():
    """An exception raised without a message says what its class means."""
    assert str(StoreUnavailable()) == "The ledger database cannot be reached."
    assert ResilienceError("custom").message == "custom"


def test_structured_fields():
    """Exceptions carry their facts as attributes, and say them in the message."""
    e = ConfigurationError("retry.jitter", "wobbly", "must be one of ...")
    assert (e.field, e.value) == ("retry.jitter", "wobbly") and "retry.jitter='wobbly'" in str(e)
    p = InvalidPayload("no GlobalID", field="feature.attributes")
    assert p.field == "feature.attributes" and "(at feature.attributes)" in str(p)
    c = CircuitOpenError("vision", 12.34)
    assert c.retry_after_s == 12.34 and "12.3s" in str(c)
    f = FormatError("drift", errors=["condition missing"], provider="azure")
    assert f.errors == ("condition missing",) and f.provider == "azure"
