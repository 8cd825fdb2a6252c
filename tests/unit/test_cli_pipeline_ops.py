"""``check``, ``dlq`` and ``status`` over scripted ledgers, and the gateway's ``/metrics``."""
from __future__ import annotations

import io
import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fme_ai_resilience.cli import main
from fme_ai_resilience.core.errors import FailureClass
from fme_ai_resilience.gateway import make_app
from fme_ai_resilience.core.intake.keys import trace_id_for
from fme_ai_resilience.core.ledger import CallRecord, FormatAnomaly, TaskOutcome
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission


@pytest.fixture
def db(tmp_path, monkeypatch):
    monkeypatch.delenv("FAIR_DB_URL", raising=False)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_store(url, init_schema=True):
        pass
    return url


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _calls(url, n, error=None):
    now = time.time()
    with open_store(url) as store:
        for _ in range(n):
            store.record_call(CallRecord("vision", now - 10, 0.4, error))


def _finish(url, key, *, e2e_s):
    now = time.time()
    with open_store(url) as store:
        store.register(Submission(key, f"F-{key}", trace_id_for(key)), 1000, now=now - e2e_s)
        (task,) = store.claim("e", 1, 600, now=now - e2e_s)
        store.complete(key, task.lease_token, TaskOutcome.ACCEPTED, {"reused": False},
                       now=now - 1)


def test_check_exits_0_on_a_healthy_ledger(db, capsys):
    """Calls succeeding, tasks finishing fast: OK and exit 0."""
    _calls(db, 20)
    _finish(db, "k", e2e_s=20)
    code, out, _ = _run(capsys, "check", "--db", db)
    assert code == 0 and out.startswith("OK:")


def test_check_exits_1_when_the_end_to_end_p95_is_slow(db, capsys):
    """End-to-end P95 over 80 % of the promise: WARN, exit 1."""
    _finish(db, "slow", e2e_s=110)
    code, out, _ = _run(capsys, "check", "--db", db)
    assert code == 1 and out.startswith("WARN:") and "end-to-end" in out


def test_check_exits_1_on_backpressure(db, capsys):
    """A backlog over 80 % of the watermark: WARN, exit 1."""
    with open_store(db) as store:
        for i in range(40):
            store.register(Submission(f"b{i}", "F", trace_id_for(f"b{i}")), 1000,
                           now=time.time())
    code, out, _ = _run(capsys, "check", "--db", db)
    assert code == 1 and "backpressure" in out


def test_check_exits_2_on_format_anomalies(db, capsys):
    """Anomalies in over 5 % of the AI calls: ALERT, exit 2."""
    _calls(db, 10)
    with open_store(db) as store:
        store.record_anomaly(FormatAnomaly("generic", time.time() - 5, ("drift",), "{}"))
    code, out, _ = _run(capsys, "check", "--db", db, "--json")
    assert code == 2 and json.loads(out)["level"] == "ALERT"


def test_check_exits_2_when_it_cannot_read_the_ledger(tmp_path, capsys):
    """A monitor sees a check that cannot run as an alert."""
    code, _, err = _run(capsys, "check", "--db", f"sqlite:///{tmp_path / 'nope' / 'l.db'}")
    assert code == 2 and err.startswith("ALERT: the check cannot run")


def _dead(url, key, cause):
    with open_store(url) as store:
        store.register(Submission(key, f"F-{key}", trace_id_for(key),
                                  attachment_url="https://x.test/p?token=SECRET-TOKEN-42"),
                       1000, now=time.time())
        (task,) = store.claim("e", 1, 60, now=time.time())
        store.bury(key, task.lease_token, cause, "photo gone (404)", now=time.time())


def test_dlq_lists_shows_and_requeues_by_cause(db, capsys):
    """The dead letters of a cause, one in full, then back to PENDING."""
    _dead(db, "a", FailureClass.NOT_FOUND)
    _dead(db, "b", FailureClass.AUTH)
    code, out, _ = _run(capsys, "dlq", "list", "--db", db, "--cause", "NOT_FOUND")
    assert code == 0 and "a  NOT_FOUND" in out and "b " not in out
    code, out, _ = _run(capsys, "dlq", "show", "a", "--db", db)
    assert code == 0 and json.loads(out)["cause"] == "NOT_FOUND"
    assert "SECRET-TOKEN-42" not in out
    assert _run(capsys, "dlq", "show", "nope", "--db", db)[0] == 1
    code, out, _ = _run(capsys, "dlq", "requeue", "--db", db, "--cause", "AUTH")
    assert code == 0 and "requeued 1" in out
    with open_store(db) as store:
        assert store.get("b").status.value == "PENDING"


def test_status_shows_the_golden_signals(db, capsys):
    """``status`` adds latency, traffic, errors, saturation, anomalies and spend."""
    _calls(db, 3, "SERVER_ERROR")
    code, out, _ = _run(capsys, "status", "--db", db)
    assert code == 0 and "Golden signals" in out and "SERVER_ERROR 3" in out
    code, out, _ = _run(capsys, "status", "--db", db, "--json")
    assert json.loads(out)["signals"]["errors"]["by_class"] == {"SERVER_ERROR": 3}


def test_the_gateway_serves_prometheus_metrics(db):
    """GET /metrics is Prometheus text a Prometheus parser reads."""
    _calls(db, 4, "RATE_LIMITED")
    with open_store(db) as store:
        app = make_app(store=store)
        seen = {}
        body = b"".join(app({"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics",
                             "wsgi.input": io.BytesIO()},
                            lambda status, headers: seen.update(status=status,
                                                                headers=dict(headers))))
    assert seen["status"] == "200 OK"
    assert seen["headers"]["Content-Type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    (errors,) = [s for s in families["fair_ai_calls"].samples if s.value]
    assert families["fair_ai_calls"].type == "counter"
    assert errors.labels == {"service": "vision", "outcome": "RATE_LIMITED"} and errors.value == 4
