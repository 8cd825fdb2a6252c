"""VisionClient over mocked HTTP: every provider's answers come back as classified outcomes."""
from __future__ import annotations

import json
import logging
import random
import re

import pytest
import requests
import responses

from fme_ai_resilience.core.resilience.timeouts import TimeoutBudget
from fme_ai_resilience.core.errors import ErrorClass
from fme_ai_resilience.core.intake.keys import as_trace_id
from fme_ai_resilience.core.ledger import CallRecord
from fme_ai_resilience.core.vision.validate import VerdictKind, validate
from fme_ai_resilience.services.vision import Credentials, VisionClient, VisionOutcome, traceparent
from fme_ai_resilience.core.vision.providers import GenericMapping
from fme_ai_resilience.core.intake.survey123 import parse_webhook

from helpers import vision_fixtures as fx


API_KEY = "sk-live-ABCDEF0123456789"
TOKEN = "portal-token-Zx9Yw8Vu7"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"

URLS = fx.URLS   # where each provider's request goes for endpoint vision.example.com
MAPPING = GenericMapping(condition="result.asset_condition", confidence="result.score",
                         labels="result.tags", label_name="tag", label_confidence="p",
                         model_version="model.version")

CASES = [
    # provider, status, body, expected error class (None = ok), expected condition
    ("azure-v4", 200, fx.AZURE_OK, None, "damaged"),
    ("azure-v4", 200, fx.AZURE_DRIFTED, ErrorClass.BAD_FORMAT, None),
    ("azure-v4", 400, fx.AZURE_ERROR, ErrorClass.BAD_REQUEST, None),
    ("azure-v4", 200, fx.AZURE_PERCENT, ErrorClass.BAD_FORMAT, None),
    ("google", 200, fx.GOOGLE_OK, None, "damaged"),
    ("google", 200, fx.GOOGLE_DRIFTED, ErrorClass.BAD_FORMAT, None),
    ("google", 200, fx.GOOGLE_ERROR_200, ErrorClass.SERVER_ERROR, None),
    ("google", 429, fx.GOOGLE_QUOTA, ErrorClass.RATE_LIMITED, None),
    ("google", 200, fx.GOOGLE_PERCENT, ErrorClass.BAD_FORMAT, None),
    ("rekognition", 200, fx.REKOGNITION_OK, None, "damaged"),
    ("rekognition", 200, fx.REKOGNITION_DRIFTED, ErrorClass.BAD_FORMAT, None),
    ("rekognition", 500, fx.REKOGNITION_THROTTLED, ErrorClass.RATE_LIMITED, None),
    ("rekognition", 200, fx.REKOGNITION_UNIT_SCALE, ErrorClass.BAD_FORMAT, None),
    ("openai", 200, fx.OPENAI_OK, None, "damaged"),
    ("openai", 200, fx.OPENAI_DRIFTED, ErrorClass.BAD_FORMAT, None),
    ("openai", 200, fx.OPENAI_REFUSAL, ErrorClass.BAD_FORMAT, None),
    ("openai", 200, fx.OPENAI_TRUNCATED, ErrorClass.BAD_FORMAT, None),
    ("openai", 200, fx.OPENAI_NULL, ErrorClass.BAD_FORMAT, None),
    ("openai", 401, {"error": {"message": "Incorrect API key provided: sk-live-ABC***"}},
     ErrorClass.AUTH, None),
    ("openai", 200, fx.OPENAI_PERCENT, ErrorClass.BAD_FORMAT, None),
    ("generic", 200, fx.GENERIC_OK, None, "fair"),
    ("generic", 200, fx.GENERIC_DRIFTED, ErrorClass.BAD_FORMAT, None),
    ("generic", 200, fx.GENERIC_ERROR, ErrorClass.SERVER_ERROR, None),
    ("generic", 200, {"error": {"code": 498, "message": "Invalid token."}}, ErrorClass.AUTH,
     None),
    ("generic", 422, {"detail": "image unreadable"}, ErrorClass.BAD_REQUEST, None),
    ("generic", 200, fx.GENERIC_PERCENT, ErrorClass.BAD_FORMAT, None),
]


def make_client(provider, clock, **kwargs):
    return VisionClient("https://vision.example.com", provider,
                        Credentials(api_key=API_KEY, token=TOKEN),
                        timeouts=TimeoutBudget(connect_s=0.5, tls_s=0.5, ttfb_s=2, body_s=1),
                        session=requests.Session(), clock=clock, rng=random.Random(7),
                        mapping=MAPPING if provider == "generic" else None, **kwargs)


@pytest.mark.parametrize("provider, status, body, expected, condition", CASES)
@responses.activate
def test_every_provider_answer_is_a_classified_outcome(clock, provider, status, body,
                                                       expected, condition):
    """Success, drift, error and wrong-scale answers all come back as outcomes, never raise."""
    responses.add(responses.POST, URLS[provider], json=body, status=status)
    out = make_client(provider, clock).analyze(b"\xff\xd8jpeg", TRACE)
    assert out.error_class is expected
    assert out.ok is (expected is None)
    assert out.status_code == status
    if condition:
        assert out.assessment.condition == condition
        assert validate(out.assessment).kind in (VerdictKind.ACCEPTED, VerdictKind.REVIEW)
    if expected is ErrorClass.BAD_FORMAT:
        assert out.errors and out.format_anomaly(observed_at=1.0).provider == provider
    assert API_KEY not in repr(out) and TOKEN not in repr(out)


@responses.activate
def test_request_carries_traceparent_from_the_trace_id(clock):
    """The W3C traceparent carries the task's trace id and a 16-hex span id."""
    responses.add(responses.POST, URLS["google"], json=fx.GOOGLE_OK)
    make_client("google", clock).analyze(b"img", TRACE)
    header = responses.calls[0].request.headers["traceparent"]
    assert re.fullmatch(rf"00-{TRACE}-[0-9a-f]{{16}}-01", header)


@responses.activate
def test_the_ledgers_trace_id_is_sent_verbatim(clock, caplog):
    """A task's trace id from intake is the traceparent's trace id, the outcome's and the log's."""
    caplog.set_level(logging.INFO)
    (sub,) = parse_webhook(json.dumps({
        "feature": {"attributes": {"globalid": "{5C1E0A2B-9D3F-4E61-8A7B-0F2C3D4E5A6B}"},
                    "attachments": {"photo": [
                        {"globalId": "{A0B1C2D3-E4F5-4A6B-8C7D-9E0F1A2B3C4D}", "id": 1}]}}}))
    responses.add(responses.POST, URLS["google"], json=fx.GOOGLE_OK)
    out = make_client("google", clock).analyze(b"img", sub.trace_id)
    header = responses.calls[0].request.headers["traceparent"]
    assert header.split("-")[1] == sub.trace_id == out.trace_id
    assert f"trace={sub.trace_id}" in caplog.text


@responses.activate
def test_an_id_that_is_no_trace_id_is_reported_as_the_one_sent(clock):
    """A caller's own id (not 32 hex) is derived once; outcome and traceparent carry the same."""
    responses.add(responses.POST, URLS["google"], json=fx.GOOGLE_OK)
    out = make_client("google", clock).analyze(b"img", "job-17/photo-3")
    sent = responses.calls[0].request.headers["traceparent"].split("-")[1]
    assert out.trace_id == sent == as_trace_id("job-17/photo-3")
    assert out.to_call_record("vision", started_at=1.0).trace_id == sent


def test_traceparent_hashes_trace_ids_that_are_not_32_hex():
    """A UUID keeps its hex; any other trace id is hashed to 32 hex; never all zeros."""
    rng = random.Random(1)
    uuid_form = "4bf92f35-77b3-4da6-a3ce-929d0e0e4736"
    assert traceparent(uuid_form, rng=rng).split("-")[1] == TRACE
    other = traceparent("task:abc", rng=rng).split("-")[1]
    assert re.fullmatch("[0-9a-f]{32}", other) and other != "0" * 32
    assert traceparent("0" * 32, rng=rng).split("-")[1] != "0" * 32


@responses.activate
def test_html_502_page_is_server_error_with_excerpt(clock):
    """A proxy's HTML 502 page is SERVER_ERROR with the page's start in the excerpt."""
    page = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
    responses.add(responses.POST, URLS["azure-v4"], body=page, status=502,
                  content_type="text/html")
    out = make_client("azure-v4", clock).analyze(b"img", TRACE)
    assert out.error_class is ErrorClass.SERVER_ERROR and out.status_code == 502
    assert "502 Bad Gateway" in out.excerpt


@responses.activate
def test_html_page_with_status_200_is_bad_format(clock):
    """An HTML page served with 200 is BAD_FORMAT, not an empty conclusion."""
    responses.add(responses.POST, URLS["azure-v4"], body="<html>maintenance</html>",
                  content_type="text/html")
    out = make_client("azure-v4", clock).analyze(b"img", TRACE)
    assert out.error_class is ErrorClass.BAD_FORMAT
    assert "text/html" in out.errors[0]


@responses.activate
def test_json_that_ends_early_is_a_transport_failure_not_format(clock):
    """A body cut mid-JSON (its length matching the cut) is TRUNCATED, retried like a 5xx:
    only a complete answer out of schema is BAD_FORMAT."""
    responses.add(responses.POST, URLS["google"], body=json.dumps(fx.GOOGLE_OK)[:57])
    out = make_client("google", clock).analyze(b"img", TRACE)
    assert out.error_class is ErrorClass.TRUNCATED


@responses.activate
def test_oversize_body_is_cut_at_the_limit(clock):
    """A body beyond max_response_bytes is BAD_FORMAT; the excerpt stays <= 2 KB."""
    responses.add(responses.POST, URLS["google"], body="x" * 50_000)
    out = make_client("google", clock, max_response_bytes=10_000).analyze(b"img", TRACE)
    assert out.error_class is ErrorClass.BAD_FORMAT
    assert "larger than 10000 bytes" in out.errors[0]
    assert len(out.excerpt) <= 2048


@responses.activate
def test_429_retry_after_seconds_header(clock):
    """Retry-After: 7 gives retry_after_s == 7."""
    responses.add(responses.POST, URLS["azure-v4"], json={"error": {"code": "429"}},
                  status=429, headers={"Retry-After": "7"})
    out = make_client("azure-v4", clock).analyze(b"img", TRACE)
    assert (out.error_class, out.retry_after_s) == (ErrorClass.RATE_LIMITED, 7.0)


@responses.activate
def test_429_retry_after_from_openai_text(clock):
    """Without Retry-After, OpenAI's 'try again in 41.724s' text gives the wait."""
    responses.add(responses.POST, URLS["openai"], json=fx.OPENAI_RATE_LIMIT, status=429)
    out = make_client("openai", clock).analyze(b"img", TRACE)
    assert out.retry_after_s == pytest.approx(41.724)


@responses.activate
def test_connection_refused_is_connection_error(clock):
    """A refused connection is CONNECTION_ERROR with no status."""
    responses.add(responses.POST, URLS["google"],
                  body=requests.exceptions.ConnectionError("refused"))
    out = make_client("google", clock).analyze(b"img", TRACE)
    assert (out.error_class, out.status_code) == (ErrorClass.CONNECTION_ERROR, None)


@responses.activate
def test_timeouts_raised_by_the_session_are_classified_by_phase(clock):
    """ConnectTimeout -> CONNECT_TIMEOUT, ReadTimeout before headers -> TTFB_TIMEOUT."""
    responses.add(responses.POST, URLS["google"],
                  body=requests.exceptions.ConnectTimeout("slow"))
    responses.add(responses.POST, URLS["google"], body=requests.exceptions.ReadTimeout("slow"))
    client = make_client("google", clock)
    first, second = client.analyze(b"img", TRACE), client.analyze(b"img", TRACE)
    assert (first.error_class, first.timed_out_phase) == (ErrorClass.CONNECT_TIMEOUT, "connect")
    assert (second.error_class, second.timed_out_phase) == (ErrorClass.TTFB_TIMEOUT, "ttfb")


@responses.activate
def test_outcome_becomes_a_call_record(clock):
    """to_call_record carries class, status, phases and trace id for ai_call_log."""
    responses.add(responses.POST, URLS["google"], json=fx.GOOGLE_QUOTA, status=429)
    out = make_client("google", clock).analyze(b"img", TRACE)
    rec = out.to_call_record("vision", started_at=1000.0, retry=True, task_key="k1")
    assert isinstance(rec, CallRecord)
    assert (rec.error_class, rec.status_code, rec.retry, rec.trace_id, rec.task_key) == (
        "RATE_LIMITED", 429, True, TRACE, "k1")
    assert set(rec.phases) >= {"connect", "ttfb", "body"}


def test_outcome_invariants_are_enforced():
    """ok is True exactly when error_class is None, and an ok outcome has an assessment."""
    with pytest.raises(ValueError, match="error_class"):
        VisionOutcome(ok=True, error_class=ErrorClass.AUTH)
    with pytest.raises(ValueError, match="error_class"):
        VisionOutcome(ok=False)
    with pytest.raises(ValueError, match="assessment"):
        VisionOutcome(ok=True)
    with pytest.raises(ValueError, match="excerpt"):
        VisionOutcome(ok=False, error_class=ErrorClass.AUTH, excerpt="x" * 3000)


@responses.activate
def test_secrets_never_reach_outcomes_or_logs(clock, caplog):
    """Key and token echoed back by the service appear in no outcome, error or log line."""
    echo = {"error": {"message": f"bad key {API_KEY} for token={TOKEN}"}}
    responses.add(responses.POST, URLS["generic"], json=echo, status=401)
    responses.add(responses.POST, URLS["generic"], body=f"<html>{API_KEY} {TOKEN}</html>",
                  status=502, content_type="text/html")
    responses.add(responses.POST, URLS["generic"],
                  json={"result": {"asset_condition": API_KEY, "score": 7}}, status=200)
    client = make_client("generic", clock)
    caplog.set_level(logging.DEBUG)
    outcomes = [client.analyze(b"img", TRACE) for _ in range(3)]
    assert [o.error_class for o in outcomes] == [ErrorClass.AUTH, ErrorClass.SERVER_ERROR,
                                                  ErrorClass.BAD_FORMAT]
    texts = [repr(o) for o in outcomes] + [o.excerpt + o.detail + " ".join(o.errors)
                                           for o in outcomes]
    texts += [r.getMessage() for r in caplog.records] + [repr(client)]
    for secret in (API_KEY, TOKEN):
        assert not [t for t in texts if secret in t]
    assert len(caplog.records) == 3


@responses.activate
def test_secret_straddling_the_excerpt_cut_is_redacted(clock):
    """A key echoed across the 2 KB excerpt boundary leaves not even a prefix behind."""
    responses.add(responses.POST, URLS["google"], body="x" * 2040 + API_KEY + "y" * 5000,
                  status=500, content_type="text/plain")
    out = make_client("google", clock).analyze(b"img", TRACE)
    assert len(out.excerpt) <= 2048 and API_KEY[:6] not in out.excerpt


@pytest.mark.parametrize("provider, body", [
    ("google", "[" * 100_000 + "]" * 100_000),
    ("rekognition", '{"Labels": [{"Name": "Rust", "Confidence": 1' + "0" * 400 + "}]}"),
    ("rekognition", '{"Labels": [{"Name": "Rust", "Confidence": 1e400}]}'),
    ("openai", json.dumps(fx.openai_answer("[" * 5000 + "]" * 5000))),
    ("generic", '{"condition": "good", "confidence": 0.5, "x": ' + "{\"a\": " * 5000 + "1"
     + "}" * 5001),
])
@responses.activate
def test_hostile_bodies_are_bad_format_outcomes(clock, provider, body):
    """Deep nesting and numbers no float holds come back as BAD_FORMAT, never as exceptions."""
    responses.add(responses.POST, URLS[provider], body=body, content_type="application/json")
    out = make_client(provider, clock).analyze(b"img", TRACE)
    assert out.error_class is ErrorClass.BAD_FORMAT and out.errors


@pytest.mark.parametrize("provider, body, expected", [
    ("google", {"responses": [{"error": "could not fetch the image"}]}, ErrorClass.SERVER_ERROR),
    ("generic", {"error": "model overloaded", "result": {"asset_condition": "good",
                                                         "score": 0.9}}, ErrorClass.SERVER_ERROR),
    ("openai", {**fx.OPENAI_OK, "error": [{"code": 401, "message": "expired"}]}, ErrorClass.AUTH),
])
@responses.activate
def test_an_error_inside_a_200_body_is_never_an_assessment(clock, provider, body, expected):
    """Errors in a 200 body, however they are spelled, are failed outcomes of their class."""
    responses.add(responses.POST, URLS[provider], json=body)
    out = make_client(provider, clock).analyze(b"img", TRACE)
    assert not out.ok and out.error_class is expected and out.assessment is None
