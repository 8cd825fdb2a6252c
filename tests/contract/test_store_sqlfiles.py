"""The named SQL blocks shipped in the package."""
from __future__ import annotations

import re

import pytest

from fme_ai_resilience.store import sqlfiles
from fme_ai_resilience.store.postgres import PREPARED, prepared_forms


def test_parse_blocks_splits_on_headers_and_drops_the_preamble():
    """Each `-- name --` starts a block; the preamble and a block's description are dropped."""
    text = ("-- file comment\n\n-- one --\n-- what\nSELECT 1\n-- kept\n\n"
            "-- two --\nSELECT 2;\n")
    assert sqlfiles.parse_blocks(text) == {"one": "SELECT 1\n-- kept", "two": "SELECT 2;"}


def test_every_statement_starts_with_its_first_keyword():
    """No block opens with a comment (old sqlite3 would not count the rows it changed)."""
    for dialect in sqlfiles.DIALECTS:
        for name, sql in sqlfiles.queries(dialect).items():
            assert sql.split()[0].isupper(), (dialect, name)


def test_a_block_defined_twice_is_an_error():
    """Two blocks with one name would silently shadow each other; refuse the file."""
    with pytest.raises(ValueError, match="twice"):
        sqlfiles.parse_blocks("-- a --\nSELECT 1\n-- a --\nSELECT 2\n")


def test_sqlite_gets_named_placeholders():
    """%(name)s becomes :name for sqlite3; PostgreSQL keeps pyformat."""
    assert ":key" in sqlfiles.queries("sqlite")["get"]
    assert "%(key)s" in sqlfiles.queries("postgresql")["get"]
    assert not any("%(" in sql for sql in sqlfiles.queries("sqlite").values())


def test_both_dialects_define_the_same_operations():
    """Every query the shared code runs exists for both dialects."""
    sqlite, pg = set(sqlfiles.queries("sqlite")), set(sqlfiles.queries("postgresql"))
    specific = {"register", "claim", "schema_lock", "session_setup", "session_limits",
                "migration_limits", "journal_wal", "synchronous_full",
                "terminate_other_sessions"}   # PostgreSQL only: SQLite has no sessions
    assert sqlite - specific == pg - specific


@pytest.mark.parametrize("dialect", sqlfiles.DIALECTS)
def test_schema_has_numbered_migrations_and_the_version_table(dialect):
    """Migrations are numbered from 1 without gaps; schema_version is bootstrapped first."""
    bootstrap, migrations = sqlfiles.schema(dialect)
    assert "schema_version" in bootstrap
    assert [v for v, _ in migrations] == list(range(1, len(migrations) + 1))
    tables = set(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", migrations[0][1]))
    assert tables == {"ai_task_registry", "circuit_state", "circuit_probe", "degradation_state",
                      "ai_call_log", "format_anomaly", "resilience_config"}


def test_split_statements_keeps_multi_line_statements_whole():
    """DDL splits at semicolons ending a line; comments between statements are skipped."""
    script = "-- c\nCREATE TABLE a (\n  x int\n);\n\n-- d\nCREATE INDEX i ON a (x);\nSELECT 1"
    assert sqlfiles.split_statements(script) == [
        "CREATE TABLE a (\n  x int\n)", "CREATE INDEX i ON a (x)", "SELECT 1"]


def test_split_statements_keeps_trigger_and_function_bodies_whole():
    """A SQLite trigger runs to its END; a PostgreSQL function to its closing $$."""
    trigger = "CREATE TRIGGER t AFTER INSERT ON a\nBEGIN\n    INSERT INTO b VALUES (1);\n" \
              "    INSERT INTO b VALUES (2);\nEND;\nSELECT 1;"
    assert sqlfiles.split_statements(trigger) == [
        "CREATE TRIGGER t AFTER INSERT ON a\nBEGIN\n    INSERT INTO b VALUES (1);\n"
        "    INSERT INTO b VALUES (2);\nEND", "SELECT 1"]
    function = "CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n" \
               "    RETURN NULL;\nEND\n$$;\nCREATE TRIGGER t AFTER INSERT ON a\n" \
               "FOR EACH ROW EXECUTE FUNCTION f();"
    assert [s.split()[1] for s in sqlfiles.split_statements(function)] == [
        "FUNCTION", "TRIGGER"]


def test_unknown_dialect_is_refused():
    """Only sqlite and postgresql exist."""
    with pytest.raises(ValueError):
        sqlfiles.queries("mysql")


def test_prepared_forms_number_each_parameter_once():
    """A parameter used twice becomes one $n; EXECUTE passes each once, in order."""
    prepare, execute, order = prepared_forms("x", "SELECT %(a)s, %(b)s, %(a)s")
    assert prepare == "PREPARE fair_x AS SELECT $1, $2, $1"
    assert execute == "EXECUTE fair_x (%s, %s)"
    assert order == ("a", "b")


def test_prepared_statements_type_every_parameter():
    """PREPARE cannot infer types in a SELECT list: each hot statement casts what it needs."""
    for name in ("register", "claim"):
        sql = sqlfiles.queries("postgresql")[name]
        untyped = re.findall(r"%\(\w+\)s(?!::)", sql)
        assert not untyped, (name, untyped)
    assert set(PREPARED) <= set(sqlfiles.queries("postgresql"))


def test_both_dialects_build_the_same_indexes():
    """Index DDL is written out per dialect; the two copies must not drift apart."""
    def indexes(dialect):
        ddl = sqlfiles.schema(dialect)[1][0][1]
        return [s for s in sqlfiles.split_statements(ddl) if s.startswith("CREATE INDEX")]

    assert indexes("sqlite") == indexes("postgresql")
    assert len(indexes("sqlite")) >= 5
