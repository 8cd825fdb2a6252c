"""Junk POSTs to the gateway and `check`: one stray body is counted but does not page; a stream
of junk from a sender warns."""
from __future__ import annotations

import io
import re

import pytest

from fme_ai_resilience.cli import main
from fme_ai_resilience.gateway import make_app
from fme_ai_resilience.store import open_store


@pytest.fixture
def db(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    open_store(url, init_schema=True).close()
    return url


def _call(app, method, path, body=b""):
    seen = {}
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "wsgi.input": io.BytesIO(body),
               "CONTENT_LENGTH": str(len(body)), "CONTENT_TYPE": "application/json"}
    out = b"".join(app(environ, lambda status, headers: seen.update(status=int(status[:3]))))
    return seen["status"], out.decode("utf-8")


def _junk(db, n):
    """``n`` distinct bodies that are not JSON, posted to the gateway: each answered 400 and
    kept as an INVALID_PAYLOAD dead letter; the gateway's /metrics afterwards."""
    with open_store(db) as store:
        app = make_app(store=store)
        for i in range(n):
            status, _ = _call(app, "POST", "/", b"not json %d {" % i)
            assert status == 400
        status, metrics = _call(app, "GET", "/metrics")
    assert status == 200
    return metrics


def _check(capsys, db):
    code = main(["check", "--db", db])
    return code, capsys.readouterr().out


def test_one_junk_post_is_counted_but_does_not_page(db, capsys):
    """Guarantee: one junk POST leaves `check` OK (exit 0), not WARN for the whole alert
    window, while /metrics and `status` still count the body kept as evidence."""
    metrics = _junk(db, 1)
    assert re.search(r'^fair_dead_letters_total\{cause="INVALID_PAYLOAD"\} 1(\.0)?$', metrics,
                     re.M), metrics
    code, out = _check(capsys, db)
    assert code == 0, out
    assert main(["status", "--db", db]) == 0
    assert "INVALID_PAYLOAD" in capsys.readouterr().out


def test_a_stream_of_junk_posts_warns(db, capsys):
    """Guarantee: five junk POSTs in the window make `check` warn (exit 1), naming the cause
    and the command to list the bodies, and never raise the dead-letter ALERT meant for tasks."""
    _junk(db, 5)
    code, out = _check(capsys, db)
    assert code == 1, out
    assert "5 deliveries kept as evidence (INVALID_PAYLOAD)" in out
    assert "dlq list --cause INVALID_PAYLOAD" in out and "are dead letters" not in out
