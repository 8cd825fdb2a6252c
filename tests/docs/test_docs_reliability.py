"""docs/reliability.md and the reliability suite agree: every test it names exists, every test
of tests/reliability/ is listed there, and each states its guarantee."""
from __future__ import annotations

import ast
import re

from helpers import REPO


ROOT = REPO
DOC = ROOT / "docs" / "reliability.md"
NAMED = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`|`::(\w+)`")


def _tests_of(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name: ast.get_docstring(node) or "" for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def _named():
    found, current = set(), None
    for match in NAMED.finditer(DOC.read_text(encoding="utf-8")):
        path, name, continued = match.groups()
        if path:
            current = path
            found.add((path, name))
        elif current:
            found.add((current, continued))
    return found


def test_every_test_the_page_names_exists():
    """Each ``tests/...py::name`` (and ``::name`` after it) of docs/reliability.md exists."""
    missing = [f"{p}::{n}" for p, n in _named()
               if not (ROOT / p).exists() or (n and n not in _tests_of(ROOT / p))]
    assert missing == []


def test_every_reliability_test_is_listed_with_its_guarantee():
    """Every test of tests/reliability/ is named on the page and says "Guarantee:"."""
    named = _named()
    for path in sorted((ROOT / "tests" / "reliability").glob("test_*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for name, doc in _tests_of(path).items():
            assert (rel, name) in named or (rel, None) in named, f"{rel}::{name}"
            assert doc.startswith("Guarantee:"), f"{rel}::{name}"
