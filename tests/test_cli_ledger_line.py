"""Every command that opens a ledger says on stderr which one, never with its password."""
from __future__ import annotations

import pytest

from fme_ai_resilience.cli import main

COMMANDS = [["db", "init"], ["db", "upgrade"], ["status"], ["status", "--json"],
            ["breaker", "show"], ["degrade", "show"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_each_command_names_its_sqlite_ledger_first(tmp_path, capsys, command):
    """The first stderr line names the SQLite file the command works on."""
    path = tmp_path / "ledger.db"
    assert main(["db", "init", "--db", f"sqlite:///{path}"]) == 0
    capsys.readouterr()
    assert main([*command, "--db", f"sqlite:///{path}"]) == 0
    assert capsys.readouterr().err.splitlines()[0] == f"ledger: sqlite file={path}"


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_each_command_names_its_postgresql_ledger_without_the_password(pg_store_url, capsys,
                                                                        command):
    """The first stderr line gives dialect, host, port, database and user; no password."""
    url = pg_store_url.replace("postgresql://postgres@", "postgresql://postgres:pw-SECRET-5@")
    database = url.rsplit("/", 1)[1]
    assert main([*command, "--db", url]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (f"ledger: postgresql host=127.0.0.1 port=5432 "
                                   f"database={database} user=postgres")
    assert "pw-SECRET-5" not in err


def test_serve_names_its_ledger_before_anything_else(capsys):
    """serve says which ledger it opens, also when it cannot open it."""
    assert main(["serve", "--db", "sqlite:////nonexistent-dir/l.db", "--port", "0"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "ledger: sqlite file=/nonexistent-dir/l.db" and err[1].startswith("error:")
