"""Every ``--help`` page: plain text, a description, its defaults and its exit codes."""
from __future__ import annotations

import argparse
import os
import re

import pytest

from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.cli.drill import THROWAWAY_DEFAULT

from helpers.cli_tree import commands, leaves, options
from helpers import REPO


ROOT = REPO
PAGES = commands()
LEAVES = leaves()
#: A file named in help text: a path with a file extension.
FILE = re.compile(r"[\w.-]*/?[\w.-]+\.(?:md|py|sql|fmw|json|txt|cfg|toml)\b")
#: A default taken from a setting: "(default: intake.engines, 8)".
FROM_SETTING = re.compile(r"default: ([a-z]+\.[a-z0-9_]+), ([^)]+)\)")


def _ids(pages):
    return [" ".join(path) or "fme-ai-resilience" for path, _ in pages]


@pytest.fixture(autouse=True)
def _no_fair_env(monkeypatch):
    """Defaults are shown as the code has them, not as the caller's FAIR_* variables set them."""
    for name in list(os.environ):
        if name.startswith("FAIR_"):
            monkeypatch.delenv(name)


def _in_repository(name: str) -> bool:
    """Whether the repository has the file ``name`` (a path, or a bare name in any folder)."""
    if "/" in name:
        return (ROOT / name).exists()
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [d for d in subfolders if not d.startswith((".", "build", "__"))]
        if name in files:
            return True
    return False


def _help(parser: argparse.ArgumentParser) -> str:
    return parser.format_help()


@pytest.mark.parametrize("path, parser", PAGES, ids=_ids(PAGES))
def test_every_page_describes_its_command(path, parser):
    """Each command and sub-command says in a sentence what it does."""
    assert parser.description and len(parser.description.split()) >= 4


@pytest.mark.parametrize("path, parser", PAGES, ids=_ids(PAGES))
def test_help_is_plain_text_naming_nothing_outside_the_repository(path, parser):
    """No RST backticks, no seed sections or shared documents, only files the repository has
    (the drill's --seed option, a random seed, is the one seed a page may name)."""
    text = _help(parser)
    assert "`" not in text
    for action in parser._actions:
        if "--seed" in action.option_strings:
            text = " ".join(text.split()).replace(" ".join(action.help.split()), "")
    assert "seed" not in re.sub(r"--seed( SEED)?", "", text).lower() and "shared/" not in text and "reference/" not in text
    for name in FILE.findall(text):
        assert _in_repository(name), f"{' '.join(path)} --help names {name}"


@pytest.mark.parametrize("path, parser", PAGES, ids=_ids(PAGES))
def test_every_page_shows_the_exit_codes(path, parser):
    """Each page ends with what 0, 1 and 2 mean for that command."""
    text = " ".join(_help(parser).split())
    assert re.search(r"Exit codes: 0 [^;]+; 1 [^;]+; 2 [^.;]*a usage or configuration error",
                     text)


@pytest.mark.parametrize("path, parser", LEAVES, ids=_ids(LEAVES))
def test_every_option_shows_its_default(path, parser):
    """An option that takes a value says its default, and a shown value is the code's own."""
    flat = Settings().as_flat_dict()
    for action in options(parser):
        text = " ".join((action.help or "").split())
        if action.required:
            assert "(required)" in text, action.option_strings
            continue
        assert "default" in text, f"{' '.join(path)} {action.option_strings[0]}: {text!r}"
        default = action.default
        if action.dest == "db" and path == ("drill",):
            assert f"({THROWAWAY_DEFAULT})" in text
        elif action.dest == "db":
            assert "(default: $FAIR_DB_URL)" in text
        elif isinstance(default, float):
            assert f"default: {default:g}" in text, text
        elif default not in (None, [], argparse.SUPPRESS):
            assert f"default: {default}" in text, text
        for name, shown in FROM_SETTING.findall(text):
            value = flat[name]
            assert shown == (f"{value:g}" if isinstance(value, float) else str(value)), text


@pytest.mark.parametrize("path, parser", LEAVES, ids=_ids(LEAVES))
def test_the_ledger_option_is_db_url_everywhere(path, parser):
    """Every command that opens a ledger spells it --db URL, defaulting to $FAIR_DB_URL."""
    for action in parser._actions:
        if "--db" in action.option_strings:
            assert action.metavar == "URL" and action.default is None
            assert "--db URL" in _help(parser)


def test_serve_and_status_default_to_the_same_ledger(monkeypatch):
    """With FAIR_DB_URL set, serve and status (and every other command) open the same ledger."""
    from fme_ai_resilience.cli import build_parser

    monkeypatch.setenv("FAIR_DB_URL", "sqlite:///shared.db")
    parser = build_parser()
    for line in (["serve"], ["status"], ["db", "init"], ["breaker", "show"], ["degrade", "show"]):
        assert parser.parse_args(line).db == "sqlite:///shared.db", line
