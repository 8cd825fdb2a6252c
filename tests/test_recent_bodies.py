"""RecentBodies: a redelivery of the same bytes is answered from the parse already made."""
from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fme_ai_resilience.errors import ConfigurationError, InvalidPayload
from fme_ai_resilience.recent_bodies import MAX_BODY_BYTES, RecentBodies
from fme_ai_resilience.survey123 import parse_webhook

DATA = Path(__file__).resolve().parent / "data"
BODY = (DATA / "survey123_add.json").read_bytes()
REPEATS = (DATA / "survey123_repeats.json").read_bytes()
TOKEN = "PORTAL-TOKEN-7f3a9c1e5b2d4a6f8e0c"
H = {"X-Survey123-Event": "addData", "X-Survey123-Delivery": "d-1"}


class Counting:
    """parse_webhook, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return parse_webhook(*args, **kwargs)


def other_body(n: int) -> bytes:
    """A distinct valid body (its own feature and photo)."""
    data = json.loads(BODY)
    data["feature"]["attributes"]["globalid"] = "{%08X-9D3F-4E61-8A7B-0F2C3D4E5A6B}" % n
    data["feature"]["attachments"]["photo"][0]["globalId"] = (
        "{%08X-E4F5-4A6B-8C7D-9E0F1A2B3C4D}" % n)
    return json.dumps(data).encode()


def test_the_same_bytes_are_parsed_once():
    """A second delivery of the same body is answered from memory, equal to a fresh parse."""
    parser, memo = Counting(), RecentBodies(8, 60.0)
    first = memo.parse(REPEATS, H, 100.0, parser=parser)
    again = memo.parse(REPEATS, H, 110.0, parser=parser)
    assert parser.calls == 1 and (memo.hits, memo.misses) == (1, 1)
    assert again == first == parse_webhook(REPEATS, H)
    assert [s.portal_token for s in again] == [TOKEN] * len(again)


def test_text_and_bytes_of_the_same_body_share_an_entry():
    """A body given as text is keyed by the bytes the parser reads, so it meets its bytes twin."""
    parser, memo = Counting(), RecentBodies(8, 60.0)
    memo.parse(BODY, H, 0.0, parser=parser)
    assert memo.parse(BODY.decode("utf-8"), H, 1.0, parser=parser) == parse_webhook(BODY, H)
    assert parser.calls == 1


@pytest.mark.parametrize("change", [
    {"headers": {"X-Survey123-Event": "editData"}},
    {"headers": {}},
    {"max_bytes": 10 ** 6 + 1},
    {"max_depth": 31},
    {"max_attachments": 199},
    {"asset_type_field": "asset_id"},
])
def test_a_different_event_header_or_limit_is_parsed_again(change):
    """The event header and every parse limit are part of the key: changing one misses."""
    parser, memo = Counting(), RecentBodies(8, 60.0)
    base = {"headers": {"X-Survey123-Event": "addData"}, "max_bytes": 10 ** 6, "max_depth": 32,
            "max_attachments": 200, "asset_type_field": "asset_type"}
    memo.parse(BODY, now=0.0, parser=parser, **base)
    changed = dict(base, **change)
    got = memo.parse(BODY, now=1.0, parser=parser, **changed)
    assert parser.calls == 2
    headers = changed.pop("headers")
    assert got == parse_webhook(BODY, headers, **changed)


def test_the_event_header_is_matched_without_case():
    """The memo reads the event header as the parser does (any case of the name)."""
    parser, memo = Counting(), RecentBodies(8, 60.0)
    body = BODY.replace(b'"eventType": "addData",', b"")
    memo.parse(body, {"X-Survey123-Event": "editData"}, 0.0, parser=parser)
    got = memo.parse(body, {"x-survey123-event": "editData"}, 1.0, parser=parser)
    assert parser.calls == 1 and got[0].event_type == "editData"
    assert memo.parse(body, {"x-survey123-event": "addData"}, 2.0, parser=parser)[0].event_type \
        == "addData"
    assert parser.calls == 2


def test_an_entry_is_used_up_to_max_age_and_not_after():
    """An entry parsed at t is used until t + max_age_s on the caller's clock, then re-parsed."""
    parser, memo = Counting(), RecentBodies(8, 60.0)
    memo.parse(BODY, H, 1000.0, parser=parser)
    memo.parse(BODY, H, 1060.0, parser=parser)
    assert parser.calls == 1
    memo.parse(BODY, H, 1060.5, parser=parser)
    assert parser.calls == 2
    memo.parse(BODY, H, 1061.0, parser=parser)  # the re-parse starts a new age
    assert parser.calls == 2


def test_a_hit_does_not_extend_an_entrys_age():
    """Redeliveries keep an entry warm in the LRU order, never past its age limit."""
    parser, memo = Counting(), RecentBodies(8, 60.0)
    for now in (0.0, 30.0, 59.0):
        memo.parse(BODY, H, now, parser=parser)
    memo.parse(BODY, H, 61.0, parser=parser)
    assert parser.calls == 2


def test_an_entry_from_the_future_is_not_used():
    """A clock that went back never uses an entry it appears to have parsed later."""
    parser, memo = Counting(), RecentBodies(8, 60.0)
    memo.parse(BODY, H, 1000.0, parser=parser)
    memo.parse(BODY, H, 990.0, parser=parser)
    assert parser.calls == 2


def test_expired_entries_are_dropped_by_a_later_call():
    """Portal tokens are not kept past max_age_s: the next call after expiry drops the entries."""
    memo = RecentBodies(8, 60.0)
    for n in range(3):
        memo.parse(other_body(n), H, float(n), parser=parse_webhook)
    assert len(memo) == 3
    memo.parse(other_body(9), H, 200.0, parser=parse_webhook)
    assert len(memo) == 1


def test_the_least_recently_used_body_is_evicted_at_size():
    """At most ``size`` bodies are kept; the one least recently used goes first."""
    parser, memo = Counting(), RecentBodies(2, 600.0)
    a, b, c = other_body(1), other_body(2), other_body(3)
    memo.parse(a, H, 0.0, parser=parser)
    memo.parse(b, H, 1.0, parser=parser)
    memo.parse(a, H, 2.0, parser=parser)  # a is now the most recently used
    memo.parse(c, H, 3.0, parser=parser)  # evicts b
    assert len(memo) == 2 and parser.calls == 3
    memo.parse(a, H, 4.0, parser=parser)
    assert parser.calls == 3
    memo.parse(b, H, 5.0, parser=parser)
    assert parser.calls == 4


def test_the_raw_bytes_of_all_entries_are_bounded():
    """Entries also fit ``max_total_bytes`` between them; a body over it is never kept."""
    memo = RecentBodies(100, 600.0, max_total_bytes=2 * len(BODY) + 10)
    for n in range(5):
        memo.parse(other_body(n), H, 0.0, parser=parse_webhook)
    assert len(memo) == 2
    small = RecentBodies(100, 600.0, max_total_bytes=len(BODY) - 1)
    parser = Counting()
    small.parse(BODY, H, 0.0, parser=parser)
    small.parse(BODY, H, 0.0, parser=parser)
    assert parser.calls == 2 and len(small) == 0


def test_size_zero_turns_it_off():
    """With size 0 every body is parsed and nothing is kept."""
    parser, memo = Counting(), RecentBodies(0, 60.0)
    for now in (0.0, 1.0):
        assert memo.parse(BODY, H, now, parser=parser) == parse_webhook(BODY, H)
    assert parser.calls == 2 and len(memo) == 0


def test_invalid_bodies_are_not_remembered():
    """A refused body is parsed, and refused, every time it comes."""
    parser, memo = Counting(), RecentBodies(8, 60.0)
    for now in (0.0, 1.0):
        with pytest.raises(InvalidPayload):
            memo.parse(b'{"feature": 1}', H, now, parser=parser)
    assert parser.calls == 2 and len(memo) == 0


def test_a_body_over_max_bytes_is_refused_without_being_hashed_or_kept():
    """The size limit still refuses; the memo never keeps what the parser refuses."""
    memo = RecentBodies(8, 60.0)
    with pytest.raises(InvalidPayload, match="over the limit"):
        memo.parse(BODY, H, 0.0, max_bytes=100)
    assert len(memo) == 0


def test_a_body_over_the_per_entry_cap_is_parsed_every_time():
    """A valid body larger than MAX_BODY_BYTES is never kept: it would hold many times its size
    in decoded submissions."""
    data = json.loads(BODY)
    data["feature"]["attributes"]["notes"] = "x" * MAX_BODY_BYTES
    big = json.dumps(data).encode()
    parser, memo = Counting(), RecentBodies(8, 60.0)
    for now in (0.0, 1.0):
        assert memo.parse(big, H, now, parser=parser) == parse_webhook(big, H)
    assert parser.calls == 2 and len(memo) == 0


def test_event_header_bytes_count_toward_the_total():
    """A body carrying its own eventType under ever new header values makes new entries; the
    header bytes are counted, so the total bound still holds."""
    body = json.dumps(dict(json.loads(BODY), eventType="addData")).encode()
    header = "x" * 2000
    memo = RecentBodies(512, 60.0, max_total_bytes=10 * (len(body) + len(header)))
    for n in range(40):
        memo.parse(body, {"X-Survey123-Event": header + str(n)}, float(n))
    assert len(memo) <= 10


def test_expire_drops_old_entries_without_a_parse():
    """expire(now) takes what has passed max_age (tokens with it); a fresh entry stays."""
    memo = RecentBodies(8, 60.0)
    memo.parse(BODY, H, 0.0)
    memo.parse(other_body(1), H, 50.0)
    memo.expire(55.0)
    assert len(memo) == 2
    memo.expire(61.0)
    assert len(memo) == 1
    memo.expire(200.0)
    assert len(memo) == 0


def test_calls_that_bypass_it_still_expire_old_entries():
    """A decoded body is parsed without the memo, but the call still sweeps it."""
    memo = RecentBodies(8, 60.0)
    memo.parse(BODY, H, 0.0)
    memo.parse(json.loads(BODY), H, 3600.0)
    assert len(memo) == 0


def test_a_clock_going_back_drops_entries_stamped_later():
    """After the clock steps back, entries parsed "in the future" go at the next call."""
    memo = RecentBodies(8, 600.0)
    memo.parse(BODY, H, 3600.0)
    memo.expire(599.0)
    assert len(memo) == 0


def test_another_parser_never_gets_this_parsers_answer():
    """The parser is part of the key."""
    first, second = Counting(), Counting()
    memo = RecentBodies(8, 60.0)
    memo.parse(BODY, H, 0.0, parser=first)
    memo.parse(BODY, H, 1.0, parser=second)
    assert (first.calls, second.calls) == (1, 1)


def test_decoded_objects_bypass_it():
    """A body passed as an object (already decoded) is parsed every time and never kept."""
    parser, memo = Counting(), RecentBodies(8, 60.0)
    data = json.loads(BODY)
    memo.parse(data, H, 0.0, parser=parser)
    memo.parse(data, H, 1.0, parser=parser)
    assert parser.calls == 2 and len(memo) == 0


def test_a_hit_is_bound_to_the_new_delivery_id():
    """The delivery id is not part of the key: a redelivery gets its own id on every photo."""
    memo = RecentBodies(8, 60.0)
    first = memo.parse(REPEATS, H, 0.0)
    second = memo.parse(REPEATS, dict(H, **{"X-Survey123-Delivery": "d-2"}), 1.0)
    assert {s.delivery_id for s in first} == {"d-1"}
    assert {s.delivery_id for s in second} == {"d-2"}
    assert second == parse_webhook(REPEATS, dict(H, **{"X-Survey123-Delivery": "d-2"}))
    without = memo.parse(REPEATS, {"X-Survey123-Event": "addData"}, 2.0)
    assert {s.delivery_id for s in without} == {None} and memo.hits == 2
    same = memo.parse(REPEATS, H, 3.0)
    assert all(a is b for a, b in zip(same, first))  # same id: the very same submissions


def test_repr_shows_counts_never_the_token():
    """repr gives the bounds and counts; no token, body or key."""
    memo = RecentBodies(8, 60.0)
    memo.parse(BODY, H, 0.0)
    memo.parse(BODY, H, 1.0)
    text = repr(memo)
    assert TOKEN not in text and "5c1e0a2b" not in text.lower()
    assert text == "RecentBodies(size=8, max_age_s=60, entries=1, hits=1, misses=1)"


def test_clear_forgets_everything():
    """clear() drops every entry (and so every portal token held)."""
    parser, memo = Counting(), RecentBodies(8, 60.0)
    memo.parse(BODY, H, 0.0, parser=parser)
    memo.clear()
    assert len(memo) == 0
    memo.parse(BODY, H, 1.0, parser=parser)
    assert parser.calls == 2


@pytest.mark.parametrize("size, age, total", [
    (-1, 60.0, 1), (1.5, 60.0, 1), (True, 60.0, 1), (8, 0.0, 1), (8, float("inf"), 1),
    (8, float("nan"), 1), (8, 60.0, 0), (8, "60", 1)])
def test_bad_bounds_are_refused(size, age, total):
    """A negative or fractional size, a non-positive or infinite age, no byte room: refused."""
    with pytest.raises(ConfigurationError):
        RecentBodies(size, age, max_total_bytes=total)


def test_threads_share_it_safely():
    """Many threads parsing a few bodies through one memo all get the right submissions."""
    memo = RecentBodies(3, 600.0)
    bodies = [other_body(n) for n in range(5)]
    expected = [parse_webhook(b, H) for b in bodies]
    failures = []

    def work(seed: int) -> None:
        for i in range(200):
            n = (seed + i) % len(bodies)
            if memo.parse(bodies[n], H, float(i)) != expected[n]:
                failures.append(n)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures and len(memo) <= 3


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([None, "d-1", "d-2"]),
                          st.sampled_from(["addData", "editData", None]),
                          st.floats(0, 50)), min_size=1, max_size=25),
       st.integers(0, 3))
def test_answers_are_always_those_of_a_fresh_parse(steps, size):
    """Whatever the sequence of bodies, headers and times, the memo answers as the parser."""
    bodies = [other_body(n) for n in range(3)] + [b'{"feature": {}}']
    memo = RecentBodies(size, 30.0)
    now = 0.0
    for n, delivery, event, step in steps:
        now += step
        headers = {k: v for k, v in (("X-Survey123-Delivery", delivery),
                                     ("X-Survey123-Event", event)) if v is not None}
        try:
            expected = parse_webhook(bodies[n], headers)
        except InvalidPayload as exc:
            with pytest.raises(InvalidPayload, match=re.escape(str(exc))):
                memo.parse(bodies[n], headers, now)
            continue
        got = memo.parse(bodies[n], headers, now)
        assert got == expected
        assert [s.delivery_id for s in got] == [s.delivery_id for s in expected]
    assert len(memo) <= size
