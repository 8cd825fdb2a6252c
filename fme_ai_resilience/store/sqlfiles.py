"""Named SQL blocks from the ``.sql`` files shipped in the package (``fme_ai_resilience.store.sql``:
the top-level ``sql/`` directory).

A file holds blocks introduced by a ``-- name --`` line, then comment lines describing it;
the lines up to the next block are its SQL. ``queries.sql`` is shared by both dialects and
written with ``%(name)s`` placeholders; ``queries.<dialect>.sql`` adds or overrides blocks.
SQLite receives the placeholders rewritten as ``:name``. ``schema.<dialect>.sql`` holds the
``migration_NNNN`` blocks and the ``schema_version`` bootstrap.
"""
from __future__ import annotations

import functools
import re
from importlib import resources
from types import MappingProxyType
from typing import Dict, List, Mapping, Tuple

from ..core.errors import ConfigurationError

__all__ = ["DIALECTS", "SQL_PACKAGE", "parse_blocks", "read_sql_file", "queries", "schema",
           "split_statements"]

DIALECTS = ("sqlite", "postgresql")
#: Where the ``.sql`` files are: the top-level ``sql/`` directory, mapped here by setup.cfg.
SQL_PACKAGE = "fme_ai_resilience.store.sql"

_HEADER = re.compile(r"^-- ([a-z0-9_]+) --\s*$")
_PYFORMAT = re.compile(r"%\((\w+)\)s")
_MIGRATION = re.compile(r"^migration_(\d{4})$")


def parse_blocks(text: str) -> Dict[str, str]:
    """``{name: sql}`` for every ``-- name --`` block in ``text`` (the preamble is dropped).

    The comment lines opening a block (its description) are dropped too: drivers look at a
    statement's first word (sqlite3 before Python 3.11 reports no row count otherwise).
    Raises ConfigurationError on a block name used twice in one file.
    """
    blocks: Dict[str, List[str]] = {}
    current = None
    for line in text.splitlines():
        match = _HEADER.match(line)
        if match:
            current = match.group(1)
            if current in blocks:
                raise ConfigurationError("sql block", current, "is defined twice")
            blocks[current] = []
        elif current is not None:
            if blocks[current] or not line.strip().startswith("--"):
                blocks[current].append(line)
    return {name: "\n".join(lines).strip() for name, lines in blocks.items()}


def read_sql_file(filename: str) -> str:
    """The text of one ``.sql`` file shipped inside the package."""
    return (resources.files(SQL_PACKAGE) / filename).read_text(encoding="utf-8")


def _check_dialect(dialect: str) -> None:
    if dialect not in DIALECTS:
        raise ConfigurationError("dialect", dialect, f"must be one of {DIALECTS}")


@functools.lru_cache(maxsize=None)
def queries(dialect: str) -> Mapping[str, str]:
    """Every named query for ``dialect``, placeholders already in the driver's style."""
    _check_dialect(dialect)
    merged = parse_blocks(read_sql_file("queries.sql"))
    merged.update(parse_blocks(read_sql_file(f"queries.{dialect}.sql")))
    if dialect == "sqlite":
        merged = {name: _PYFORMAT.sub(r":\1", sql) for name, sql in merged.items()}
    return MappingProxyType(merged)


@functools.lru_cache(maxsize=None)
def schema(dialect: str) -> Tuple[str, Tuple[Tuple[int, str], ...]]:
    """The ``schema_version`` bootstrap DDL and the ``(version, ddl)`` migrations in order."""
    _check_dialect(dialect)
    blocks = parse_blocks(read_sql_file(f"schema.{dialect}.sql"))
    migrations = []
    for name, sql in blocks.items():
        match = _MIGRATION.match(name)
        if match:
            migrations.append((int(match.group(1)), sql))
    return blocks["schema_version"], tuple(sorted(migrations))


def split_statements(script: str) -> List[str]:
    """The statements of a DDL script (each ends with ``;`` at the end of a line).

    For drivers that run one statement per call (sqlite3 ``execute``); the schema files keep
    to that layout (no semicolons at the end of a line inside statements), except in the
    bodies of a SQLite trigger (up to its ``END;`` line) and of a PostgreSQL ``$$``-quoted
    function.
    """
    statements, current = [], []
    quoted = body = False
    for line in script.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("--")):
            continue
        current.append(line)
        quoted ^= line.count("$$") % 2 == 1
        if stripped.upper() == "BEGIN" and current[0].strip().upper().startswith("CREATE TRIGGER"):
            body = True
        if body:
            if stripped.upper() != "END;":
                continue
            body = False
        if stripped.endswith(";") and not quoted:
            statements.append("\n".join(current).rstrip().rstrip(";"))
            current = []
    if any(line.strip() and not line.strip().startswith("--") for line in current):
        statements.append("\n".join(current).rstrip().rstrip(";"))
    return statements
