"""Assessment validation: schema, value domain and the asymmetric confidence policy."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fme_ai_resilience.core.ledger import FormatAnomaly
from fme_ai_resilience.core.config.settings import ValidationSettings
from fme_ai_resilience.core.vision.validate import VerdictKind, Verdict, schema_errors, validate
from fme_ai_resilience.core.vision.providers import Assessment


def result(condition="good", confidence=0.9, **extra):
    return {"condition": condition, "confidence": confidence, **extra}


def test_confident_good_is_accepted():
    """A good conclusion at or above the threshold is ACCEPTED."""
    assert validate(result("good", 0.75)).kind is VerdictKind.ACCEPTED


def test_good_below_threshold_goes_to_review():
    """A good conclusion needs the threshold: below it, REVIEW for lack of confidence."""
    verdict = validate(result("good", 0.74))
    assert verdict.kind is VerdictKind.REVIEW
    assert "not trusted" in verdict.reasons[0]


def test_damaged_below_threshold_still_goes_to_review_flagged():
    """A weak damaged conclusion is never dropped: REVIEW, flagged as possible damage."""
    verdict = validate(result("damaged", 0.3))
    assert verdict.kind is VerdictKind.REVIEW
    assert verdict.reasons[0].startswith("possible damaged")


def test_confident_damaged_is_accepted():
    """A damaged conclusion at the threshold is ACCEPTED."""
    assert validate(result("damaged", 0.8)).kind is VerdictKind.ACCEPTED


def test_threshold_per_asset_type():
    """Asset types override the default threshold (hydrant 0.9 here)."""
    settings = ValidationSettings(thresholds={"hydrant": 0.9})
    assert validate(result("good", 0.85), settings, "hydrant").kind is VerdictKind.REVIEW
    assert validate(result("good", 0.85), settings, "valve").kind is VerdictKind.ACCEPTED
    assert validate(result("good", 0.85), settings, "hydrant").threshold == 0.9


@pytest.mark.parametrize("bad, words", [
    ({"confidence": 0.9}, "condition"),
    (result(confidence="high"), "confidence"),
    (result("rusty"), "not one of"),
    (result(confidence=1.5), "[0, 1]"),
    (result(confidence=-0.1), "[0, 1]"),
    (result(confidence=float("nan")), "finite"),
    (result(confidence=float("inf")), "finite"),
    (result(labels=[["rust", 80]]), "labels/0"),
    (result(labels=[["rust"]]), "labels/0"),
    ("not an object", "object"),
])
def test_invalid_results(bad, words):
    """Schema and value-domain violations give INVALID with the reason."""
    verdict = validate(bad)
    assert verdict.kind is VerdictKind.INVALID
    assert any(words in r for r in verdict.reasons), verdict.reasons


def test_invalid_verdict_produces_format_anomaly():
    """An INVALID verdict yields the format_anomaly record to store; others yield None."""
    verdict = validate(result("asset_condition_missing"))
    anomaly = verdict.anomaly(provider="openai", observed_at=1_790_000_000.0,
                              excerpt='{"condition": "asset_condition_missing"}',
                              model_version="gpt-4o", task_key="k1", trace_id="t1")
    assert isinstance(anomaly, FormatAnomaly)
    assert anomaly.errors == verdict.reasons and anomaly.model_version == "gpt-4o"
    assert validate(result()).anomaly(provider="x", observed_at=0.0) is None


def test_assessment_objects_are_validated_through_to_dict():
    """An Assessment is validated like its mapping form."""
    a = Assessment("damaged", 0.9, (("rust", 0.9),), "3.0", "rekognition")
    assert validate(a).kind is VerdictKind.ACCEPTED


def test_configured_conditions_define_the_domain():
    """Only the configured conditions are valid."""
    settings = ValidationSettings(conditions=("ok", "replace"))
    assert validate(result("good"), settings).kind is VerdictKind.INVALID
    assert validate(result("replace", 0.95), settings,
                    alarm_conditions=("replace",)).kind is VerdictKind.ACCEPTED


def test_invalid_verdict_needs_reasons():
    """An INVALID verdict without reasons cannot be built."""
    with pytest.raises(ValueError, match="reasons"):
        Verdict(VerdictKind.INVALID)


@settings(deadline=None)
@given(condition=st.sampled_from(["good", "fair", "damaged"]),
       confidence=st.floats(allow_nan=True, allow_infinity=True))
def test_verdict_is_total_and_consistent(condition, confidence):
    """Any confidence gets a verdict; ACCEPTED iff in range and >= threshold."""
    verdict = validate(result(condition, confidence))
    in_range = math.isfinite(confidence) and 0 <= confidence <= 1
    if not in_range:
        assert verdict.kind is VerdictKind.INVALID
    elif confidence >= 0.75:
        assert verdict.kind is VerdictKind.ACCEPTED
    else:
        assert verdict.kind is VerdictKind.REVIEW


@pytest.mark.parametrize("condition", ["Damaged", "DAMAGED", "damaged ", " damaged\n"])
def test_condition_differing_in_case_or_spaces_is_the_configured_one(condition):
    """A condition written "Damaged", "DAMAGED" or "damaged " is damaged, confident or not."""
    assert validate(result(condition, 0.97)).kind is VerdictKind.ACCEPTED
    weak = validate(result(condition, 0.4))
    assert weak.kind is VerdictKind.REVIEW and "possible damaged" in weak.reasons[0]


@pytest.mark.parametrize("condition", ["damage", "broken", "dam aged", "  "])
def test_unknown_condition_stays_invalid(condition):
    """A condition that is not a configured one, even a near synonym, is INVALID."""
    assert validate(result(condition, 0.97)).kind is VerdictKind.INVALID


def test_schema_errors_of_a_hostile_value_are_one_violation():
    """A value nested 100,000 deep is one violation, not a RecursionError."""
    deep = None
    for _ in range(100_000):
        deep = [deep]
    assert schema_errors({"condition": deep, "confidence": 0.5}) == [
        "(root): nested deeper than 64 levels"]


def test_schema_error_messages_are_cut():
    """A violation quoting a huge value keeps a short message."""
    errors = schema_errors({"condition": ["x" * 10_000], "confidence": 0.5})
    assert len(errors) == 1 and len(errors[0]) <= 320 and errors[0].startswith("condition: ")


def test_a_confidence_no_float_holds_is_invalid_not_an_overflow():
    """validate() of a confidence of 10**400 is an INVALID verdict, never OverflowError."""
    verdict = validate({"condition": "good", "confidence": 10 ** 400})
    assert verdict.kind is VerdictKind.INVALID and "confidence" in verdict.reasons[0]
