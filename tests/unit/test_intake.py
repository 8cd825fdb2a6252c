"""The intake decision: the status contract over a real ledger (SQLite; PostgreSQL where noted)."""
from __future__ import annotations

import json
import logging

import pytest

from fme_ai_resilience.core.errors import FailureClass
from fme_ai_resilience.services.flow.client import FlowHealth
from fme_ai_resilience.services.intake.webhook import IntakeAnswer, receive
from fme_ai_resilience.core.ledger import RegisterOutcome, Status, TaskOutcome
from fme_ai_resilience.core.intake.keys import body_key, trace_id_for
from fme_ai_resilience.core.config.settings import IntakeSettings, Settings
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission

from helpers import DATA


BODY = (DATA / "survey123_add.json").read_bytes()
TOKEN = "PORTAL-TOKEN-7f3a9c1e5b2d4a6f8e0c"
FEATURE = "5c1e0a2b-9d3f-4e61-8a7b-0f2c3d4e5a6b"
KEY = f"{FEATURE}/a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d"
H = {"Content-Type": "application/json", "X-Survey123-Event": "addData"}


@pytest.fixture
def ledger():
    s = open_store("sqlite:///:memory:", init_schema=True)
    yield s
    s.close()


def settings(**intake) -> Settings:
    return Settings(intake=IntakeSettings(**intake))


def hdr(delivery: str) -> dict:
    return dict(H, **{"X-Survey123-Delivery": delivery})


def body_with_photos(n: int, feature: str = "{5C1E0A2B-9D3F-4E61-8A7B-0F2C3D4E5A6B}") -> bytes:
    data = json.loads(BODY)
    data["feature"]["attributes"]["globalid"] = feature
    data["feature"]["attachments"]["photo"] = [
        {"globalId": "{%08d-1111-4222-8333-444444444444}" % i, "id": i, "contentType": "image/jpeg",
         "url": f"https://services.example.com/x/FeatureServer/0/204/attachments/{i}"}
        for i in range(n)]
    return json.dumps(data).encode()


def fill(store, n: int, now: float, prefix: str = "filler") -> None:
    """Put ``n`` unrelated PENDING tasks in the ledger."""
    for i in range(n):
        store.register(Submission(idempotency_key=f"{prefix}-{i}", feature_global_id="f",
                                  trace_id="t"), 10 ** 6, now=now)


def finish(store, key: str, now: float) -> None:
    """Claim ``key`` (only it is due) and complete it, as the processor would."""
    (task,) = store.claim("engine", 1, 60.0, now=now)
    assert task.key == key
    assert store.complete(key, task.lease_token, TaskOutcome.ACCEPTED, {"condition": "ok"}, now=now)


def test_first_delivery_is_202_and_pending(store, clock):
    """A new photo answers 202 and leaves one PENDING row without the token (every backend)."""
    decision = receive(BODY, hdr("d1"), Settings(), store=store, now=clock.now())
    assert decision.status_code == 202 and decision.body["status"] == "accepted"
    assert [r.outcome for r in decision.registrations] == [RegisterOutcome.NEW]
    record = store.get(KEY)
    assert record.status is Status.PENDING
    assert record.payload["delivery_id"] == "d1"
    assert record.trace_id == trace_id_for(KEY) and len(record.trace_id) == 32
    assert TOKEN not in json.dumps(dict(record.payload))
    assert json.loads(decision.body_bytes())["submissions"][0]["key"] == KEY


def test_redelivery_202_while_pending_then_200_once_succeeded(ledger, clock):
    """A new delivery id of the same fact is 202 while in progress and 200 once SUCCEEDED."""
    assert receive(BODY, hdr("d1"), Settings(), store=ledger, now=clock.now()).status_code == 202
    again = receive(BODY, hdr("d2"), Settings(), store=ledger, now=clock.now())
    assert again.status_code == 202 and again.body["status"] == "duplicate_in_progress"
    finish(ledger, KEY, clock.now())
    done = receive(BODY, hdr("d3"), Settings(), store=ledger, now=clock.now())
    assert done.status_code == 200 and done.body["status"] == "duplicate_done"
    assert ledger.counts()["SUCCEEDED"] == 1 and sum(ledger.counts().values()) == 1


def test_dead_duplicate_answers_200(ledger, clock):
    """A duplicate of a dead letter is recorded already: 200 (the compensator requeues it)."""
    receive(BODY, hdr("d1"), Settings(), store=ledger, now=clock.now())
    (task,) = ledger.claim("e", 1, 60.0, now=clock.now())
    ledger.bury(KEY, task.lease_token, FailureClass.NOT_FOUND, "photo gone", now=clock.now())
    assert receive(BODY, hdr("d2"), Settings(), store=ledger, now=clock.now()).status_code == 200


def test_invalid_body_is_400_with_a_redacted_dead_letter(ledger, clock, caplog):
    """Garbage answers 400 and a DEAD row keyed by the body hash keeps excerpt and reason."""
    caplog.set_level(logging.DEBUG)
    data = json.loads(BODY)
    del data["feature"]
    raw = json.dumps(data).encode()
    decision = receive(raw, hdr("d9"), Settings(), store=ledger, now=clock.now())
    assert decision.status_code == 400 and decision.body["status"] == "invalid"
    assert "no feature" in decision.body["reason"]
    record = ledger.get(body_key(raw))
    assert record.status is Status.DEAD
    assert record.failure_class is FailureClass.INVALID_PAYLOAD
    assert "no feature" in record.payload["reason"] and record.payload["delivery_id"] == "d9"
    assert "surveyInfo" in record.payload["excerpt"]
    assert record.trace_id == trace_id_for(body_key(raw))   # a W3C trace id, 32 hex
    assert TOKEN not in json.dumps(dict(record.payload)) and TOKEN not in (record.last_error or "")
    assert TOKEN not in caplog.text
    # the same garbage again: still 400, the evidence is kept once
    assert receive(raw, hdr("d10"), Settings(), store=ledger, now=clock.now()).status_code == 400
    assert ledger.counts()["DEAD"] == 1


def test_binary_garbage_is_400_and_storable(ledger, clock):
    """Non-UTF-8 bytes with NULs still leave a dead letter (the excerpt is made storable)."""
    raw = b"\x00\xff\xfe garbage \x00"
    assert receive(raw, {}, Settings(), store=ledger, now=clock.now()).status_code == 400
    assert ledger.get(body_key(raw)).status is Status.DEAD


def test_reject_mode_over_the_watermark_is_429_with_littles_law_retry_after(ledger, clock):
    """Past the watermark in reject mode: 429, nothing stored, Retry-After = excess / drain."""
    now = clock.now()
    fill(ledger, 5, now)
    config = settings(watermark=2, overload_mode="reject")  # planned drain 8/20 = 0.4 task/s
    decision = receive(BODY, hdr("d1"), config, store=ledger, now=now)
    assert decision.status_code == 429 and decision.body["stored"] is False
    assert decision.headers["Retry-After"] == "8"  # (5 - 2) / 0.4 = 7.5 -> 8
    assert decision.retry_after_s == 8 and ledger.get(KEY) is None


def test_retry_after_uses_the_measured_drain_rate_once_there_is_history(ledger, clock):
    """With enough completions in the window the measured rate replaces the planned one."""
    now = clock.now()
    fill(ledger, 30, now - 100, prefix="done")
    for task in ledger.claim("e", 30, 60.0, now=now - 100):
        ledger.complete(task.key, task.lease_token, TaskOutcome.ACCEPTED, {}, now=now - 100)
    fill(ledger, 5, now)
    config = settings(watermark=2, overload_mode="reject", drain_window_s=300.0,
                      drain_min_completions=10)
    decision = receive(BODY, hdr("d1"), config, store=ledger, now=now)
    assert decision.status_code == 429
    assert decision.retry_after_s == 30  # (5 - 2) / (30 / 300 s) = 30 s
    slower = settings(watermark=2, overload_mode="reject", drain_min_completions=31)
    assert receive(BODY, hdr("d2"), slower, store=ledger, now=now).retry_after_s == 8  # planned rate


class _NoFullCounts:
    """A ledger whose whole-table ``counts()`` must not be called; records backlog limits."""

    def __init__(self, store):
        self.store, self.limits = store, []

    def __getattr__(self, name):
        return getattr(self.store, name)

    def counts(self):
        raise AssertionError("intake grouped the whole table by status")

    def backlog(self, limit=None):
        self.limits.append(limit)
        return self.store.backlog(limit)


def test_429_counts_the_backlog_through_the_capped_in_progress_count(store, clock):
    """A 429 measures the backlog with the capped in-progress count, never a whole-table count."""
    now = clock.now()
    fill(store, 5, now)
    ledger = _NoFullCounts(store)
    decision = receive(BODY, hdr("d1"), settings(watermark=2, overload_mode="reject"), store=ledger,
                      now=now)
    assert decision.status_code == 429 and decision.retry_after_s == 8  # (5 - 2) / 0.4
    assert ledger.limits == [2 + 24 * 3600 * 0.4]  # past it Retry-After is 24 h whatever


def test_park_mode_over_the_watermark_is_202_and_deferred(store, clock):
    """Past the watermark in park mode: 202 and the row DEFERRED (every backend)."""
    now = clock.now()
    fill(store, 3, now)
    decision = receive(BODY, hdr("d1"), settings(watermark=2), store=store, now=now)
    assert decision.status_code == 202
    assert decision.registrations[0].outcome is RegisterOutcome.PARKED
    assert store.get(KEY).status is Status.DEFERRED


def test_park_mode_over_the_ceiling_is_429(ledger, clock):
    """Past the park ceiling (rows) even park mode answers 429 with Retry-After."""
    now = clock.now()
    fill(ledger, 6, now)
    decision = receive(BODY, hdr("d1"), settings(watermark=2, park_ceiling=6), store=ledger,
                      now=now)
    assert decision.status_code == 429 and ledger.get(KEY) is None
    assert decision.retry_after_s == 10  # (6 - 2) / 0.4


def test_multi_photo_body_answers_for_the_whole(ledger, clock):
    """202 if any photo is new; 200 only when every photo is done."""
    now = clock.now()
    raw = body_with_photos(3)
    first = receive(raw, hdr("d1"), Settings(), store=ledger, now=now)
    assert first.status_code == 202 and len(first.registrations) == 3
    tasks = ledger.claim("engine", 10, 60.0, now=now)
    assert len(tasks) == 3
    ledger.complete(tasks[0].key, tasks[0].lease_token, TaskOutcome.ACCEPTED, {}, now=now)
    assert receive(raw, hdr("d2"), Settings(), store=ledger, now=now).status_code == 202
    for task in tasks[1:]:
        ledger.complete(task.key, task.lease_token, TaskOutcome.REVIEW, {}, now=now)
    assert receive(raw, hdr("d3"), Settings(), store=ledger, now=now).status_code == 200
    more = body_with_photos(4)  # one photo more than before: it is new
    assert receive(more, hdr("d4"), Settings(), store=ledger, now=now).status_code == 202


def test_a_body_is_never_split_at_the_ceiling(ledger, clock):
    """Photos past the ceiling are parked with the rest of their body, never dropped."""
    now = clock.now()
    fill(ledger, 1, now)
    decision = receive(body_with_photos(3), hdr("d1"),
                      settings(watermark=2, overload_mode="reject"), store=ledger, now=now)
    assert decision.status_code == 202
    statuses = [ledger.get(r.key).status for r in decision.registrations]
    assert statuses == [Status.PENDING, Status.DEFERRED, Status.DEFERRED]


def test_a_body_partly_stored_earlier_is_completed_even_over_the_backlog(ledger, clock):
    """If some photos of a body are already in the ledger, the refused rest is stored too."""
    now = clock.now()
    receive(body_with_photos(1), hdr("d1"), Settings(), store=ledger, now=now)
    fill(ledger, 10, now)
    decision = receive(body_with_photos(2), hdr("d2"),
                      settings(watermark=2, overload_mode="reject"), store=ledger, now=now)
    assert decision.status_code == 202
    assert ledger.get(decision.registrations[1].key).status is Status.DEFERRED


def test_ledger_unreachable_is_503_with_retry_after(clock):
    """A database that cannot be reached answers 503 + Retry-After."""
    down = open_store("sqlite:////nonexistent-dir/ledger.db")
    decision = receive(BODY, hdr("d1"), Settings(), store=down, now=clock.now())
    assert decision.status_code == 503 and decision.retry_after_s >= 1
    assert decision.body["stored"] == []
    assert receive(b"garbage", {}, Settings(), store=down, now=clock.now()).status_code == 503


@pytest.mark.parametrize("mode, stored", [("park", Status.DEFERRED), ("reject", None)])
def test_no_engine_capacity_is_503(ledger, clock, mode, stored):
    """FME Flow without capacity: 503 + Retry-After; park mode still keeps the photo DEFERRED."""
    health = FlowHealth(reachable=True, has_capacity=False, queued=4, engines=2, busy_engines=2)
    decision = receive(BODY, hdr("d1"), settings(overload_mode=mode), store=ledger, now=clock.now(),
                      flow_health=lambda: health)
    assert decision.status_code == 503 and decision.body["status"] == "no_engine_capacity"
    assert decision.retry_after_s == 10  # 4 queued jobs at 0.4 per second
    record = ledger.get(KEY)
    assert (record.status if record else None) is stored


def test_no_engine_capacity_still_answers_duplicates(ledger, clock):
    """A fact already finished answers 200 even while FME Flow is saturated."""
    receive(BODY, hdr("d1"), Settings(), store=ledger, now=clock.now())
    finish(ledger, KEY, clock.now())
    health = FlowHealth(reachable=True, has_capacity=False)
    assert receive(BODY, hdr("d2"), Settings(), store=ledger, now=clock.now(),
                  flow_health=health).status_code == 200


def test_a_failing_health_probe_never_blocks_intake(ledger, clock):
    """An exception from the flow probe is ignored: the ledger takes the work."""
    def broken():
        raise RuntimeError("flow down")
    assert receive(BODY, hdr("d1"), Settings(), store=ledger, now=clock.now(),
                  flow_health=broken).status_code == 202


def test_attachments_unknown_registers_one_flagged_task(ledger, clock):
    """A body without an attachment list registers the feature for queryAttachments."""
    data = json.loads(BODY)
    data["feature"]["attachments"] = None
    decision = receive(json.dumps(data).encode(), hdr("d1"), Settings(), store=ledger,
                      now=clock.now())
    assert decision.status_code == 202
    record = ledger.get(f"{FEATURE}/attachments-unknown")
    assert record.payload["attachments_unknown"] is True


def test_decisions_never_log_the_token(ledger, clock, caplog):
    """No intake path writes the portal token to the log."""
    caplog.set_level(logging.DEBUG)
    receive(BODY, hdr("d1"), Settings(), store=ledger, now=clock.now())
    receive(BODY, hdr("d2"), settings(watermark=1, overload_mode="reject"), store=ledger,
           now=clock.now())
    fill(ledger, 3, clock.now())
    receive(body_with_photos(2, "{11111111-1111-4111-8111-111111111111}"), hdr("d3"),
           settings(watermark=1, overload_mode="reject"), store=ledger, now=clock.now())
    assert TOKEN not in caplog.text


def test_intake_decision_validates_and_freezes():
    """IntakeAnswer refuses a non-HTTP status and exposes read-only headers."""
    with pytest.raises(ValueError):
        IntakeAnswer(42)
    decision = IntakeAnswer(429, {"Retry-After": "3"}, {"status": "x"})
    with pytest.raises(TypeError):
        decision.headers["Retry-After"] = "4"  # type: ignore[index]
    assert IntakeAnswer(202).retry_after_s is None


def test_an_unexpected_parser_failure_is_400_with_a_dead_letter(ledger, clock, caplog,
                                                                  monkeypatch):
    """Any parser exception becomes a 400 with a dead letter and a logged type, never a 500."""
    def broken(*args, **kwargs):
        raise RuntimeError("parser bug " + TOKEN)

    monkeypatch.setattr("fme_ai_resilience.services.intake.webhook.parse_webhook", broken)
    caplog.set_level(logging.DEBUG)
    decision = receive(BODY, hdr("d1"), Settings(), store=ledger, now=clock.now())
    assert decision.status_code == 400 and "RuntimeError" in decision.body["reason"]
    assert ledger.get(body_key(BODY)).status is Status.DEAD
    assert "RuntimeError" in caplog.text and TOKEN not in caplog.text


def test_unlisted_photo_lists_count_toward_the_limit_at_intake(ledger, clock):
    """Repeat records without photo lists cannot make one body create rows past the limit."""
    data = json.loads(BODY)
    data["feature"]["attachments"] = {}
    data["feature"]["repeats"] = {"t": [
        {"attributes": {"globalid": "{%08d-1111-4111-8111-111111111111}" % i}}
        for i in range(14)]}
    raw = json.dumps(data).encode()
    decision = receive(raw, hdr("d1"), settings(max_attachments=10), store=ledger, now=clock.now())
    assert decision.status_code == 400 and "max_attachments" in decision.body["reason"]
    assert ledger.counts().get("PENDING", 0) == 0 and ledger.counts()["DEAD"] == 1


def past_the_hard_ceiling(ledger, now: float, photos: int) -> IntakeAnswer:
    """A body of ``photos`` photos whose first one is already in a ledger past the hard
    ceiling (park ceiling 2 + max_attachments 3, with 11 unfinished tasks)."""
    receive(body_with_photos(1), hdr("d1"), Settings(), store=ledger, now=now)
    fill(ledger, 10, now)
    return receive(body_with_photos(photos), hdr("d2"),
                  settings(watermark=2, park_ceiling=2, max_attachments=3,
                           overload_mode="reject"), store=ledger, now=now)


def test_the_never_split_path_stops_at_a_hard_ceiling(ledger, clock):
    """Refused photos of a partly stored body park only up to park ceiling + max_attachments."""
    decision = past_the_hard_ceiling(ledger, clock.now(), 2)
    assert decision.status_code == 429 and decision.body["stored"] is True
    assert decision.registrations[1].outcome is RegisterOutcome.OVER_BACKLOG
    assert ledger.get(decision.registrations[1].key) is None


def test_the_answer_lists_at_most_fifty_keys_and_counts_them_all(ledger, clock):
    """A large body's 202 lists the first 50 registrations and gives the total count."""
    decision = receive(body_with_photos(60), hdr("d1"), Settings(), store=ledger, now=clock.now())
    body = json.loads(decision.body_bytes())
    assert decision.status_code == 202 and len(decision.registrations) == 60
    assert len(body["submissions"]) == 50 and body["submission_count"] == 60


def test_a_reason_naming_a_body_key_with_a_line_break_is_stored_and_logged_escaped(ledger,
                                                                                   clock, caplog):
    """An invalid body whose error names a key holding a line break cannot forge a log line,
    and its dead letter's reason is escaped too."""
    data = json.loads(BODY)
    data["feature"]["attachments"] = {"photo\n2026 INFO intake: forged": [{"id": 1}]}
    caplog.set_level(logging.DEBUG)
    decision = receive(json.dumps(data).encode(), hdr("d1"), Settings(), store=ledger,
                      now=clock.now())
    assert decision.status_code == 400 and "forged" in decision.body["reason"]
    assert "\n" not in decision.body["reason"]
    assert "\n" not in ledger.get(decision.body["dead_letter"]).payload["reason"]
    assert not [r for r in caplog.records if len(r.getMessage().splitlines()) > 1]


# -- the dead letter of an unparseable body keeps no token -------------------------------------

_T = TOKEN.encode()
UNPARSEABLE_WITH_TOKEN = {
    "truncated, the token echoed in a note first": (
        b'{"feature": {"attributes": {"note": "sent with ' + _T + b'"}}, '
        b'"portalInfo": {"url": "https://www.arcgis.com", "token": "' + _T + b'", "ur'),
    "cut inside the token": b'{"feature": {"attributes": {}}, "portalInfo": {"token": "' + _T[:20],
    "escaped member name, truncated": (
        b'{"portalInfo": {"\\u0074oken": "' + _T + b'"}, "feature": {"note": "' + _T + b'"'),
    "escaped member name, valid JSON": b'{"portalInfo": {"\\u0074ok\\u0065n": "' + _T + b'"}, '
                                       b'"feature": 7}',
    "an escape inside the token": (
        b'{"portalInfo": {"token": "' + _T[:12] + b'\\"' + _T[12:] + b'"}, "feature": {'),
    "form-encoded with the token in free text": (
        b"f=json&token=" + _T + b"&note=please+check+" + _T + b"+again"),
    "a header pasted as text": b"Authorization: Bearer " + _T + b"\nbody lost; it was " + _T,
    "fmetoken": b"X-Auth: fmetoken token=" + _T + b"; copy " + _T,
}


@pytest.mark.parametrize("name", sorted(UNPARSEABLE_WITH_TOKEN))
def test_the_dead_letter_of_an_unparseable_body_keeps_no_token(ledger, clock, caplog, name):
    """Truncated, non-JSON, escaped-name and escaped-value bodies: the stored excerpt and the
    log hold no part of the portal token (scrubbed by pattern and by every value it took)."""
    raw = UNPARSEABLE_WITH_TOKEN[name]
    caplog.set_level(logging.DEBUG)
    decision = receive(raw, hdr("d1"), Settings(), store=ledger, now=clock.now())
    assert decision.status_code == 400
    record = ledger.get(decision.body["dead_letter"])
    stored = json.dumps(record.payload) + (record.last_error or "")
    pieces = {TOKEN[i:i + 10] for i in range(len(TOKEN) - 9)}
    assert not [p for p in pieces if p in stored], record.payload["excerpt"]
    assert not [p for p in pieces if p in caplog.text]
    assert "[REDACTED]" in record.payload["excerpt"]


def test_a_long_unparseable_body_learns_the_token_beyond_the_excerpt(ledger, clock):
    """The token's value is learnt from the whole body, so a mention inside the excerpt is
    scrubbed even when the token member itself lies past the excerpt's end."""
    raw = (b'{"feature": {"attributes": {"note": "' + _T + b'"}, "pad": "' + b"x" * 20000
           + b'"}, "portalInfo": {"token": "' + _T + b'"}, "cut')
    decision = receive(raw, hdr("d1"), Settings(), store=ledger, now=clock.now())
    excerpt = ledger.get(decision.body["dead_letter"]).payload["excerpt"]
    assert TOKEN[:10] not in excerpt and '"note": "[REDACTED]"' in excerpt


# -- junk bodies cannot fill the disk or fake a drain --------------------------------------------

def junk(i: int) -> bytes:
    return b'{"feature": {"attributes": {"globalid": "not-a-guid-%d"}}}' % i


def test_invalid_bodies_are_no_drained_work_for_retry_after(ledger, clock):
    """A flood of distinct invalid bodies leaves Retry-After where the real drain puts it: the
    dead letters are not counted as finished tasks."""
    now = clock.now()
    fill(ledger, 100, now)
    config = settings(watermark=2, overload_mode="reject", drain_window_s=10,
                      drain_min_completions=10)
    before = receive(BODY, hdr("r1"), config, store=ledger, now=now)
    assert before.status_code == 429 and before.retry_after_s == 245  # (100 - 2) / 0.4
    for i in range(60):
        assert receive(junk(i), hdr(f"j{i}"), config, store=ledger, now=now).status_code == 400
    after = receive(BODY, hdr("r2"), config, store=ledger, now=now)
    assert after.status_code == 429 and after.retry_after_s == 245


def test_past_the_dead_letter_bounds_junk_is_still_400_and_counted(ledger, clock):
    """Past intake.max_invalid_per_minute (or max_invalid_total) the sender still gets 400,
    nothing is stored, and the counter says how many bodies were not kept."""
    config = settings(max_invalid_per_minute=4, max_invalid_total=6)
    answers = [receive(junk(i), hdr(f"j{i}"), config, store=ledger, now=clock.now())
               for i in range(7)]
    assert [a.status_code for a in answers] == [400] * 7
    assert [a.body["kept"] for a in answers] == [True] * 4 + [False] * 3
    assert answers[0].body["dead_letter"] == body_key(junk(0))
    assert answers[-1].body["dead_letter"] is None
    clock.advance(61)
    again = [receive(junk(i), hdr(f"k{i}"), config, store=ledger, now=clock.now())
             for i in range(7, 11)]
    assert [a.body["kept"] for a in again] == [True, True, False, False]
    assert ledger.counts()["DEAD"] == 6
    assert ledger.intake_counters()["invalid_not_kept"] == 5


# -- bursts are parked, refusals leave what reconciliation needs ---------------------------------

def feature_gid(i: int) -> str:
    return "{%08X-2222-4333-8444-555555555555}" % i


def test_the_headline_burst_is_stored_whole_with_the_default_settings(ledger, clock):
    """300 phones syncing three-photo surveys at once, default settings: every body is
    answered 202 and all 900 photos are stored (PENDING up to the watermark, DEFERRED after)."""
    answers = [receive(body_with_photos(3, feature_gid(i)), hdr(f"sync-{i}"), Settings(),
                      store=ledger, now=clock.now()) for i in range(300)]
    assert {a.status_code for a in answers} == {202}
    counts = ledger.counts()
    assert counts["PENDING"] == 48 and counts["DEFERRED"] == 852
    assert ledger.refusal_counts() == {}


def test_the_park_ceiling_is_a_number_of_rows_by_default_100000():
    """The park ceiling is a storage limit in rows, not a multiple of the engine watermark."""
    intake = IntakeSettings()
    assert intake.park_ceiling == 100_000 and intake.capacity.watermark == 48
    assert IntakeSettings(engines=80).park_ceiling == 100_000


def test_a_refused_body_leaves_a_record_reconciliation_can_use(ledger, clock, caplog):
    """A 429 that stored nothing leaves a refusal record (feature GlobalID, service and layer
    URL, delivery id, time, reason) and a log line with the same; never the token. A
    redelivery of the same body is counted on the same record."""
    fill(ledger, 5, clock.now())
    config = settings(watermark=2, overload_mode="reject")
    caplog.set_level(logging.INFO)
    first = receive(BODY, hdr("d-first"), config, store=ledger, now=clock.now())
    clock.advance(30)
    again = receive(BODY, hdr("d-again"), config, store=ledger, now=clock.now())
    assert first.status_code == again.status_code == 429
    (refusal,) = ledger.refusals(since=0)
    assert refusal.key == body_key(BODY) and refusal.reason == "over_backlog"
    assert (refusal.status_code, refusal.photos_refused, refusal.photos_stored) == (429, 1, 0)
    assert refusal.feature_global_id == FEATURE and refusal.delivery_id == "d-again"
    assert refusal.service_url.endswith("/FeatureServer") and refusal.layer_url.endswith("/0")
    assert refusal.records == ((refusal.layer_url, FEATURE),)
    assert (refusal.refusals, refusal.first_refused_at, refusal.refused_at) == (
        2, clock.now() - 30, clock.now())
    assert ledger.refusal_counts() == {"over_backlog": {"bodies": 1, "deliveries": 2}}
    assert TOKEN not in repr(refusal) and TOKEN not in caplog.text
    assert any(FEATURE in r.getMessage() and "d-first" in r.getMessage()
               and "FeatureServer/0" in r.getMessage() for r in caplog.records)


def test_no_engine_capacity_in_reject_mode_leaves_a_refusal_record(ledger, clock):
    """A 503 for lack of engines that stored nothing is recorded too, with its reason."""
    health = FlowHealth(reachable=True, has_capacity=False, queued=4, engines=2, busy_engines=2)
    answer = receive(BODY, hdr("d1"), settings(overload_mode="reject"), store=ledger,
                    now=clock.now(), flow_health=health)
    assert answer.status_code == 503
    (refusal,) = ledger.refusals(since=0)
    assert (refusal.reason, refusal.status_code) == ("no_engine_capacity", 503)


def test_photos_refused_past_the_hard_ceiling_are_recorded(ledger, clock):
    """A body partly stored, its rest refused past the hard ceiling: the record counts both."""
    answer = past_the_hard_ceiling(ledger, clock.now(), 3)
    assert answer.status_code == 429 and answer.body["stored"] is True
    (refusal,) = ledger.refusals(since=0)
    assert (refusal.photos_refused, refusal.photos_stored) == (2, 1)


def test_refusal_records_are_bounded_and_the_rest_counted(ledger, clock):
    """Past intake.max_refusal_records distinct refused bodies, refusals are logged and counted,
    not recorded; the records already there keep counting their redeliveries."""
    fill(ledger, 5, clock.now())
    config = settings(watermark=2, overload_mode="reject", max_refusal_records=2)
    for i in range(4):
        assert receive(body_with_photos(1, feature_gid(i)), hdr(f"d{i}"), config, store=ledger,
                      now=clock.now()).status_code == 429
    receive(body_with_photos(1, feature_gid(0)), hdr("again"), config, store=ledger,
           now=clock.now())
    assert len(ledger.refusals(since=0)) == 2
    assert ledger.intake_counters()["refusals_not_recorded"] == 2
    assert ledger.refusal_counts()["over_backlog"] == {"bodies": 2, "deliveries": 3}


SERVICE = "https://services.example.com/abc/arcgis/rest/services/inspection/FeatureServer"
OTHER = "https://gis.example.org/arcgis/rest/services/water/FeatureServer"


def serving(*services) -> Settings:
    return Settings(intake=IntakeSettings(feature_services=services))


def test_a_webhook_for_an_unconfigured_service_is_a_422_dead_letter(ledger, clock, caplog):
    """A body naming a service the deployment does not serve is refused and kept as evidence."""
    caplog.set_level(logging.DEBUG)
    decision = receive(BODY, hdr("d1"), serving(OTHER), store=ledger, now=clock.now())
    assert decision.status_code == 422 and decision.body["status"] == "unknown_service"
    assert decision.body["dead_letter"] == body_key(BODY) and decision.registrations == ()
    assert ledger.get(KEY) is None   # never a task, so never a download
    record = ledger.get(body_key(BODY))
    assert record.status is Status.DEAD and record.failure_class is FailureClass.UNKNOWN_SERVICE
    assert record.payload["service_url"] == SERVICE and record.payload["keys"] == [KEY]
    assert record.trace_id == trace_id_for(body_key(BODY))
    assert not FailureClass.UNKNOWN_SERVICE.requeue_automatically
    assert TOKEN not in json.dumps(dict(record.payload)) and TOKEN not in caplog.text
    again = receive(BODY, hdr("d2"), serving(OTHER), store=ledger, now=clock.now())
    assert again.status_code == 422 and ledger.counts()["DEAD"] == 1


def test_a_foreign_service_body_cannot_take_the_real_facts_key(ledger, clock):
    """A body with real GlobalIDs but another serviceUrl leaves the real photo's key free."""
    data = json.loads(BODY)
    data["surveyInfo"]["serviceUrl"] = ("https://attacker.example/arcgis/rest/services/x/"
                                        "FeatureServer")
    forged = json.dumps(data).encode()
    assert receive(forged, hdr("x"), serving(SERVICE), store=ledger,
                  now=clock.now()).status_code == 422
    real = receive(BODY, hdr("d1"), serving(SERVICE), store=ledger, now=clock.now())
    assert real.status_code == 202 and real.registrations[0].outcome is RegisterOutcome.NEW


def test_a_body_naming_no_service_is_unknown_when_services_are_configured(ledger, clock):
    """With services configured, a body whose service cannot be told is not registered."""
    data = json.loads(BODY)
    del data["surveyInfo"]
    for photo in data["feature"]["attachments"]["photo"]:
        photo.pop("url")
    decision = receive(json.dumps(data), hdr("d1"), serving(SERVICE), store=ledger,
                      now=clock.now())
    assert decision.status_code == 422 and ledger.get(KEY) is None


def test_a_configured_service_is_registered_in_any_spelling(ledger, clock):
    """The configured service, case and trailing slash aside, is registered as usual."""
    decision = receive(BODY, hdr("d1"), serving(SERVICE.upper().replace("HTTPS:", "https:") + "/"),
                      store=ledger, now=clock.now())
    assert decision.status_code == 202 and ledger.get(KEY).status is Status.PENDING


def test_unknown_service_evidence_is_requeued_only_when_forced(store, clock):
    """An UNKNOWN_SERVICE dead letter is no task: requeue skips it unless forced (every backend)."""
    receive(BODY, hdr("d1"), serving(OTHER), store=store, now=clock.now())
    key = body_key(BODY)
    assert store.requeue(keys=[key], now=clock.now()) == 0
    with pytest.raises(ValueError):
        store.requeue(failure_class=FailureClass.UNKNOWN_SERVICE, now=clock.now())
    assert store.get(key).status is Status.DEAD
    assert store.requeue(failure_class=FailureClass.UNKNOWN_SERVICE, force=True,
                         now=clock.now()) == 1
