"""The package as it ships: every package directory listed, the SQL found, no symlinks."""
from __future__ import annotations

import configparser
import subprocess

import pytest

from fme_ai_resilience.store import sqlfiles

from helpers import REPO


ROOT = REPO


def _setup_cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return parser


def test_every_package_directory_is_listed_in_setup_cfg():
    """A new subpackage missing from setup.cfg would be missing from every wheel."""
    listed = set(_setup_cfg()["options"]["packages"].split())
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "fme_ai_resilience").rglob("__init__.py")}
    found.add("fme_ai_resilience.store.sql")   # mapped from the top-level sql/ directory
    found.add("fme_ai_resilience.workspaces")  # mapped from the top-level workspaces/
    assert listed == found


def test_the_sql_package_is_the_top_level_sql_directory():
    """The DDL has one copy, sql/, mapped into the package by the build."""
    assert _setup_cfg()["options"]["package_dir"].split() == [
        "fme_ai_resilience.store.sql", "=", "sql", "fme_ai_resilience.workspaces", "=",
        "workspaces"]
    assert not (ROOT / "fme_ai_resilience" / "store" / "sql").exists()
    shipped = sorted(p.name for p in (ROOT / "sql").glob("*.sql"))
    assert shipped == ["queries.postgresql.sql", "queries.sql", "queries.sqlite.sql",
                       "schema.postgresql.sql", "schema.sqlite.sql"]
    for name in shipped:
        assert sqlfiles.read_sql_file(name) == (ROOT / "sql" / name).read_text(encoding="utf-8")


def test_the_workspace_templates_ship_in_the_package():
    """The templates' scripts have one copy, workspaces/, mapped into the package: the class
    the drill's engines run is the one the .fmw embeds."""
    from fme_ai_resilience.testing.templates import template_script

    assert not (ROOT / "fme_ai_resilience" / "workspaces").exists()
    for name in ("WS-01_intake", "WS-02_processor", "WS-03_compensator"):
        assert template_script(name) == (ROOT / "workspaces" / f"{name}.py").read_text(
            encoding="utf-8")
        for release in ("2023", "2024"):   # the version-4 templates' scripts
            assert template_script(name, release) == (
                ROOT / "workspaces" / "fme2023-2024" / f"{name}.py").read_text(encoding="utf-8")


def test_the_repository_holds_no_symlink():
    """A Windows checkout (core.symlinks=false) turns a symlink into a small text file."""
    try:
        listing = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True,
                                 text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    links = [line.split("\t", 1)[1] for line in listing.splitlines()
             if line.startswith("120000 ")]
    assert links == []
