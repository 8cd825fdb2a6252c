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


def test_serve_names_its_ledger_before_anything_else(tmp_path, capsys):
    """serve says which ledger it opened before it serves; an unreachable one is a single
    error line naming it."""
    from fme_ai_resilience.cli import build_parser
    from fme_ai_resilience.cli.serve import build_server

    path = tmp_path / "ledger.db"
    server, store = build_server(build_parser().parse_args(
        ["serve", "--db", f"sqlite:///{path}", "--port", "0",
         "--set", "download.allowed_hosts=photos.example.com"]))
    server.close()
    store.close()
    assert capsys.readouterr().err.splitlines()[0] == f"ledger: sqlite file={path}"
    assert main(["serve", "--db", "postgresql://fair:pw-SECRET-5@127.0.0.1:1/x",
                 "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ledger postgresql://127.0.0.1:1/x: ") and err.count("\n") == 1
    assert "pw-SECRET-5" not in err


def test_a_ledger_that_cannot_be_reached_is_one_error_line_naming_it(capsys):
    """Before a ledger answers, nothing but the error names it: one line, no password."""
    assert main(["status", "--db", "postgresql://fair:pw-SECRET-5@127.0.0.1:1/x"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ledger postgresql://127.0.0.1:1/x: ") and err.count("\n") == 1


def test_a_command_logging_json_lines_names_its_ledger_in_a_log_record(tmp_path, caplog,
                                                                       capsys):
    """Where a command logs JSON lines, the ledger is named in a log record, so stderr stays
    one JSON object per line."""
    import logging

    from fme_ai_resilience.cli.common import announce
    from fme_ai_resilience.store import open_store

    caplog.set_level(logging.INFO)
    with open_store(f"sqlite:///{tmp_path / 'l.db'}") as store:
        announce(store=store, json_logs=True)
    assert capsys.readouterr().err == ""
    assert [r.getMessage() for r in caplog.records] == [f"ledger: sqlite file={tmp_path / 'l.db'}"]
