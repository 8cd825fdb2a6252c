"""Arbitrary JSON through every provider adapter and the client: only documented outcomes.

Whatever a service (or a proxy, or an attacker in between) answers, ``normalize`` returns an
Assessment or raises FormatError, and ``VisionClient.analyze`` returns a VisionOutcome whose
error class is one docs/vision.md lists for an answered call.
"""
from __future__ import annotations

import copy
import json
import random

import pytest
import requests
import responses
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.errors import ErrorClass, FormatError
from fme_ai_resilience.services.vision import Credentials, VisionClient, VisionOutcome
from fme_ai_resilience.core.vision.providers import PROVIDERS, Assessment, normalize
from fme_ai_resilience.core.resilience.timeouts import TimeoutBudget

from helpers import vision_fixtures as fx


URLS = fx.URLS   # where each provider's request goes for endpoint vision.example.com
VALID = {"azure-v4": fx.AZURE_OK, "google": fx.GOOGLE_OK, "rekognition": fx.REKOGNITION_OK,
         "openai": fx.OPENAI_OK, "generic": {"condition": "fair", "confidence": 0.8,
                                             "labels": [{"name": "wear", "confidence": 0.8}],
                                             "model_version": "m1"}}
#: The classes docs/vision.md gives an answered call (a status and a body came back).
ANSWERED = {ErrorClass.BAD_FORMAT, ErrorClass.SERVER_ERROR, ErrorClass.AUTH,
            ErrorClass.BAD_REQUEST, ErrorClass.RATE_LIMITED, ErrorClass.NOT_FOUND,
            ErrorClass.TTFB_TIMEOUT}

KEYS = st.sampled_from([
    "responses", "labelAnnotations", "description", "score", "error", "code", "message",
    "status", "details", "tagsResult", "values", "name", "confidence", "objectsResult", "tags",
    "modelVersion", "Labels", "CustomLabels", "Name", "Confidence", "__type", "choices",
    "content", "refusal", "finish_reason", "condition", "labels", "model", "model_version",
    "confidence_score"]) | st.text(max_size=6)
NUMBERS = (st.integers() | st.floats(allow_nan=False, allow_infinity=False)
           | st.sampled_from([10 ** 400, -(10 ** 400), 0, 1, 100, 0.5, 498, 429, 1e308]))
LEAVES = st.none() | st.booleans() | NUMBERS | st.text(max_size=12)


def nested(depth, leaf=None):
    value = leaf
    for _ in range(depth):
        value = [value] if depth % 2 else {"error": value}
    return value


ANY_JSON = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(KEYS, inner, max_size=5), max_leaves=25)
HOSTILE = ANY_JSON | st.integers(60, 3000).map(nested) | st.builds(nested, st.integers(1, 80),
                                                                   ANY_JSON)


def _paths(value, prefix=()):
    """Every path into a JSON value (keys and indexes), the root included."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, prefix + (k,)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, prefix + (i,)))
    return out


@st.composite
def mutated(draw, provider):
    """A valid answer of ``provider`` with one part replaced by arbitrary (hostile) JSON."""
    payload = copy.deepcopy(VALID[provider])
    path = draw(st.sampled_from(_paths(payload)))
    value = draw(HOSTILE)
    if provider == "openai" and draw(st.booleans()):   # or inside the JSON-in-a-string
        content = json.loads(payload["choices"][0]["message"]["content"])
        inner = draw(st.sampled_from(_paths(content)))
        content = _replaced(content, inner, value)
        text = draw(st.sampled_from([dumps(content), "[" * 5000 + "]" * 5000,
                                     dumps(content)[:20]]))
        payload["choices"][0]["message"]["content"] = text
        return payload
    return _replaced(payload, path, value)


def _replaced(payload, path, value):
    if not path:
        return value
    node = payload
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return payload


def dumps(value):
    """JSON text of ``value`` at any depth (``json.dumps`` recurses, and gives up near 1000)."""
    out, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            out.append(item.text)
        elif isinstance(item, dict):
            parts = [_Raw("}")]
            for i, (k, v) in enumerate(reversed(list(item.items()))):
                parts.append(v)
                parts.append(_Raw(json.dumps(k) + ":"))
                if i < len(item) - 1:
                    parts.append(_Raw(","))
            parts.append(_Raw("{"))
            stack.extend(parts)
        elif isinstance(item, list):
            parts = [_Raw("]")]
            for i, v in enumerate(reversed(item)):
                parts.append(v)
                if i < len(item) - 1:
                    parts.append(_Raw(","))
            parts.append(_Raw("["))
            stack.extend(parts)
        else:
            out.append(json.dumps(item))
    return "".join(out)


class _Raw:
    def __init__(self, text):
        self.text = text


def answers(provider):
    return mutated(provider) | HOSTILE


@pytest.mark.parametrize("provider", PROVIDERS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_normalize_gives_an_assessment_or_a_format_error(provider, data):
    """Any JSON handed to normalize() is an Assessment or a FormatError with an ErrorClass."""
    payload = data.draw(answers(provider))
    try:
        result = normalize(provider, payload)
    except FormatError as exc:
        assert exc.error_class in ANSWERED and exc.errors
    else:
        assert isinstance(result, Assessment) and 0.0 <= result.confidence <= 1.0


def _client(provider):
    return VisionClient("https://vision.example.com", provider, Credentials(api_key="k-1234567"),
                        timeouts=TimeoutBudget(connect_s=0.5, tls_s=0.5, ttfb_s=2, body_s=1),
                        session=requests.Session(), clock=FakeClock(), rng=random.Random(3))


@pytest.mark.parametrize("provider", PROVIDERS)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_client_turns_every_answer_into_a_documented_outcome(provider, data):
    """Any JSON answer with any usual status is a VisionOutcome of a documented class."""
    payload = data.draw(answers(provider))
    status = data.draw(st.sampled_from([200, 200, 200, 400, 404, 429, 500]))
    body = dumps(payload)
    with responses.RequestsMock() as mock:
        mock.add(responses.POST, URLS[provider], body=body, status=status,
                 content_type="application/json")
        out = _client(provider).analyze(b"\xff\xd8jpeg", "4bf92f3577b34da6a3ce929d0e0e4736")
    assert isinstance(out, VisionOutcome)
    if out.ok:
        assert status == 200 and isinstance(out.assessment, Assessment)
    else:
        assert out.error_class in ANSWERED and out.assessment is None
