"""CHANGELOG.md: Keep a Changelog 1.1.0 as written, the newest release is the package's
``__version__``, and every ledger schema version is in a release's (or the coming one's)
upgrade notes, once, as it is in docs/ledger.md's table."""
from __future__ import annotations

import datetime
import re

import pytest

from fme_ai_resilience import __version__
from fme_ai_resilience.store import SqlStore

from helpers import REPO

CHANGELOG = REPO / "CHANGELOG.md"
RELEASE = re.compile(r"^## \[(?P<version>\d+\.\d+\.\d+)\] - (?P<date>\d{4}-\d{2}-\d{2})$")
#: Keep a Changelog's groups, and this project's upgrade notes.
GROUPS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security", "Upgrade notes")
SCHEMA = re.compile(r"^- Schema version (\d+): ", re.M)


def _sections():
    """``[(heading, body)]`` for every ``## `` heading, in order."""
    text = CHANGELOG.read_text(encoding="utf-8")
    parts = re.split(r"^(## .*)$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2]))


def test_the_headings_are_keep_a_changelog():
    """The title, then [Unreleased], then releases as ``## [x.y.z] - YYYY-MM-DD``, newest first,
    each with real dates and only the known groups (each at most once)."""
    text = CHANGELOG.read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n")
    sections = _sections()
    assert sections[0][0] == "## [Unreleased]"
    versions, dates = [], []
    for heading, body in sections[1:]:
        match = RELEASE.match(heading)
        assert match, f"not a release heading: {heading!r}"
        versions.append(tuple(int(n) for n in match.group("version").split(".")))
        dates.append(datetime.date.fromisoformat(match.group("date")))
    assert versions and versions == sorted(versions, reverse=True)
    assert len(set(versions)) == len(versions)
    assert dates == sorted(dates, reverse=True)
    for heading, body in sections:
        groups = re.findall(r"^### (.*)$", body, re.M)
        assert set(groups) <= set(GROUPS), f"{heading}: {groups}"
        assert len(groups) == len(set(groups)), f"{heading}: a group twice"
        assert not re.search(r"^#{4,} ", body, re.M), heading


def test_every_release_names_its_groups_once_in_the_usual_order():
    """Each release, [Unreleased] included, has only Keep a Changelog's groups (and Upgrade
    notes), each once, in the usual order, none of them empty."""
    for heading, body in _sections():
        groups = re.findall(r"^### (.*)$", body, re.M)
        assert groups and groups == sorted(set(groups), key=GROUPS.index), heading
        for chunk in re.split(r"^### .*$", body, flags=re.M)[1:]:
            assert chunk.strip(), f"{heading}: an empty group"


def test_the_newest_release_is_the_package_version():
    """The version lives in __init__.py; the changelog's newest release says the same."""
    newest = RELEASE.match(_sections()[1][0]).group("version")
    assert newest == __version__


def _schema_notes():
    """``{schema version: the release heading whose upgrade notes name it}``."""
    found = {}
    for heading, body in _sections():
        notes = body.split("### Upgrade notes", 1)[1] if "### Upgrade notes" in body else ""
        notes = notes.split("\n### ", 1)[0]
        for number in SCHEMA.findall(notes):
            assert int(number) not in found, f"schema version {number} noted twice"
            found[int(number)] = heading
    return found


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_every_schema_version_is_in_the_upgrade_notes(dialect):
    """Each migration of sql/schema.*.sql is named once, in a release's Upgrade notes (or
    [Unreleased]'s), and no note names a schema version that does not exist."""
    latest = SqlStore.latest_schema_version(dialect)
    assert sorted(_schema_notes()) == list(range(1, latest + 1))


def test_the_ledger_page_maps_schema_versions_to_the_same_releases():
    """docs/ledger.md's upgrade table agrees with the changelog, row by row."""
    page = (REPO / "docs" / "ledger.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (\d+) \| ([^|]+?) \|", page, re.M))
    noted = {str(v): re.sub(r"^## \[([^\]]+)\].*$", r"\1", h) for v, h in
             _schema_notes().items()}
    assert rows == noted
