"""WS-03's notifications can be read from a shell: ``notifications list`` shows those waiting
and changes nothing, ``notifications take`` prints each in full and hands it over once."""
from __future__ import annotations

import json
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
