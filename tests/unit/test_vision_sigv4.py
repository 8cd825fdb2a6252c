"""AWS SigV4 signing: published known-answer vectors, Rekognition integration, no secret leaks."""
from __future__ import annotations

import hashlib
import json
import logging
import random
import re

import pytest
import requests
import responses

from fme_ai_resilience.core.resilience.timeouts import TimeoutBudget
from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.errors import ConfigurationError, ErrorClass
from fme_ai_resilience.core.text.redact import redact_headers, redact_text
from fme_ai_resilience.services.vision import (AwsCredentials, Credentials, RequestOptions,
                                               VisionClient,
                                      VisionRequest, build_request, rekognition_signer)
from fme_ai_resilience.services.vision.sigv4 import (amz_date, canonical_query, canonical_request,
                                            canonical_uri, sign, signing_key, string_to_sign)

# the AWS SigV4 test suite's and IAM documentation example's fixed inputs

from helpers import vision_fixtures as fx


ACCESS_KEY = "AKIDEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
SUITE_TIME = 1_440_938_160.0          # 2015-08-30T12:36:00Z
SUITE = AwsCredentials(ACCESS_KEY, SECRET, region="us-east-1", service="service")
ORIGIN = "https://example.amazonaws.com"
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
SUITE_TOKEN = "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"

# (name, method, target, headers, body, signed headers, published signature)
SUITE_VECTORS = [
    ("get-vanilla", "GET", "/", {}, b"", "host;x-amz-date",
     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
    ("post-vanilla", "POST", "/", {}, b"", "host;x-amz-date",
     "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
    ("get-vanilla-query-order-key-case", "GET", "/?Param2=value2&Param1=value1", {}, b"",
     "host;x-amz-date", "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
    ("get-vanilla-query-order-value", "GET", "/?Param1=value2&Param1=value1", {}, b"",
     "host;x-amz-date", "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694"),
    ("get-vanilla-utf8-query", "GET", "/?\u1234=bar", {}, b"", "host;x-amz-date",
     "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"),
    ("get-unreserved", "GET",
     "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", {}, b"",
     "host;x-amz-date", "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"),
    ("get-slashes", "GET", "//example//", {}, b"", "host;x-amz-date",
     "9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84"),
    ("get-header-value-trim", "GET", "/",
     {"My-Header1": " value1", "My-Header2": '"a   b   c"'}, b"",
     "host;my-header1;my-header2;x-amz-date",
     "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"),
    ("get-header-value-order", "GET", "/", {"My-Header1": "value4,value1,value3,value2"}, b"",
     "host;my-header1;x-amz-date",
     "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"),
    ("post-x-www-form-urlencoded", "POST", "/",
     {"Content-Type": "application/x-www-form-urlencoded"}, b"Param1=value1",
     "content-type;host;x-amz-date",
     "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"),
]

AUTH_FORMAT = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[A-Z0-9]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/"
    r"(?P<service>[a-z0-9-]+)/aws4_request, SignedHeaders=(?P<signed>[a-z0-9-]+(?:;[a-z0-9-]+)*),"
    r" Signature=(?P<sig>[0-9a-f]{64})$")


@pytest.mark.parametrize("name, method, target, headers, body, signed, signature",
                         SUITE_VECTORS, ids=[v[0] for v in SUITE_VECTORS])
def test_suite_vector_signs_to_its_published_authorization(name, method, target, headers, body,
                                                           signed, signature):
    """Each AWS SigV4 test-suite request signs to the suite's published Authorization header."""
    request = VisionRequest(method, ORIGIN + target, dict(headers, Host="example.amazonaws.com"),
                            body)
    out = sign(request, SUITE, now=SUITE_TIME)
    assert out.headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        f"SignedHeaders={signed}, Signature={signature}")
    assert out.headers["X-Amz-Date"] == "20150830T123600Z"


def test_suite_session_token_vector_signs_the_security_token():
    """get-vanilla with a session token signs X-Amz-Security-Token to the published value."""
    creds = AwsCredentials(ACCESS_KEY, SECRET, SUITE_TOKEN, region="us-east-1",
                           service="service")
    out = sign(VisionRequest("GET", ORIGIN + "/", {}), creds, now=SUITE_TIME)
    assert out.headers["X-Amz-Security-Token"] == SUITE_TOKEN
    assert out.headers["Authorization"].endswith(
        "SignedHeaders=host;x-amz-date;x-amz-security-token, "
        "Signature=07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8")


def test_iam_documentation_example_matches_every_intermediate_value():
    """The IAM ListUsers example reproduces the documented canonical hash, key and signature."""
    creds = AwsCredentials(ACCESS_KEY, SECRET, region="us-east-1", service="iam")
    request = VisionRequest("GET", "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08",
                            {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
    out = sign(request, creds, now=SUITE_TIME)
    unsigned = {k: v for k, v in out.headers.items() if k != "Authorization"}
    canonical, signed = canonical_request(VisionRequest("GET", request.url, unsigned))
    assert signed == "content-type;host;x-amz-date"
    assert canonical == ("GET\n/\nAction=ListUsers&Version=2010-05-08\n"
                         "content-type:application/x-www-form-urlencoded; charset=utf-8\n"
                         "host:iam.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
                         f"content-type;host;x-amz-date\n{EMPTY_SHA256}")
    digest = "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59"
    assert hashlib.sha256(canonical.encode()).hexdigest() == digest
    assert string_to_sign("20150830T123600Z", "20150830/us-east-1/iam/aws4_request",
                          canonical).endswith("\n" + digest)
    assert signing_key(SECRET, "20150830", "us-east-1", "iam").hex() == (
        "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9")
    assert out.headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date, "
        "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7")


@pytest.mark.parametrize("path, expected", [
    ("", "/"), ("/", "/"), ("/example space/", "/example%20space/"),
    ("/\u1234", "/%E1%88%B4"), ("/a/./b/../c", "/a/c"), ("/example1/example2/../..", "/"),
    ("/a%2Fb", "/a%252Fb"), ("//example//", "/example/"),
])
def test_canonical_uri_normalises_and_encodes_each_segment(path, expected):
    """Dot and empty segments go; each segment is URI-encoded as it stands (a % again)."""
    assert canonical_uri(path) == expected


@pytest.mark.parametrize("query, expected", [
    ("", ""), ("b&a=1", "a=1&b="), ("q=a+b", "q=a%2Bb"), ("q=a%20b", "q=a%20b"),
    ("a=1=2", "a=1%3D2"), ("x=a.b&x=a%2Fb", "x=a%2Fb&x=a.b"), ("Z=1&a=2", "Z=1&a=2"),
])
def test_canonical_query_reencodes_and_sorts_bytewise(query, expected):
    """Parameters are re-encoded per RFC 3986 and sorted by encoded name, then value."""
    assert canonical_query(query) == expected


def test_signing_time_comes_only_from_the_given_epoch_seconds():
    """The same inputs sign identically; a second later changes date and signature."""
    request = VisionRequest("POST", ORIGIN + "/", {"Content-Type": "application/json"}, b"{}")
    first, again = sign(request, SUITE, now=SUITE_TIME), sign(request, SUITE, now=SUITE_TIME)
    later = sign(request, SUITE, now=SUITE_TIME + 1)
    assert first.headers == again.headers
    assert later.headers["X-Amz-Date"] == "20150830T123601Z"
    assert later.headers["Authorization"] != first.headers["Authorization"]
    assert amz_date(0) == "19700101T000000Z"


def test_signing_again_replaces_the_earlier_signature_headers():
    """A re-signed request carries one Authorization/X-Amz-Date, both from the new time."""
    once = sign(VisionRequest("GET", ORIGIN + "/", {}), SUITE, now=SUITE_TIME + 3600)
    twice = sign(once, SUITE, now=SUITE_TIME)
    assert twice.headers == sign(VisionRequest("GET", ORIGIN + "/", {}), SUITE,
                                 now=SUITE_TIME).headers


def test_content_sha256_header_is_the_signed_payload_hash():
    """With content_sha256 the body's SHA-256 travels in x-amz-content-sha256 and is signed."""
    out = sign(VisionRequest("POST", ORIGIN + "/", {}, b"Param1=value1"), SUITE, now=SUITE_TIME,
               content_sha256=True)
    assert out.headers["x-amz-content-sha256"] == hashlib.sha256(b"Param1=value1").hexdigest()
    assert "SignedHeaders=host;x-amz-content-sha256;x-amz-date," in out.headers["Authorization"]


def test_host_keeps_a_non_default_port_only():
    """The signed Host is the URL's host, with the port only when it is not the scheme's."""
    assert sign(VisionRequest("GET", "https://Ex.com:443/", {}), SUITE,
                now=0).headers["Host"] == "ex.com"
    assert sign(VisionRequest("GET", "http://ex.com:8080/", {}), SUITE,
                now=0).headers["Host"] == "ex.com:8080"


def test_aws_credentials_hide_secrets_and_name_the_bad_field():
    """The repr shows neither secret key nor token; an empty field is named in the error."""
    creds = AwsCredentials(ACCESS_KEY, SECRET, SUITE_TOKEN, region="eu-west-1")
    for text in (repr(creds), str(creds), repr(rekognition_signer(creds, clock=FakeClock())),
                 repr(Credentials.aws(creds, clock=FakeClock()))):
        assert SECRET not in text and SUITE_TOKEN not in text
    assert creds.service == "rekognition"
    with pytest.raises(ValueError, match="secret_access_key") as info:
        AwsCredentials(ACCESS_KEY, " ")
    assert SECRET not in str(info.value)
    with pytest.raises(ValueError, match="region"):
        AwsCredentials(ACCESS_KEY, SECRET, region="")


def test_rekognition_request_is_signed_at_the_clock_time():
    """Credentials.aws signs the DetectLabels request with the JSON 1.1 headers at clock.now()."""
    clock = FakeClock(start=SUITE_TIME)
    creds = AwsCredentials(ACCESS_KEY, SECRET, region="us-east-1")
    req = build_request("rekognition", "https://rekognition.us-east-1.amazonaws.com", b"\xff\xd8",
                        Credentials.aws(creds, clock=clock))
    assert req.headers["Content-Type"] == "application/x-amz-json-1.1"
    assert req.headers["X-Amz-Target"] == "RekognitionService.DetectLabels"
    assert req.headers["Host"] == "rekognition.us-east-1.amazonaws.com"
    assert req.headers["X-Amz-Date"] == "20150830T123600Z"
    found = AUTH_FORMAT.match(req.headers["Authorization"])
    assert found and found["date"] == "20150830" and found["service"] == "rekognition"
    assert found["signed"] == ("accept;accept-encoding;content-type;host;x-amz-date;"
                               "x-amz-target")
    clock.advance(86_400)
    custom = RequestOptions(rekognition_target="RekognitionService.DetectCustomLabels")
    later = build_request("rekognition", "https://rekognition.us-east-1.amazonaws.com",
                          b"\xff\xd8", Credentials.aws(creds, clock=clock), custom)
    assert later.headers["X-Amz-Date"] == "20150831T123600Z"
    assert later.headers["X-Amz-Target"] == "RekognitionService.DetectCustomLabels"
    assert later.headers["Authorization"] != req.headers["Authorization"]


@responses.activate
def test_client_sends_a_verifiable_signature_and_leaks_no_aws_secret(caplog):
    """The wire request's signature re-derives from its signed headers; no secret escapes."""
    clock = FakeClock(start=SUITE_TIME)
    token = "FwoGZXIvYXdzEJr//////////wEaDOkTempSessionToken+abc/def=="
    creds = AwsCredentials("AKIAIOSFODNN7EXAMPLE", SECRET, token, region="eu-west-1")
    url = "https://rekognition.eu-west-1.amazonaws.com/"
    echo = {"__type": "UnrecognizedClientException",
            "message": f"token {token} secret {SECRET} Authorization: AWS4-HMAC-SHA256 "
                       "Credential=AKIAIOSFODNN7EXAMPLE/x, Signature=" + "ab" * 32}
    responses.add(responses.POST, url, json=echo, status=403)
    responses.add(responses.POST, url, body=f"<html>{SECRET} {token}</html>", status=502,
                  content_type="text/html")
    responses.add(responses.POST, url, json=fx.REKOGNITION_OK)
    client = VisionClient(url, "rekognition", Credentials.aws(creds, clock=clock),
                          TimeoutBudget(connect_s=0.5, tls_s=0.5, ttfb_s=2, body_s=1),
                          session=requests.Session(), clock=clock, rng=random.Random(3))
    caplog.set_level(logging.DEBUG)
    outcomes = [client.analyze(b"\xff\xd8jpeg", "a" * 32) for _ in range(3)]
    assert [o.error_class for o in outcomes] == [ErrorClass.AUTH, ErrorClass.SERVER_ERROR, None]
    assert outcomes[2].assessment.condition == "damaged"

    sent = responses.calls[0].request
    found = AUTH_FORMAT.match(sent.headers["Authorization"])
    assert found and found["key"] == "AKIAIOSFODNN7EXAMPLE" and found["region"] == "eu-west-1"
    assert sent.headers["X-Amz-Security-Token"] == token
    signed_names = found["signed"].split(";")
    assert "x-amz-security-token" in signed_names and "traceparent" not in signed_names
    wire = {k: v for k, v in sent.headers.items() if k.lower() in signed_names}
    body = sent.body if isinstance(sent.body, bytes) else sent.body.encode()
    assert json.loads(body)["Image"]["Bytes"]
    resigned = sign(VisionRequest("POST", sent.url, wire, body), creds, now=SUITE_TIME)
    assert resigned.headers["Authorization"] == sent.headers["Authorization"]

    texts = [repr(o) for o in outcomes] + [o.excerpt + o.detail + " ".join(o.errors)
                                           for o in outcomes]
    texts += [r.getMessage() for r in caplog.records] + [repr(client), repr(client.credentials)]
    with pytest.raises(ConfigurationError) as info:
        client.analyze("https://photos.example.com/a.jpg", "a" * 32)
    texts += [str(info.value), repr(info.value)]
    for secret in (SECRET, token, "ab" * 32):
        assert not [t for t in texts if secret in t]


def test_redaction_hides_aws_signature_and_security_token_in_free_text():
    """Free text keeps the SigV4 scheme and scope but loses Signature= and the session token."""
    auth = ("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/rekognition/"
            "aws4_request, SignedHeaders=host;x-amz-date, Signature=" + "5f" * 32)
    token = "FwoGZXIvYXdzEJr//////////wEaDOk+abc/def=="
    for text in (f"Authorization: {auth}", f"{{'Authorization': '{auth}'}}", auth,
                 f"X-Amz-Security-Token: {token}", f"{{'X-Amz-Security-Token': '{token}'}}",
                 f'"x-amz-security-token":"{token}"',
                 f"https://s3.example.com/a.jpg?X-Amz-Security-Token={token}&x=1"):
        cleaned = redact_text(text)
        assert "5f" * 32 not in cleaned and token not in cleaned and "[REDACTED]" in cleaned
    assert redact_text(f"Authorization: {auth}").startswith(
        "Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/")
    assert redact_headers({"Authorization": auth, "X-Amz-Security-Token": token}) == {
        "Authorization": "[REDACTED]", "X-Amz-Security-Token": "[REDACTED]"}
