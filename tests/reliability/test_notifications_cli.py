"""WS-03's notifications can be read from a shell: ``notifications list`` shows those waiting
and changes nothing, ``notifications take`` prints each in full and hands it over once."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time

import pytest

from fme_ai_resilience.cli import main
from fme_ai_resilience.services.compensation.compensator import NOT_FOUND_KIND
from fme_ai_resilience.store import open_store


@pytest.fixture
def db(tmp_path, monkeypatch):
    monkeypatch.delenv("FAIR_DB_URL", raising=False)
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with open_store(url, init_schema=True) as store:
        for i in range(3):
            store.notify(NOT_FOUND_KIND, f"Survey123 photo not found {i}",
                         f"the layer no longer has photo {i}\nrequeue: never", f"k{i}",
                         now=time.time() + i)
    return url


def test_notifications_are_listed_and_taken_once_from_a_shell(db, capsys):
    """Guarantee: ``notifications list`` prints the waiting notifications oldest first and
    leaves them waiting; ``take --json`` prints them with their bodies and marks them handed
    over, so a second take prints none."""
    assert main(["notifications", "list", "--db", db]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split(": ", 1)[1] for line in listed] == [
        f"Survey123 photo not found {i}" for i in range(3)]
    assert main(["notifications", "take", "--json", "--db", db]) == 0
    taken = json.loads(capsys.readouterr().out)
    assert [(n["task_key"], n["body"].splitlines()[0]) for n in taken] == [
        (f"k{i}", f"the layer no longer has photo {i}") for i in range(3)]
    assert main(["notifications", "take", "--json", "--db", db]) == 0
    assert json.loads(capsys.readouterr().out) == []
    with open_store(db) as store:
        assert store.pending_notifications() == []


def _take(db, *extra):
    return [sys.executable, "-m", "fme_ai_resilience", "notifications", "take", "--json",
            "--db", db, *extra]


def test_a_take_whose_reader_is_gone_loses_no_notification(db):
    """Guarantee: when ``notifications take`` cannot print (its reader closed the pipe), it
    exits 1 with one line on stderr and the notifications wait again: ``list`` shows them and
    a later ``take`` prints them."""
    proc = subprocess.Popen(_take(db), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert [line for line in err.splitlines() if line.startswith("error: ")] == [
        err.strip().splitlines()[-1]] and "Traceback" not in err, err
    with open_store(db) as store:
        assert [n.task_key for n in store.pending_notifications()] == ["k0", "k1", "k2"]
    done = subprocess.run(_take(db), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [n["task_key"] for n in json.loads(done.stdout)] == ["k0", "k1", "k2"]


def test_concurrent_takes_print_each_notification_once_in_all(tmp_path, monkeypatch):
    """Guarantee: several ``notifications take`` runs at once on one ledger print each
    notification exactly once between them: a run prints only what its own mark claimed."""
    monkeypatch.delenv("FAIR_DB_URL", raising=False)
    url = f"sqlite:///{tmp_path / 'many.db'}"
    with open_store(url, init_schema=True) as store:
        for i in range(300):
            store.notify(NOT_FOUND_KIND, f"photo {i}", f"body {i}", f"k{i}", now=1000.0 + i)
    # Hold the write lock while the takes start, so all of them read the same waiting rows
    # before any can mark one (WAL: reading goes on under another's write lock).
    holder = sqlite3.connect(str(tmp_path / "many.db"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        runs = [subprocess.Popen(_take(url, "--limit", "1000"), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE) for _ in range(4)]
        time.sleep(4)
    finally:
        holder.execute("COMMIT")
        holder.close()
    outs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0] * 4, [e for _, e in outs]
    printed = [n["task_key"] for out, _ in outs for n in json.loads(out)]
    assert sorted(printed) == sorted(f"k{i}" for i in range(300))
    with open_store(url) as store:
        assert store.pending_notifications() == []
