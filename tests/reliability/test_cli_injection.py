"""SQL injection in every CLI field that reaches the ledger changes nothing: the text is a value,
never SQL, on SQLite and on PostgreSQL."""
from __future__ import annotations

import time

import pytest

from fme_ai_resilience.cli import main
from fme_ai_resilience.core.intake.keys import trace_id_for
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission

INJECTIONS = ["x'; DROP TABLE ai_task_registry; --", "x\" OR 1=1 --", "') OR ('1'='1",
              "x'); DELETE FROM circuit_state; --", "x; TRUNCATE resilience_config"]


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path, monkeypatch):
    monkeypatch.delenv("FAIR_DB_URL", raising=False)
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
    else:
        url = request.getfixturevalue("pg_store_url")
    with open_store(url, init_schema=True, create=True) as store:
        store.clear()
        store.register(Submission("sentinel", "F", trace_id_for("sentinel")), 100,
                       now=time.time())
        store.set_config({"intake.watermark": "77"}, now=time.time())
    return url


def argvs(text, db):
    return [["dlq", "show", text, "--db", db], ["dlq", "requeue", text, "--db", db],
            ["dlq", "list", "--cause", text, "--db", db],
            ["breaker", "show", "--service", text, "--db", db],
            ["breaker", "open", "--create", "--service", text, "--db", db],
            ["degrade", "set", text, "--db", db],
            ["process", "--once", "--set", f"intake.watermark={text}", "--db", db],
            ["reconcile", "--layer", text, "--since", "2026-01-01", "--db", db],
            ["reconcile", "--layer", "https://gis.example.com/arcgis/rest/services/S/"
             "FeatureServer/0", "--since", text, "--db", db]]


@pytest.mark.parametrize("text", INJECTIONS)
def test_injection_in_every_cli_field_changes_nothing(db, text, capsys):
    """Guarantee: SQL in a CLI argument (keys, causes, services, levels, settings, URLs) is a
    value: refused or looked up, and the ledger's tables and rows are intact afterwards."""
    for argv in argvs(text, db):
        try:
            code = main(argv)
        except SystemExit as stop:
            code = stop.code
        assert code in (0, 1, 2), argv
    capsys.readouterr()
    with open_store(db) as store:
        assert store.get("sentinel") is not None
        assert store.counts().get("PENDING") == 1
        assert not store.breaker_list()
        assert dict(store.get_config()).get("intake.watermark") == "77"
