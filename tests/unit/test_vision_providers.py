"""Provider adapters: every answer shape becomes one Assessment, or a FormatError naming why."""
from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs, urlsplit

import pytest

from fme_ai_resilience.core.errors import ConfigurationError, ErrorClass, FormatError
from fme_ai_resilience.core.vision.validate import VerdictKind, validate
from fme_ai_resilience.services.vision import builders
from fme_ai_resilience.services.vision.builders import Credentials, build_request
from fme_ai_resilience.core.vision.providers import (Assessment, ConditionRules, GenericMapping,
                                                     detect_error, normalize)

from helpers import vision_fixtures as fx


MAPPING = GenericMapping(condition="result.asset_condition", confidence="result.score",
                         labels="result.tags", label_name="tag", label_confidence="p",
                         model_version="model.version")


def test_azure_success_derives_damaged_from_rust_tag():
    """Azure 4.0 tags and object tags are labels; a 'rust' tag makes the asset damaged."""
    a = normalize("azure-v4", fx.AZURE_OK)
    assert (a.condition, a.confidence, a.model_version) == ("damaged", 0.88, "2023-10-01")
    assert a.labels[0] == ("outdoor", 0.99)
    assert ("fire hydrant", 0.91) in a.labels
    assert a.provider == "azure-v4"


def test_azure_v32_shape_is_drift():
    """The 3.2 shape (top-level tags) raises FormatError listing the missing fields."""
    with pytest.raises(FormatError) as info:
        normalize("azure-v4", fx.AZURE_DRIFTED)
    assert any("tagsResult" in e for e in info.value.errors)
    assert info.value.provider == "azure-v4"


def test_azure_percent_confidence_is_out_of_range():
    """A 0-100 confidence where Azure promises 0-1 is refused, not divided silently."""
    with pytest.raises(FormatError, match="outside 0-1"):
        normalize("azure-v4", fx.AZURE_PERCENT)


def test_azure_error_body_is_classified_by_status():
    """Azure's 400 error body maps to BAD_REQUEST with its message."""
    assert detect_error("azure-v4", 400, fx.AZURE_ERROR) == (
        ErrorClass.BAD_REQUEST, "Image size is too big.")
    assert detect_error("azure-v4", 401, fx.AZURE_ERROR)[0] is ErrorClass.AUTH


def test_google_success_uses_score():
    """Google labels use `score`; a 'Crack' label makes the asset damaged."""
    a = normalize("google", fx.GOOGLE_OK)
    assert (a.condition, a.confidence) == ("damaged", 0.811)
    assert a.labels[0] == ("Fire hydrant", 0.962)


def test_google_deprecated_confidence_field_is_drift():
    """A label without `score` (only the deprecated zero `confidence`) raises FormatError."""
    with pytest.raises(FormatError) as info:
        normalize("google", fx.GOOGLE_DRIFTED)
    assert any("score" in e for e in info.value.errors)


def test_google_error_inside_http_200_is_classified():
    """responses[0].error in an HTTP 200 (code 14, cannot fetch) is a SERVER_ERROR."""
    cls, message = detect_error("google", 200, fx.GOOGLE_ERROR_200)
    assert cls is ErrorClass.SERVER_ERROR and "can not access the URL" in message


def test_google_quota_error_is_rate_limited():
    """RESOURCE_EXHAUSTED is RATE_LIMITED whether the status says 429 or 200."""
    assert detect_error("google", 429, fx.GOOGLE_QUOTA)[0] is ErrorClass.RATE_LIMITED
    assert detect_error("google", 200, fx.GOOGLE_QUOTA)[0] is ErrorClass.RATE_LIMITED


def test_google_percent_score_is_out_of_range():
    """A Google score of 96.2 is refused as out of the 0-1 range."""
    with pytest.raises(FormatError, match="outside 0-1"):
        normalize("google", fx.GOOGLE_PERCENT)


def test_rekognition_scales_0_100_to_unit():
    """Rekognition's 0-100 confidences come out on 0-1."""
    a = normalize("rekognition", fx.REKOGNITION_OK)
    assert a.condition == "damaged"
    assert a.confidence == pytest.approx(0.924)
    assert a.labels[0] == ("Fire Hydrant", pytest.approx(0.991))
    assert a.model_version == "3.0"


def test_rekognition_custom_labels_are_read():
    """DetectCustomLabels answers (CustomLabels) are read like Labels."""
    a = normalize("rekognition", fx.REKOGNITION_CUSTOM)
    assert a.labels == (("valve_ok", pytest.approx(0.91)),)
    assert a.condition == "good"


def test_rekognition_unit_scale_answer_is_drift():
    """Rekognition answers already on 0-1 are refused (a scale change, not 1% confidence)."""
    with pytest.raises(FormatError, match="0-100"):
        normalize("rekognition", fx.REKOGNITION_UNIT_SCALE)


def test_rekognition_renamed_field_is_drift():
    """`Label` instead of `Name` raises FormatError naming the required field."""
    with pytest.raises(FormatError) as info:
        normalize("rekognition", fx.REKOGNITION_DRIFTED)
    assert any("Name" in e for e in info.value.errors)


@pytest.mark.parametrize("status", [500, 400, 200])
def test_rekognition_throttling_is_rate_limited_whatever_the_status(status):
    """ThrottlingException is RATE_LIMITED, even inside a 500."""
    assert detect_error("rekognition", status, fx.REKOGNITION_THROTTLED)[0] is \
        ErrorClass.RATE_LIMITED


def test_rekognition_provisioned_throughput_in_400_is_rate_limited():
    """ProvisionedThroughputExceededException (HTTP 400) is RATE_LIMITED, not BAD_REQUEST."""
    body = {"__type": "com.amazonaws.rekognition#ProvisionedThroughputExceededException"}
    assert detect_error("rekognition", 400, body)[0] is ErrorClass.RATE_LIMITED


def test_openai_structured_content_is_parsed():
    """JSON inside choices[0].message.content becomes the assessment."""
    a = normalize("openai", fx.OPENAI_OK)
    assert (a.condition, a.confidence, a.model_version) == ("damaged", 0.86,
                                                             "gpt-4o-2024-08-06")
    assert a.labels == (("rust", 0.9),)


def test_openai_renamed_field_is_drift():
    """`asset_condition` instead of `condition` raises FormatError naming `condition`."""
    with pytest.raises(FormatError) as info:
        normalize("openai", fx.OPENAI_DRIFTED)
    assert any("condition" in e for e in info.value.errors)


def test_openai_percent_confidence_is_refused():
    """A confidence of 86 from a model asked for 0-1 is refused."""
    with pytest.raises(FormatError, match="outside 0-1"):
        normalize("openai", fx.OPENAI_PERCENT)


@pytest.mark.parametrize("payload, words", [
    (fx.OPENAI_REFUSAL, "refused"), (fx.OPENAI_TRUNCATED, "cut off"),
    (fx.OPENAI_NULL, "no content"), (fx.openai_answer("not json"), "not JSON")])
def test_openai_refusal_truncation_null_and_garbage_are_format_errors(payload, words):
    """Refusals, finish_reason=length, null and non-JSON content raise FormatError."""
    with pytest.raises(FormatError, match=words):
        normalize("openai", payload)


def test_openai_rate_limit_error_object_is_rate_limited():
    """OpenAI's 429 error object is RATE_LIMITED and keeps the 'try again in' text."""
    cls, message = detect_error("openai", 429, fx.OPENAI_RATE_LIMIT)
    assert cls is ErrorClass.RATE_LIMITED and "41.724s" in message


def test_generic_mapping_reads_configured_paths():
    """The generic adapter follows dotted paths for condition, confidence, labels, version."""
    a = normalize("generic", fx.GENERIC_OK, mapping=MAPPING)
    assert (a.condition, a.confidence, a.model_version) == ("fair", 0.81, "insp-2.4")
    assert a.labels == (("wear", 0.81),)


def test_generic_renamed_field_is_drift_with_schema_errors():
    """A renamed field fails the schema derived from the mapping."""
    with pytest.raises(FormatError) as info:
        normalize("generic", fx.GENERIC_DRIFTED, mapping=MAPPING)
    assert any("asset_condition" in e for e in info.value.errors)


def test_generic_percent_scale_is_configurable():
    """With confidence_scale=100 a percentage answer is read; with 1 it is refused."""
    with pytest.raises(FormatError):
        normalize("generic", fx.GENERIC_PERCENT, mapping=MAPPING)
    pct = GenericMapping(**{**MAPPING.__dict__, "confidence_scale": 100})
    assert normalize("generic", fx.GENERIC_PERCENT, mapping=pct).confidence == 0.81


def test_generic_explicit_schema_replaces_derived_one():
    """A configured JSON Schema is what the payload is checked against."""
    mapping = GenericMapping(schema={"type": "object", "required": ["verdict"]})
    with pytest.raises(FormatError, match="verdict"):
        normalize("generic", {"condition": "good", "confidence": 0.9}, mapping=mapping)


def test_generic_labels_are_optional():
    """A generic answer without labels is read (condition and confidence suffice)."""
    a = normalize("generic", {"condition": "good", "confidence": 0.9})
    assert (a.condition, a.confidence, a.labels) == ("good", 0.9, ())


@pytest.mark.parametrize("payload", [
    {"verdict": 1}, {"verdict": 1, "condition": None, "confidence": 0.5},
    {"verdict": 1, "condition": "good", "confidence": "high"},
    {"verdict": 1, "condition": "good", "confidence": 0.5, "labels": [1, 2]}])
def test_generic_custom_schema_still_checks_mapped_values(payload):
    """With a permissive custom schema, missing or mistyped mapped values are FormatError."""
    mapping = GenericMapping(schema={"type": "object", "required": ["verdict"]})
    with pytest.raises(FormatError):
        normalize("generic", payload, mapping=mapping)


def test_generic_error_in_200_body_is_classified():
    """{"error": {"code": 503}} in an HTTP 200 is a SERVER_ERROR."""
    assert detect_error("generic", 200, fx.GENERIC_ERROR)[0] is ErrorClass.SERVER_ERROR


def test_constant_confidence_across_labels_is_drift():
    """Three or more labels with one identical confidence are refused as constant."""
    payload = {"responses": [{"labelAnnotations": [
        {"description": d, "score": 0.5} for d in ("a", "b", "c")]}]}
    with pytest.raises(FormatError, match="constant"):
        normalize("google", payload)


def test_rules_from_string_and_weak_evidence():
    """Configured rules apply; a weak damage label lowers a 'good' conclusion's confidence."""
    rules = ConditionRules.from_string("damaged=leak|burst;fair=moss")
    labels = [("Water leak", 0.4), ("Valve", 0.95)]
    assert rules.derive(labels) == ("good", pytest.approx(0.6))
    assert rules.derive([("Burst pipe", 0.7)]) == ("damaged", 0.7)
    assert rules.derive([]) == ("good", 0.0)
    with pytest.raises(ConfigurationError):
        ConditionRules.from_string("damaged")


def test_assessment_rejects_out_of_range_confidence():
    """An Assessment cannot hold a confidence outside [0, 1] or NaN."""
    for bad in (1.2, -0.1, float("nan")):
        with pytest.raises(ValueError, match="confidence"):
            Assessment("good", bad)


def test_unknown_provider_is_a_configuration_error():
    """normalize names the unknown provider."""
    with pytest.raises(ConfigurationError, match="vision.provider"):
        normalize("clarifai", {})


def test_request_builders_keep_secrets_in_headers():
    """Every provider's request carries its key in a header and never in the URL."""
    creds = Credentials(api_key="k-123456789", token="t-987654321")
    for provider in ("azure-v4", "google", "openai", "generic"):
        req = build_request(provider, "https://vision.example.com", b"\xff\xd8jpeg", creds)
        assert "123456789" not in req.url and "987654321" not in req.url
        assert any("123456789" in v or "987654321" in v for v in req.headers.values())
        assert "k-123456789" not in repr(req) and "k-123456789" not in repr(creds)


def test_request_builders_encode_bytes_and_urls():
    """Bytes go inline (base64 in JSON), URLs by reference, in each provider's own field."""
    creds = Credentials(api_key="k")
    az = build_request("azure-v4", "https://a.example", "https://p.example/1.jpg", creds)
    assert json.loads(az.body) == {"url": "https://p.example/1.jpg"}
    assert "api-version=2023-10-01" in az.url
    g = build_request("google", "https://vision.googleapis.com", b"abc", creds)
    assert json.loads(g.body)["requests"][0]["image"]["content"] == \
        base64.b64encode(b"abc").decode()
    r = build_request("rekognition", "https://rekognition.eu-west-1.amazonaws.com", b"abc",
                      Credentials(signer=lambda q: q.with_headers(Authorization="AWS4 sig")))
    assert r.headers["X-Amz-Target"] == "RekognitionService.DetectLabels"
    assert r.headers["Authorization"] == "AWS4 sig"
    o = build_request("openai", "https://api.example/v1", b"abc", creds)
    body = json.loads(o.body)
    assert o.url.endswith("/v1/chat/completions")
    assert body["response_format"]["type"] == "json_schema"
    assert body["messages"][0]["content"][1]["image_url"]["url"].startswith("data:image/jpeg")
    with pytest.raises(ConfigurationError, match="bytes"):
        build_request("rekognition", "https://r.example", "https://p.example/1.jpg", creds)
    assert builders.AZURE_PATH in az.url


@pytest.mark.parametrize("label", ["Residential area", "Stainless steel", "Trust", "Crust",
                                   "Accident", "Footwear"])
def test_keywords_inside_other_words_do_not_match(label):
    """A rule keyword inside another word ("dent" in "Residential") is no finding."""
    payload = {"responses": [{"labelAnnotations": [
        {"description": label, "score": 0.93}, {"description": "Fire hydrant", "score": 0.91}]}]}
    assert normalize("google", payload).condition == "good"


@pytest.mark.parametrize("label, condition", [("Leakage", "damaged"), ("Rusty pipe", "damaged"),
                                              ("Cracked concrete", "damaged"),
                                              ("Worn paint", "fair"), ("Water-stain", "fair")])
def test_keywords_match_at_word_starts(label, condition):
    """A keyword that starts a word of the label ("Leakage", "Rusty") still matches."""
    payload = {"responses": [{"labelAnnotations": [
        {"description": label, "score": 0.93}, {"description": "Fire hydrant", "score": 0.91}]}]}
    assert normalize("google", payload).condition == condition


def strict_mode_problems(node, path="schema"):
    """Where a JSON Schema breaks OpenAI strict mode: objects must forbid extra keys and
    require every property (an optional one is nullable instead)."""
    problems = []
    if isinstance(node, dict):
        types = node.get("type")
        if types == "object" or (isinstance(types, list) and "object" in types):
            if node.get("additionalProperties") is not False:
                problems.append(f"{path}: additionalProperties is not false")
            if set(node.get("properties", {})) != set(node.get("required", [])):
                problems.append(f"{path}: required {node.get('required')} is not every "
                                f"property {sorted(node.get('properties', {}))}")
        for key, value in node.items():
            problems.extend(strict_mode_problems(value, f"{path}/{key}"))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            problems.extend(strict_mode_problems(value, f"{path}/{i}"))
    return problems


def test_strict_mode_checker_finds_a_loose_object():
    """The strict-mode checker itself flags an open object with an optional property."""
    loose = {"type": "object", "required": ["a"],
             "properties": {"a": {"type": "string"}, "b": {"type": "number"}}}
    assert len(strict_mode_problems(loose)) == 2


def test_openai_request_schema_obeys_strict_mode_with_condition_enum():
    """The strict response_format schema closes every object, requires every property and
    limits the condition to the configured conditions."""
    options = builders.RequestOptions(conditions=("intact", "needs repair"))
    req = build_request("openai", "https://api.example.com/v1", b"\xff\xd8",
                        Credentials(api_key="sk-test-1234"), options)
    fmt = json.loads(req.body)["response_format"]["json_schema"]
    assert fmt["strict"] is True
    assert strict_mode_problems(fmt["schema"]) == []
    assert fmt["schema"]["properties"]["condition"]["enum"] == ["intact", "needs repair"]
    default = build_request("openai", "https://api.example.com/v1", b"\xff\xd8",
                            Credentials(api_key="sk-test-1234"))
    schema = json.loads(default.body)["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["condition"]["enum"] == ["good", "fair", "damaged"]


def test_openai_answer_with_null_labels_is_read():
    """A strict-mode answer stating labels as null (no evidence) is a normal assessment."""
    content = json.dumps({"condition": "fair", "confidence": 0.8, "labels": None})
    payload = {"model": "m", "choices": [{"finish_reason": "stop",
                                          "message": {"content": content}}]}
    a = normalize("openai", payload)
    assert (a.condition, a.confidence, a.labels) == ("fair", 0.8, ())


@pytest.mark.parametrize("stated", ["Damaged", "DAMAGED", "damaged "])
def test_stated_condition_is_trimmed_and_lower_cased(stated):
    """A model answering "Damaged" or "damaged " gives the condition damaged."""
    content = json.dumps({"condition": stated, "confidence": 0.97, "labels": None})
    payload = {"model": "m", "choices": [{"finish_reason": "stop",
                                          "message": {"content": content}}]}
    assert normalize("openai", payload).condition == "damaged"


def test_weak_damage_casts_doubt_on_fair_as_on_good():
    """Weak rust beside strong weathering is fair with rust's doubt, so it goes to REVIEW."""
    def google(labels):
        return {"responses": [{"labelAnnotations": [
            {"description": n, "score": s} for n, s in labels]}]}

    fair = normalize("google", google([("Rust", 0.45), ("Weathered", 0.92)]))
    good = normalize("google", google([("Rust", 0.45), ("Fire hydrant", 0.98)]))
    assert (fair.condition, fair.confidence) == ("fair", pytest.approx(0.55))
    assert (good.condition, good.confidence) == ("good", pytest.approx(0.55))
    assert validate(fair).kind is VerdictKind.REVIEW
    assert validate(good).kind is VerdictKind.REVIEW
    assert ConditionRules().derive([("Rust", 0.92), ("Weathered", 0.4)]) == ("damaged", 0.92)


def test_google_response_without_label_annotations_is_drift():
    """A per-image response with keys but no labelAnnotations (a renamed field) is drift."""
    payload = {"responses": [{"labels": [{"description": "rust", "score": 0.97}]}]}
    with pytest.raises(FormatError, match="labelAnnotations") as info:
        normalize("google", payload)
    assert "labels" in info.value.errors[0]


def test_google_empty_response_object_means_no_labels():
    """An empty per-image response ({}) is no labels: good at confidence 0, sent to REVIEW."""
    a = normalize("google", {"responses": [{}]})
    assert (a.condition, a.confidence, a.labels) == ("good", 0.0, ())
    assert validate(a).kind is VerdictKind.REVIEW


@pytest.mark.parametrize("confidence", [0.95, 1, 0.01])
def test_generic_unit_answer_on_percent_scale_is_drift(confidence):
    """With confidence_scale=100 a main confidence in (0, 1] reads as a 0-1 answer: drift."""
    with pytest.raises(FormatError, match="0-100 scale"):
        normalize("generic", {"condition": "damaged", "confidence": confidence},
                  mapping=GenericMapping(confidence_scale=100))
    assert normalize("generic", {"condition": "damaged", "confidence": 0},
                     mapping=GenericMapping(confidence_scale=100)).confidence == 0.0


def test_azure_requests_only_the_features_the_adapter_reads():
    """Azure is asked for tags and objects only: caption is offered in some regions alone."""
    req = build_request("azure-v4", "https://a.example", b"\xff\xd8", Credentials(api_key="k"))
    query = parse_qs(urlsplit(req.url).query)
    assert query == {"api-version": ["2023-10-01"], "features": ["tags,objects"]}


def test_azure_features_are_configurable_and_checked():
    """RequestOptions.azure_features chooses the features; tags stays, unknown ones are refused."""
    options = builders.RequestOptions(azure_features=("tags", "caption"))
    req = build_request("azure-v4", "https://a.example", b"\xff\xd8", Credentials(), options)
    assert parse_qs(urlsplit(req.url).query)["features"] == ["tags,caption"]
    for bad in (("objects",), ("tags", "captions"), ()):
        with pytest.raises(ConfigurationError, match="azure_features"):
            builders.RequestOptions(azure_features=bad)


def nested(depth, leaf=None):
    """``depth`` nested one-element arrays around ``leaf``, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("provider, payload, error_class", [
    ("google", fx.GOOGLE_ERROR_200, ErrorClass.SERVER_ERROR),
    ("google", {"responses": [{"error": "could not fetch the image"}]}, ErrorClass.SERVER_ERROR),
    ("google", {"responses": [{"error": {"code": 7, "message": "denied"}}]}, ErrorClass.AUTH),
    ("google", {"responses": [{"labelAnnotations": []}, {"error": {"code": 14}}]},
     ErrorClass.SERVER_ERROR),
    ("generic", {"error": "model overloaded", "condition": "good", "confidence": 0.9},
     ErrorClass.SERVER_ERROR),
    ("generic", {"error": {"code": 498, "message": "Invalid token."}, "condition": "good",
                 "confidence": 0.9}, ErrorClass.AUTH),
    ("azure-v4", {**fx.AZURE_OK, "error": {"code": 429, "message": "slow down"}},
     ErrorClass.RATE_LIMITED),
    ("openai", {**fx.OPENAI_OK, "error": {"message": "upstream failed"}}, ErrorClass.SERVER_ERROR),
    ("rekognition", {**fx.REKOGNITION_OK, "__type": "ThrottlingException"},
     ErrorClass.RATE_LIMITED),
])
def test_an_error_in_a_200_body_never_normalises_to_an_assessment(provider, payload,
                                                                  error_class):
    """normalize() called on its own refuses an answer reporting an error, with its class."""
    with pytest.raises(FormatError) as info:
        normalize(provider, payload, mapping=None)
    assert info.value.error_class is error_class


def test_drift_keeps_bad_format_as_its_error_class():
    """A drifted answer's FormatError carries BAD_FORMAT, usable as an attempt outcome."""
    with pytest.raises(FormatError) as info:
        normalize("azure-v4", fx.AZURE_DRIFTED)
    assert info.value.error_class is ErrorClass.BAD_FORMAT


@pytest.mark.parametrize("provider, payload, words", [
    ("azure-v4", {"modelVersion": "2023-10-01", "tagsResult": {"values": []},
                  "tags": [{"name": "rust", "confidence": 0.93}]}, "tags"),
    ("azure-v4", {"modelVersion": "2023-10-01", "tagsResult": {"values": []},
                  "objectsResult": {"values": []}, "objects": [{"object": "hydrant"}]},
     "objects"),
    ("rekognition", {"Labels": [], "CustomLabels": [{"Name": "Rust", "Confidence": 93.0}]},
     "CustomLabels"),
    ("rekognition", {"Labels": [{"Name": "Rust", "Confidence": 93.0}], "CustomLabels": []},
     "CustomLabels"),
    ("rekognition", {"Labels": [], "DetectedLabels": [{"Name": "Rust", "Confidence": 93.0}]},
     "DetectedLabels"),
    ("generic", {"condition": "good", "confidence": 0, "confidence_score": 0.93}, "confidence"),
    ("generic", {"condition": "good", "confidence": 0.0, "labels": [
        {"name": "rust", "confidence": 0, "score": 0.9}]}, "score"),
])
def test_drift_that_would_read_as_good_at_zero_is_a_format_error(provider, payload, words):
    """Labels moved elsewhere, both Rekognition lists, or a renamed confidence are drift."""
    with pytest.raises(FormatError, match=words) as info:
        normalize(provider, payload)
    assert info.value.error_class is ErrorClass.BAD_FORMAT


def test_an_empty_answer_in_the_known_shape_is_still_no_labels():
    """Azure and Rekognition answers in their own shape with no labels stay good at 0."""
    azure = normalize("azure-v4", {"modelVersion": "2023-10-01", "tagsResult": {"values": []},
                                   "metadata": {"width": 10, "height": 10}})
    rek = normalize("rekognition", {"Labels": [], "LabelModelVersion": "3.0"})
    assert (azure.condition, azure.confidence) == (rek.condition, rek.confidence) == ("good", 0.0)


def test_openai_labels_as_plain_strings_are_read():
    """A server ignoring strict mode that lists labels as strings gives the same assessment."""
    content = {"condition": "damaged", "confidence": 0.86, "labels": ["rust", "crack", "pipe"]}
    a = normalize("openai", fx.openai_answer(content))
    assert (a.condition, a.confidence) == ("damaged", 0.86)
    assert a.labels == (("rust", 0.86), ("crack", 0.86), ("pipe", 0.86))
    mixed = normalize("openai", fx.openai_answer(
        {"condition": "fair", "confidence": 0.8, "labels": [{"name": "wear", "confidence": 0.9},
                                                            "paint"]}))
    assert mixed.labels == (("wear", 0.9), ("paint", 0.8))


@pytest.mark.parametrize("provider, payload", [
    ("rekognition", {"Labels": [{"Name": "Rust", "Confidence": 10 ** 400}]}),
    ("google", {"responses": [{"labelAnnotations": [{"description": "Rust",
                                                     "score": -10 ** 400}]}]}),
    ("azure-v4", {"modelVersion": "m", "tagsResult": {"values": [{"name": "rust",
                                                                  "confidence": 10 ** 400}]}}),
    ("generic", {"condition": "good", "confidence": 10 ** 400}),
    ("openai", fx.openai_answer('{"condition": "good", "confidence": 1' + "0" * 400 + "}")),
    ("openai", fx.openai_answer('{"condition": "good", "confidence": 1e400}')),
    ("openai", fx.openai_answer("[" * 5000 + "]" * 5000)),
    ("openai", fx.openai_answer('{"condition": "good", "confidence": 0.5, "labels": '
                                + "[" * 5000 + "]" * 5000 + "}")),
    ("generic", {"condition": "good", "confidence": 0.5, "extra": nested(100_000)}),
    ("google", {"responses": [{"labelAnnotations": nested(100_000)}]}),
])
def test_hostile_payloads_are_format_errors(provider, payload):
    """Huge numbers and deep nesting raise FormatError, never OverflowError or RecursionError."""
    with pytest.raises(FormatError):
        normalize(provider, payload)
