"""Submission: the unit the ledger registers, and its token's secrecy."""
from __future__ import annotations

import dataclasses
import json

import pytest

from fme_ai_resilience.core.errors import InvalidPayload
from fme_ai_resilience.core.intake.submission import Submission

TOKEN = "portal-token-SECRET-123"


def make(**overrides) -> Submission:
    values = dict(idempotency_key="k1", feature_global_id="5c1e0a2b-9d3f-4e61-8a7b-0f2c3d4e5a6b",
                  trace_id="t-1", object_id=204, attachment_global_id="a0b1",
                  attachment_id=77, attachment_url="https://h/FeatureServer/0/204/attachments/77",
                  attributes={"asset_type": "hydrant"}, portal_token=TOKEN)
    values.update(overrides)
    return Submission(**values)


def test_token_is_not_in_repr_payload_or_equality():
    """The portal token rides along for the download but is never shown, stored or compared."""
    s = make()
    assert TOKEN not in repr(s)
    payload = s.to_payload()
    assert "portal_token" not in payload and TOKEN not in json.dumps(payload)
    assert s == make(portal_token="another")


def test_payload_round_trip():
    """from_payload(to_payload()) gives the same submission; the token is passed separately."""
    s = make()
    back = Submission.from_payload(json.loads(json.dumps(s.to_payload())), portal_token=TOKEN)
    assert back == s and back.portal_token == TOKEN


def test_unknown_payload_keys_are_ignored():
    """A payload written by a newer version still loads."""
    payload = dict(make().to_payload(), added_later="x")
    assert Submission.from_payload(payload).idempotency_key == "k1"


def test_attributes_are_read_only_copies():
    """Changing the caller's dict afterwards does not change the submission, nor can it be edited."""
    attrs = {"asset_type": "hydrant"}
    s = make(attributes=attrs)
    attrs["asset_type"] = "valve"
    assert s.attributes["asset_type"] == "hydrant"
    with pytest.raises(TypeError):
        s.attributes["x"] = 1  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.trace_id = "other"  # type: ignore[misc]


def test_null_attributes_become_empty():
    """A stored payload with "attributes": null loads with no attributes."""
    payload = dict(make().to_payload(), attributes=None)
    assert dict(Submission.from_payload(payload).attributes) == {}


@pytest.mark.parametrize("overrides, field", [
    ({"idempotency_key": ""}, "idempotency_key"),
    ({"feature_global_id": ""}, "feature_global_id"),
    ({"attributes": ["not", "a", "mapping"]}, "attributes"),
])
def test_invalid_submission_raises_invalid_payload(overrides, field):
    """A submission without its identity, or with malformed attributes, is InvalidPayload."""
    with pytest.raises(InvalidPayload) as info:
        make(**overrides)
    assert info.value.field == field and isinstance(info.value, ValueError)


@pytest.mark.parametrize("payload", [{"trace_id": "t"}, ["k1"], None])
def test_incomplete_or_malformed_stored_payload_is_invalid(payload):
    """A stored payload missing required fields, or not an object at all, is InvalidPayload."""
    with pytest.raises(InvalidPayload):
        Submission.from_payload(payload)  # type: ignore[arg-type]


def test_submissions_are_hashable_and_compare_field_wise():
    """A Submission can go in a set; equal ones hash alike and differing fields stay unequal."""
    a = Submission(idempotency_key="k", feature_global_id="f", trace_id="t",
                   attributes={"crew": "n2"})
    b = Submission(idempotency_key="k", feature_global_id="f", trace_id="t",
                   attributes={"crew": "n2"})
    c = Submission(idempotency_key="k", feature_global_id="f", trace_id="t",
                   attributes={"crew": "s1"})
    assert hash(a) == hash(b) and len({a, b}) == 1
    assert a != c and len({a, c}) == 2


def test_payload_holds_every_field_but_the_token_with_plain_attributes():
    """Every dataclass field but the token, in declaration order; attributes as a plain dict
    (JSON-ready, and a copy: changing it leaves the submission alone)."""
    s = make()
    payload = s.to_payload()
    assert list(payload) == [f.name for f in dataclasses.fields(Submission)
                             if f.name != "portal_token"]
    assert type(payload["attributes"]) is dict and payload["attributes"] == {"asset_type": "hydrant"}
    payload["attributes"]["asset_type"] = "valve"
    assert s.attributes["asset_type"] == "hydrant"
    assert {k: v for k, v in payload.items() if k != "attributes"} == {
        f.name: getattr(s, f.name) for f in dataclasses.fields(Submission)
        if f.name not in ("portal_token", "attributes")}


