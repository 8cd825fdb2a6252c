"""Idempotency keys: stable per business fact, blind to delivery details."""
from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fme_ai_resilience.core.errors import InvalidPayload
from fme_ai_resilience.core.intake.keys import (UNKNOWN_ATTACHMENTS, as_trace_id, body_key,
                                                edit_marker, idempotency_key, normalise_global_id,
                                                trace_id_for)

FEATURE = "{5C1E0A2B-9D3F-4E61-8A7B-0F2C3D4E5A6B}"
PHOTO = "{A0B1C2D3-E4F5-4A6B-8C7D-9E0F1A2B3C4D}"


@pytest.mark.parametrize("raw", [
    FEATURE, FEATURE.lower(), FEATURE.strip("{}"), FEATURE.strip("{}").lower(),
    " " + FEATURE + " ", FEATURE.strip("{}").replace("-", ""),
])
def test_global_id_forms_normalise_to_one(raw):
    """Braces, case, hyphens and surrounding blanks do not change a GlobalID."""
    assert normalise_global_id(raw) == "5c1e0a2b-9d3f-4e61-8a7b-0f2c3d4e5a6b"


@pytest.mark.parametrize("raw", ["", "not-a-guid", "{5C1E0A2B}", 42, None, "{" + "g" * 32 + "}"])
def test_non_guid_is_invalid_payload_naming_the_field(raw):
    """Anything but a GUID is refused with the field named."""
    with pytest.raises(InvalidPayload) as info:
        normalise_global_id(raw, field="feature.attributes.globalid")
    assert info.value.field == "feature.attributes.globalid"


def test_same_fact_same_key_whatever_the_spelling():
    """Upper- and lower-case, braced or not: the same photo has the same key."""
    assert idempotency_key(FEATURE, PHOTO) == idempotency_key(FEATURE.lower().strip("{}"),
                                                              PHOTO.lower())


def test_different_photos_of_one_feature_have_different_keys():
    """Two photos of one feature are two business facts."""
    other = "{B0B1C2D3-E4F5-4A6B-8C7D-9E0F1A2B3C4D}"
    assert idempotency_key(FEATURE, PHOTO) != idempotency_key(FEATURE, other)


def test_unknown_attachment_list_gets_a_marker_key():
    """Without an attachment GlobalID the key is the feature plus the unknown-list marker."""
    key = idempotency_key(FEATURE)
    assert key.endswith("/" + UNKNOWN_ATTACHMENTS)
    assert key != idempotency_key(FEATURE, PHOTO)


def test_edit_marker_follows_the_edit_content_not_key_order():
    """The same edit gives the same marker; different values give a different one."""
    a = edit_marker({"condition": "ok", "crew": "n2"})
    assert a == edit_marker({"crew": "n2", "condition": "ok"})
    assert a != edit_marker({"condition": "damaged", "crew": "n2"})
    assert a.startswith("edit-")


def test_edit_key_differs_from_add_key():
    """An editData fact is not the addData fact of the same photo."""
    marker = edit_marker({"condition": "ok"})
    assert idempotency_key(FEATURE, PHOTO, marker) != idempotency_key(FEATURE, PHOTO)
    assert idempotency_key(FEATURE, PHOTO, marker).endswith("@" + marker)


def test_body_key_is_the_sha256_of_the_body():
    """The dead letter of an unparseable body is keyed by its hash."""
    assert body_key(b"abc") == (
        "body:sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")


def test_trace_id_is_stable_per_key():
    """A fact keeps one trace id across redeliveries, and it is a W3C trace id (32 hex)."""
    key = idempotency_key(FEATURE, PHOTO)
    assert trace_id_for(key) == trace_id_for(key)
    assert trace_id_for(key) != trace_id_for(idempotency_key(FEATURE))
    assert re.fullmatch("[0-9a-f]{32}", trace_id_for(key)) and trace_id_for(key) != "0" * 32
    assert trace_id_for(key) == hashlib.sha256(key.encode()).hexdigest()[:32]


@pytest.mark.parametrize("value, expected", [
    ("4bf92f3577b34da6a3ce929d0e0e4736", "4bf92f3577b34da6a3ce929d0e0e4736"),
    ("4BF92F35-77B3-4DA6-A3CE-929D0E0E4736", "4bf92f3577b34da6a3ce929d0e0e4736"),
    ("task:abc", hashlib.sha256(b"task:abc").hexdigest()[:32]),
    ("0" * 32, hashlib.sha256(b"0" * 32).hexdigest()[:32])])
def test_as_trace_id_keeps_w3c_ids_and_derives_the_rest(value, expected):
    """A W3C trace id stays as it is, a UUID keeps its digits, anything else is derived."""
    assert as_trace_id(value) == expected


def _by_pattern(value):
    """The GlobalID the pattern alone makes of ``value`` (the reference for the shortcut)."""
    from fme_ai_resilience.core.intake.keys import _GUID

    match = _GUID.match(value.strip())
    return None if match is None else "-".join(match.groups()).lower()


_GUID_TEXT = st.lists(st.sampled_from(list("0123456789abcdefABCDEF-{} gG_+x\u0660\uff10\t")),
                      min_size=30, max_size=40).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.one_of(_GUID_TEXT, st.uuids().map(str), st.uuids().map(lambda u: "{%s}" % str(u).upper()),
                 st.builds(lambda u, i, c: str(u)[:i] + c + str(u)[i + 1:], st.uuids(),
                           st.integers(0, 35), st.sampled_from(list("-xg {}_\u0660")))))
def test_every_spelling_normalises_as_the_pattern_says(value):
    """The shortcut for the usual spelling answers as the GUID pattern: same id, or refused."""
    expected = _by_pattern(value)
    if expected is None:
        with pytest.raises(InvalidPayload):
            normalise_global_id(value)
    else:
        assert normalise_global_id(value) == expected
