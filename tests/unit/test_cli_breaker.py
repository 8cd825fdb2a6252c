"""The breaker and degrade commands against a SQLite ledger."""
from __future__ import annotations

import json
import time

import pytest

from fme_ai_resilience.core.resilience.breaker import BreakerMode
from fme_ai_resilience.cli import main
from fme_ai_resilience.core.ledger import CallRecord
from fme_ai_resilience.store import open_store


@pytest.fixture
def db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("FAIR_DB_URL", url)
    with open_store(url, init_schema=True):
        pass
    return url


def run(capsys, *argv):
    """Exit code, stdout and stderr, without the line naming the ledger each command opens
    (``ledger: sqlite file=...``, checked in tests/unit/test_cli_ledger_line.py)."""
    code = main(list(argv))
    out = capsys.readouterr()
    err = out.err
    if err.startswith("ledger: sqlite file="):
        err = err.split("\n", 1)[1]
    return code, out.out, err


def test_open_show_reset_round_trip(db, capsys):
    """open forces the circuit, show reports it, reset returns it to automatic CLOSED."""
    assert run(capsys, "breaker", "open", "--service", "vision", "--create")[0] == 0
    code, out, _ = run(capsys, "breaker", "show", "--json")
    (item,) = json.loads(out)
    assert (item["service"], item["mode"], item["effective"]) == (
        "vision", "FORCED_OPEN", "OPEN (forced)")
    with open_store(db) as store:
        assert store.breaker_get("vision", now=0).mode is BreakerMode.FORCED_OPEN
    code, out, _ = run(capsys, "breaker", "reset", "--service", "vision")
    assert code == 0 and "CLOSED" in out
    code, out, _ = run(capsys, "breaker", "show", "--service", "vision")
    assert "vision: CLOSED (automatic state CLOSED" in out


def test_show_of_an_unknown_service_creates_no_circuit(db, capsys):
    """show --service for a service with no circuit reports it closed and writes nothing."""
    code, out, _ = run(capsys, "breaker", "show", "--service", "visoin")
    assert code == 0 and "visoin: CLOSED (automatic state CLOSED, generation 0" in out
    with open_store(db) as store:
        assert store.breaker_list() == {}


def test_close_and_disable_set_modes(db, capsys):
    """close forces CLOSED; disable keeps metrics only."""
    run(capsys, "breaker", "close", "--service", "vision", "--create")
    run(capsys, "breaker", "disable", "--service", "fallback", "--create")
    with open_store(db) as store:
        rows = store.breaker_list()
    assert rows["vision"].mode is BreakerMode.FORCED_CLOSED
    assert rows["fallback"].mode is BreakerMode.DISABLED


def test_calibrate_suggests_and_applies(db, capsys):
    """calibrate reads the call log, suggests thresholds above the baseline and can store them."""
    now = time.time()
    with open_store(db, init_schema=True) as store:
        for i in range(200):
            store.record_call(CallRecord("vision", now - 3000 + i * 10, 1.0,
                                         None if i % 20 >= 3 else "BAD_FORMAT"))
    code, out, _ = run(capsys, "breaker", "calibrate", "--service", "vision", "--days", "1",
                       "--apply", "--json")
    advice = json.loads(out)
    assert code == 0 and advice["applied"] is True
    assert advice["baseline_failure_p95"] == pytest.approx(0.15)
    assert advice["failure_rate"] == pytest.approx(0.25)
    with open_store(db) as store:
        assert float(store.get_config()["breaker.failure_rate"]) == advice["failure_rate"]


def test_calibrate_refuses_a_history_too_thin_for_a_fleet_wide_threshold(db, capsys):
    """4 calls: no hourly bucket reaches breaker.min_calls, so --apply stores nothing, exits 1
    and says how many calls it needs."""
    now = time.time()
    with open_store(db) as store:
        for i in range(4):
            store.record_call(CallRecord("vision", now - 600 + i, 1.0, None))
    code, out, err = run(capsys, "breaker", "calibrate", "--service", "vision", "--apply")
    assert code == 1 and out == ""
    assert err.startswith("vision: 4 calls in the last 7 days, at most 4 in one hour: ")
    assert "needs at least 20 calls in an hour (breaker.min_calls)" in err
    code, out, _ = run(capsys, "breaker", "calibrate", "--service", "vision", "--apply", "--json")
    advice = json.loads(out)
    assert code == 1 and advice["applied"] is False and advice["buckets"] == 0
    assert (advice["calls_seen"], advice["min_calls"]) == (4, 20)
    with open_store(db) as store:
        assert store.get_config() == {}


def test_calibrate_without_history_exits_1(db, capsys):
    """No calls: the defaults stay, exit code 1."""
    code, _, err = run(capsys, "breaker", "calibrate", "--service", "vision")
    assert code == 1 and "keep the defaults" in err


def test_degrade_set_show_auto(db, capsys):
    """set holds a level, show reports override and computed level, auto clears it."""
    assert run(capsys, "degrade", "set", "L3")[0] == 0
    code, out, _ = run(capsys, "degrade", "show", "--json")
    info = json.loads(out)
    assert (info["level"], info["override"], info["computed"], info["model"]) == (
        "L3", "L3", "L0", "fallback")
    code, out, _ = run(capsys, "degrade", "auto")
    assert out.startswith("L0 normal: automatic")


def test_missing_ledger_is_a_usage_error(tmp_path, monkeypatch, capsys):
    """Without --db or FAIR_DB_URL the command says what is missing and exits 2."""
    monkeypatch.delenv("FAIR_DB_URL", raising=False)
    code, _, err = run(capsys, "breaker", "show")
    assert code == 2 and "no ledger given" in err


def test_bad_level_is_a_clear_error(db, capsys):
    """An unknown level exits 2 with one line naming it."""
    code, _, err = run(capsys, "degrade", "set", "L9")
    assert code == 2 and "level='L9': is not a degradation level (L0-L4)" in err


def _known(db, *services):
    with open_store(db) as store:
        for service in services:
            store.breaker_get(service, now=time.time())


@pytest.mark.parametrize("action", ["open", "close", "disable", "reset"])
def test_steering_a_service_nobody_uses_is_refused(db, capsys, action):
    """A misspelt --service exits 2, names the known circuits and --create, and creates nothing."""
    _known(db, "vision")
    code, out, err = run(capsys, "breaker", action, "--service", "visoin")
    assert code == 2 and out == ""
    assert err == ("error: --service='visoin': is not a known service: no circuit and no calls "
                   "in the call log (did you mean vision?); known circuits: vision; pass "
                   "--create to steer a new one\n")
    with open_store(db) as store:
        assert set(store.breaker_list()) == {"vision"}


def test_a_service_known_from_its_calls_can_be_steered(db, capsys):
    """Calls in the call log make a service known even before it has a circuit row."""
    with open_store(db) as store:
        store.record_call(CallRecord("fallback", time.time() - 60, 1.0, None))
    code, out, _ = run(capsys, "breaker", "open", "--service", "fallback")
    assert code == 0 and out.startswith("fallback: OPEN (forced)")


def test_create_steers_a_new_service(db, capsys):
    """--create forces open a circuit no engine has used yet (before the first deployment)."""
    code, out, _ = run(capsys, "breaker", "open", "--service", "ocr", "--create")
    assert code == 0 and out.startswith("ocr: OPEN (forced)")
    with open_store(db) as store:
        assert store.breaker_list()["ocr"].mode is BreakerMode.FORCED_OPEN


def test_show_of_an_unknown_service_says_so(db, capsys):
    """show --service of a service nobody uses reports it closed and notes it is not known."""
    _known(db, "vision")
    code, _, err = run(capsys, "breaker", "show", "--service", "visoin")
    assert code == 0
    assert err == ("note: visoin is not a known service: no circuit and no calls in the call log "
                   "(did you mean vision?)\n")
