"""The release a user can read: ``--version``, the one place the version is written, and the
schema version and release ``db init|upgrade`` name."""
from __future__ import annotations

import re
import sqlite3
import subprocess
import sys

from fme_ai_resilience import __version__
from fme_ai_resilience.cli import main
from fme_ai_resilience.store import SqlStore

from helpers import REPO

RELEASE = f"fme-ai-resilience {__version__}"


def test_version_prints_the_package_version():
    """``python -m fme_ai_resilience --version``: the program and ``__version__``, exit 0."""
    done = subprocess.run([sys.executable, "-m", "fme_ai_resilience", "--version"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert (done.returncode, done.stdout) == (0, f"{RELEASE}\n")


def test_the_version_is_written_in_one_place():
    """setup.cfg reads the version from the package; no other packaged file writes it."""
    assert re.match(r"^\d+\.\d+\.\d+$", __version__)
    assert "version = attr: fme_ai_resilience.__version__" in (
        REPO / "setup.cfg").read_text(encoding="utf-8")
    written = [p for p in [*(REPO / "fme_ai_resilience").rglob("*.py"), REPO / "pyproject.toml",
                           REPO / "setup.cfg"]
               if f'"{__version__}"' in p.read_text(encoding="utf-8")
               or f"'{__version__}'" in p.read_text(encoding="utf-8")]
    assert written == [REPO / "fme_ai_resilience" / "__init__.py"]


def test_db_upgrade_names_the_schema_version_and_the_release(tmp_path, capsys):
    """A new ledger: from 0 to the latest version, named with the release; again: already
    there, the same release, nothing to do."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    latest = SqlStore.latest_schema_version("sqlite")
    assert main(["db", "upgrade", "--db", url]) == 0
    first = capsys.readouterr().out.strip()
    assert first.startswith(f"{url}: schema version 0 -> {latest} (applied 1, ")
    assert first.endswith(f"), the latest of {RELEASE}")
    assert main(["db", "upgrade", "--db", url]) == 0
    assert capsys.readouterr().out.strip() == (
        f"{url}: schema already at version {latest}, the latest of {RELEASE}; nothing to do")


def test_db_upgrade_says_when_the_ledger_is_newer_than_the_release(tmp_path, capsys):
    """After a rollback the ledger may carry a version this release does not know: the line
    says so, names both, and nothing is changed."""
    path = tmp_path / "ledger.db"
    url = f"sqlite:///{path}"
    latest = SqlStore.latest_schema_version("sqlite")
    assert main(["db", "init", "--db", url]) == 0
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, 0)",
                   (latest + 1,))
    capsys.readouterr()
    assert main(["db", "upgrade", "--db", url]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"{url}: schema at version {latest + 1}, newer than the {latest} "
                           f"of {RELEASE}: nothing done")
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT max(version) FROM schema_version").fetchone()[0] == latest + 1
