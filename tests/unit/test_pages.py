"""Signals that page: each alert built from a ledger state and seen by ``check`` (exit code and
reason), with ``status`` and ``/metrics`` showing the same figures."""
from __future__ import annotations

import io
import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fme_ai_resilience.cli import main
from fme_ai_resilience.core.resilience.degrade import CRITICAL
from fme_ai_resilience.core.errors import FailureClass
from fme_ai_resilience.gateway import make_app
from fme_ai_resilience.core.ledger import TaskOutcome
from fme_ai_resilience.store import open_store

from helpers.processing import submission


@pytest.fixture
def db(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    open_store(url, init_schema=True).close()
    return url


def _registered(db, n, *, ago, prefix="k"):
    now = time.time()
    with open_store(db) as store:
        for i in range(n):
            store.register(submission(f"{prefix}{i}", photo=f"{prefix}{i}"), 1000, now=now - ago)


def _claimed(db, n, *, ago, lease_s=60.0):
    with open_store(db) as store:
        return store.claim("engine", n, lease_s, now=time.time() - ago)


def _check(capsys, db):
    code = main(["check", "--db", db])
    return code, capsys.readouterr().out


def _metrics(db):
    with open_store(db) as store:
        body = b"".join(make_app(store=store)({"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics",
                                               "wsgi.input": io.BytesIO()},
                                              lambda status, headers: None))
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


def test_due_work_with_no_processor_pages_a_stall(db, capsys):
    """8 tasks due for longer than the promise, nothing finished: ALERT, exit 2, with the age."""
    _registered(db, 8, ago=300)
    code, out = _check(capsys, db)
    assert code == 2 and "stall: 8 task(s) due" in out and "the oldest due task is 5 min" in out
    families = _metrics(db)
    assert families["fair_due_tasks"].samples[0].value == 8
    assert families["fair_stalled_seconds"].samples[0].value >= 300
    assert families["fair_alert_level"].samples[0].value == 2


def test_due_work_within_the_promise_is_no_stall(db, capsys):
    """Work registered a moment ago is due but not stalled: OK."""
    _registered(db, 8, ago=5)
    assert _check(capsys, db)[0] == 0


def test_every_task_a_dead_letter_pages_and_status_shows_them(db, capsys):
    """All 8 tasks buried BAD_REQUEST: check exits 2, /metrics says 2, status lists them."""
    _registered(db, 8, ago=60)
    with open_store(db) as store:
        for task in store.claim("engine", 8, 60, now=time.time() - 50):
            store.bury(task.key, task.lease_token, FailureClass.BAD_REQUEST, "HTTP 400",
                       now=time.time() - 40)
    code, out = _check(capsys, db)
    assert code == 2 and "8 of 8 task(s) finished in the window are dead letters" in out
    assert "a new dead-letter cause: BAD_REQUEST" in out
    assert _metrics(db)["fair_alert_level"].samples[0].value == 2
    assert main(["status", "--db", db]) == 0
    shown = capsys.readouterr().out
    assert "dead letters BAD_REQUEST 8" in shown and "errors              AI calls none" in shown


def test_a_new_dead_letter_cause_pages_at_once_below_the_rate(db, capsys):
    """One NOT_FOUND among 19 successes is under the rate, but a cause never seen: ALERT."""
    _registered(db, 20, ago=60)
    with open_store(db) as store:
        tasks = store.claim("engine", 20, 60, now=time.time() - 50)
        for task in tasks[:19]:
            store.complete(task.key, task.lease_token, TaskOutcome.ACCEPTED, {}, now=time.time())
        store.bury(tasks[19].key, tasks[19].lease_token, FailureClass.NOT_FOUND, "404",
                   now=time.time())
    code, out = _check(capsys, db)
    assert code == 2 and "a new dead-letter cause: NOT_FOUND" in out
    assert "dead letters (" not in out


def test_a_processor_that_stopped_renewing_warns_then_pages(db, capsys):
    """A lease expired a moment ago warns; one expired past the promise is an ALERT."""
    _registered(db, 1, ago=40, prefix="a")
    _claimed(db, 1, ago=40, lease_s=10)
    code, out = _check(capsys, db)
    assert code == 1 and "1 lease(s) not renewed" in out
    _registered(db, 1, ago=600, prefix="b")
    _claimed(db, 1, ago=600, lease_s=10)
    code, out = _check(capsys, db)
    assert code == 2 and "2 lease(s) not renewed" in out and "a processor stopped" in out
    assert _metrics(db)["fair_expired_leases"].samples[0].value == 2


def test_a_review_queue_left_waiting_warns(db, capsys):
    """A photo waiting for a person longer than alerts.review_age_s: WARN with its age."""
    _registered(db, 1, ago=90_000)
    with open_store(db) as store:
        (task,) = store.claim("engine", 1, 60, now=time.time() - 89_990)
        store.complete(task.key, task.lease_token, TaskOutcome.SKIPPED, {"reason": "policy"},
                       now=time.time() - 89_980, review=True)
    code, out = _check(capsys, db)
    assert code == 1 and "review queue: 1 photo(s), the oldest waiting 25 h" in out
    assert _metrics(db)["fair_review_queue"].samples[0].value == 1


def test_status_check_and_metrics_agree_on_every_figure(db, capsys):
    """The same counts, levels and alerts from the three views of one ledger."""
    _registered(db, 6, ago=400)
    with open_store(db) as store:
        tasks = store.claim("engine", 4, 60, now=time.time() - 390)
        store.complete(tasks[0].key, tasks[0].lease_token, TaskOutcome.ACCEPTED, {},
                       now=time.time() - 380)
        store.bury(tasks[1].key, tasks[1].lease_token, FailureClass.AUTH, "401",
                   now=time.time() - 370)
    assert main(["status", "--db", db, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)["signals"]
    assert main(["check", "--db", db, "--json"]) == 2
    check = json.loads(capsys.readouterr().out)
    families = _metrics(db)
    for key in ("analysed", "awaiting_analysis", "in_review", "skipped_by_policy",
                "dead_by_cause", "due", "expired_leases", "review_queue"):
        assert status["ledger"][key] == check["ledger"][key], key
    photos = {s.labels["state"]: s.value for s in families["fair_photos"].samples}
    assert photos["analysed"] == check["ledger"]["analysed"] == 1
    assert photos["awaiting_analysis"] == check["ledger"]["awaiting_analysis"] == 4
    dead = {s.labels["cause"]: s.value for s in families["fair_dead_letters_in_ledger"].samples}
    assert dead == check["ledger"]["dead_by_cause"] == {"AUTH": 1}
    counted = {s.labels["cause"]: s.value for s in families["fair_dead_letters"].samples
               if s.value}
    assert families["fair_dead_letters"].type == "counter"
    assert counted == {r["labels"]["cause"]: r["value"]
                       for r in check["totals"]["counters"]["dead_letters"]} == {"AUTH": 1}
    assert [a["signal"] for a in status["alerts"]] == [a["signal"] for a in check["alerts"]]
    assert status["level"] == check["level"] == "ALERT"
    assert families["fair_alert_level"].samples[0].value == 2


def test_junk_bodies_only_warn_and_never_count_as_dead_tasks(db, capsys):
    """Five invalid bodies kept as evidence: a WARN for junk deliveries, no dead-letter ALERT."""
    now = time.time()
    with open_store(db) as store:
        for i in range(5):
            store.record_dead_letter(f"body:{i}", {"raw": "junk"}, FailureClass.INVALID_PAYLOAD,
                                     "not JSON", now=now - 30)
    code, out = _check(capsys, db)
    assert code == 1 and "5 deliveries kept as evidence (INVALID_PAYLOAD)" in out
    assert "are dead letters" not in out


def test_work_due_past_the_promise_while_others_finish_warns(db, capsys):
    """Engines finish newer (critical-first) work while old photos wait: WARN with the age."""
    _registered(db, 3, ago=600, prefix="old")
    with open_store(db) as store:
        now = time.time()
        store.register(submission("hydrant"), 1000, now=now, priority=CRITICAL)
        (task,) = store.claim("engine", 1, 60, now=now)
        assert task.key == "hydrant"
        store.complete(task.key, task.lease_token, TaskOutcome.ACCEPTED, {}, now=now)
    code, out = _check(capsys, db)
    assert code == 1 and "overdue: 3 task(s) due, the oldest registered 10 min ago" in out
    assert "stall" not in out


def test_a_webhook_sender_gone_silent_or_refused_for_its_signature_warns(db, capsys):
    """`check` warns (exit 1) when an ArcGIS sender that delivered before is silent for over a
    day, and when deliveries claiming to be one were refused for their signature in the
    window; `check --json` lists the senders' counts."""
    with open_store(db) as store:
        store.record_sender("arcgis_online", "delivered", now=time.time() - 2 * 86400)
    code, out = _check(capsys, db)
    assert code == 1 and "no delivery from arcgis_online" in out
    with open_store(db) as store:
        store.record_sender("arcgis_online", "delivered", now=time.time())
        store.record_sender("arcgis_enterprise", "bad_signature", now=time.time())
    code, out = _check(capsys, db)
    assert code == 1 and "arcgis_enterprise refused for their signature" in out
    assert "no delivery from" not in out
    assert main(["check", "--db", db, "--json"]) == 1
    senders = json.loads(capsys.readouterr().out)["senders"]
    assert {(s["sender"], s["event"], s["n"]) for s in senders} == {
        ("arcgis_online", "delivered", 2), ("arcgis_enterprise", "bad_signature", 1)}
