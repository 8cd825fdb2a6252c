"""Bounded JSON decoding: any value within the limits, and no body can exhaust stack or floats."""
from __future__ import annotations

import pytest

from fme_ai_resilience.core.errors import InvalidPayload
from fme_ai_resilience.core.text.untrusted_json import (MAX_INT_DIGITS, cut_short, decode_object,
                                                        decode_value, deeper_than)


@pytest.mark.parametrize("text, value", [
    ('{"a": [1, 2.5, "x", null, true]}', {"a": [1, 2.5, "x", None, True]}),
    ("[1, 2]", [1, 2]), ('"text"', "text"), ("0.5", 0.5), (b"\xef\xbb\xbf[]", [])])
def test_decode_value_reads_any_json_value(text, value):
    """An answer may be any JSON value: object, array, string or number."""
    assert decode_value(text, max_bytes=1000, max_depth=8) == value


@pytest.mark.parametrize("text, reason", [
    ("[" * 100_000 + "]" * 100_000, "nesting deeper than 64"),
    ('{"c": 1e400}', "out of range"), ('{"c": -1e400}', "out of range"),
    ('{"c": 1' + "0" * 400 + "}", "out of range"), ("[NaN]", "not a JSON number"),
    ("", "empty"), ("[1,", "not JSON"), (b"\xff[]", "not UTF-8")])
def test_decode_value_refuses_hostile_bodies_with_invalid_payload(text, reason):
    """Deep nesting, numbers no float holds and broken text are InvalidPayload, nothing else."""
    with pytest.raises(InvalidPayload, match=reason):
        decode_value(text, max_bytes=10 ** 6, max_depth=64)


def test_the_largest_integer_a_float_holds_is_read():
    """An integer of MAX_INT_DIGITS digits is still a number; one more digit is refused."""
    assert decode_value("9" * MAX_INT_DIGITS, max_bytes=1000, max_depth=1) == int("9" * 308)
    with pytest.raises(InvalidPayload, match="out of range"):
        decode_object('{"n": %s}' % ("9" * (MAX_INT_DIGITS + 1)), max_bytes=1000, max_depth=4)


def test_decode_value_keeps_the_size_limit():
    """A body over max_bytes is refused before it is decoded."""
    with pytest.raises(InvalidPayload, match="over the limit"):
        decode_value("[" + "1," * 600 + "1]", max_bytes=1000, max_depth=4)


def test_deeper_than_walks_any_depth_without_recursion():
    """A decoded value 100,000 levels deep is measured, not recursed into."""
    value = None
    for _ in range(100_000):
        value = [value]
    assert deeper_than(value, 64)
    assert not deeper_than({"a": [{"b": []}]}, 4) and deeper_than({"a": [{"b": []}]}, 3)
    assert not deeper_than("text", 0) and deeper_than([], 0)


@pytest.mark.parametrize("text, cut", [
    ('{"condition": "fair", "confid', True), ('{"a": [1, 2', True), ('{"a": tru', True),
    ('"unterminated', True), ('{"a": "q\\"', True), ('  [{"a": 1}, {"b"', True),
    ('{"a": 1}', False), ('{"a": 1}}', False), ('{"a" 1}', False), ('<html>', False),
    ("", False), ("12", False), ('{"a": 1} trailing', False), ('{"a": ]', False),
])
def test_cut_short_tells_a_json_cut_in_transit_from_text_that_is_no_json(text, cut):
    """An object, array or string that ends before it is whole was cut short; a whole value,
    a mismatched bracket or text that opens no JSON value was not."""
    assert cut_short(text) is cut
