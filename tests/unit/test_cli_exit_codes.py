"""One exit-code policy for every command: 0 ok, 1 a check failed or the ledger could not do it,
2 a usage or configuration error; each error one line on stderr, never a traceback."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fme_ai_resilience.cli.common import service_name

from helpers.cli_tree import argv, leaves, options, run, takes_db


LEDGER_COMMANDS = [(path, parser) for path, parser in leaves() if takes_db(parser)]
#: Commands that may bring a new ledger into existence (a new SQLite file, the schema).
CREATING = {("db", "init"), ("db", "upgrade"), ("serve",), ("drill",)}
#: Commands that make a throwaway ledger of their own when none is given (the drill, which
#: empties its ledger, never falls back on $FAIR_DB_URL's).
THROWAWAY = {("drill",)}
#: ``check`` is a monitor: its exit code is its finding (0 ok, 1 warn, 2 alert), and a check
#: that cannot run is an alert, so an unreachable ledger exits 2 there; its lines say ALERT.
MONITORS = {("check",)}


def _prefix(path):
    return "ALERT: the check cannot run: " if path in MONITORS else "error: "
EXPECTED_FORM = "sqlite:///relative/path.db, sqlite:////absolute/path.db or " \
                "postgresql://user@host:port/db"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """No FAIR_* variable of the caller names a ledger or changes a setting here; relative
    SQLite paths land in a temporary directory; a URL that falls back on libpq's defaults
    (``postgresql://``) finds no server instead of the local one."""
    for name in list(os.environ):
        if name.startswith("FAIR_") or name.startswith("PG"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PGHOST", "127.0.0.1")
    monkeypatch.setenv("PGPORT", "1")
    monkeypatch.chdir(tmp_path)


def _ids(cases):
    return [" ".join(path) for path, _ in cases]


def _run_isolated(line, cwd):
    """``line`` in a child process (serve would listen if the ledger opened)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIR_")}
    done = subprocess.run([sys.executable, "-m", "fme_ai_resilience", *line], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


def _outcome(path, parser, db, tmp_path, capsys):
    line = argv(path, parser) + (["--db", db] if db is not None else [])
    if path == ("serve",):
        return _run_isolated(line + ["--port", "0"], tmp_path)
    code = run(line)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_every_ledger_command_is_covered():
    """The walk finds every command that opens a ledger, so none escapes the policy below."""
    assert {" ".join(path) for path, _ in LEDGER_COMMANDS} == {
        "db init", "db upgrade", "status", "serve", "breaker show", "breaker open",
        "breaker close", "breaker disable", "breaker reset", "breaker calibrate",
        "degrade show", "degrade set", "degrade auto", "dlq list", "dlq show", "dlq requeue",
        "review list", "review show", "review resolve", "notifications list",
        "notifications take",
        "check", "process", "compensate", "reconcile", "drill"}


NEEDING = [(path, parser) for path, parser in LEDGER_COMMANDS if path not in THROWAWAY]


@pytest.mark.parametrize("path, parser", NEEDING, ids=_ids(NEEDING))
def test_no_ledger_given_is_a_usage_error_naming_the_forms(path, parser, tmp_path, capsys):
    """Without --db or FAIR_DB_URL every ledger command exits 2 with one line naming the forms."""
    code, _, err = _outcome(path, parser, None, tmp_path, capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith(_prefix(path)) and "Traceback" not in err
    assert "no ledger given" in err and "FAIR_DB_URL" in err and EXPECTED_FORM in err


@pytest.mark.parametrize("db", ["postgresql://", "sqlite:/x", "mysql://h/d", "sqlite://x.db"])
@pytest.mark.parametrize("path, parser", LEDGER_COMMANDS, ids=_ids(LEDGER_COMMANDS))
def test_a_malformed_db_is_a_usage_error_naming_the_expected_form(path, parser, db, tmp_path,
                                                                  capsys):
    """A --db no ledger can be opened from exits 2 with one line naming the form expected."""
    code, _, err = _outcome(path, parser, db, tmp_path, capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"{_prefix(path)}--db={db!r}: ") and f"expected {EXPECTED_FORM}" in err


@pytest.mark.parametrize("path, parser", LEDGER_COMMANDS, ids=_ids(LEDGER_COMMANDS))
def test_an_unreachable_ledger_exits_1_with_one_line(path, parser, tmp_path, capsys):
    """A server that refuses the connection exits 1 (a monitor's check: 2), with one line
    naming the ledger and no password."""
    db = "postgresql://fair:pw-SECRET-9@127.0.0.1:1/ledger"
    code, out, err = _outcome(path, parser, db, tmp_path, capsys)
    assert code == (2 if path in MONITORS else 1), err
    assert err.count("\n") == 1 and "Traceback" not in err and "pw-SECRET-9" not in out + err
    assert err.startswith(f"{_prefix(path)}ledger postgresql://127.0.0.1:1/ledger: ")


OPENING = [(path, parser) for path, parser in LEDGER_COMMANDS if path not in CREATING]


@pytest.mark.parametrize("path, parser", OPENING, ids=_ids(OPENING))
def test_a_missing_directory_says_which_form_is_meant(path, parser, tmp_path, capsys):
    """A SQLite path in a directory that does not exist exits 1 and explains the two forms."""
    code, _, err = _outcome(path, parser, "sqlite:///no-such-dir/ledger.db", tmp_path, capsys)
    assert code == (2 if path in MONITORS else 1), err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"{_prefix(path)}ledger sqlite:///no-such-dir/ledger.db: ")
    assert "no such directory" in err and "relative to the working directory" in err
    assert "sqlite:////absolute/path.db" in err


@pytest.mark.parametrize("path, parser", OPENING, ids=_ids(OPENING))
def test_a_missing_file_points_at_db_init(path, parser, tmp_path, capsys):
    """A SQLite file that does not exist exits 1, creates nothing and says to run db init."""
    target = tmp_path / "absent.db"
    code, _, err = _outcome(path, parser, f"sqlite:///{target}", tmp_path, capsys)
    assert code == (2 if path in MONITORS else 1) and not target.exists()
    assert err.count("\n") == 1 and "no ledger file" in err and "db init" in err


def test_serve_port_out_of_range_is_a_usage_error(capsys):
    """serve --port 99999 exits 2 naming the option and the range, not with a traceback."""
    code = run(["serve", "--db", "sqlite:///x.db", "--port", "99999"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "argument --port: must be <= 65535, got '99999'" in err


NUMBER_OPTIONS = [(path, parser, action.option_strings[0]) for path, parser in leaves()
                  for action in options(parser)
                  if action.type not in (None, str, service_name)]


def test_the_number_options_are_found():
    """The walk finds the number options, so the checks below cover them all."""
    assert {(" ".join(p), o) for p, _, o in NUMBER_OPTIONS} >= {
        ("plan", "--engines"), ("plan", "--job-limit-seconds"), ("plan", "--tasks-per-job"),
        ("breaker calibrate", "--days"), ("breaker calibrate", "--margin"),
        ("serve", "--port"), ("serve", "--config-ttl-seconds"), ("dlq list", "--limit"),
        ("check", "--window")}


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
@pytest.mark.parametrize("path, parser, option", NUMBER_OPTIONS,
                         ids=[f"{' '.join(p)} {o}" for p, _, o in NUMBER_OPTIONS])
def test_every_number_option_refuses_non_finite_values_by_name(path, parser, option, value,
                                                               capsys):
    """inf and nan given to any number option exit 2 naming that option: "must be finite"."""
    code = run(argv(path, parser) + [f"{option}={value}"])
    err = capsys.readouterr().err
    assert code == 2 and f"argument {option}: must be finite, got {value!r}" in err


@pytest.mark.parametrize("line, message", [
    (["plan", "--job-limit-seconds", "-5"],
     "error: processing.job_runtime_limit_s=-5.0: must be >= 0"),
    (["plan", "--tasks-per-job", "0"], "error: processing.claim_limit=0: must be >= 1"),
    (["plan", "--engines", "2.5"],
     "argument --engines: must be a whole number in ASCII digits, got '2.5'"),
    (["breaker", "calibrate", "--service", "v", "--margin", "2"],
     "argument --margin: must be <= 1, got '2'"),
    (["serve", "--db", "sqlite:///x.db", "--config-ttl-seconds", "-1"],
     "argument --config-ttl-seconds: must be >= 0, got '-1'"),
])
def test_a_bad_option_value_names_the_real_setting_or_the_option(line, message, capsys):
    """An option that sets a setting is refused in the setting's name, any other in its own;
    never in the name of something that does not exist."""
    assert run(line) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "job_limit_s=" not in err and "fme." not in err and "value=" not in err


@pytest.mark.parametrize("line, env", [
    (["plan", "--set", "retry.task_attempt="], {}),
    (["plan"], {"FAIR_RETRY_TASK_ATTEMPT": ""}),
])
def test_an_unknown_setting_with_an_empty_value_exits_2(line, env, monkeypatch, capsys):
    """--set NAME= and FAIR_NAME= of a setting that does not exist fail, naming the real one."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert run(line) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a known setting" in err
    assert "did you mean" in err and "TASK_ATTEMPTS" in err.upper()
