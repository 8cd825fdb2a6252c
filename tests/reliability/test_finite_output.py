"""What the commands print as JSON is JSON: a cost per call so large that the spend would
overflow is refused as a setting, naming it, and no ``Infinity`` or ``NaN`` is ever printed."""
from __future__ import annotations

import json
import time

import pytest

from fme_ai_resilience.cli import main
from fme_ai_resilience.core.ledger import CallRecord
from fme_ai_resilience.store import open_store


def strict(text):
    """``text`` parsed as JSON proper: ``Infinity`` and ``NaN`` are refused."""
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def db(tmp_path, monkeypatch):
    for name in ("FAIR_DB_URL", "FAIR_COST_PER_CALL"):
        monkeypatch.delenv(name, raising=False)
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with open_store(url, init_schema=True) as store:
        for _ in range(3):   # three AI calls in the window: 3 x 1e308 overflows
            store.record_call(CallRecord(service="vision", started_at=time.time() - 5,
                                         duration_s=0.2, status_code=200))
    return url


@pytest.mark.parametrize("command", [["check", "--json"], ["status", "--json"]])
def test_a_cost_per_call_of_1e308_prints_no_infinity(db, command, monkeypatch, capsys):
    """Guarantee: with ``cost.per_call=1e308`` and three AI calls, ``check --json`` and
    ``status --json`` print no ``Infinity``: the setting is refused with one line naming it
    (exit 2), or what is printed parses as strict JSON."""
    monkeypatch.setenv("FAIR_COST_PER_CALL", "1e308")
    code = main(command + ["--db", db])
    out = capsys.readouterr()
    assert "Infinity" not in out.out + out.err and "NaN" not in out.out + out.err
    assert code == 2 and "cost.per_call" in out.err and out.err.count("\n") == 1, out.err


def test_the_largest_cost_per_call_gives_a_finite_spend(db, monkeypatch, capsys):
    """Guarantee: the largest ``cost.per_call`` accepted (1e6) gives a finite spend that
    ``check --json`` prints as strict JSON."""
    monkeypatch.setenv("FAIR_COST_PER_CALL", "1000000")
    main(["check", "--json", "--db", db])
    signals = strict(capsys.readouterr().out)
    assert signals["spend"]["amount"] == 3_000_000
