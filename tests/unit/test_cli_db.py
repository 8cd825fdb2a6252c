"""`fme-ai-resilience db init|upgrade`: idempotent schema creation from the installed package."""
from __future__ import annotations

import pytest

from fme_ai_resilience.cli import main
from fme_ai_resilience.store import SqlStore, open_store


def test_db_init_twice_is_harmless(tmp_path, capsys):
    """The second init reports nothing to do and keeps the rows the first one served."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert main(["db", "init", "--db", url]) == 0
    latest = SqlStore.latest_schema_version("sqlite")
    assert f"0 -> {latest}" in capsys.readouterr().out
    with open_store(url) as store:
        store.set_config({"kept": "yes"}, now=1.0)
    assert main(["db", "init", "--db", url]) == 0
    assert "nothing to do" in capsys.readouterr().out
    with open_store(url) as store:
        assert store.get_config() == {"kept": "yes"}
        assert store.schema_version() == SqlStore.latest_schema_version("sqlite")


def test_db_init_twice_on_postgresql(pg_url, capsys):
    """init then upgrade on PostgreSQL: the second changes nothing."""
    assert main(["db", "init", "--db", pg_url]) == 0
    assert main(["db", "upgrade", "--db", pg_url]) == 0
    assert "nothing to do" in capsys.readouterr().out.splitlines()[-1]


def test_db_url_from_the_environment(tmp_path, monkeypatch, capsys):
    """Without --db the FAIR_DB_URL variable names the ledger."""
    monkeypatch.setenv("FAIR_DB_URL", f"sqlite:///{tmp_path / 'env.db'}")
    assert main(["db", "init"]) == 0
    assert (tmp_path / "env.db").exists()


def test_db_init_without_a_url_explains(monkeypatch, capsys):
    """No --db and no FAIR_DB_URL: exit 2 and say how to give one."""
    monkeypatch.delenv("FAIR_DB_URL", raising=False)
    assert main(["db", "init"]) == 2
    assert "FAIR_DB_URL" in capsys.readouterr().err


def test_db_init_unreachable_server_fails_cleanly(capsys):
    """A database that cannot be reached: exit 1, a one-line error naming the ledger, without
    the password."""
    pytest.importorskip("psycopg2")
    assert main(["db", "init", "--db", "postgresql://fair:pw-SECRET-1@127.0.0.1:1/x"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ledger postgresql://127.0.0.1:1/x: ") and err.count("\n") == 1
    assert "pw-SECRET-1" not in err and "Traceback" not in err


def test_db_needs_an_action(capsys):
    """`db` alone is a usage error."""
    with pytest.raises(SystemExit) as exc:
        main(["db"])
    assert exc.value.code == 2
