"""Upgrading a ledger: photos an earlier version marked SKIPPED at a degradation level (never
analysed, and not by any policy of the deployment) are owed again after the upgrade, on every
SQL backend; a feature whose photos were registered as their own tasks stays finished."""
from __future__ import annotations

import json

import pytest

from fme_ai_resilience.core.ledger import Stage, Status
from fme_ai_resilience.store import open_store, sqlfiles

T0 = 1_700_000_000.0


def _legacy(key, result, written):
    """A row an earlier version finished as SKIPPED (literal SQL: the test's own values)."""
    quoted = [v if v == "NULL" else "'" + v.replace("'", "''") + "'"
              for v in (key, json.dumps({"asset_type": "sign"}), json.dumps(result), written)]
    return ("INSERT INTO ai_task_registry (task_key, status, payload, outcome, result, "
            "written, created_at, updated_at, completed_at) VALUES ({0}, 'SUCCEEDED', {1}, "
            "'SKIPPED', {2}, {3}, {4}, {4}, {4})".format(*quoted, T0))


def _before_the_owed_photos(monkeypatch):
    """sqlfiles.schema without the migrations from 6 on: the ledger as the last release left it."""
    real = sqlfiles.schema

    def older(dialect):
        bootstrap, migrations = real(dialect)
        return bootstrap, tuple(m for m in migrations if m[0] < 6)
    monkeypatch.setattr(sqlfiles, "schema", older)


@pytest.fixture(params=("sqlite", "postgresql"))
def old_ledger_url(request, tmp_path, monkeypatch):
    if request.param == "postgresql":
        from helpers.postgres import pg_run
        base = request.getfixturevalue("pg_url")
        name = f"legacy_{abs(hash(str(tmp_path))) % 10**8}"
        pg_run(base, f"DROP SCHEMA IF EXISTS {name} CASCADE")
        pg_run(base, f"CREATE SCHEMA {name}")
        url = f"{base}?options=-csearch_path%3D{name}"
    else:
        url = f"sqlite:///{tmp_path / 'old.db'}"
    _before_the_owed_photos(monkeypatch)
    with open_store(url, init_schema=True) as store:
        assert store.schema_version() == 5
        for key, result, written in (
                ("ladder-skipped", {"outcome": "SKIPPED", "reused": False, "reason":
                                    "not analysed at this degradation level (manual review)"},
                 '{"ok": true}'),
                ("expanded", {"outcome": "SKIPPED", "reused": False, "expanded": ["a"],
                              "reason": "the feature's 1 photo(s) registered"}, "NULL")):
            statement = _legacy(key, result, written)
            store._transact(lambda tx, sql=statement: tx.script([sql]))
    monkeypatch.undo()
    return url


def test_photos_skipped_by_an_earlier_ladder_are_owed_after_the_upgrade(old_ledger_url):
    """The upgrade makes a ladder-skipped photo PENDING (due, no write-back recorded); the
    expansion of a feature without a photo list stays SUCCEEDED."""
    with open_store(old_ledger_url, init_schema=True) as store:
        assert store.schema_version() >= 6
        owed = store.get("ladder-skipped")
        assert owed.status is Status.PENDING and owed.outcome is None
        assert owed.next_attempt_at is not None and owed.next_attempt_at <= T0
        (task,) = store.claim("engine", 5, 60, now=T0 + 1)
        assert task.key == "ladder-skipped" and not task.done(Stage.WRITTEN)
        assert store.get("expanded").status is Status.SUCCEEDED
        assert store.outcome_counts().skipped == 0
