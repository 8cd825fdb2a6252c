"""Every numeric option has a sane range and names accept ASCII only, with length limits: a
bad value is a usage error (exit 2), never an OverflowError, MemoryError or a stored row."""
from __future__ import annotations

import pytest

from fme_ai_resilience.cli import main
from fme_ai_resilience.core.resilience.degrade import Level
from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.store import open_store


@pytest.fixture
def db(tmp_path, monkeypatch):
    monkeypatch.delenv("FAIR_DB_URL", raising=False)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    open_store(url, init_schema=True, create=True).close()
    return url


@pytest.mark.parametrize("days", ["1e308", "1e12", "367"])
def test_breaker_calibrate_refuses_a_huge_number_of_days(db, days, capsys):
    """``breaker calibrate --days`` past a year is a usage error, not an overflow."""
    with pytest.raises(SystemExit) as info:
        main(["breaker", "calibrate", "--service", "vision", "--days", days, "--db", db])
    assert info.value.code == 2
    assert "--days" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["process", "--idle", "1e308"], ["process", "--max-batches", "99999999999999"],
    ["dlq", "list", "--limit", "10000000000"], ["compensate", "--interval", "1e300"],
    ["check", "--window", "1e300"], ["serve", "--idle-timeout-seconds", "1e300"],
    ["serve", "--backlog", "1000000"], ["plan", "--burst", "1e400"]])
def test_numeric_options_have_a_ceiling(db, argv, capsys):
    """Numeric options far past any sane value are usage errors naming the option."""
    with pytest.raises(SystemExit) as info:
        main([*argv, "--db", db] if argv[0] != "plan" else argv)
    assert info.value.code == 2
    assert argv[-2] in capsys.readouterr().err


def test_degrade_set_refuses_an_arabic_indic_digit(db, capsys):
    """``degrade set ٢`` is refused: levels are ASCII only."""
    assert main(["degrade", "set", "\u0662", "--db", db]) == 2
    assert "degradation level" in capsys.readouterr().err
    with pytest.raises(ConfigurationError):
        Level.parse("L\u0662")


def test_breaker_open_create_refuses_a_100000_character_name(db, capsys):
    """``breaker open --create`` with a 100,000-character name stores nothing: exit 2."""
    with pytest.raises(SystemExit) as info:
        main(["breaker", "open", "--create", "--service", "s" * 100_000, "--db", db])
    assert info.value.code == 2
    with open_store(db) as store:
        assert not store.breaker_list()


def test_breaker_open_create_refuses_a_non_ascii_name(db):
    """A service name in another script is refused."""
    with pytest.raises(SystemExit) as info:
        main(["breaker", "open", "--create", "--service", "vision\u0662", "--db", db])
    assert info.value.code == 2


def test_an_ascii_name_within_the_limit_is_accepted(db, capsys):
    """A plain service name still works."""
    assert main(["breaker", "open", "--create", "--service", "vision-2.eu:prod",
                 "--db", db]) == 0
    assert "vision-2.eu:prod" in capsys.readouterr().out
