"""Secrets a remote service echoes back reach nothing the product keeps or shows: an ArcGIS
token quoted by an applyEdits row error, a Vision AI key echoed JSON-escaped or URL-encoded in
a drifted answer. Checked in the ledger's file, the JSON log lines and ``dlq show``."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from fme_ai_resilience.cli import main

from helpers.hostile import Front
from helpers.one_task import OneTask
from helpers.review_queue import review_queue


TOKEN = "tok/En+9931=abc"          # a slash and a plus: JSON- and URL-escaped forms differ
VISION_KEY = "vk/7710+secret"


def secret_forms(secret):
    """The forms a service may echo ``secret`` in: raw, JSON-escaped, URL-encoded."""
    escaped = json.dumps(secret)[1:-1]
    return sorted({secret, escaped, escaped.replace("/", "\\/"), quote(secret, safe=""),
                   quote_plus(secret, safe="")}, key=len, reverse=True)


def process_json_logs(world, env):
    """``process --once --log-format json`` in a child process; its stderr lines."""
    done = subprocess.run([sys.executable, "-m", "fme_ai_resilience", "process", "--db",
                           world.db, "--once", "--log-format", "json"],
                          env=env, capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


def leaks(secret, *texts):
    """Every form of ``secret`` found in ``texts`` (raw, JSON-escaped, URL-encoded)."""
    return [form for form in secret_forms(secret) for text in texts if form in text]


def ledger_text(world):
    path = Path(world.db.split("sqlite:///", 1)[1])
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*")).decode(
        "latin-1")


@pytest.fixture
def world(tmp_path, monkeypatch):
    for name in ("FAIR_DB_URL", "FAIR_LOG_FORMAT"):
        monkeypatch.delenv(name, raising=False)
    one = OneTask(tmp_path)
    yield one
    one.close()


def env_with(**values):
    import os
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIR_")}
    env.update(values)
    return env


def test_a_token_echoed_in_an_applyedits_row_error_is_kept_nowhere(world, capsys):
    """Guarantee: the ArcGIS token quoted (raw, JSON-escaped, URL-encoded) by an applyEdits
    row error reaches neither last_error, the JSON log lines nor ``dlq show``."""
    quoted = " ".join(secret_forms(TOKEN))
    rows = json.dumps({"updateResults": [{"success": False, "globalId": None, "error": {
        "code": 1000, "description": f"token {quoted} is not allowed to edit"}}]})
    rule = (lambda method, path: rows.encode() if "applyEdits" in path else None)
    with Front(rule, upstream_port=int(world.layer.url.rsplit(":", 1)[1])) as layer:
        key = world.register(layer.url, {"retry.task_attempts": "1"})
        logs = process_json_logs(world, env_with(FAIR_ARCGIS_TOKEN=TOKEN))
    assert any(b"applyEdits" in head for head in layer.seen), "no write-back was tried"
    assert main(["dlq", "show", key, "--db", world.db]) in (0, 1)
    shown = capsys.readouterr().out
    assert "is not allowed to edit" in shown + logs + ledger_text(world)
    assert leaks(TOKEN, logs, shown, ledger_text(world)) == []


def test_a_vision_key_echoed_escaped_in_a_drifted_answer_is_kept_nowhere(world, capsys):
    """Guarantee: a Vision AI key echoed JSON-escaped or URL-encoded in an answer that fails
    its schema reaches neither format_anomaly.excerpt, the log lines nor ``dlq show``."""
    quoted = " ".join(secret_forms(VISION_KEY))
    answer = ('{"unexpected": "' + quoted.replace('"', '\\"') + '", "note": "drifted"}')
    with Front(lambda method, path: answer.encode()) as vision:
        key = world.register(world.layer.url, {"vision.endpoint": vision.url + "/analyze",
                                               "retry.task_attempts": "1"})
        logs = process_json_logs(world, env_with(FAIR_VISION_KEY=VISION_KEY))
    assert vision.seen, "the Vision AI saw no call"
    assert main(["dlq", "show", key, "--db", world.db]) in (0, 1)
    shown = capsys.readouterr().out
    assert "drifted" in ledger_text(world)
    assert leaks(VISION_KEY, logs, shown, ledger_text(world)) == []


# -- configured secrets typed into a review note -------------------------------------------

CONFIGURED = {"FAIR_VISION_KEY": "ATTACK-vk-5521/zq", "FAIR_ARCGIS_TOKEN": "arc+Tok/7741-x",
              "AWS_SECRET_ACCESS_KEY": "wJal7rXUtnF/EMI+K7MDENGbPx"}


def pasted(*secrets):
    """A note quoting each secret raw, JSON-escaped (the first characters only), URL-encoded
    and base64-encoded."""
    import base64

    out = []
    for secret in secrets:
        head = "".join(f"\\u{ord(c):04x}" for c in secret[:3])
        out += [secret, head + secret[3:], quote(secret, safe=""),
                base64.b64encode(secret.encode()).decode()]
    return "seen: " + " | ".join(out)


def stored_and_shown(db, db_text, capsys, note):
    """Resolve ``b1`` with ``note`` through the CLI; what the ledger keeps and ``review show``
    and ``review list --resolved --json`` print."""
    assert main(["review", "resolve", "b1", "--db", db, "--condition", "fair",
                 "--reviewer", "inspector 7", "--note", note]) == 0
    assert main(["review", "show", "b1", "--db", db]) == 0
    assert main(["review", "list", "--resolved", "--json", "--db", db]) == 0
    out = capsys.readouterr()
    return db_text(), out.out + out.err


def test_configured_secrets_typed_into_a_review_note_are_kept_nowhere(tmp_path, monkeypatch,
                                                                      capsys):
    """Guarantee: the Vision key, the ArcGIS token and the AWS secret this process is configured
    with, typed into a review note raw, partly JSON-escaped, URL- or base64-encoded, reach
    neither the ledger nor ``review show``/``review list``; the rest of the note is kept."""
    for name, value in CONFIGURED.items():
        monkeypatch.setenv(name, value)
    db = f"sqlite:///{tmp_path / 'l.db'}"
    review_queue(db)
    kept, shown = stored_and_shown(
        db, lambda: b"".join(p.read_bytes() for p in tmp_path.glob("l.db*")).decode("latin-1"),
        capsys, "rust on the left leg; " + pasted(*CONFIGURED.values()))
    assert "rust on the left leg" in kept and "rust on the left leg" in shown
    for secret in CONFIGURED.values():
        assert leaks(secret, kept, shown) == [] and secret[3:] not in kept + shown


def test_a_stored_note_holding_a_configured_secret_is_not_printed(tmp_path, monkeypatch,
                                                                  capsys):
    """Guarantee: a verdict note already in the ledger that holds a configured secret (kept
    before it was scrubbed on the way in) is printed by ``review show`` and ``review list``
    without it."""
    from fme_ai_resilience.core.ledger import ReviewVerdict
    from fme_ai_resilience.store import open_store

    monkeypatch.setenv("FAIR_VISION_KEY", CONFIGURED["FAIR_VISION_KEY"])
    db = f"sqlite:///{tmp_path / 'l.db'}"
    review_queue(db)
    with open_store(db) as store:
        assert store.resolve_review("b1", ReviewVerdict(
            condition="fair", reviewer="x", resolved_at=1.0,
            note="old note " + CONFIGURED["FAIR_VISION_KEY"]), now=1.0)
    assert main(["review", "show", "b1", "--db", db]) == 0
    assert main(["review", "list", "--resolved", "--json", "--db", db]) == 0
    shown = capsys.readouterr().out
    assert "old note" in shown and CONFIGURED["FAIR_VISION_KEY"] not in shown


def test_a_stored_dead_letter_error_holding_a_configured_secret_is_not_printed(
        tmp_path, monkeypatch, capsys):
    """Guarantee: a dead letter whose ``last_error`` holds a configured secret (kept before it
    was scrubbed on the way in) is printed by ``dlq show`` and ``dlq list`` without it."""
    import time

    from fme_ai_resilience.core.errors import FailureClass
    from fme_ai_resilience.store import open_store
    from helpers.processing import register, submission

    secret = CONFIGURED["AWS_SECRET_ACCESS_KEY"]
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    db = f"sqlite:///{tmp_path / 'l.db'}"
    now = time.time()
    with open_store(db, init_schema=True) as store:
        register(store, submission("d1"), now=now)
        task = store.claim("t", 1, 60, now=now)[0]
        assert store.bury("d1", task.lease_token, FailureClass.AUTH,
                          f"old error quoting {quote(secret, safe='')}", now=now)
    assert main(["dlq", "show", "d1", "--db", db]) == 0
    assert main(["dlq", "list", "--json", "--db", db]) == 0
    shown = capsys.readouterr().out
    assert "old error quoting" in shown and leaks(secret, shown) == []


def test_the_ledger_password_typed_into_a_review_note_is_kept_nowhere(pg_ledger_url,
                                                                      monkeypatch, capsys):
    """Guarantee: the password of the ledger URL the command runs with (``--db``), typed into a
    review note alone or inside the URL, reaches neither the ledger nor ``review show``."""
    from helpers.postgres import pg_run

    password = "Pw-7731/ledger+x"
    db = pg_ledger_url.replace("://postgres@", f"://postgres:{quote(password, safe='')}@", 1)
    assert db != pg_ledger_url
    review_queue(db)

    def kept():
        rows = pg_run(pg_ledger_url, "SELECT CAST(review_verdict AS text) FROM ai_task_registry")
        return json.dumps([list(r) for r in rows])

    stored, shown = stored_and_shown(db, kept, capsys,
                                     f"tried {db} then {pasted(password)}")
    assert "tried postgresql://postgres:" in shown
    assert leaks(password, stored, shown) == [] and password[3:] not in stored + shown


def test_a_vision_key_echoed_partly_escaped_in_a_drifted_answer_is_kept_nowhere(world, capsys):
    """Guarantee: a Vision AI key echoed with only some characters JSON-escaped
    (``\\u0041\\u0054\\u0054ACK-...``), percent-encoded or double-escaped in an answer that
    fails its schema is kept, decodable, neither in format_anomaly.excerpt nor the logs nor
    ``dlq show``."""
    key = "ATTACK-vk/Qz4Jw+zz"   # stretches no port, time or hex id can hold
    echoes = ["".join(f"\\u{ord(c):04X}" for c in key[:3]) + key[3:],
              key[:7] + "".join(f"%{b:02x}" for b in key[7:].encode()),
              "\\\\u0041" + key[1:].replace("/", "\\/")]
    answer = '{"unexpected": "' + " ".join(echoes) + '", "note": "drifted"}'
    with Front(lambda method, path: answer.encode()) as vision:
        key_ = world.register(world.layer.url, {"vision.endpoint": vision.url + "/analyze",
                                                "retry.task_attempts": "1"})
        logs = process_json_logs(world, env_with(FAIR_VISION_KEY=key))
    assert vision.seen, "the Vision AI saw no call"
    assert main(["dlq", "show", key_, "--db", world.db]) in (0, 1)
    shown = capsys.readouterr().out
    kept = ledger_text(world)
    assert "drifted" in kept
    for text in (logs, shown, kept):   # no stretch of any echo survives
        assert [part for part in ("ACK-vk", "Qz4Jw", "%2b%7a%7a") if part in text] == []


LOGGING_CHILD = """
import argparse, logging, sys
from fme_ai_resilience.cli.logs import setup_logging
setup_logging(argparse.Namespace(log_format=sys.argv[1], db=sys.argv[2],
                                 monitor_token_env="OPS_MONITOR_TOKEN",
                                 secret_env="OPS_SHARED_SECRET"))
log = logging.getLogger("fme_ai_resilience.test")
for secret in sys.argv[3:]:
    log.warning("quoting %s and %r", secret, {"seen": secret.encode().hex() + secret})
"""


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_long_running_commands_log_lines_hold_no_configured_secret(log_format):
    """Guarantee: whatever a component logs, the log lines of ``process``, ``compensate`` and
    ``serve`` (text or JSON) hold none of the secrets the command is configured with (its
    settings', its ledger URL's password, the AWS credential, the variables its ``--*-env``
    options name: serve's monitor token and shared secret)."""
    password = "Pw-5514/log+x"
    db = f"postgresql://fair:{quote(password, safe='')}@127.0.0.1:5432/ledger"
    named = {"OPS_MONITOR_TOKEN": "mon-Tok-8841/abc", "OPS_SHARED_SECRET": "shared+Sec-9901"}
    env = env_with(**CONFIGURED, **named)
    done = subprocess.run([sys.executable, "-c", LOGGING_CHILD, log_format, db,
                           *CONFIGURED.values(), *named.values(), password],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("quoting") == len(CONFIGURED) + len(named) + 1
    for secret in (*CONFIGURED.values(), *named.values(), password):
        assert leaks(secret, done.stderr) == [], done.stderr
