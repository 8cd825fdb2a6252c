"""Awkward text and numbers at the store edge: the same outcome on every backend (contract tests)."""
from __future__ import annotations

import json

import pytest

from fme_ai_resilience.core.errors import ErrorClass, FailureClass, StoreError
from fme_ai_resilience.core.ledger import FormatAnomaly, RegisterOutcome, Status
from fme_ai_resilience.store.text import clean_json, clean_text, needs_cleaning
from fme_ai_resilience.core.intake.submission import Submission

T0 = 1_790_000_000.0
#: Text no driver can store as it is: a NUL, a lone high and a lone low surrogate.
AWKWARD = "a\x00b\ud83dc\udc00d"
#: What the store keeps instead.
STORED = "a\ufffdb\ufffdc\ufffdd"


def sub(key: str, **extra) -> Submission:
    return Submission(idempotency_key=key, feature_global_id=f"F-{key}", trace_id=f"trace-{key}",
                      **extra)


def claimed(store, key):
    assert store.register(sub(key), 10, now=T0).outcome is RegisterOutcome.NEW
    (task,) = store.claim("engine", 1, 60, now=T0)
    return task


# -- the helpers -----------------------------------------------------------------------------

def test_clean_text_replaces_nul_and_lone_surrogates_keeps_pairs():
    """NUL and each unpaired surrogate become U+FFFD; a surrogate pair becomes its character."""
    assert clean_text(AWKWARD) == STORED
    assert clean_text("x\ud83d\ude00y") == "x\U0001f600y"
    assert clean_text("plain é ✓") == "plain é ✓"


def test_clean_json_cleans_keys_and_values_at_any_depth():
    """Strings inside JSON-ready values, keys included, are cleaned; other values stay."""
    value = {"k\x00": [AWKWARD, {"n": 1, "t": True, "x": None}], "f": 1.5}
    assert clean_json(value) == {"k\ufffd": [STORED, {"n": 1, "t": True, "x": None}], "f": 1.5}


def test_needs_cleaning_finds_nul_escapes_and_raw_surrogates_in_json_text():
    """What json.dumps writes for a NUL (an escape) or a lone surrogate (raw, ensure_ascii
    off) is found; clean text, a surrogate pair's character and escaped backslashes are not."""
    def dumps(value):
        return json.dumps(value, ensure_ascii=False)

    assert needs_cleaning(dumps({"a": "x\x00y"}))
    assert needs_cleaning(dumps({"a": "broken \ud83d"}))
    assert needs_cleaning(dumps({"k\udc00": 1}))
    assert not needs_cleaning(dumps({"a": "plain", "b": "é ✓ \U0001f600"}))
    assert not needs_cleaning(dumps({"a": "back\\slash"}))


# -- every backend ---------------------------------------------------------------------------

def test_register_with_awkward_text_stores_it_readably(store):
    """A payload with NUL and lone surrogates registers on every backend, stored cleaned."""
    attrs = json.loads('{"notes": "broken emoji \\ud83d", "nul": "x\\u0000y"}')
    outcome = store.register(sub("k1", attributes=attrs), 10, now=T0)
    assert outcome.outcome is RegisterOutcome.NEW
    payload = store.get("k1").payload
    assert payload["attributes"] == {"notes": "broken emoji \ufffd", "nul": "x\ufffdy"}


def test_record_dead_letter_with_awkward_text(store):
    """Evidence with NUL and lone surrogates in payload and error is kept, cleaned."""
    assert store.record_dead_letter("h1", {"body": AWKWARD}, FailureClass.INVALID_PAYLOAD, AWKWARD,
                                    now=T0)
    record = store.get("h1")
    assert (record.status, record.payload, record.last_error) == (
        Status.DEAD, {"body": STORED}, STORED)


def test_fail_with_awkward_error_text_moves_the_task(store):
    """fail() with NUL in the error text leaves the task FAILED, never stuck PROCESSING."""
    task = claimed(store, "k")
    assert store.fail("k", task.lease_token, ErrorClass.SERVER_ERROR, AWKWARD, T0 + 5, now=T0)
    record = store.get("k")
    assert (record.status, record.last_error) == (Status.FAILED, STORED)


def test_bury_with_awkward_error_text(store):
    """bury() with NUL and lone surrogates in the error text buries, text cleaned."""
    task = claimed(store, "k")
    assert store.bury("k", task.lease_token, FailureClass.FORMAT, AWKWARD, now=T0)
    record = store.get("k")
    assert (record.status, record.last_error) == (Status.DEAD, STORED)


def test_record_anomaly_with_awkward_text(store):
    """An anomaly with awkward excerpt, errors and model version is stored and read back."""
    store.record_anomaly(FormatAnomaly(provider="p", observed_at=T0, errors=(AWKWARD,),
                                       excerpt=AWKWARD, model_version=AWKWARD))
    (anomaly,) = store.recent_anomalies(T0)
    assert (anomaly.errors, anomaly.excerpt, anomaly.model_version) == (
        (STORED,), STORED, STORED)


def test_set_config_with_awkward_text(store):
    """Settings with awkward names and values are stored cleaned and read back."""
    store.set_config({f"name{AWKWARD}": AWKWARD}, now=T0)
    assert store.get_config() == {f"name{STORED}": STORED}


def test_awkward_key_reads_back_under_the_same_key(store):
    """A key with a NUL is stored cleaned, and the same awkward key finds the row again."""
    store.register(sub("k\x00"), 10, now=T0)
    assert store.get("k\x00").key == "k\ufffd"


def test_huge_backlog_ceiling_is_no_limit(store):
    """A backlog ceiling past the 64-bit range behaves as no limit, never OverflowError."""
    assert store.register(sub("k"), 10 ** 20, now=T0).outcome is RegisterOutcome.NEW
    assert store.register(sub("p"), 0, now=T0, park_ceiling=10 ** 20).outcome \
        is RegisterOutcome.PARKED
    assert store.backlog(limit=10 ** 20) == 2
    assert sorted(t.key for t in store.claim("e", 10 ** 20, 60, now=T0)) == ["k", "p"]


def test_huge_integer_parameter_is_a_store_error(store):
    """A lease token past the 64-bit range comes out as StoreError, not OverflowError."""
    claimed(store, "k")
    with pytest.raises(StoreError):
        store.fail("k", 10 ** 20, ErrorClass.SERVER_ERROR, "x", T0, now=T0)
    assert store.get("k").status is Status.PROCESSING
