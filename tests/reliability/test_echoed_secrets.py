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
