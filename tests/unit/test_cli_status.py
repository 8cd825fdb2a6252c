"""`fme-ai-resilience status`: the ledger by status and dead letters by cause."""
from __future__ import annotations

import json
import re
import time

from fme_ai_resilience.cli import main
from fme_ai_resilience.core.errors import FailureClass
from fme_ai_resilience.core.ledger import Status, TaskOutcome
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission



def _json_status(url, capsys):
    assert main(["status", "--db", url, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_status_json_on_an_empty_ledger(shared_ledger_url, capsys):
    """Every status and every failure class is listed, all zero."""
    report = _json_status(shared_ledger_url, capsys)
    assert report["ledger"] == {s.value: 0 for s in Status}
    assert report["dead_letters"] == {f.value: 0 for f in FailureClass}
    assert (report["total"], report["in_progress"], report["completed_last_hour"]) == (0, 0, 0)
    assert report["schema_version"] >= 1
    assert report["intake"]["invalid_not_kept"] == 0


def test_status_json_on_a_busy_ledger(shared_ledger_url, capsys):
    """Counts by status and by cause match what the ledger holds."""
    now = time.time()
    with open_store(shared_ledger_url) as store:
        for i in range(7):
            store.register(Submission(f"k{i}", f"F{i}", "t"), 100, now=now)
        tasks = store.claim("engine", 4, 60, now=now)
        store.complete(tasks[0].key, tasks[0].lease_token, TaskOutcome.ACCEPTED, None, now=now)
        store.bury(tasks[1].key, tasks[1].lease_token, FailureClass.FORMAT, "drift", now=now)
        store.record_dead_letter("bad", {}, FailureClass.INVALID_PAYLOAD, "x", now=now)
    report = _json_status(shared_ledger_url, capsys)
    assert report["ledger"] == {"PENDING": 3, "PROCESSING": 2, "SUCCEEDED": 1, "FAILED": 0,
                                "DEFERRED": 0, "DEAD": 2}
    assert report["dead_letters"]["FORMAT"] == 1
    assert report["dead_letters"]["INVALID_PAYLOAD"] == 1
    # the invalid body's dead letter is no finished work: 1 completed + 1 buried
    assert (report["total"], report["in_progress"], report["completed_last_hour"]) == (8, 5, 2)


def test_status_text_table(shared_ledger_url, capsys):
    """The table names each status and each cause on its own line."""
    assert main(["status", "--db", shared_ledger_url]) == 0
    out = capsys.readouterr().out
    for name in [s.value for s in Status] + [f.value for f in FailureClass]:
        assert any(line.split()[:1] == [name] for line in out.splitlines()), name


def test_status_of_a_missing_sqlite_file_creates_nothing(tmp_path, capsys):
    """status never leaves an empty ledger file behind; it exits 1 with the reason."""
    target = tmp_path / "absent.db"
    assert main(["status", "--db", f"sqlite:///{target}"]) == 1
    assert not target.exists()
    assert "error:" in capsys.readouterr().err


def test_status_of_a_blank_sqlite_file_creates_the_schema(tmp_path, capsys):
    """A SQLite file without the tables gets them on first open: status shows an empty ledger
    (a PostgreSQL database without them says "run db init": tests/integration)."""
    import sqlite3

    target = tmp_path / "blank.db"
    sqlite3.connect(str(target)).close()
    assert main(["status", "--db", f"sqlite:///{target}", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total"] == 0 and report["schema_version"] >= 1


def test_status_counts_the_invalid_bodies_intake_did_not_keep(shared_ledger_url, capsys):
    """Bodies past the dead-letter bounds are counted in status, JSON and text."""
    now = time.time()
    with open_store(shared_ledger_url) as store:
        for i in range(3):
            store.keep_invalid_body(f"body:{i}", {}, "bad", now=now, per_minute=1, limit=10)
    assert _json_status(shared_ledger_url, capsys)["intake"]["invalid_not_kept"] == 2
    assert main(["status", "--db", shared_ledger_url]) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if "not kept" in ln]
    assert line and line[0].split()[4] == "2"


def test_status_counts_refusals_by_reason(shared_ledger_url, capsys):
    """Refused bodies and deliveries are counted by reason, in JSON and in the table."""
    from fme_ai_resilience.core.ledger import Refusal

    now = time.time()
    with open_store(shared_ledger_url) as store:
        for key, reason in (("body:a", "over_backlog"), ("body:a", "over_backlog"),
                            ("body:b", "no_engine_capacity")):
            store.record_refusal(Refusal(key=key, reason=reason, status_code=429,
                                         feature_global_id="f", refused_at=now,
                                         photos_refused=1), limit=10)
    report = _json_status(shared_ledger_url, capsys)
    assert report["intake"]["refusals"] == {
        "over_backlog": {"bodies": 1, "deliveries": 2},
        "no_engine_capacity": {"bodies": 1, "deliveries": 1}}
    assert report["intake"]["refusals_not_recorded"] == 0
    assert main(["status", "--db", shared_ledger_url]) == 0
    out = capsys.readouterr().out
    assert re.search(r"refused over_backlog\s+1 bodies, 2 deliveries", out)
