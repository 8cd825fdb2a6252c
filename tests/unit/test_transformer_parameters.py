"""The packaged transformers' parameters as FME's own parser gives them back: typed values
(numbers for number fields) read as the settings read the same text typed."""
from __future__ import annotations

from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.fme.transformers import transformer_parameters
from fme_ai_resilience.testing import FakeFeature

#: What FMETransformer.getParsedParamValue may give for each serialized value: a number
#: field's value as a float even when it is whole (FME keeps numbers as doubles).
PARSED = {"___XF_FAIR_PROCESSING_CLAIM_LIMIT": 10.0,
          "___XF_FAIR_RETRY_TASK_ATTEMPTS": 4,
          "___XF_FAIR_BREAKER_FAILURE_RATE": 0.25,
          "___XF_FAIR_INTAKE_LATENCY_PROMISE_S": 150.0,
          "___XF_FAIR_WRITEBACK_SINK": "collect"}


def test_typed_values_from_fmes_parser_read_as_the_same_settings():
    """A whole float for a count is that whole number (never "10.0", which a count refuses),
    other numbers and text as they are."""
    feature = FakeFeature({name: "serialized" for name in PARSED})
    found = transformer_parameters(feature, lambda name, value: PARSED[name])
    settings = Settings.from_mapping(found, prefix="FAIR_")
    assert settings.processing.claim_limit == 10
    assert settings.retry.task_attempts == 4
    assert settings.breaker.failure_rate == 0.25
    assert settings.intake.latency_promise_s == 150.0
    assert feature.getAllAttributeNames() == []

